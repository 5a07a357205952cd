"""The job's secrets on SageMaker: trainctl puts only their ARNs in the job's environment
(TRAINCTL_SECRET_ARN_<NAME>=<arn>, from the spec's `secrets:`); this reads each value at start with the
execution role's credentials (boto3 ships in the SageMaker training images) into the env var <NAME>.
On EC2 the node agent has already done it, and nothing here runs. Values are never printed."""
from __future__ import annotations

import os
from typing import MutableMapping

PREFIX = "TRAINCTL_SECRET_ARN_"


def load_secrets(env: MutableMapping[str, str] | None = None, client=None) -> list[str]:
    """Fill env[NAME] for every TRAINCTL_SECRET_ARN_NAME not yet set; returns the names filled."""
    env = os.environ if env is None else env
    wanted = {k[len(PREFIX):]: v for k, v in env.items() if k.startswith(PREFIX) and k[len(PREFIX):] not in env}
    if not wanted:
        return []
    if client is None:
        import boto3

        client = boto3.session.Session().client
    for name, arn in wanted.items():
        if ":secretsmanager:" in arn:
            env[name] = client("secretsmanager", region_name=arn.split(":")[3]).get_secret_value(
                SecretId=arn)["SecretString"]
        else:  # SSM's GetParameter takes the parameter's ARN as its Name
            env[name] = client("ssm", region_name=arn.split(":")[3]).get_parameter(
                Name=arn, WithDecryption=True)["Parameter"]["Value"]
    return sorted(wanted)
