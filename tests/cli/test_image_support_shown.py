"""The date AWS stops patching each image trainctl chooses is shown where the user chooses: `trainctl catalog`
(table and JSON) and every plan option's `why`. Through the CLI, offline."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl.catalog.images import DLAMI_PARAMETERS, IMAGES, support_of


def test_the_catalog_lists_each_chosen_image_with_its_end_of_patch(tmp_path):
    doc = json.loads(run_cli(["-o", "json", "catalog", "g5.xlarge"], tmp_path).stdout)
    images = {r["image"]: r for r in doc["images"]}
    for image in [":".join(IMAGES["gpu"]), ":".join(IMAGES["neuron"]), DLAMI_PARAMETERS["gpu"],
                  DLAMI_PARAMETERS["neuron"]]:
        row = images[image]
        assert row["end_of_patch"] == support_of(image).end_of_patch and row["source"], row
    table = run_cli(["catalog", "g5.xlarge"], tmp_path, env={"COLUMNS": "100"}).stdout
    assert "patched until" in table and "2027-01-21" in table and "not published" in table


def test_every_plan_option_says_until_when_its_image_is_patched(tmp_path):
    gpu = json.loads(run_cli(["-o", "json", "plan", str(CONFIGS / "vit-base-g5.yaml"), "--offline"], tmp_path).stdout)
    for o in gpu["options"]:
        expected = "GPU DLAMI" if o["platform"] == "ec2" else "PyTorch 2.10: patched"
        assert any(w.startswith("image ") and expected in w and "until 2027-01-21" in w for w in o["why"]), o["why"]
    trn = json.loads(run_cli(["-o", "json", "plan", str(CONFIGS / "vit-base-trn1.yaml"), "--offline"],
                             tmp_path).stdout)
    assert trn["options"] and all(any(w.startswith("image ") and "Neuron" in w and "no end of patch" in w
                                      for w in o["why"]) for o in trn["options"])
