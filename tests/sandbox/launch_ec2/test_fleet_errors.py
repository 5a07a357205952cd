"""An instant CreateFleet reports several kinds of error in `Errors`, not only capacity.
Only capacity codes mean "no capacity here" (another AZ, another option); any other error fails the launch
at once with AWS's message, with no failover, leaving nothing behind."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
LAYOUTS = ["--layout", "g5.12xlarge:1:{m}", "--layout", "g5.4xlarge:2:{m}"]


def fleets_made(sandbox) -> int:
    return sum(c["count"] for c in sandbox.admin.call_log() if c["operation"] == "CreateFleet")


@pytest.mark.parametrize("code,market,words", [
    ("UnauthorizedOperation", "on-demand", "You are not authorized to perform this operation."),
    ("VcpuLimitExceeded", "spot", "You have requested more vCPU capacity than your current vCPU limit"),
    ("InvalidParameterValue", "on-demand", "Value (gp9) for parameter volumeType is invalid."),
])
def test_a_non_capacity_fleet_error_fails_the_launch_at_once(sandbox, tmp_path, code, market, words):
    home = tmp_path / "home"
    layouts = [a.format(m=market) for a in LAYOUTS]
    extra = {"message": words} if code == "InvalidParameterValue" else {}
    sandbox.admin.action("set_fleet_error", code=code, **extra)
    before = fleets_made(sandbox)
    proc = run_cli(["--output", "json", "launch", SPEC, "--platform", "ec2", *layouts, "--yes", "--failover"],
                   home, env=sandbox.env)
    assert proc.returncode not in (0, 4), proc.stderr  # 4 is "no capacity"
    last = proc.stderr.strip().splitlines()[-1]
    assert f"{code}: {words}" in last and "no capacity" not in last and "failover" not in proc.stderr
    assert fleets_made(sandbox) - before == 1  # neither another AZ nor another option was tried
    for region in ("us-east-1", "us-west-2"):
        ec2 = sandbox.client("ec2", region)
        live = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                if i["State"]["Name"] != "terminated"]
        assert live == [] and ec2.describe_launch_templates()["LaunchTemplates"] == []
    jobs = json.loads(run_cli(["--output", "json", "ls", "--no-status"], home, env=sandbox.env).stdout)["jobs"]
    assert [j["recorded_status"] for j in jobs] == ["SubmitFailed"]


def test_the_sandbox_reports_the_switched_error_per_pool(sandbox):
    ec2 = sandbox.client("ec2")
    sandbox.admin.action("set_fleet_error", code="VcpuLimitExceeded", market="spot")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    subnets = ec2.describe_subnets()["Subnets"][:2]
    lt = ec2.create_launch_template(LaunchTemplateName="t", LaunchTemplateData={"ImageId": image,
                                                                               "InstanceType": "g5.xlarge"})
    spec = {"LaunchTemplateId": lt["LaunchTemplate"]["LaunchTemplateId"], "Version": "$Latest"}
    overrides = [{"SubnetId": s["SubnetId"]} for s in subnets]

    def fleet(kind: str) -> dict:
        return ec2.create_fleet(Type="instant", LaunchTemplateConfigs=[{"LaunchTemplateSpecification": spec,
                                                                        "Overrides": overrides}],
                                TargetCapacitySpecification={"TotalTargetCapacity": 1,
                                                             "DefaultTargetCapacityType": kind})

    spot = fleet("spot")
    assert not spot.get("Instances")
    assert [e["ErrorCode"] for e in spot["Errors"]] == ["VcpuLimitExceeded"] * 2
    assert all(e["Lifecycle"] == "spot" and "vCPU limit" in e["ErrorMessage"] for e in spot["Errors"])
    assert fleet("on-demand")["Instances"]  # the switch named the Spot market only
