"""An fp16 plan on p3 (V100, Volta) against the sandbox, through the CLI: no image trainctl chooses drives Volta (the
OSS-driver DLAMIs list no P3, CUDA 13 dropped sm_70: catalog/images.py), so every p3 layout is left out with that
reason, and a launch that names one is refused in one line before anything is created. Before, the sandbox's
market (p3 is offered in every us-east-1 AZ) ranked EC2 p3 first and the launch went ahead: its node, booted from
an image that lists no P3, would have seen no GPU (trainctl_sandbox/ec2/machines.py) and trained on the CPU."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli


def _fp16_spec(tmp_path) -> str:
    spec = tmp_path / "fp16.yaml"
    spec.write_text((CONFIGS / "vit-base-g5.yaml").read_text()
                    .replace("families: [g5]", "families: [p3, g5]").replace("precision: bf16", "precision: fp16")
                    .replace("regions: [us-east-1, us-west-2]", "regions: [us-east-1]")
                    .replace("  layouts:\n    - g5.12xlarge:1:on-demand\n    - g5.2xlarge:4:spot\n"
                             "    - g5.4xlarge:4:spot\n", ""))
    return str(spec)


def test_an_fp16_plan_on_p3_leaves_volta_out_with_the_reason_and_a_p3_launch_is_refused(sandbox_env, tmp_path):
    sb, home, spec = sandbox_env, tmp_path / "home", _fp16_spec(tmp_path)
    assert "p3.2xlarge" in {o["InstanceType"] for o in sb.client("ec2").describe_instance_type_offerings()[
        "InstanceTypeOfferings"]}   # the sandbox's market has p3: only the image rule leaves it out
    plan = run_cli(["-o", "json", "plan", spec, "--top", "500"], home, env=sb.env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["source"] != "offline" and doc["options"], doc["source"]
    assert all(o["instance_type"].startswith("g5.") for o in doc["options"]), [o["instance_type"] for o in doc["options"]]
    volta = [e for e in doc["excluded"] if e["instance_type"].startswith("p3")]
    assert {e["platform"] for e in volta} == {"sagemaker", "ec2"}
    assert all("cannot drive the V100 (Volta" in e["reason"] for e in volta), volta
    for platform in ("ec2", "sagemaker"):
        launch = run_cli(["launch", spec, "--platform", platform, "--layout", "p3.2xlarge:1:spot", "--region",
                          "us-east-1", "--dry-run"], home, env=sb.env)
        assert launch.returncode != 0 and len(launch.stderr.strip().splitlines()) == 1, launch.stderr
        assert "V100 (Volta" in launch.stderr, launch.stderr
