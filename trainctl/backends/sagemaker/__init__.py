"""SageMaker training jobs (managed Spot, single-subnet VPC) through plain boto3. The backend's class is in
`backend`; each of its abstract methods is a module here, with the same names as in `backends/ec2/`."""
from trainctl.backends.sagemaker.backend import SageMakerBackend

__all__ = ["SageMakerBackend"]
