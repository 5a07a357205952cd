"""Raw EC2: a plan option as an instant EC2 Fleet in a cluster placement group, with trainctl's node agent on
every instance (trainctl/bootstrap). The backend's class is in `backend`; each of its abstract methods is a
module here, with the same names as in `backends/sagemaker/`; `fleet` (all-or-nothing fleets, recovery),
`attempts` (recovery tokens), `spot_role` (the Spot service-linked role), `common` (tags and lookups by tag)."""
from trainctl.backends.ec2.backend import Ec2Backend
from trainctl.backends.ec2.common import log_group, name_for

__all__ = ["Ec2Backend", "log_group", "name_for"]
