"""EC2 needs the Spot service-linked role AWSServiceRoleForEC2Spot before the first Spot
request made through the API. The strict sandbox refuses Spot requests without it, with EC2's error code;
`doctor` checks it; an EC2 Spot launch creates it when allowed, or fails at once saying how in one line."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
SPOT = ["--platform", "ec2", "--layout", "g5.xlarge:2:spot"]
ROLE = "AWSServiceRoleForEC2Spot"
CREATE = "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"


def cli(sb, home, *args):
    return run_cli(list(args), home, env=sb.env)


def _live(ec2) -> list[dict]:
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] in ("pending", "running")]


def test_the_sandbox_refuses_spot_requests_without_the_role(sandbox):
    iam, ec2 = sandbox.client("iam"), sandbox.client("ec2")
    assert iam.get_role(RoleName=ROLE)["Role"]["Path"] == "/aws-service-role/spot.amazonaws.com/"  # seeded
    sandbox.admin.action("remove_spot_service_linked_role")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    try:
        ec2.run_instances(ImageId=image, InstanceType="g5.xlarge", MinCount=1, MaxCount=1, SubnetId=subnet,
                          InstanceMarketOptions={"MarketType": "spot"})
        raise AssertionError("a Spot RunInstances without the role was accepted")
    except ec2.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
        assert "service-linked role for EC2 Spot Instances" in e.response["Error"]["Message"]
    assert _live(ec2) == []
    on_demand = ec2.run_instances(ImageId=image, InstanceType="g5.xlarge", MinCount=1, MaxCount=1, SubnetId=subnet)
    assert on_demand["Instances"]  # On-Demand needs no such role

    # IAM makes exactly AWS's role for spot.amazonaws.com, and refuses a second one with AWS's wording
    made = iam.create_service_linked_role(AWSServiceName="spot.amazonaws.com")["Role"]
    assert made["RoleName"] == ROLE and made["Path"] == "/aws-service-role/spot.amazonaws.com/"
    try:
        iam.create_service_linked_role(AWSServiceName="spot.amazonaws.com")
        raise AssertionError("a second Spot service-linked role was made")
    except iam.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "InvalidInput" and "has been taken" in e.response["Error"]["Message"]


def test_doctor_checks_it_and_a_spot_launch_creates_it(sandbox, tmp_path):
    home = tmp_path / "home"
    sandbox.admin.action("remove_spot_service_linked_role")
    doc = json.loads(cli(sandbox, home, "-o", "json", "doctor", SPEC, "--platform", "ec2").stdout)
    check = next(c for c in doc["checks"] if c["name"] == "Spot service-linked role")
    assert check["status"] == "fail" and CREATE in check["fix"]

    dry = json.loads(cli(sandbox, home, "-o", "json", "launch", SPEC, *SPOT, "--dry-run").stdout)
    first = dry["requests"][0]
    assert (first["service"], first["operation"], first["params"]) == (
        "iam", "CreateServiceLinkedRole", {"AWSServiceName": "spot.amazonaws.com"})
    assert any(ROLE in n for n in dry["notes"])

    proc = cli(sandbox, home, "-o", "json", "launch", SPEC, *SPOT, "--yes")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    job = out["job_id"]
    assert sandbox.client("iam").get_role(RoleName=ROLE)["Role"]["Arn"].endswith(
        f"role/aws-service-role/spot.amazonaws.com/{ROLE}")
    assert len(_live(sandbox.client("ec2", out["region"]))) == 2
    doc = json.loads(cli(sandbox, home, "-o", "json", "doctor", SPEC, "--platform", "ec2").stdout)
    assert next(c for c in doc["checks"] if c["name"] == "Spot service-linked role")["status"] == "pass"
    again = json.loads(cli(sandbox, home, "-o", "json", "launch", SPEC, *SPOT, "--dry-run").stdout)
    assert all(r["operation"] != "CreateServiceLinkedRole" for r in again["requests"])
    assert cli(sandbox, home, "down", job).returncode == 0


def test_without_the_right_to_create_it_the_launch_fails_at_once_saying_how(sandbox, tmp_path):
    home = tmp_path / "home"
    sandbox.admin.action("remove_spot_service_linked_role", creatable=False)
    proc = cli(sandbox, home, "launch", SPEC, *SPOT, "--yes")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "CreateServiceLinkedRole" in last or "AccessDenied" in last
    assert CREATE in last
    for region in ("us-east-1", "us-west-2"):  # the spec's regions
        ec2 = sandbox.client("ec2", region)
        assert _live(ec2) == [] and ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert sandbox.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []
