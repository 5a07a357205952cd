"""EC2 types with one network card get the reachability rule too: a node reaches S3, EC2 and CloudWatch Logs
only from a subnet that gives it a public IPv4 and routes to an internet gateway, or through a NAT or VPC
endpoints. A subnet that assigns no public IPv4 (the default for a subnet made with CreateSubnet) and has no
NAT leaves the node's agent unable to start while it bills: `launch` leaves such subnets out, or refuses in
one line; `doctor` says the same."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl_sandbox.testing import default_vpc

REGION = "us-east-1"
SPEC = str(CONFIGS / "vit-base-g5.yaml")


def _private_subnet(sb) -> tuple[str, str]:
    """A subnet of the default VPC that assigns no public IPv4 (the main route table: the internet gateway)."""
    ec2 = sb.client("ec2", REGION)
    vpc, _ = default_vpc(sb, REGION)
    az = ec2.describe_availability_zones()["AvailabilityZones"][0]["ZoneName"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.250.0/24", AvailabilityZone=az)["Subnet"]
    assert not subnet["MapPublicIpOnLaunch"]
    return subnet["SubnetId"], az


def _dry_run(sb, tmp_path, *extra: str):
    return run_cli(["--output", "json", "launch", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:2:spot",
                    "--region", REGION, *extra, "--dry-run"], tmp_path / "home", env=sb.env)


def test_single_card_fleets_leave_out_subnets_without_public_ipv4_or_nat(sandbox_env, tmp_path):
    private, az = _private_subnet(sandbox_env)
    proc = _dry_run(sandbox_env, tmp_path, "--subnet", ",".join(
        [private] + [s["SubnetId"] for s in sandbox_env.client("ec2", REGION).describe_subnets(
            Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]]))
    assert proc.returncode == 0, proc.stderr
    used = {o["SubnetId"] for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateFleet"
            for c in r["params"]["LaunchTemplateConfigs"] for o in c["Overrides"]}
    assert used and private not in used


def test_a_single_card_launch_into_only_such_a_subnet_is_refused_in_one_line(sandbox_env, tmp_path):
    private, _ = _private_subnet(sandbox_env)
    proc = _dry_run(sandbox_env, tmp_path, "--subnet", private)
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"subnet {private} assigns no public IPv4" in lines[0] and "NAT" in lines[0], lines[0]
    doctor = run_cli(["--output", "json", "doctor", SPEC, "--platform", "ec2", "--subnet", private],
                     tmp_path / "home", env=sandbox_env.env)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["EC2 nodes reach AWS"]["status"] == "fail", checks["EC2 nodes reach AWS"]
