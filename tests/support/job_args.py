"""The entrypoint arguments a job gets, read back from a `launch --dry-run -o json` document: SageMaker's
HyperParameters of CreateTrainingJob, and the args of the node config in an EC2 launch template's user data."""
from __future__ import annotations

import base64
import json


def sagemaker_args(doc: dict) -> dict[str, str]:
    job = next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    return {k: json.loads(v) if v.startswith('"') else v for k, v in job["HyperParameters"].items()
            if not k.startswith("sagemaker_")}


def ec2_args(doc: dict) -> dict[str, str]:
    lt = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")["params"]
    user_data = base64.b64decode(lt["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    flat = config["args"]
    return {flat[i][2:]: flat[i + 1] for i in range(0, len(flat), 2)}
