"""What a SageMaker launch asks AWS for: `prepare` reads (account, role, bucket, code object, subnets) and
returns the exact write calls: the job bucket's set-up when trainctl owns it, the code archive when its
content hash is new, a self-referencing security group, and CreateTrainingJob per the SageMaker PyTorch
container contract (plain boto3: no sagemaker SDK at run time, it costs 1-2 s and 300 MB+)."""
from __future__ import annotations

import json
import urllib.parse
from typing import Any

from trainctl.aws import clients as aws
from trainctl.backends.job_args import entrypoint_args, layout_note
from trainctl.naming import bucket as layout
from trainctl.naming import resources as naming
from trainctl.aws import network
from trainctl.backends import data_checks
from trainctl.backends.data_keys import data_keys
from trainctl.backends.sagemaker import data as job_data
from trainctl.backends.sagemaker import distribution
from trainctl.backends.sagemaker import role as job_role
from trainctl.backends.base import JOB_TAG, AwsCall, LaunchRequest, LaunchSettings, tags
from trainctl.backends.security_group import self_only_security_group
from trainctl.errors import TrainctlError, UsageError
from trainctl.backends import budget
from trainctl.backends.launch_limits import MAX_SECONDS, boundary, max_runtime_s

PLATFORM = "sagemaker"
CHECKPOINT_LOCAL = "/opt/ml/checkpoints"
SECRET_ENV_PREFIX = "TRAINCTL_SECRET_ARN_"  # + the env var name: the ARN the container reads the value from
METRICS = [{"Name": "train:loss", "Regex": r"trainctl step=\d+ loss=([0-9.eE+-]+)"},
           {"Name": "train:samples_per_s", "Regex": r"samples_per_s=([0-9.eE+-]+)"}]


def _hp(value: Any) -> str:
    # The SDK's contract: every hyperparameter JSON-encoded (strings keep their quotes).
    return json.dumps(value)


def trusts_sagemaker(doc: Any) -> bool:
    if isinstance(doc, str):
        doc = json.loads(urllib.parse.unquote(doc))
    for st in doc.get("Statement", []):
        if st.get("Effect") != "Allow":
            continue
        actions = st.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        services = (st.get("Principal") or {}).get("Service", [])
        services = [services] if isinstance(services, str) else services
        if "sagemaker.amazonaws.com" in services and any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions):
            return True
    return False


def role_arn(iam, account: str, region: str, wanted: str) -> tuple[str, str]:
    """A user-given execution role (--role or the spec's role:), checked to exist and trust SageMaker."""
    name = wanted
    arn = name if name.startswith("arn:") else None
    if arn:
        name = arn.rsplit("/", 1)[-1]
        if f":{account}:" not in arn:  # another account's role: we cannot read it, SageMaker will check
            return arn, f"execution role {arn} (another account: not checked)"
    fix = ("pass --role NAME|ARN of a role that trusts sagemaker.amazonaws.com with S3 access to the job bucket, "
           "or leave --role (and the spec's role:) out: trainctl then creates the job's own role")
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            raise TrainctlError(f"SageMaker execution role {name!r} not found in account {account}: {fix}") from None
        if aws.error_code(e) in ("AccessDenied", "AccessDeniedException"):
            return arn or naming.arn(region, "iam", account, f"role/{name}", regional=False), \
                f"execution role {name} (no iam:GetRole permission: trust not checked)"
        raise
    if not trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
        raise TrainctlError(f"IAM role {name!r} does not trust sagemaker.amazonaws.com: add a trust policy "
                            f"statement allowing sts:AssumeRole for Service sagemaker.amazonaws.com, or {fix}")
    return role["Arn"], f"execution role {role['Arn']}"


def _code_calls(s3, spec, settings: LaunchSettings, bucket: str, account: str, region: str,
                notes: list[str]) -> tuple[str, str, list, bool]:
    """(the program, the code's S3 URI, the upload call if the content is new, whether it has requirements.txt)."""
    from trainctl.backends.bucket_calls import code_calls
    from trainctl.backends.packaging import job_code

    pkg, program = job_code(spec, settings.spec_path)
    key, upload = code_calls(s3, bucket, account, pkg, settings.job_id, region, why=f"code: {len(pkg.files)} files, runs {program}")
    uri = f"s3://{bucket}/{key}"
    pip = "requirements.txt" in pkg.files
    if pkg.secrets_note():
        notes.append(pkg.secrets_note())
    if not upload:
        notes.append(f"code {len(pkg.files)} files, sha256 {pkg.sha256[:12]}: already at {uri}")
        return program, uri, [], pip
    notes.append(f"code {len(pkg.files)} files ({pkg.listing()}), {len(pkg.data)} bytes, "
                 f"sha256 {pkg.sha256[:12]}")
    if pip:
        # What SageMaker's framework containers do (the training toolkit installs it); the local sandbox runs the
        # script with its own interpreter's packages and installs nothing, which the note says rather than hides.
        notes.append("requirements.txt shipped: SageMaker's training container pip-installs it before the script "
                     "starts (the local sandbox installs nothing: its jobs use the packages already installed)")
    return program, uri, upload, pip


def hyperparameters(spec, inst, option, program: str, source_uri: str, job_id: str,
                    kind: str = "torch_distributed", mp_parameters: dict | None = None) -> dict[str, str]:
    """The script's arguments and the SDK v2's own hyperparameters, the distribution's included
    (backends/sagemaker/distribution.py)."""
    user_args = entrypoint_args(spec, option, inst, kind)
    hps = {str(k): _hp(v) for k, v in user_args.items()}
    hps.update({"sagemaker_program": _hp(program), "sagemaker_submit_directory": _hp(source_uri),
                "sagemaker_container_log_level": "20", "sagemaker_job_name": _hp(job_id),
                "sagemaker_region": _hp(option.region)})
    hps.update(distribution.hyperparameters(kind, option, option.count > 1 or inst.accelerator_count > 1,
                                            mp_parameters))
    return hps


def _network(client_for, job_id: str, option, opts, pip: bool, calls: list, notes: list[str],
             secrets: tuple[str, ...] = (), needs_vpc: bool = False) -> dict | None:
    """VpcConfig for a job of several nodes: one subnet in the plan's AZ (the same rule as EC2 and doctor); a
    group that only talks to itself unless one is given. A single node needs no VPC: it runs with SageMaker's
    own internet access."""
    if option.count == 1 and not needs_vpc:
        notes.append("one node: no VPC (SageMaker's network reaches S3 and PyPI)")
        return None
    ec2 = client_for("ec2", option.region)
    net = network.job_network(ec2, option.region, opts.subnet)
    subnet, _, note = net.subnet_for(option.availability_zone)
    notes.append(note)
    _check_vpc_routes(ec2, option.region, subnet, net.vpc_id, pip, notes, secrets)
    if opts.security_group:
        notes.append(f"security group {opts.security_group} (given)")
        group = opts.security_group
    else:
        group = "${security_group_id}"
        calls.extend(self_only_security_group(job_id, naming.job_resource_name(job_id), net.vpc_id, option.region,
                                              tags(job_id), "hosts"))
    return {"SecurityGroupIds": [group], "Subnets": [subnet]}


def adopt_training_job(job_id: str, region: str) -> tuple[AwsCall, ...]:
    """CreateTrainingJob whose answer was lost (a 5xx or a read timeout after SageMaker made the job) is retried
    by botocore and answered ResourceInUse: the job is this launch's when it carries its trainctl:job tag, and
    is adopted; a job of that name without the tag is someone else's and the launch fails, touching nothing."""
    return (AwsCall("sagemaker", "DescribeTrainingJob", {"TrainingJobName": job_id}, region,
                    outputs={"training_job_arn": "TrainingJobArn"}, why="the job of this name"),
            AwsCall("sagemaker", "ListTags", {"ResourceArn": "${training_job_arn}"}, region,
                    owner_tag=(JOB_TAG, job_id), why="adopted only when it carries this job's tag"))


def _check_vpc_routes(ec2, region: str, subnet: str, vpc: str, pip: bool, notes: list[str],
                      secrets: tuple[str, ...] = ()) -> None:
    """A job in a VPC has no internet (SageMaker Developer Guide, train-vpc): the code download needs S3 (a
    gateway endpoint or a NAT), pip-installing requirements.txt needs a NAT. Refused here, not ten minutes
    into a billed job that fails with an S3 timeout or InstallRequirementsError."""
    route = network.private_route(ec2, region, subnet, vpc)
    if pip and not route.nat:
        raise UsageError(f"subnet {subnet} has no NAT route, so a SageMaker job in it cannot pip-install "
                         "requirements.txt (InstallRequirementsError): "
                         + network.private_fix(region, vpc, route.route_table, (), nat_only=True)
                         + "; or vendor the packages into source_dir (pip install -t DIR -r requirements.txt) and "
                           "remove requirements.txt")
    if not route.reaches():
        raise UsageError(f"subnet {subnet} reaches S3 neither through a gateway endpoint nor a NAT, so a SageMaker "
                         "job in it cannot download its code: "
                         + network.private_fix(region, vpc, route.route_table, (), nat_only=False))
    needed = network.secret_services(secrets)  # the container reads them at start (trainctl_secrets.py)
    if needed and not route.reaches(needed):
        raise UsageError(f"subnet {subnet} has no NAT route and lacks {', '.join(route.missing(needed))}, so a "
                         "SageMaker job in it cannot read its secrets: "
                         + network.private_fix(region, vpc, route.route_table, needed, nat_only=False))
    notes.append(f"subnet {subnet} reaches " + (f"the internet through NAT gateway {route.nat}" if route.nat
                                               else f"S3 through gateway endpoint {route.s3_gateway}"))


def _managed_spot(params: dict, spec, bucket: str, job_id: str, notes: list[str]) -> None:
    stopping, wait = params["StoppingCondition"], int(spec.constraints.max_spot_wait_hours * 3600)
    stopping["MaxWaitTimeInSeconds"] = min(MAX_SECONDS, stopping["MaxRuntimeInSeconds"] + wait)
    params["EnableManagedSpotTraining"] = True
    notes.append(f"managed Spot: MaxWait {stopping['MaxWaitTimeInSeconds']} s (runtime "
                 f"{stopping['MaxRuntimeInSeconds']} s + max_spot_wait_hours "
                 f"{spec.constraints.max_spot_wait_hours:g}); checkpoints synced to "
                 f"{params['CheckpointConfig']['S3Uri']}")


def checkpoint_config(bucket: str, job_id: str) -> dict:
    """Every job's checkpoints in S3, Spot or not: SageMaker restores them into a restart (Spot) and into a job that
    `launch --resume-from` started from another's (usecases/launch/resume.py copies them in first)."""
    return {"S3Uri": layout.sagemaker_checkpoints(bucket, job_id), "LocalPath": CHECKPOINT_LOCAL}


def _market(params: dict, option, spec, bucket: str, job_id: str, notes: list[str]) -> None:
    if option.market == "spot":
        _managed_spot(params, spec, bucket, job_id, notes)
    if option.capacity_block is not None:
        _on_training_plan(params, option, bucket, job_id, notes)


def _on_training_plan(params: dict, option, bucket: str, job_id: str, notes: list[str]) -> None:
    """The job on its training plan (ResourceConfig.TrainingPlanArn; its InstanceType must be the plan's, Developer
    Guide "Create a training job using the API"). Its checkpoints are in S3 (CheckpointConfig): SageMaker terminates
    a plan's instances from 30 minutes before its end, and `launch --resume-from` starts the next job from them. A job
    queued before the plan's start waits Pending, and the StoppingCondition counts that wait ("Training plans
    utilization for SageMaker training jobs"), so MaxRuntimeInSeconds grows by the wait."""
    plan = option.capacity_block
    params["ResourceConfig"]["TrainingPlanArn"] = plan.reservation_id or "${training_plan_arn}"
    stopping = params["StoppingCondition"]
    stopping["MaxRuntimeInSeconds"] = min(MAX_SECONDS, stopping["MaxRuntimeInSeconds"] + int(plan.wait_hours * 3600))
    notes.append(f"on SageMaker training plan {plan.reservation_id or '(bought first)'} from {plan.start} to "
                 f"{plan.end}: the job waits Pending until it is Active; SageMaker terminates its instances from 30 "
                 f"minutes before the end, so checkpoints go to {params['CheckpointConfig']['S3Uri']}")


def _job_role(client_for, job_id: str, region: str, account: str, bucket: str, source_uri: str, image: str, spec,
              in_vpc: bool, notes: list[str]) -> tuple[str, list[AwsCall]]:
    """The job's own execution role (backends/sagemaker/role.py): its ARN and the calls that make it."""

    bounded_by = boundary(client_for("iam", region), account, region, notes, role="the job's execution role",
                          reads=data_checks.data_reads(spec.data))
    code_key = source_uri.removeprefix(f"s3://{bucket}/")
    reads = data_checks.data_reads(spec.data)
    policy = job_role.execution_policy(job_id, bucket, region, account, code_key, image, tuple(spec.secrets.values()),
                                       in_vpc, reads, data_keys(client_for, region, account, reads, notes))
    arn, calls = job_role.role_calls(job_id, region, account, bounded_by, policy, spec.name)
    notes.append(f"execution role {arn}: this job's own, writes only under s3://{bucket}/{job_id}/; "
                 "`trainctl down` deletes it once the job has ended")
    return arn, calls


# CreateTrainingJob's Environment is a TrainingEnvironmentMap: at most 100 entries, keys and values of at most
# 512 characters (botocore `sagemaker` TrainingEnvironmentKey/Value); SageMaker refuses the whole request.
ENVIRONMENT_VALUE_MAX = 512


def environment(job_id: str, secrets: dict[str, str]) -> dict[str, str]:
    """The job's environment: the secrets' ARNs only, never their values (the container reads them at start,
    entrypoints/trainctl_secrets.py). An ARN too long for SageMaker is one line before anything is created."""
    env = {"TRAINCTL_JOB_ID": job_id, "PYTHONUNBUFFERED": "1",
           **{f"{SECRET_ENV_PREFIX}{name}": arn for name, arn in secrets.items()}}
    for name, arn in secrets.items():
        if len(arn) > ENVIRONMENT_VALUE_MAX:
            raise UsageError(f"secret {name}: its ARN is {len(arn)} characters, and a SageMaker job's environment "
                             f"holds values of at most {ENVIRONMENT_VALUE_MAX}; give the secret a shorter name, or "
                             "launch it with --platform ec2")
    return env


def check_pullable(image: str, account: str) -> None:
    """The job's own role carries the permissions boundary, which lets it pull only from the accounts of
    trainctl's images and the caller's own (iam/boundary.py): another account's image would fail the job's
    image pull after it was created."""
    from trainctl.catalog.images import image_accounts

    owner = image.split(".", 1)[0]
    if ".dkr.ecr." in image and owner not in (*image_accounts(), account):
        raise UsageError(f"--image {image}: the job's role carries trainctl's permissions boundary, which pulls "
                         f"only from AWS's Deep Learning Containers accounts and this account ({account}); copy the "
                         "image into this account's ECR, or pass --role with a role that may pull it")


def _training_instance(option):
    from trainctl.catalog import load_catalog

    if option.platform != "sagemaker":
        raise UsageError(f"option {option.rank} is for {option.platform}, not sagemaker")
    inst = load_catalog().instances.get(option.instance_type)
    if inst is None or not inst.sagemaker_training:
        raise UsageError(f"{option.instance_type} is not a SageMaker training instance type")
    return inst


def _image(opts, kind: str, region: str, accelerator: str, notes: list[str]) -> str:
    """The training image: --image, SMP v2's own image, or trainctl's image table; with its support dates."""
    from trainctl.backends.sagemaker.images import smp_image, training_image
    from trainctl.catalog.images import support_today

    image = opts.image or (smp_image(region) if kind == "smp" else training_image(region, accelerator))
    notes.append(f"image {image}" + (" (--image)" if opts.image else " (SMP v2's own image)" if kind == "smp"
                                     else f" (trainctl's {accelerator} image table)"))
    notes.append(support_today(image))
    return image


def prepare(client_for, option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
    from trainctl.backends.bucket_calls import job_bucket_calls

    inst = _training_instance(option)
    region, job_id, opts = option.region, naming.training_job_name(settings.job_id), settings.options
    kind = distribution.chosen(opts.distribution, spec)
    distribution.check(kind, spec, option, inst.accelerator.kind)
    mp_parameters = distribution.smp_parameters(option, inst.accelerator_count, spec.model.tensor_parallel) \
        if kind == "smp" else None
    notes: list[str] = [layout_note(spec, option), distribution.describe(kind, mp_parameters)]
    account = client_for("sts", region).get_caller_identity()["Account"]
    given_role = opts.role or spec.role
    if given_role:
        arn, note = role_arn(client_for("iam", region), account, region, given_role)
        notes.append(note + ": given, so trainctl creates no role; keeping jobs out of each other's S3 prefixes "
                            "is then that role's policy's job (docs/security.md)")
    s3 = client_for("s3", region)
    bucket, calls = job_bucket_calls(s3, job_id, region, account, opts.bucket, notes,
                                     None if given_role else ", or pass --role with a role that reaches yours")
    program, source_uri, upload, pip = _code_calls(s3, spec, settings, bucket, account, region, notes)
    calls += upload
    vpc_config = _network(client_for, job_id, option, opts, pip, calls, notes, tuple(spec.secrets.values()),
                          job_data.needs_vpc(spec.data))
    data_checks.refuse_bad_data(client_for, region, spec, opts, (vpc_config or {}).get("Subnets", ()), notes, PLATFORM)
    calls += job_data.lustre_calls(client_for, region, spec.data, vpc_config, job_id, opts.security_group, notes)
    image = _image(opts, kind, region, inst.accelerator.kind, notes)
    if not given_role:
        check_pullable(image, account)
        arn, role_calls = _job_role(client_for, job_id, region, account, bucket, source_uri, image, spec,
                                    bool(vpc_config), notes)
        calls += role_calls
    stopping = budget.sagemaker_runtime({"MaxRuntimeInSeconds": max_runtime_s(option, opts.max_runtime_hours)},
                                        spec, option, region, notes)  # the budget bounds it too
    params: dict[str, Any] = {
        "TrainingJobName": job_id, "RoleArn": arn,
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                   "EnableSageMakerMetricsTimeSeries": True, "MetricDefinitions": METRICS},
        "HyperParameters": hyperparameters(spec, inst, option, program, source_uri, job_id, kind, mp_parameters),
        "OutputDataConfig": {"S3OutputPath": layout.sagemaker_output(bucket, job_id)},
        "ResourceConfig": {"InstanceType": f"ml.{option.instance_type}", "InstanceCount": option.count,
                           # sized from the job by the plan (planner/disk.py); NVMe types use their instance storage
                           "VolumeSizeInGB": getattr(option, "volume_gb", None) or 50},
        "StoppingCondition": stopping,
        "Environment": environment(job_id, spec.secrets),
        "RetryStrategy": {"MaximumRetryAttempts": 2},
        "Tags": tags(job_id, **{"trainctl:spec": spec.name}),
        "CheckpointConfig": checkpoint_config(bucket, job_id),
        **job_data.data_params(spec, bucket, job_id, notes),
    }
    if vpc_config:
        params["VpcConfig"] = vpc_config
    _market(params, option, spec, bucket, job_id, notes)
    calls.append(AwsCall("sagemaker", "CreateTrainingJob", params, region,
                         outputs={"training_job_arn": "TrainingJobArn"},
                         why=f"{option.count} x ml.{option.instance_type} {option.market}",
                         ok_errors=("ResourceInUse",), fallback=adopt_training_job(job_id, region),
                         retry=None if given_role else job_role.ASSUME_RETRY))
    return LaunchRequest(platform="sagemaker", job_id=job_id, region=region, option=option, calls=tuple(calls),
                         notes=tuple(notes))
