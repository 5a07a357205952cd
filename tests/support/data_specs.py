"""The reference data spec (configs/vit-imagenet-data.yaml) with a train channel of a test's own: shared by the plan
tests offline (tests/cli) and live (tests/sandbox/plan)."""
from __future__ import annotations

import yaml

from tests.support.helpers import CONFIGS


def spec_file(tmp_path, train, regions=("us-east-1",)) -> str:
    spec = yaml.safe_load((CONFIGS / "vit-imagenet-data.yaml").read_text())
    spec["data"] = {"train": train}
    spec["candidates"]["regions"] = list(regions)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)
