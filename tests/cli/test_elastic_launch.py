"""`elastic: {min_nodes: N}` meets the layout at launch, before any AWS call: an EC2 layout of fewer nodes is refused
in one line; on SageMaker, which cannot change a running job's size, one warning says the bound does not apply and
its managed restart stays."""
from __future__ import annotations

from tests.support.helpers import CONFIGS, run_cli


def _spec(tmp_path, min_nodes: int) -> str:
    path = tmp_path / "elastic.yaml"
    path.write_text((CONFIGS / "vit-base-g5.yaml").read_text() + f"elastic: {{min_nodes: {min_nodes}}}\n")
    return str(path)


def test_min_nodes_above_the_layout_is_refused_and_sagemaker_is_warned(tmp_path):
    home, spec = tmp_path / "home", _spec(tmp_path, 3)
    base = ["--region", "us-east-1", "launch", spec, "--offline", "--dry-run"]
    small = run_cli([*base, "--platform", "ec2", "--layout", "g5.xlarge:2:spot"], home, env={"COLUMNS": "300"})
    assert small.returncode == 2 and small.stderr.count("\n") == 1, small.stderr
    assert "elastic.min_nodes 3 is more than the 2 node(s) of layout g5.xlarge:2:spot" in small.stderr
    sagemaker = run_cli([*base, "--platform", "sagemaker", "--layout", "ml.g5.xlarge:4:spot"], home,
                        env={"COLUMNS": "300"})
    warnings = [line for line in sagemaker.stderr.splitlines() if "elastic" in line]
    assert len(warnings) == 1 and "does not apply on SageMaker, which cannot change a running job's size" \
        in warnings[0], sagemaker.stderr
