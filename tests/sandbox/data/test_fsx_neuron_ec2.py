"""EC2 FSx for Lustre on Trainium, through the CLI against the sandbox: the Neuron DLAMI trainctl boots is Ubuntu
24.04 and the node agent installs a Lustre client on Amazon Linux 2023 only (bootstrap/fsx.py), so an EC2 trn1 job
with an FSx channel is refused in one line before anything is created, and the plan keeps SageMaker (it mounts
FSx itself). Before, the dry run passed: every node would have booted, billed and stopped at its mount."""
from __future__ import annotations

import json

from tests.support.data_jobs import default_subnets, lustre_file_system, lustre_group
from tests.support.helpers import CONFIGS, run_cli


def _trn1_subnet(sb) -> str:
    offered = {o["Location"] for o in sb.client("ec2").describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["trn1.2xlarge"]}])[
        "InstanceTypeOfferings"]}
    return next(subnet for az, subnet in sorted(default_subnets(sb).items()) if az in offered)


def test_an_ec2_trn1_job_with_an_fsx_channel_is_refused_before_anything_is_created(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    subnet = _trn1_subnet(sb)
    fs = lustre_file_system(sb, subnet, [lustre_group(sb)])
    spec = tmp_path / "trn-fsx.yaml"
    spec.write_text((CONFIGS / "vit-base-trn1.yaml").read_text().replace("regions: [us-east-1, us-west-2]",
                                                                         "regions: [us-east-1]")
                    + f"data: {{train: {{fsx: {fs['FileSystemId']}, "
                      f"path: /{fs['LustreConfiguration']['MountName']}/shards}}}}\n")
    launch = run_cli(["launch", str(spec), "--platform", "ec2", "--layout", "trn1.2xlarge:1:on-demand", "--subnet",
                      subnet, "--dry-run"], home, env=sb.env, timeout=150)
    assert launch.returncode != 0 and len(launch.stderr.strip().splitlines()) == 1, launch.stderr
    assert "needs a Lustre client" in launch.stderr and "Ubuntu 24.04" in launch.stderr, launch.stderr
    assert not sb.client("ec2").describe_launch_templates()["LaunchTemplates"]
    plan = run_cli(["-o", "json", "plan", str(spec), "--top", "500"], home, env=sb.env, timeout=150)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["options"] and {o["platform"] for o in doc["options"]} == {"sagemaker"}
    assert any(e["platform"] == "ec2" and "needs a Lustre client" in e["reason"] for e in doc["excluded"])
