"""The entrypoint arguments a job gets, read back from a `launch --dry-run -o json` document: SageMaker's
HyperParameters of CreateTrainingJob, and the args of the node config in an EC2 launch template's user data."""
from __future__ import annotations

import base64
import json


def sagemaker_args(doc: dict) -> dict:
    """The JSON-decoded hyperparameters (SageMaker's own `sagemaker_*` keys left out)."""
    job = next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    return {k: json.loads(v) for k, v in job["HyperParameters"].items() if not k.startswith("sagemaker_")}


def ec2_config(doc: dict) -> dict:
    """The node config in the EC2 launch template's user data."""
    lt = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")["params"]
    user_data = base64.b64decode(lt["LaunchTemplateData"]["UserData"]).decode()
    return json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])


def ec2_command_line(doc: dict) -> list[str]:
    return ec2_config(doc)["args"]


def ec2_args(doc: dict) -> dict[str, str]:
    flat = ec2_command_line(doc)
    return {flat[i][2:]: flat[i + 1] for i in range(0, len(flat), 2)}


def toolkit_command_line(doc: dict) -> list[str]:
    """What SageMaker's training toolkit passes the script: the JSON-decoded hyperparameters, keys sorted,
    str() of each value (sagemaker-training-toolkit mapping.to_cmd_args)."""
    hps = sagemaker_args(doc)
    return [x for k in sorted(hps) for x in (f"--{k}", str(hps[k]))]
