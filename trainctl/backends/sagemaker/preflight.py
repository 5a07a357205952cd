"""SageMaker's pre-flight checks for `doctor` (backends/preflight.py): the execution role (the one given, or the
permissions boundary each job's own role is made under) and, for a job in a VPC, the subnet's route to S3."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.aws import clients as aws
from trainctl.backends.preflight import POLICY_FIX, Check, Preflight, denied, fail, ok, ships_requirements, skip

ROLE_CHECK = "SageMaker execution role"
ROUTE_CHECK = "subnet reaches S3"


def preflight_checks(client_for: Callable[[str, str], Any], ctx: Preflight) -> list[Check]:
    if "sagemaker" not in ctx.platforms:
        return [skip(ROLE_CHECK, "the spec does not use SageMaker"),
                skip(ROUTE_CHECK, "only SageMaker VPC jobs need it (EC2: \"EC2 nodes reach AWS\")")]
    best = ctx.first_option("sagemaker")
    given = ctx.role or (ctx.spec.role if ctx.spec else None)
    out = [check_execution_role(client_for, ctx.region, given) if given else
           check_job_role_boundary(client_for, ctx.region)]
    if best is not None and best.count == 1:
        out.append(skip(ROUTE_CHECK, "the best SageMaker option has one node: it runs outside any VPC"))
    else:
        out.append(check_s3_route(client_for, ctx.region, ctx.subnet, best.availability_zone if best else None,
                                  ships_requirements(ctx.spec, ctx.spec_path), ctx.secrets))
    return out


def check_execution_role(client_for: Callable[[str, str], Any], region: str, role: str) -> Check:
    from trainctl.backends.sagemaker.prepare import trusts_sagemaker

    role_name = role.rsplit("/", 1)[-1]
    fix = ("leave --role out (trainctl then makes each job its own role), or create it from the per-job template "
           "`trainctl iam-policy --role sagemaker-execution -o json` (policy and trust policy)")
    try:
        found = client_for("iam", region).get_role(RoleName=role_name)["Role"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return fail(ROLE_CHECK, f"role {role_name} does not exist", fix)
        if denied(e):
            return fail(ROLE_CHECK, f"cannot read role {role_name}: {aws.error_summary(e)}", POLICY_FIX)
        raise
    if not trusts_sagemaker(found.get("AssumeRolePolicyDocument", {})):
        return fail(ROLE_CHECK, f"role {role_name} does not trust sagemaker.amazonaws.com",
                    "add a trust statement allowing sts:AssumeRole for Service sagemaker.amazonaws.com")
    return ok(ROLE_CHECK, f"{found['Arn']} trusts sagemaker.amazonaws.com")


def check_job_role_boundary(client_for: Callable[[str, str], Any], region: str) -> Check:
    """Without --role, each SageMaker job gets its own execution role from the launch, under trainctl's
    permissions boundary: nothing to pre-create but the boundary (an administrator's, once per account)."""
    from trainctl.naming.resources import partition
    from trainctl.iam import BOUNDARY_POLICY
    from trainctl.iam.boundary import boundary_arn

    account = client_for("sts", region).get_caller_identity()["Account"]
    arn = boundary_arn(account, partition(region))
    try:
        client_for("iam", region).get_policy(PolicyArn=arn)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return fail(ROLE_CHECK, f"each job's own role needs the permissions boundary {arn}, which does not exist",
                        f"an administrator creates it once: `trainctl iam-policy --role boundary > b.json && aws iam "
                        f"create-policy --policy-name {BOUNDARY_POLICY} --policy-document file://b.json`")
        if denied(e):
            return skip(ROLE_CHECK, f"cannot read {arn} ({aws.error_summary(e)}): each job's own role needs it")
        raise
    return ok(ROLE_CHECK, f"created per job by launch, within {arn}")


def check_s3_route(client_for: Callable[[str, str], Any], region: str, subnet_flag: str | None, az: str | None,
                   pip: bool = False, secrets: tuple[str, ...] = ()) -> Check:
    """A SageMaker job in a VPC has no public IP: its subnet reaches S3 only through a gateway endpoint or a NAT,
    and PyPI (`pip`: the code ships a requirements.txt) only through a NAT. The subnet checked is the one
    `launch` would use: the same rule (aws/network.py), the plan's AZ."""
    from trainctl.aws import network
    from trainctl.errors import UsageError

    name = ROUTE_CHECK
    ec2 = client_for("ec2", region)
    try:
        net = network.job_network(ec2, region, subnet_flag)
    except UsageError as e:
        return fail(name, str(e).split(":")[0], str(e).split(": ", 1)[-1])
    sid, sn_az, _ = net.subnet_for(az)
    route = network.s3_route(ec2, region, sid, net.vpc_id)
    where = f"subnet {sid} ({sn_az}, the one launch would use)"
    needed = network.secret_services(secrets)
    private = network.private_route(ec2, region, sid, net.vpc_id) if pip or needed else None
    if private is not None and needed and route.ok and not private.reaches(needed):
        return fail(name, f"{where}: no NAT route and {', '.join(private.missing(needed))}: a SageMaker job there "
                          "cannot read its secrets", network.private_fix(region, net.vpc_id, private.route_table,
                                                                         needed, nat_only=False))
    if pip and private is not None and not private.nat:  # a NAT is the fix for the code download as well
        return fail(name, f"{where}: {route.detail}; without a NAT route the code's requirements.txt cannot be "
                          "pip-installed there (InstallRequirementsError)",
                    network.private_fix(region, net.vpc_id, private.route_table, (), nat_only=True) + "; or vendor "
                    "the packages into source_dir (pip install -t DIR -r requirements.txt) and remove "
                    "requirements.txt")
    if route.ok:
        return ok(name, f"{where}: {route.detail}")
    return fail(name, f"{where} in VPC {net.vpc_id}: {route.detail}: a SageMaker job there cannot fetch its code",
                route.fix)
