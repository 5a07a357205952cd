"""The job bucket and its layout: one place says where every object of a job lives.

- `trainctl/code/<content hash>/sourcedir.tar.gz`: SageMaker code, shared by every job with the same code;
- `<job>/code/sourcedir.tar.gz`: EC2 code, under the job's prefix (the node role reaches only `<job>/*`);
- `<job>/status/<completed|failed|stopped>`: EC2 status markers left by the nodes and `trainctl stop`;
- `trainctl/checkpoints/<job>`, `trainctl/output`: SageMaker checkpoints and model output.
"""
from __future__ import annotations


def job_bucket(account: str, region: str) -> str:
    return f"trainctl-{account}-{region}"


def sagemaker_code_key(content_hash: str) -> str:
    return f"trainctl/code/{content_hash}/sourcedir.tar.gz"


def ec2_code_key(job_id: str) -> str:
    return f"{job_id}/code/sourcedir.tar.gz"


def status_prefix(job_id: str) -> str:
    return f"{job_id}/status/"


def status_key(job_id: str, status: str) -> str:
    return status_prefix(job_id) + status


def sagemaker_prefix(bucket: str) -> str:
    return f"s3://{bucket}/trainctl"


def sagemaker_checkpoints(bucket: str, job_id: str) -> str:
    return f"{sagemaker_prefix(bucket)}/checkpoints/{job_id}"


def sagemaker_output(bucket: str) -> str:
    return f"{sagemaker_prefix(bucket)}/output"
