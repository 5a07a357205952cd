"""EC2's pre-flight checks for `doctor` (backends/preflight.py): the nodes' route to AWS (the subnets `launch`
would keep, by the same code) and the Spot service-linked role."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.preflight import Check, Preflight, fail, ok, skip


def preflight_checks(client_for: Callable[[str, str], Any], ctx: Preflight) -> list[Check]:
    if "ec2" not in ctx.platforms or ctx.plan is None:
        return []
    return [check_node_route(client_for, ctx.region, ctx.subnet, ctx.first_option("ec2"), ctx.secrets,
                             (ctx.spec, ctx.spec_path))]


def late_preflight_checks(client_for: Callable[[str, str], Any], ctx: Preflight) -> list[Check]:
    # only EC2 Spot needs it: SageMaker runs managed Spot instances itself
    return [check_spot_role(client_for, ctx.region)] if "ec2" in ctx.platforms else []


def check_node_route(client_for: Callable[[str, str], Any], region: str, subnet_flag: str | None, option,
                     secrets: tuple[str, ...] = (), job: tuple | None = None) -> Check:
    """`launch` keeps only the subnets whose EC2 nodes reach S3, EC2 and CloudWatch Logs (a public IPv4 with an
    internet gateway for a type with one network card, else a NAT or VPC endpoints), and, when the code of `job`
    (spec, spec path) ships a requirements.txt, those that reach PyPI too (backends/ec2/pip_reach.py): the same
    code as the launch's."""
    from trainctl.aws import network
    from trainctl.backends.ec2 import pip_reach
    from trainctl.backends.ec2.prepare import no_public_ipv4, node_subnets
    from trainctl.catalog import load_catalog
    from trainctl.errors import UsageError

    name = "EC2 nodes reach AWS"
    inst = load_catalog().instance(option.instance_type) if option else None
    if inst is None:
        return skip(name, "no EC2 option to check")
    ec2 = client_for("ec2", region)
    try:
        notes: list[str] = []
        kept = node_subnets(ec2, region, inst, network.job_network(ec2, region, subnet_flag), notes, secrets)
        if job is not None:
            from trainctl.backends.packaging import job_code

            kept = pip_reach.subnets_for_pip(ec2, region, inst.name, kept, not no_public_ipv4(inst),
                                             job_code(*job)[0], notes)
    except UsageError as e:
        detail, _, fix = str(e).partition(": ")
        return fail(name, detail, fix)
    return ok(name, notes[-1] if notes else f"{inst.name}: nodes reach AWS from "
                                            f"{', '.join(s for ids in kept.by_az.values() for s in ids)}")


def check_spot_role(client_for: Callable[[str, str], Any], region: str) -> Check:
    """EC2 needs the Spot service-linked role before the first Spot request (backends/ec2/spot_role.py)."""
    from trainctl.backends.ec2 import spot_role

    name = "Spot service-linked role"
    found = spot_role.exists(client_for("iam", region))
    if found:
        return ok(name, f"{spot_role.ROLE_NAME} exists")
    if found is None:
        return skip(name, f"cannot read {spot_role.ROLE_NAME} (no iam:GetRole on it); {spot_role.FIX}")
    return fail(name, f"{spot_role.ROLE_NAME} does not exist: EC2 Spot launches need it (a launch with "
                      "iam:CreateServiceLinkedRole creates it)", spot_role.FIX)
