"""`launch --platform ec2 --failover`: an option EC2 refuses at submit (no AZ gives all N instances) leaves
nothing behind, and the launch moves to the next-ranked option, recording both attempts."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
LAYOUTS = ["--layout", "g5.12xlarge:1:on-demand", "--layout", "g5.4xlarge:2:on-demand"]


def cli(sb, home, *args):
    return run_cli(list(args), home, env=sb.env)


def test_capacity_refused_at_submit_fails_over_to_the_next_option(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    plan = json.loads(cli(sb, home, "--output", "json", "plan", SPEC, "--platform", "ec2", *LAYOUTS).stdout)
    first = plan["options"][0]
    # Every option of the refused type (one per region) is tried before the first of another type.
    n_refused = next(i for i, o in enumerate(plan["options"]) if o["instance_type"] != first["instance_type"])
    second = plan["options"][n_refused]
    sb.admin.set_capacity(first["instance_type"], available=False)  # every AZ

    # Without --failover: one line, the no-capacity exit code, and nothing left behind.
    refused = cli(sb, home, "--output", "json", "launch", SPEC, "--platform", "ec2", *LAYOUTS, "--yes")
    assert refused.returncode == 4, refused.stderr
    assert "got no capacity" in refused.stderr and "--failover" in refused.stderr.strip().splitlines()[-1]
    for region in {o["region"] for o in plan["options"]}:
        ec2 = sb.client("ec2", region)
        running = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                   if i["State"]["Name"] != "terminated"]
        assert running == [] and ec2.describe_launch_templates()["LaunchTemplates"] == []
    ec2 = sb.client("ec2", second["region"])

    # With --failover: the second option runs.
    proc = cli(sb, home, "--output", "json", "launch", SPEC, "--platform", "ec2", *LAYOUTS, "--yes", "--failover")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    *refused_attempts, b = out["attempts"]
    assert len(refused_attempts) == n_refused
    for a, option in zip(refused_attempts, plan["options"]):
        assert a["layout"] == f"{first['instance_type']}:{first['count']}:on-demand"
        assert a["region"] == option["region"] and a["outcome"].startswith("no capacity")
    a = refused_attempts[0]
    assert b["layout"] == f"{second['instance_type']}:{second['count']}:on-demand" and b["outcome"] == "running"
    assert "failover" in proc.stderr
    live = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [b["job_id"]]}])
            ["Reservations"] for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]
    assert len(live) == second["count"] and {i["InstanceType"] for i in live} == {second["instance_type"]}
    jobs = {j["job_id"]: j for j in json.loads(cli(sb, home, "--output", "json", "ls", "--no-status").stdout)["jobs"]}
    assert jobs[a["job_id"]]["recorded_status"] == "NoCapacity"
    assert jobs[b["job_id"]]["recorded_status"] == "InProgress"

    down = cli(sb, home, "down", b["job_id"])
    assert down.returncode == 0, down.stderr
    left = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [b["job_id"]]}])
            ["Reservations"] for i in r["Instances"] if i["State"]["Name"] != "terminated"]
    assert left == []
