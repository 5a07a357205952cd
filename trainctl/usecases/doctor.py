"""`trainctl doctor [SPEC]`: can this account and region launch the spec, and if not, why and what to do.

Each check reads only (no writes) and ends as pass, fail (with the fix) or skip (with the reason).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from trainctl.aws import clients as aws
from trainctl.usecases.doctor_costs import check_cost_allocation_tag
from trainctl.usecases.doctor_disks import disk_checks
from trainctl.naming.bucket import job_bucket


@dataclass
class Check:
    name: str
    status: str            # "pass" | "fail" | "skip"
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def _ok(name: str, detail: str) -> Check:
    return Check(name, "pass", detail)


def _fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "fail", detail, fix)


def _skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


def _denied(e: Exception) -> bool:
    return aws.error_code(e) in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation",
                                 "UnauthorizedAccess")


POLICY_FIX = "grant it: `trainctl iam-policy` prints the policy trainctl needs"


def check_credentials(region: str) -> tuple[Check, str | None]:
    name = "credentials and region"
    try:
        if not aws.has_credentials():
            return _fail(name, "no AWS credentials found", "run `aws configure` (or `aws sso login`), set "
                         "AWS_PROFILE or pass --profile; `trainctl --sandbox doctor` tries the local sandbox"), None
        ident = aws.client("sts", region).get_caller_identity()
    except Exception as e:  # noqa: BLE001 - expired tokens, unreachable endpoint, bad region: all end here
        return _fail(name, f"credentials do not work in {region}: {aws.error_summary(e)}",
                     "refresh the credentials (`aws sso login`, new keys) or check --region"), None
    return _ok(name, f"{ident['Arn']} (account {ident['Account']}) in {region}"), ident["Account"]


def check_quotas(plan, spec_path: str, platforms: tuple[str, ...]) -> list[Check]:
    """The quota of the option the plan would rank first were every quota high enough: the plan puts over-quota
    options last, so its first option may be a worse one that merely fits."""
    from trainctl.planner.pricing import objective_value

    out = []
    for platform in platforms:
        name = f"quotas ({platform})"
        options = [o for o in plan.options if o.platform == platform]
        if not options:
            out.append(_skip(name, f"the plan has no {platform} option (`trainctl plan {spec_path} --show-excluded`)"))
            continue
        best = min(options, key=lambda o: objective_value(o, plan.objective))
        layout = f"{best.count} x {best.instance_type} {best.market} in {best.region}"
        if best.quota_ok is None:
            out.append(_skip(name, f"{layout}: quota not readable ({'; '.join(plan.warnings) or 'no value'})"))
        elif best.quota_ok:
            n = sum(1 for o in options if o.quota_ok)
            out.append(_ok(name, f"{layout} (the best {platform} option) fits its quota; {n} of the {len(options)} "
                                 f"{platform} option{'s' if len(options) != 1 else ''} {'does' if n == 1 else 'do'}"))
        else:
            why = next((w for w in best.why if w.startswith("over quota")), "over quota")
            fits = next((o for o in options if o.quota_ok), None)
            instead = (f"; the best that fits is {fits.count} x {fits.instance_type} {fits.market} in {fits.region}"
                       if fits else "; no option fits")
            command = why.split("`")[1] if why.count("`") >= 2 else "request an increase in the Service Quotas console"
            out.append(_fail(name, f"{layout} (the best {platform} option) is {why.split('; request')[0]}{instead}",
                             command))
    return out


def check_execution_role(region: str, role: str) -> Check:
    from trainctl.backends.sagemaker.prepare import trusts_sagemaker

    name = "SageMaker execution role"
    role_name = role.rsplit("/", 1)[-1]
    fix = ("leave --role out (trainctl then makes each job its own role), or create it from the per-job template "
           "`trainctl iam-policy --role sagemaker-execution -o json` (policy and trust policy)")
    try:
        found = aws.client("iam", region).get_role(RoleName=role_name)["Role"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return _fail(name, f"role {role_name} does not exist", fix)
        if _denied(e):
            return _fail(name, f"cannot read role {role_name}: {aws.error_summary(e)}", POLICY_FIX)
        raise
    if not trusts_sagemaker(found.get("AssumeRolePolicyDocument", {})):
        return _fail(name, f"role {role_name} does not trust sagemaker.amazonaws.com",
                     "add a trust statement allowing sts:AssumeRole for Service sagemaker.amazonaws.com")
    return _ok(name, f"{found['Arn']} trusts sagemaker.amazonaws.com")


def check_job_role_boundary(region: str) -> Check:
    """Without --role, each SageMaker job gets its own execution role from the launch, under trainctl's
    permissions boundary: nothing to pre-create but the boundary (an administrator's, once per account)."""
    from trainctl.naming.resources import partition
    from trainctl.iam import BOUNDARY_POLICY
    from trainctl.iam.boundary import boundary_arn

    name = "SageMaker execution role"
    account = aws.client("sts", region).get_caller_identity()["Account"]
    arn = boundary_arn(account, partition(region))
    try:
        aws.client("iam", region).get_policy(PolicyArn=arn)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return _fail(name, f"each job's own role needs the permissions boundary {arn}, which does not exist",
                         f"an administrator creates it once: `trainctl iam-policy --role boundary > b.json && aws iam "
                         f"create-policy --policy-name {BOUNDARY_POLICY} --policy-document file://b.json`")
        if _denied(e):
            return _skip(name, f"cannot read {arn} ({aws.error_summary(e)}): each job's own role needs it")
        raise
    return _ok(name, f"created per job by launch, within {arn}")


def check_s3_route(region: str, subnet_flag: str | None, az: str | None, pip: bool = False,
                   secrets: tuple[str, ...] = ()) -> Check:
    """A SageMaker job in a VPC has no public IP: its subnet reaches S3 only through a gateway endpoint or a NAT,
    and PyPI (`pip`: the code ships a requirements.txt) only through a NAT. The subnet checked is the one
    `launch` would use: the same rule (awsinfra.network), the plan's AZ."""
    from trainctl.aws import network
    from trainctl.errors import UsageError

    name = "subnet reaches S3"
    ec2 = aws.client("ec2", region)
    try:
        net = network.job_network(ec2, region, subnet_flag)
    except UsageError as e:
        return _fail(name, str(e).split(":")[0], str(e).split(": ", 1)[-1])
    sid, sn_az, _ = net.subnet_for(az)
    route = network.s3_route(ec2, region, sid, net.vpc_id)
    where = f"subnet {sid} ({sn_az}, the one launch would use)"
    needed = network.secret_services(secrets)
    private = network.private_route(ec2, region, sid, net.vpc_id) if pip or needed else None
    if private is not None and needed and route.ok and not private.reaches(needed):
        return _fail(name, f"{where}: no NAT route and {', '.join(private.missing(needed))}: a SageMaker job there "
                           "cannot read its secrets", network.private_fix(region, net.vpc_id, private.route_table,
                                                                          needed, nat_only=False))
    if pip and private is not None and not private.nat:  # a NAT is the fix for the code download as well
        return _fail(name, f"{where}: {route.detail}; without a NAT route the code's requirements.txt cannot be "
                           "pip-installed there (InstallRequirementsError)",
                     network.private_fix(region, net.vpc_id, private.route_table, (), nat_only=True) + "; or vendor "
                     "the packages into source_dir (pip install -t DIR -r requirements.txt) and remove "
                     "requirements.txt")
    if route.ok:
        return _ok(name, f"{where}: {route.detail}")
    return _fail(name, f"{where} in VPC {net.vpc_id}: {route.detail}: a SageMaker job there cannot fetch its code",
                 route.fix)


def ships_requirements(spec, spec_path: str | None) -> bool:
    """Whether the job's code archive has a requirements.txt (the container pip-installs it)."""
    if spec is None:
        return False
    from trainctl.backends.packaging import job_code

    return "requirements.txt" in job_code(spec, spec_path)[0].files


def check_node_route(region: str, subnet_flag: str | None, option, secrets: tuple[str, ...] = (),
                     job: tuple | None = None) -> Check:
    """`launch` keeps only the subnets whose EC2 nodes reach S3, EC2 and CloudWatch Logs (a public IPv4 with an
    internet gateway for a type with one network card, else a NAT or VPC endpoints), and, when the code of `job`
    (spec, spec path) ships a requirements.txt, those that reach PyPI too (backends/ec2/pip_reach.py): the same
    code, backends/ec2."""
    from trainctl.aws import network
    from trainctl.backends.ec2 import pip_reach
    from trainctl.backends.ec2.prepare import no_public_ipv4, node_subnets
    from trainctl.catalog import load_catalog
    from trainctl.errors import UsageError

    name = "EC2 nodes reach AWS"
    inst = load_catalog().instance(option.instance_type) if option else None
    if inst is None:
        return _skip(name, "no EC2 option to check")
    ec2 = aws.client("ec2", region)
    try:
        notes: list[str] = []
        kept = node_subnets(ec2, region, inst, network.job_network(ec2, region, subnet_flag), notes, secrets)
        if job is not None:
            from trainctl.backends.packaging import job_code

            kept = pip_reach.subnets_for_pip(ec2, region, inst.name, kept, not no_public_ipv4(inst),
                                             job_code(*job)[0], notes)
    except UsageError as e:
        detail, _, fix = str(e).partition(": ")
        return _fail(name, detail, fix)
    return _ok(name, notes[-1] if notes else f"{inst.name}: nodes reach AWS from "
                                             f"{', '.join(s for ids in kept.by_az.values() for s in ids)}")


def check_bucket(region: str, bucket: str, account: str | None = None, own: bool = False) -> Check:
    """The job bucket's encryption and public access. `own`: trainctl's own bucket (no --bucket), which every
    launch creates if missing and locks down (backends/bucket_calls.py): what a launch would fix is a note, not a
    failure; a bucket policy that makes it public is not something a launch undoes, so it stays a failure."""
    from trainctl.naming.bucket import owner

    name = "job bucket"
    s3 = aws.client("s3", region)
    try:
        s3.head_bucket(Bucket=bucket, **owner(account))
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ("404", "NoSuchBucket", "NotFound"):
            return _ok(name, f"{bucket} does not exist yet: the first launch creates it encrypted, public access "
                             "blocked")
        return _fail(name, f"{bucket}: {aws.error_summary(e)}", "use a bucket this account owns (--bucket)")
    problems = []
    try:
        rules = s3.get_bucket_encryption(Bucket=bucket, **owner(account))["ServerSideEncryptionConfiguration"]["Rules"]
        algos = [r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in rules]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "ServerSideEncryptionConfigurationNotFoundError":
            raise
        algos = []
        problems.append("no default encryption")
    try:
        block = s3.get_public_access_block(Bucket=bucket, **owner(account))["PublicAccessBlockConfiguration"]
        open_ = [k for k in ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")
                 if not block.get(k)]
        if open_:
            problems.append(f"public access not blocked: {', '.join(open_)} off")
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "NoSuchPublicAccessBlockConfiguration":
            raise
        problems.append("no public access block")
    try:
        if s3.get_bucket_policy_status(Bucket=bucket, **owner(account))["PolicyStatus"].get("IsPublic"):
            problems.append("its bucket policy makes it public")
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "NoSuchBucketPolicy":
            raise
    public_policy = "its bucket policy makes it public" in problems
    if problems and own and not public_policy:  # every launch sets both on trainctl's own bucket
        return _ok(name, f"{bucket}: {'; '.join(problems)} yet: the first launch makes it encrypted and private "
                         "(every launch sets both on trainctl's own bucket)")
    if problems:
        return _fail(name, f"{bucket}: {'; '.join(problems)}",
                     f"aws s3api put-bucket-encryption --bucket {bucket} --server-side-encryption-configuration "
                     "'{\"Rules\":[{\"ApplyServerSideEncryptionByDefault\":{\"SSEAlgorithm\":\"AES256\"}}]}' and "
                     f"aws s3api put-public-access-block --bucket {bucket} --public-access-block-configuration "
                     "BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true "
                     "(a launch with trainctl's default bucket does both)")
    return _ok(name, f"{bucket}: encrypted ({', '.join(algos)}), public access blocked")


def check_spot_role(region: str) -> Check:
    """EC2 needs the Spot service-linked role before the first Spot request (awsinfra.spot_role)."""
    from trainctl.backends.ec2 import spot_role

    name = "Spot service-linked role"
    found = spot_role.exists(aws.client("iam", region))
    if found:
        return _ok(name, f"{spot_role.ROLE_NAME} exists")
    if found is None:
        return _skip(name, f"cannot read {spot_role.ROLE_NAME} (no iam:GetRole on it); {spot_role.FIX}")
    return _fail(name, f"{spot_role.ROLE_NAME} does not exist: EC2 Spot launches need it (a launch with "
                       "iam:CreateServiceLinkedRole creates it)", spot_role.FIX)


def check_placement_scores(region: str, instance_type: str, count: int) -> Check:
    from trainctl.aws.market import placement_scores_for

    name = "Spot placement scores"
    try:  # the launch's exact configuration, as the plan asks it for its best fixed layouts
        scores, _ = placement_scores_for(aws.client("ec2", region), region, instance_type, count)
    except Exception as e:  # noqa: BLE001
        return _fail(name, f"GetSpotPlacementScores in {region}: {aws.error_summary(e)}",
                     POLICY_FIX if _denied(e) else "plans go on without scores (capacity odds unknown)")
    n = len(scores)
    return _ok(name, f"{n} AZ score{'s' if n != 1 else ''} for {count} x {instance_type} in {region}")


def run(spec_path: str | None, *, role: str | None = None, bucket: str | None = None, subnet: str | None = None,
        platform: str | None = None, on_check: Callable[[Check], Any] | None = None,
        refresh: bool = False) -> list[Check]:
    from trainctl.errors import UsageError

    spec = None
    if spec_path:
        from trainctl.catalog import load_catalog
        from trainctl.spec import load_spec

        spec = load_spec(spec_path, catalog=load_catalog())
    if platform not in (None, "sagemaker", "ec2"):
        raise UsageError(f"--platform {platform!r}: use sagemaker or ec2")
    platforms = (platform,) if platform else tuple(spec.candidates.platforms) if spec else ("sagemaker", "ec2")
    region = aws.default_region()
    checks: list[Check] = []

    def add(c: Check) -> None:
        checks.append(c)
        if on_check:
            on_check(c)

    cred, account = check_credentials(region)
    add(cred)
    if account is None:
        for n in ("quotas", "SageMaker execution role", "subnet reaches S3", "job bucket", "Spot placement scores"):
            add(_skip(n, "needs working credentials"))
        return checks
    plan = None
    if spec is not None:
        from trainctl.usecases.plan import PlanInputs, make_plan

        _, plan = make_plan(PlanInputs(spec_path=spec_path, refresh=refresh))
        for c in [*check_quotas(plan, spec_path, platforms), *(Check(*d) for d in disk_checks(plan, platforms))]:
            add(c)
    else:
        add(_skip("quotas", "give a job spec to check the quotas its layouts need"))
    secret_arns = tuple((spec.secrets or {}).values()) if spec is not None else ()
    if "sagemaker" in platforms:
        best = next((o for o in plan.options if o.platform == "sagemaker"), None) if plan else None
        given = role or (spec.role if spec else None)
        add(check_execution_role(region, given) if given else check_job_role_boundary(region))
        if best is not None and best.count == 1:
            add(_skip("subnet reaches S3", "the best SageMaker option has one node: it runs outside any VPC"))
        else:
            add(check_s3_route(region, subnet, best.availability_zone if best else None,
                               ships_requirements(spec, spec_path), secret_arns))
    else:
        add(_skip("SageMaker execution role", "the spec does not use SageMaker"))
        add(_skip("subnet reaches S3", "only SageMaker VPC jobs need it (EC2: \"EC2 nodes reach AWS\")"))
    if "ec2" in platforms and plan is not None:
        add(check_node_route(region, subnet, next((o for o in plan.options if o.platform == "ec2"), None),
                             secret_arns, (spec, spec_path)))
    add(check_bucket(region, bucket or job_bucket(account, region), account, own=bucket is None))
    for c in check_data(region, spec, subnet):
        add(c)
    if "ec2" in platforms:  # only EC2 Spot needs it: SageMaker runs managed Spot instances itself
        add(check_spot_role(region))
    for check in (_scores_check(region, spec, plan), Check(*check_cost_allocation_tag())): add(check)  # noqa: E701
    return checks


def check_data(region: str, spec, subnet: str | None) -> list[Check]:
    """The launch's checks of the spec's data: channels (backends/data_checks.py): the bucket's region, a key
    under the prefix, the FSx file system in the VPC and AZ of the --subnet given."""
    from trainctl.backends import data_checks

    data = spec.data if spec else None
    found = data_checks.checks(aws.client, region, data, subnet.split(",") if subnet else ())
    found += data_checks.boundary_checks(aws.client, region, data)  # the job roles' boundary admits the buckets
    return [_ok(f"data {c.channel}", c.line) if c.ok else _fail(f"data {c.channel}", *c.line.split("; ", 1))
            for c in found]


def _scores_check(region: str, spec, plan) -> Check:
    """The plan's scores when it read them (placement-score configurations are limited per account and day:
    doctor asks no extra one); else one query for the spec's first layout."""
    scored = [o for o in plan.options if o.spot_placement_score is not None] if plan else []
    if scored:
        best = max(scored, key=lambda o: o.spot_placement_score)
        return _ok("Spot placement scores", f"the plan read them: best {best.spot_placement_score} for "
                                            f"{best.count} x {best.instance_type} in {best.where}")
    layout = next(iter(spec.candidates.layouts), None) if spec else None
    itype, count = (layout.instance_type, layout.count) if layout else (None, 1)
    if itype is None and spec is not None and spec.candidates.families:
        from trainctl.catalog import load_catalog

        itype = min((i for i in load_catalog().instances.values() if i.family == spec.candidates.families[0]),
                    key=lambda i: i.vcpus).name
    return check_placement_scores(region, itype or "g5.xlarge", count)


def render(checks: list[Check], width: int = 100) -> str:
    """One line per check (wrapped at `width` under its text), the fix under a failure, then the tally."""
    from trainctl.render.safe import clean
    from trainctl.render.text import wrap_keeping_commands

    lines = []
    for c in checks:  # details quote AWS's messages: no control sequences reach the terminal
        lines += wrap_keeping_commands(f"{c.name}: {clean(c.detail, one_line=True)}", width, first=f"{c.status.upper():4}  ", rest=" " * 6)
        if c.fix:
            lines += wrap_keeping_commands(c.fix, width, first="      fix: ", rest=" " * 11)
    failed = sum(c.status == "fail" for c in checks)
    lines.append(f"{failed} check{'s' if failed != 1 else ''} failed" if failed else "all checks passed")
    return "\n".join(lines)


def to_json(checks: list[Check]) -> dict:
    return {"ok": not any(c.status == "fail" for c in checks), "checks": [c.to_json() for c in checks]}
