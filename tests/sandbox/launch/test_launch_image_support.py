"""A launch names how long AWS patches the image it uses, and warns when it is past (catalog/images.py)."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

TINY = str(CONFIGS.parent / "tests" / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


def _notes(sb, tmp_path, *args: str) -> list[str]:
    proc = run_cli(["--output", "json", "launch", *args, "--region", "us-east-1", "--dry-run"], tmp_path / "home",
                   env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["notes"]


def test_the_launch_says_how_long_its_image_is_patched(sandbox_env, tmp_path):
    notes = _notes(sandbox_env, tmp_path, TINY, "--layout", "g5.xlarge:1:on-demand")
    assert any("PyTorch 2.10" in n and "2027-01-21" in n for n in notes), notes
    notes = _notes(sandbox_env, tmp_path, str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                   "--layout", "g5.xlarge:1:on-demand")
    # the GPU DLAMI is PyTorch 2.10 now (2.7 passed its end of patch on 2026-04-23: a warning, unit-tested)
    assert any(n.startswith("PyTorch 2.10 (GPU DLAMI") and "until 2027-01-21" in n for n in notes), notes
    assert not any(n.startswith("warning:") for n in notes), notes


def test_an_ec2_trainium_launch_boots_the_neuron_dlami_that_carries_pytorch_xla(sandbox_env, tmp_path):
    """The bundled Neuron script runs on torch_xla: the Neuron DLAMI trainctl boots is the PyTorch 2.9 one (SDK 2.31,
    the last Neuron DLAMI with torch-neuronx; catalog/images.py), resolved from the account's SSM parameter as
    published (the sandbox seeds it with the image's name), and the launch names it."""
    from trainctl_sandbox.server.seed import ami_id

    proc = run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-trn1.yaml"), "--platform", "ec2", "--layout",
                    "trn1.2xlarge:1:on-demand", "--region", "us-east-1", "--dry-run"], tmp_path / "home",
                   env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (template,) = [r["params"] for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate"]
    assert template["LaunchTemplateData"]["ImageId"] == ami_id("us-east-1", "neuron-pytorch-2.9")
    assert any(n.startswith("PyTorch 2.9 (Neuron DLAMI, Ubuntu 24.04)") for n in doc["notes"]), doc["notes"]
