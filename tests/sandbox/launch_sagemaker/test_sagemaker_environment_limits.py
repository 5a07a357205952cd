"""CreateTrainingJob's Environment is a TrainingEnvironmentMap: keys and values of at most 512 characters (not
the 1024 of the EnvironmentMap of other SageMaker shapes). A secret's ARN goes there: one longer than 512 is
refused by `launch` in one line; the sandbox refuses such a request as SageMaker does."""
from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.support.helpers import CONFIGS, run_cli

SPEC = (CONFIGS.parent / "tests" / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml").read_text()
LONG_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/trainctl/tiny-vit/" + "p" * 491  # 553 characters


def test_a_secret_arn_over_512_characters_is_one_line_for_sagemaker(sandbox_env, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC + f"secrets:\n  HF_TOKEN: {LONG_ARN}\n")
    proc = run_cli(["launch", str(spec), "--layout", "g5.xlarge:1:on-demand", "--dry-run"], tmp_path / "home",
                   env=sandbox_env.env)
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "secret HF_TOKEN" in lines[0] and "512" in lines[0], lines


def test_the_sandbox_refuses_an_environment_value_over_512(sandbox):
    with pytest.raises(ClientError, match="less than or equal to 512"):
        sandbox.client("sagemaker").create_training_job(
            TrainingJobName="long-env", RoleArn="arn:aws:iam::123456789012:role/trainctl-sagemaker-execution",
            AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                                                     "2.3-cpu-py311", "TrainingInputMode": "File"},
            Environment={"TRAINCTL_SECRET_ARN_HF_TOKEN": LONG_ARN},
            OutputDataConfig={"S3OutputPath": "s3://trainctl-123456789012-us-east-1/out"},
            ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            StoppingCondition={"MaxRuntimeInSeconds": 600})
