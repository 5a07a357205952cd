"""`watch --recover` moving a job to another AZ gives it a cluster placement group of its own there: a cluster
group lives in one AZ, and the sandbox binds it to the AZ of its first instance and refuses a launch elsewhere with
InvalidPlacementGroup.InUse, as AWS does. Before, the move reused the job's group and failed with the survivors
already terminated. `down` removes every group of the job. Through the CLI."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli


def _live(ec2, job):
    return [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]


def test_a_job_moved_to_another_az_gets_its_own_group_and_down_removes_them_all(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(["--output", "json", "--region", "us-east-1", "launch", str(CONFIGS / "vit-base-g5.yaml"),
                        "--platform", "ec2", "--layout", "g5.12xlarge:2:spot", "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    ec2 = sb.client("ec2", "us-east-1")
    before = _live(ec2, job)
    first_az, first_group = before[0]["Placement"]["AvailabilityZone"], before[0]["Placement"]["GroupName"]
    sb.admin.action("reclaim_spot_instances", job=job, instance_ids=[before[1]["InstanceId"]])
    sb.admin.set_capacity("g5.12xlarge", first_az, False)   # no room left in the job's AZ: the job moves
    moved = run_cli(["--output", "json", "watch", job, "--once", "--recover"], home, env=sb.env)
    assert moved.returncode == 0, moved.stderr
    now = _live(ec2, job)
    assert len(now) == 2 and len({i["Placement"]["AvailabilityZone"] for i in now}) == 1
    az = now[0]["Placement"]["AvailabilityZone"]
    assert az != first_az and {i["Placement"]["GroupName"] for i in now} == {f"{first_group}-{az}"}
    groups = {g["GroupName"] for g in ec2.describe_placement_groups()["PlacementGroups"]}
    assert {first_group, f"{first_group}-{az}"} <= groups   # (the launch made one per AZ its fleets may try)
    down = run_cli(["--output", "json", "down", job], home, env=sb.env)
    assert down.returncode == 0, down.stderr
    assert ec2.describe_placement_groups()["PlacementGroups"] == []
