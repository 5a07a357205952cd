"""`trainctl doctor [SPEC]`: can this account and region launch the spec, and if not, why and what to do.

Each check reads only (no writes) and ends as pass, fail (with the fix) or skip (with the reason). The checks
every platform shares are here; each platform's own are its backend's (`Backend.preflight_checks`); the last runs
the launch itself as its dry run (usecases/doctor/launch.py).
"""
from __future__ import annotations

from typing import Any, Callable

from trainctl.aws import clients as aws
from trainctl.backends.preflight import POLICY_FIX, Check, Preflight
from trainctl.backends.preflight import denied as _denied, fail as _fail, ok as _ok, skip as _skip
from trainctl.usecases.doctor.costs import check_cost_allocation_tag
from trainctl.usecases.doctor.launch import launch_checks
from trainctl.usecases.doctor.disks import disk_checks
from trainctl.naming.bucket import job_bucket


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
        # a Capacity Block draws on no vCPU quota of the account (its own: 256 instances across blocks)
        options = [o for o in plan.options if o.platform == platform and o.market != "capacity-block"]
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


def check_placement_scores(region: str, instance_type: str, count: int) -> Check:
    from trainctl.aws.placement import placement_scores_in

    name = "Spot placement scores"
    try:  # the launch's exact configuration, as the plan asks it for its best fixed layouts
        scores, _ = placement_scores_in(region, instance_type, count)
    except Exception as e:  # noqa: BLE001
        return _fail(name, f"GetSpotPlacementScores in {region}: {aws.error_summary(e)}",
                     POLICY_FIX if _denied(e) else "plans go on without scores (capacity odds unknown)")
    n = len(scores)
    return _ok(name, f"{n} AZ score{'s' if n != 1 else ''} for {count} x {instance_type} in {region}")


def run(spec_path: str | None, *, role: str | None = None, bucket: str | None = None, subnet: str | None = None,
        platform: str | None = None, on_check: Callable[[Check], Any] | None = None,
        refresh: bool = False) -> list[Check]:
    from trainctl.backends import all_backends, check_platform, platforms as every_platform

    spec = None
    if spec_path:
        from trainctl.catalog import load_catalog
        from trainctl.spec import load_spec

        spec = load_spec(spec_path, catalog=load_catalog())
    check_platform(platform)
    platforms = (platform,) if platform else tuple(spec.candidates.platforms) if spec else every_platform()
    region = aws.default_region()
    backends = all_backends()
    checks: list[Check] = []

    def add(c: Check) -> None:
        checks.append(c)
        if on_check:
            on_check(c)

    cred, account = check_credentials(region)
    add(cred)
    if account is None:
        for n in ("quotas", *(n for b in backends for n in b.preflight_names), "job bucket",
                  "Spot placement scores"):
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
    ctx = Preflight(region, platforms, spec, spec_path, plan, role, subnet, secret_arns)
    for c in (c for b in backends for c in b.preflight_checks(ctx)):  # each platform's own, skipped if unused
        add(c)
    add(check_bucket(region, bucket or job_bucket(account, region), account, own=bucket is None))
    for c in check_data(region, spec, subnet):
        add(c)
    for c in (c for b in backends for c in b.late_preflight_checks(ctx)):
        add(c)
    for check in (_scores_check(region, spec, plan), Check(*check_cost_allocation_tag()),
                  *(Check(*c) for c in launch_checks(spec_path, plan, platforms, checks))): add(check)  # noqa: E701
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
    from trainctl.text.safe import clean
    from trainctl.text.wrap import wrap_keeping_commands

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
