"""The planner pairs a layout only with an image that can drive it (catalog/images.py: each chosen image's
families, CUDA build and the oldest GPU architecture it runs on, with sources). An fp16 plan on p3 (V100, Volta)
used to rank EC2 p3 Spot first on the CUDA 13 PyTorch 2.10 DLAMI, whose release notes list no P3 and whose CUDA
dropped sm_70: the job would have trained on the CPU. Through the CLI, offline."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl.catalog.images import DLAMI_PARAMETERS, IMAGES, support_of


def _spec(tmp_path, families: str) -> str:
    spec = tmp_path / "fp16.yaml"
    spec.write_text((CONFIGS / "vit-base-g5.yaml").read_text()
                    .replace("families: [g5]", f"families: [{families}]").replace("precision: bf16", "precision: fp16")
                    .replace("  layouts:\n    - g5.12xlarge:1:on-demand\n    - g5.2xlarge:4:spot\n"
                             "    - g5.4xlarge:4:spot\n", ""))
    return str(spec)


def test_an_fp16_plan_on_p3_excludes_volta_with_the_reason(tmp_path):
    proc = run_cli(["-o", "json", "plan", _spec(tmp_path, "p3, p3dn, g5"), "--offline", "--top", "500"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["options"] and all(o["instance_type"].startswith("g5.") for o in doc["options"])
    volta = [e for e in doc["excluded"] if e["instance_type"].startswith("p3")]
    assert {e["platform"] for e in volta} == {"sagemaker", "ec2"}
    assert {e["instance_type"].split(".")[0] for e in volta} == {"p3", "p3dn"}
    assert all("cannot drive the V100 (Volta" in e["reason"] and "Amazon Linux 2" in e["reason"] for e in volta)
    table = run_cli(["plan", _spec(tmp_path, "p3"), "--offline", "--show-excluded"], tmp_path,
                    env={"COLUMNS": "200"}).stdout
    assert "cannot drive the V100" in table and "no layout is left" in table


def test_every_chosen_image_carries_its_truth_with_a_source(tmp_path):
    for image in [":".join(IMAGES["gpu"]), ":".join(IMAGES["neuron"]), DLAMI_PARAMETERS["gpu"],
                  DLAMI_PARAMETERS["neuron"]]:
        row = support_of(image)
        assert row.accelerator and row.os and row.toolkit and row.driver and row.source, row
        assert row.families or row.min_compute_capability, row
    assert support_of(DLAMI_PARAMETERS["gpu"]).root_device == "/dev/xvda"
    assert support_of(DLAMI_PARAMETERS["neuron"]).root_device == "/dev/sda1"
    shown = {r["image"]: r for r in json.loads(run_cli(["-o", "json", "catalog", "p3.2xlarge"], tmp_path).stdout)[
        "images"]}   # `trainctl catalog` shows it
    dlami = shown[DLAMI_PARAMETERS["gpu"]]
    assert dlami["os"] == "Amazon Linux 2023" and "p3" not in dlami["families"] and dlami["root_device"] == "/dev/xvda"


def test_ec2_fsx_on_the_ubuntu_neuron_image_is_excluded_and_launch_refuses_in_one_line(tmp_path):
    """The Neuron DLAMI is Ubuntu 24.04, and the node agent installs a Lustre client on Amazon Linux 2023 only:
    every trn1 node booted, billed and shut down at its mount. Now EC2 is left out with the reason; SageMaker (it
    mounts FSx itself) stays."""
    spec = tmp_path / "trn-fsx.yaml"
    spec.write_text((CONFIGS / "vit-base-trn1.yaml").read_text()
                    + "data: {train: {fsx: fs-0123456789abcdef0, path: /fsx/data}}\n")
    doc = json.loads(run_cli(["-o", "json", "plan", str(spec), "--offline", "--top", "500"], tmp_path).stdout)
    assert doc["options"] and {o["platform"] for o in doc["options"]} == {"sagemaker"}
    refused = [e for e in doc["excluded"] if e["platform"] == "ec2"]
    assert refused and all("needs a Lustre client" in e["reason"] and "Ubuntu 24.04" in e["reason"] for e in refused)
    launch = run_cli(["launch", str(spec), "--platform", "ec2", "--offline", "--dry-run"], tmp_path)
    assert launch.returncode != 0 and len(launch.stderr.strip().splitlines()) == 1, launch.stderr
    assert "needs a Lustre client" in launch.stderr, launch.stderr
