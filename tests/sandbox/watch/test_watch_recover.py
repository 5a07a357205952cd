"""`trainctl watch --recover` on an EC2 job whose Spot node was reclaimed: the lost capacity comes back in
the same AZ and placement group, and the interruption is recorded once, however often watch runs."""
from __future__ import annotations

import json
import sqlite3

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")


def live_instances(ec2, job_id):
    return [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job_id]}])
            ["Reservations"] for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]


def test_watch_recover_relaunches_a_reclaimed_node(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(["--output", "json", "launch", SPEC, "--platform", "ec2", "--layout", "g5.12xlarge:2:spot",
                        "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    out = json.loads(launched.stdout)
    job, region = out["job_id"], out["region"]
    ec2 = sb.client("ec2", region)
    before = live_instances(ec2, job)
    assert len(before) == 2
    lost = before[1]["InstanceId"]
    sb.admin.action("reclaim_spot_instances", job=job, instance_ids=[lost])  # EC2's Spot reclaim

    # Without --recover, watch only reports it.
    seen = run_cli(["--output", "json", "watch", job, "--once"], home, env=sb.env)
    doc = json.loads(seen.stdout)
    assert doc["interruptions"] == 1 and doc["secondary_status"] == "Interrupted"
    said = " ".join(seen.stderr.split())
    assert "its surviving nodes launch themselves" in said
    assert f"`trainctl watch {job} --recover` relaunches it (same AZ first) now" in said
    assert len(live_instances(ec2, job)) == 1

    for _ in range(2):  # a second run finds the job whole and records nothing twice
        recovered = run_cli(["--output", "json", "watch", job, "--once", "--recover"], home, env=sb.env)
        assert recovered.returncode == 0, recovered.stderr
    now = live_instances(ec2, job)
    assert len(now) == 2 and lost not in {i["InstanceId"] for i in now}
    assert {i["Placement"]["AvailabilityZone"] for i in now} == {before[0]["Placement"]["AvailabilityZone"]}
    assert json.loads(recovered.stdout)["secondary_status"] != "Interrupted"
    with sqlite3.connect(home / "state.db") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM events WHERE job_id=? ORDER BY id", (job,))]
    assert kinds.count("interruption") == 1 and kinds.count("recovered") == 1

    # SageMaker restarts managed Spot jobs itself: --recover is refused there in one line.
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
