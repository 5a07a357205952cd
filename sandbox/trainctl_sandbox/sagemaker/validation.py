"""CreateTrainingJob's validation in the sandbox, as AWS answers it: ValidationException with the
API model's constraint messages, then the rules across members, then the VPC's subnets and groups."""
from __future__ import annotations

import re
from typing import Any

from moto.sagemaker.exceptions import ValidationError

DEFAULT_MAX_RUNTIME = 86400  # what SageMaker fills in when StoppingCondition omits it

_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_ROLE_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$")
_S3_RE = re.compile(r"^(https|s3)://([^/]+)/?(.*)$")
_ENV_KEY_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def constraint(value: Any, path: str, rule: str) -> str:
    return f"Value '{value}' at '{path}' failed to satisfy constraint: Member must {rule}"


def validate(request: dict[str, Any], account_id: str, region: str) -> list[str | None]:
    """Raise ValidationError like AWS; return the AZs of the job's subnets ([None] outside a VPC)."""
    errors = _constraint_errors(request) + _parameter_errors(request)
    if errors:
        n = len(errors)
        raise ValidationError(f"{n} validation error{'s' if n > 1 else ''} detected: {'; '.join(errors)}")
    _check_rules(request)
    from trainctl_sandbox.sagemaker.channels import fsx_refusal

    if fsx_refusal(request, account_id, region):  # SageMaker checks the file system when the job is created
        raise ValidationError(fsx_refusal(request, account_id, region))
    return _subnet_azs(request, account_id, region)


def _constraint_errors(request: dict[str, Any]) -> list[str]:
    """The members' constraints of the API model (patterns, ranges), as AWS lists them."""
    errors: list[str] = []
    name = request.get("TrainingJobName", "")
    if not _NAME_RE.match(name):
        errors.append(constraint(name, "trainingJobName",
                                 "satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"))
    role = request.get("RoleArn", "")
    if len(role) < 20 or len(role) > 2048 or not _ROLE_RE.match(role):
        errors.append(constraint(role, "roleArn", "satisfy regular expression pattern: "
                                 "^arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+$"))
    out = (request.get("OutputDataConfig") or {}).get("S3OutputPath", "")
    if not _S3_RE.match(out):
        errors.append(constraint(out, "outputDataConfig.s3OutputPath",
                                 "satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$"))
    resource = request.get("ResourceConfig") or {}
    count = resource.get("InstanceCount")
    if count is not None and count < 1:
        errors.append(constraint(count, "resourceConfig.instanceCount", "have value greater than or equal to 1"))
    itype = resource.get("InstanceType")
    if itype is not None and not itype.startswith("ml."):
        errors.append(constraint(itype, "resourceConfig.instanceType",
                                 "satisfy enum value set: [ml.* training instance types]"))
    volume = resource.get("VolumeSizeInGB")
    if volume is not None and volume < 1:
        errors.append(constraint(volume, "resourceConfig.volumeSizeInGB", "have value greater than or equal to 1"))
    stopping = request.get("StoppingCondition") or {}
    for key in ("MaxRuntimeInSeconds", "MaxWaitTimeInSeconds"):
        value = stopping.get(key)
        if value is not None and value > 2419200:
            errors.append(constraint(value, f"stoppingCondition.{key[0].lower()}{key[1:]}",
                                      "have value less than or equal to 2419200"))
    ckpt = request.get("CheckpointConfig")
    if ckpt is not None and not _S3_RE.match(ckpt.get("S3Uri", "")):
        errors.append(constraint(ckpt.get("S3Uri", ""), "checkpointConfig.s3Uri",
                                 "satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$"))
    return errors


def _parameter_errors(request: dict[str, Any]) -> list[str]:
    """Constraints on HyperParameters, Environment, Tags and RetryStrategy."""
    errors: list[str] = []
    for key, value in (request.get("HyperParameters") or {}).items():
        if len(key) > 256:
            errors.append(constraint(key, "hyperParameters", "have length less than or equal to 256"))
        if len(value) > 2500:
            errors.append(constraint(value[:40] + "...", f"hyperParameters.{key}",
                                      "have length less than or equal to 2500"))
    env = request.get("Environment") or {}
    if len(env) > 100:
        errors.append(constraint(len(env), "environment", "have length less than or equal to 100"))
    for key, value in env.items():
        if not _ENV_KEY_RE.match(key) or len(key) > 512:
            errors.append(constraint(key, "environment", "satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*"))
        if len(value) > 512:
            errors.append(constraint(value[:40] + "...", f"environment.{key}", "have length less than or equal to 512"))
    if len(request.get("Tags") or []) > 50:
        errors.append(constraint(len(request["Tags"]), "tags", "have length less than or equal to 50"))
    retry = (request.get("RetryStrategy") or {}).get("MaximumRetryAttempts")
    if retry is not None and not 1 <= retry <= 30:
        errors.append(constraint(retry, "retryStrategy.maximumRetryAttempts",
                                 "have value between 1 and 30"))
    return errors


def _check_rules(request: dict[str, Any]) -> None:
    """The rules across members that CreateTrainingJob enforces, one ValidationError each."""
    resource = request.get("ResourceConfig") or {}
    stopping = request.get("StoppingCondition") or {}
    ckpt = request.get("CheckpointConfig")
    algo = request.get("AlgorithmSpecification") or {}
    if not algo.get("TrainingImage") and not algo.get("AlgorithmName"):
        raise ValidationError("Either TrainingImage or AlgorithmName must be specified in AlgorithmSpecification.")
    if not resource.get("InstanceType") or not resource.get("InstanceCount") or not resource.get("VolumeSizeInGB"):
        raise ValidationError("ResourceConfig must specify InstanceType, InstanceCount and VolumeSizeInGB.")
    max_runtime = stopping.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME)
    max_wait = stopping.get("MaxWaitTimeInSeconds")
    if request.get("EnableManagedSpotTraining"):
        if max_wait is None or max_wait < max_runtime:
            raise ValidationError("Invalid MaxWaitTimeInSeconds. It must be present and be greater than or "
                                  "equal to MaxRuntimeInSeconds")
    elif max_wait is not None:
        raise ValidationError("Invalid MaxWaitTimeInSeconds. It is only supported when "
                              "EnableManagedSpotTraining is set to true")
    if ckpt is not None and ckpt.get("LocalPath") and not ckpt["LocalPath"].startswith("/"):
        raise ValidationError("CheckpointConfig.LocalPath must be an absolute path.")


# SageMaker's data parallelism library's instance types (SageMaker Developer Guide, SMDDP v2 "Supported
# frameworks, AWS Regions, and instances types"; the same list as trainctl/backends/sagemaker/distribution.py).
SMDDP_INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")


def _enabled(value: Any) -> bool:
    return value in (True, "true", "True")


def distribution_failure(hyperparameters: dict[str, Any], instance_type: str) -> str | None:
    """Why a job with SageMaker's distributed libraries fails before the script runs (decoded hyperparameters),
    or None. CreateTrainingJob accepts any hyperparameters: SageMaker refuses these at run time, so the job
    fails. On p5 without torch_distributed: the SageMaker SDK v2's own words (estimator.py
    `_distribution_configuration`); elsewhere SMDDP has no documented message: the sandbox names the types."""
    smdistributed = "sagemaker_distributed_dataparallel_enabled" in hyperparameters or \
        "mp_parameters" in hyperparameters
    torchrun = _enabled(hyperparameters.get("sagemaker_torch_distributed_enabled"))
    if smdistributed and not torchrun and "p5.48xlarge" in instance_type:
        return "ClientError: SMModelParallel and SMDataParallel currently do not support p5 instances."
    if _enabled(hyperparameters.get("sagemaker_distributed_dataparallel_enabled")) and \
            instance_type not in SMDDP_INSTANCE_TYPES:
        return (f"AlgorithmError: the SageMaker distributed data parallelism library (SMDDP) does not support "
                f"{instance_type}; supported: {', '.join(SMDDP_INSTANCE_TYPES)}")
    return None


def _subnet_azs(request: dict[str, Any], account_id: str, region: str) -> list[str | None]:
    """The AZs of VpcConfig's subnets ([None] outside a VPC); a subnet or group that does not exist fails."""
    vpc = request.get("VpcConfig")
    if not vpc:
        return [None]
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[account_id][region]
    azs: list[str | None] = []
    for subnet_id in vpc.get("Subnets") or []:
        try:
            azs.append(ec2.get_subnet(subnet_id).availability_zone)
        except Exception:
            raise ValidationError(f"The subnet ID '{subnet_id}' does not exist") from None
    for sg_id in vpc.get("SecurityGroupIds") or []:
        if ec2.get_security_group_from_id(sg_id) is None:
            raise ValidationError(f"The security group '{sg_id}' does not exist")
    return azs or [None]


def script_mode_refusal(request: dict[str, Any]) -> tuple[str | None, Any, Any]:
    """(why the container refuses the job before its download, or None; the program; the code's S3 URI)."""
    from trainctl_sandbox.sagemaker.container import decode_hyperparameter

    hps = {k: decode_hyperparameter(v) for k, v in (request.get("HyperParameters") or {}).items()}
    program, submit = hps.get("sagemaker_program"), hps.get("sagemaker_submit_directory")
    if not program or not submit:
        return ("AlgorithmError: the sandbox runs script-mode jobs only: HyperParameters need sagemaker_program "
                "and sagemaker_submit_directory (an s3:// URI of sourcedir.tar.gz)"), program, submit
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage", "")
    failure = distribution_failure(hps, request["ResourceConfig"]["InstanceType"]) or smp_image_failure(hps, image)
    return failure, program, submit


def smp_image_failure(hyperparameters: dict[str, Any], image: str) -> str | None:
    """SMP v2 (`torch.sagemaker`) is only in the smdistributed-modelparallel images (SageMaker Developer Guide,
    "SMP v2 supported frameworks"; SDK image_uri_config/pytorch-smp.json): in any other image the script's
    `import torch.sagemaker` fails."""
    if "mp_parameters" not in hyperparameters or "/smdistributed-modelparallel:" in image:
        return None
    return ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"ModuleNotFoundError: No module "
            f"named 'torch.sagemaker'\" (SMP v2 is in the smdistributed-modelparallel images, not {image})")


def check_role(request: dict[str, Any], account_id: str, propagation_s: float) -> None:
    """SageMaker assumes the execution role when the job is created: a role that does not exist, does not
    trust sagemaker.amazonaws.com, or was made too recently for IAM to have propagated it (IAM is eventually
    consistent; `propagation_s`, real seconds) is refused with AWS's message. Another account's role is
    taken as it is (its trust is that account's)."""
    import json
    import urllib.parse
    from datetime import datetime, timezone

    from moto.iam.models import iam_backends

    arn = request.get("RoleArn", "")
    if arn.split(":")[4:5] != [account_id]:
        return
    refusal = ValidationError(f"Could not assume role {arn}. Please ensure that the role exists and allows "
                              "principal 'sagemaker.amazonaws.com' to assume the role.")
    role = next((r for r in iam_backends[account_id]["global"].get_roles() if r.arn == arn), None)
    if role is None:
        raise refusal
    trust = json.loads(urllib.parse.unquote(role.assume_role_policy_document))
    services: list[str] = []
    for st in trust.get("Statement", []):
        named = (st.get("Principal") or {}).get("Service") or [] if st.get("Effect") == "Allow" else []
        services += [named] if isinstance(named, str) else named
    created = role.create_date if role.create_date.tzinfo else role.create_date.replace(tzinfo=timezone.utc)
    if "sagemaker.amazonaws.com" not in services or \
            (datetime.now(timezone.utc) - created).total_seconds() < propagation_s:
        raise refusal
