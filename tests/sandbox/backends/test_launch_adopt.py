"""A transient error after CreateTrainingJob never stops the job it created.

SageMaker makes the job, the answer is lost (a read timeout; a botocore event hook sends the request to the
sandbox itself, then raises what urllib3 would), botocore retries and gets ResourceInUse. The launch describes
the job, checks its trainctl:job tag and adopts it. A job of that name without the tag is someone else's:
the launch fails in one line and its cleanup leaves that job running."""
from __future__ import annotations

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session

from tests.support.ec2_jobs import option
from trainctl.aws import clients as aws
from trainctl.backends.base import LaunchSettings
from trainctl.backends.calls import NotOurs
from trainctl.backends.options import SageMakerOptions
from trainctl.backends.sagemaker import SageMakerBackend

REGION = "us-east-1"


def _request(backend, spec, path, job: str):
    return backend.prepare(option("g5.xlarge", 1, "on-demand", None, platform="sagemaker"), spec,
                           LaunchSettings(job_id=job, spec_path=path, options=SageMakerOptions()))


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_):
        yield self.data


def _lose_the_first_answer(sent: list[int], how: str):
    """before-send: the first CreateTrainingJob reaches the sandbox, and its answer is lost on the way back
    (a read timeout, or a 500 from a front end that made the job and failed afterwards)."""
    def hook(request, **_):
        sent.append(1)
        if len(sent) > 1:
            return None
        URLLib3Session().send(request)
        if how == "read timeout":
            raise ReadTimeoutError(endpoint_url=request.url)
        return AWSResponse(request.url, 500, {"Content-Type": "application/x-amz-json-1.1"},
                           _Body(b'{"__type": "InternalFailure", "message": "internal error"}'))
    return hook


@pytest.mark.parametrize("how", ["read timeout", "500"])
def test_a_lost_answer_and_a_duplicate_name_adopt_the_job(env, how):
    sb, spec, path = env
    backend = SageMakerBackend()
    request = _request(backend, spec, path, "job-lost")
    sent: list[int] = []
    hook = _lose_the_first_answer(sent, how)
    events = aws.client("sagemaker", REGION).meta.events
    events.register_first("before-send.sagemaker.CreateTrainingJob", hook)
    messages: list[str] = []
    try:
        outputs = backend.submit(request, progress=messages.append)
    finally:
        events.unregister("before-send.sagemaker.CreateTrainingJob", hook)
    try:
        assert len(sent) == 2  # the lost one, and botocore's retry that SageMaker refused as a duplicate
        job = sb.client("sagemaker").describe_training_job(TrainingJobName="job-lost")
        assert outputs["training_job_arn"] == job["TrainingJobArn"]
        assert job["TrainingJobStatus"] == "InProgress"
        assert any("adopting" in m for m in messages)
    finally:
        backend.stop("job-lost", REGION)


def test_a_job_of_that_name_owned_by_someone_else_is_neither_adopted_nor_stopped(env):
    sb, spec, path = env
    backend = SageMakerBackend()
    theirs = _request(backend, spec, path, "job-taken")
    job = next(c for c in theirs.calls if c.operation == "CreateTrainingJob").params
    other = {**{k: v for k, v in job.items() if k != "VpcConfig"},  # theirs: outside our launch's VPC setup
             "Tags": [{"Key": "trainctl:job", "Value": "someone-else"}],
             "RoleArn": "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution"}  # their own role
    sm = sb.client("sagemaker")
    ours = _request(backend, spec, path, "job-taken")
    sm.create_training_job(**other)
    try:
        with pytest.raises(NotOurs, match="ResourceInUse.*not tagged trainctl:job=job-taken"):
            backend.submit(ours)
        removed = backend.cleanup("job-taken", REGION)  # what `launch` does after a failed submit
        assert not any("training job" in r for r in removed)
        assert "execution role trainctl-job-taken" in removed  # ours, made before CreateTrainingJob: it goes
        assert sm.describe_training_job(TrainingJobName="job-taken")["TrainingJobStatus"] == "InProgress"
    finally:
        sm.stop_training_job(TrainingJobName="job-taken")
