"""The EC2 node agent in the job bucket: EC2 limits user data to 16 KB (EC2 User Guide, "Instance user data"),
which the agent's modules outgrew, so the user data carries only the node config and a loader, and the agent
(bootstrap/agent_archive, a deterministic tar.gz) goes to S3 under its content hash, like the job's code.
The node role may read exactly that key (iam/node_role.py); the loader checks the sha256 before extracting."""
from __future__ import annotations

import hashlib

from trainctl.backends.base import AwsCall
from trainctl.backends.bucket_calls import object_calls
from trainctl.naming.bucket import agent_key


def agent_calls(s3, bucket: str, account: str, job_id: str, region: str) -> tuple[dict, list[AwsCall]]:
    """({agent_key, agent_sha256} for the node config, the upload unless the same bytes are already there)."""
    from trainctl.bootstrap import agent_archive

    data = agent_archive()
    sha256 = hashlib.sha256(data).hexdigest()
    key = agent_key(sha256)
    calls = object_calls(s3, bucket, account, key, data, sha256, job_id, region,
                         why=f"the node agent ({len(data)} bytes) that each node's user data downloads")
    return {"agent_key": key, "agent_sha256": sha256}, calls
