"""ARNs and image accounts depend on the partition (aws, aws-cn, aws-us-gov)."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import run_cli
from trainctl.backends.sagemaker.images import training_image


def _arns(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value.startswith("arn:") else []
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arns(v)]
    if isinstance(value, list):
        return [a for v in value for a in _arns(v)]
    return []


@pytest.mark.parametrize("region,partition", [("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
@pytest.mark.parametrize("role", ["cli", "sagemaker-execution", "ec2-node"])
def test_iam_policy_prints_arns_of_the_regions_partition(tmp_path, region, partition, role):
    proc = run_cli(["--region", region, "--output", "json", "iam-policy", "--role", role], tmp_path)
    assert proc.returncode == 0, proc.stderr
    arns = _arns(json.loads(proc.stdout))
    assert arns and all(a.startswith(f"arn:{partition}:") for a in arns), [a for a in arns
                                                                          if not a.startswith(f"arn:{partition}:")]


@pytest.mark.parametrize("region,registry", [
    ("cn-north-1", "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn"),
    ("cn-northwest-1", "727897471807.dkr.ecr.cn-northwest-1.amazonaws.com.cn"),
    ("us-gov-west-1", "442386744353.dkr.ecr.us-gov-west-1.amazonaws.com"),
    ("us-gov-east-1", "446045086412.dkr.ecr.us-gov-east-1.amazonaws.com"),
    ("us-east-1", "763104351884.dkr.ecr.us-east-1.amazonaws.com"),
    # the newest regions, from the SageMaker Python SDK's image_uri_config/pytorch.json
    ("ap-east-2", "975050140332.dkr.ecr.ap-east-2.amazonaws.com"),
    ("ap-southeast-5", "550225433462.dkr.ecr.ap-southeast-5.amazonaws.com"),
    ("ap-southeast-6", "633930458069.dkr.ecr.ap-southeast-6.amazonaws.com"),
    ("ap-southeast-7", "590183813437.dkr.ecr.ap-southeast-7.amazonaws.com"),
    ("mx-central-1", "637423239942.dkr.ecr.mx-central-1.amazonaws.com"),
])
def test_training_images_come_from_the_partitions_dlc_account(region, registry):
    assert training_image(region, "gpu").startswith(registry + "/pytorch-training:")
