"""Two `watch --recover` at once (two laptops, each with its own job store) relaunch one lost node exactly once
(issue 36, item 5): before, the second watcher's describe saw the loss before the first one's fleet and its
ClientToken came from the instance ids after it, so EC2 made a second fleet ("2 of 1 nodes up" for ever). Now the
one that takes the loss's relaunch claim in the job bucket (S3 If-None-Match) launches; the other launches nothing,
says who does once, and goes on watching.

The race is made exact with a botocore hook: the second watcher runs whole while the first one is between its
describe and its fleet (at its DescribeSubnets)."""
from __future__ import annotations

from tests.support.ec2_jobs import JOB, REGION, job_bucket, live
from trainctl.aws import clients as aws
from trainctl.bootstrap.relaunch_claim import CLAIM_FOLDER
from trainctl.state.job_store import JobStore
from trainctl.usecases.jobs.recovery import Recovery
from trainctl.usecases.jobs.watch import JobRef


def _watcher(backend, home, said) -> Recovery:
    home.mkdir()
    return Recovery(backend, JobRef(JOB, "ec2", REGION, None), JobStore(home / "state.db", endpoint=""),
                    said.append, lambda: 0.0)


def test_two_watchers_relaunch_one_lost_node_once(launched, tmp_path):
    sb, backend, out = launched
    survivor, lost = out["instance_ids"]
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[lost])
    first_said, second_said, fleets = [], [], []
    first = _watcher(backend, tmp_path / "laptop-1", first_said)
    second = _watcher(backend, tmp_path / "laptop-2", second_said)
    events = aws.client("ec2", REGION).meta.events
    second_result: list[bool] = []

    def second_watch_arrives(**_):
        if not second_result:  # the first watcher saw the loss and is on its way to the fleet
            second_result.append(False)
            second_result[0] = second(backend.describe(JOB, REGION))

    count = lambda **_: fleets.append("CreateFleet")  # noqa: E731
    events.register("before-call.ec2.DescribeSubnets", second_watch_arrives)
    events.register("before-call.ec2.CreateFleet", count)
    try:
        relaunched = first(backend.describe(JOB, REGION))
        for _ in range(2):  # later polls of both: the job is whole, nothing more is launched or said
            assert first(backend.describe(JOB, REGION)) is False
            assert second(backend.describe(JOB, REGION)) is False
    finally:
        events.unregister("before-call.ec2.DescribeSubnets", second_watch_arrives)
        events.unregister("before-call.ec2.CreateFleet", count)
    now = {i["InstanceId"] for i in live(sb)}
    assert len(now) == 2 and survivor in now and lost not in now, f"{len(now)} nodes for a job of 2: {fleets}"
    assert fleets == ["CreateFleet"] and relaunched is True and second_result == [False]
    held = [line for line in second_said if "relaunched by another process" in line]
    assert len(held) == 1 and "`watch --recover` on" in held[0] and "launching nothing here" in held[0], second_said
    assert "\n" not in held[0]
    claims = sb.client("s3").list_objects_v2(Bucket=job_bucket(sb), Prefix=f"{JOB}/{CLAIM_FOLDER}/")
    assert claims["KeyCount"] == 1  # one claim for the one loss, kept: the loss is relaunched


def test_a_watcher_that_found_no_capacity_releases_the_claim_for_the_next_attempt(launched, tmp_path):
    """A relaunch refused for capacity gives its claim back: the other watcher's next poll takes it and launches
    (the claim does not block a loss nobody relaunched)."""
    from tests.support.ec2_jobs import set_capacity

    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    first_said, second_said = [], []
    first = _watcher(backend, tmp_path / "laptop-1", first_said)
    second = _watcher(backend, tmp_path / "laptop-2", second_said)
    set_capacity(sb, False)
    assert first(backend.describe(JOB, REGION)) is False
    assert any("found no capacity" in line for line in first_said), first_said
    set_capacity(sb, True)
    assert second(backend.describe(JOB, REGION)) is True, second_said
    assert len(live(sb)) == 2


def test_watch_recover_says_in_one_line_that_another_laptop_relaunches_and_launches_nothing(sandbox_env, tmp_path):
    """Through the CLI: a colleague's `watch --recover` holds this loss's claim (written as it writes it); this
    machine's `watch --once --recover` launches nothing, exits 0 and says who relaunches, in one line."""
    import json

    from tests.support.helpers import CONFIGS, run_cli
    from trainctl.bootstrap.relaunch_claim import RelaunchClaim, claim_key

    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"),
                        "--platform", "ec2", "--layout", "g5.12xlarge:2:spot", "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    lost = live(sb, job)[1]["InstanceId"]
    sb.admin.action("reclaim_spot_instances", job=job, instance_ids=[lost])
    bucket = job_bucket(sb)
    assert RelaunchClaim(sb.client("s3"), bucket, claim_key(job, [lost])).take("`watch --recover` on laptop-1") is None
    proc = run_cli(["watch", job, "--once", "--recover"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "relaunched by another process" in line]
    assert len(said) == 1 and "`watch --recover` on laptop-1 holds it since" in said[0], proc.stderr
    assert len(live(sb, job)) == 1  # nothing launched here
    assert run_cli(["down", job], home, env=sb.env).returncode == 0


def test_a_claim_whose_holder_died_is_taken_over_once_stale(sandbox_env):
    """A holder that never released its claim (its laptop closed mid-relaunch) blocks the loss only STALE_S, counted
    on S3's clock: its answer's Date moved past that (a botocore hook) lets the next claimant take it over."""
    from trainctl.bootstrap.relaunch_claim import STALE_S, RelaunchClaim

    s3 = sandbox_env.client("s3")
    s3.create_bucket(Bucket="claims")
    assert RelaunchClaim(s3, "claims", "j/status/relaunch/x").take("laptop-1") is None
    assert "laptop-1 holds it since" in RelaunchClaim(s3, "claims", "j/status/relaunch/x").take("laptop-2")

    def later(http_response, parsed, **_):
        from email.utils import formatdate

        headers = parsed["ResponseMetadata"]["HTTPHeaders"]
        headers["date"] = formatdate(parsed["LastModified"].timestamp() + STALE_S + 1, usegmt=True)

    s3.meta.events.register("after-call.s3.GetObject", later)
    try:
        assert RelaunchClaim(s3, "claims", "j/status/relaunch/x").take("laptop-2") is None
    finally:
        s3.meta.events.unregister("after-call.s3.GetObject", later)
    assert "laptop-2 holds it" in RelaunchClaim(s3, "claims", "j/status/relaunch/x").take("laptop-3")
