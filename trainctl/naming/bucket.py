"""The job bucket and its layout: one place says where every object of a job lives, the same on both platforms.

- `trainctl/code/<sha256>/sourcedir.tar.gz`: the job's code, content-addressed (the key names the sha256 of
  its bytes), shared by every job with the same code, written only by the CLI; the nodes and the SageMaker
  container may only read it;
- `trainctl/agent/<sha256>/trainctl_node.tar.gz`: the EC2 node agent, content-addressed the same way, written
  only by the CLI; a node's user data downloads it (EC2's 16 KB user data cannot hold it);
- `<job>/checkpoints/`: checkpoints (EC2 nodes sync them; SageMaker's CheckpointConfig syncs them);
- `<job>/logs/`, `<job>/status/<completed|failed|stopped>`: what the nodes leave (status markers also come
  from `trainctl stop`);
- `<job>/output/`: the model (SageMaker writes `<job>/output/<job>/output/model.tar.gz`; the EC2 agent uploads
  /opt/ml/model's files under `<job>/output/model/`);
- `<job>/tensorboard/`: TensorBoard events, synced while the job runs (TensorBoardOutputConfig; the EC2 agent).

A job's principal writes only under its own `<job>/` prefix, in the folders JOB_WRITABLE names.
Every S3 call names the bucket's owner (ExpectedBucketOwner): the bucket name is predictable, so one
created first by another account must be refused, never used.
"""
from __future__ import annotations

CODE_PREFIX = "trainctl/code/"
AGENT_PREFIX = "trainctl/agent/"
RECORD_NAME = "job.json"                        # JOB/job.json: the job's record (state/documents.py)
MEASUREMENTS_PREFIX = "trainctl/measurements/"  # the account's measurements (state/documents.py)
JOB_WRITABLE = ("checkpoints", "logs", "status", "output", "tensorboard")


def job_bucket(account: str, region: str) -> str:
    return f"trainctl-{account}-{region}"


def owner(account: str | None) -> dict[str, str]:
    """The ExpectedBucketOwner argument of an S3 call (S3 answers 403 when another account owns the bucket)."""
    return {"ExpectedBucketOwner": account} if account else {}


def code_key(sha256: str) -> str:
    return f"{CODE_PREFIX}{sha256}/sourcedir.tar.gz"


def agent_key(sha256: str) -> str:
    return f"{AGENT_PREFIX}{sha256}/trainctl_node.tar.gz"


def code_sha256(key: str) -> str | None:
    """The sha256 a code key names, or None for a key outside the content-addressed layout."""
    parts = key.split("/")
    if key.startswith(CODE_PREFIX) and len(parts) == 4 and len(parts[2]) == 64:
        return parts[2]
    return None


def job_prefix(job_id: str) -> str:
    return f"{job_id}/"


def checkpoints_prefix(job_id: str) -> str:
    return f"{job_id}/checkpoints/"


def status_prefix(job_id: str) -> str:
    return f"{job_id}/status/"


def status_key(job_id: str, status: str) -> str:
    return status_prefix(job_id) + status


def sagemaker_checkpoints(bucket: str, job_id: str) -> str:
    return f"s3://{bucket}/{job_id}/checkpoints"


def sagemaker_output(bucket: str, job_id: str) -> str:
    return f"s3://{bucket}/{job_id}/output"


def output_prefix(job_id: str) -> str:
    return f"{job_id}/output/"


def tensorboard_prefix(job_id: str) -> str:
    return f"{job_id}/tensorboard/"
