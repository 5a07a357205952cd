"""`trainctl plan` with a `data:` section offline: the why lines, the `data` field of `-o json`, and what it says when
a channel's size is not known."""
from __future__ import annotations

from tests.support.data_specs import spec_file
from tests.support.helpers import run_cli, run_json

REFERENCE = ("--layout", "g5.12xlarge:1:on-demand", "--layout", "g5.2xlarge:4:spot", "--layout", "g5.4xlarge:4:spot")


def test_plan_shows_the_copy_and_carries_the_data_terms_in_json(tmp_path):
    doc = run_json(["plan", "configs/vit-imagenet-data.yaml", "--offline", "--platform", "ec2", *REFERENCE], tmp_path)
    options = [o for o in doc["options"] if o["region"] == "us-east-1"]
    assert len(options) == 3
    for o in options:
        assert set(o["data"]) == {"copy_hours", "copies", "ingress_gbps", "egress_usd", "requests_usd", "input_bound",
                                  "priced", "stream_cap_gbps"}
        assert o["data"]["copy_hours"] > 0 and o["data"]["copies"] >= 1 and o["data"]["priced"]
        assert any(w.startswith("data: each node copies 140.0 GB") for w in o["why"])
        assert any(w.startswith("data dollars: $") for w in o["why"])
    assert any("cross-Region transfer is not priced" in w for w in doc["warnings"])
    table = run_cli(["plan", "configs/vit-imagenet-data.yaml", "--offline", *REFERENCE], tmp_path)
    assert table.returncode == 0, table.stderr


def test_a_plan_without_data_has_no_data_field_value(tmp_path):
    doc = run_json(["plan", "configs/vit-base-g5.yaml", "--offline", "--layout", "g5.12xlarge:1:on-demand"], tmp_path)
    assert all(o["data"] is None for o in doc["options"])


def test_without_a_size_offline_the_plan_says_the_data_was_not_priced(tmp_path):
    spec = spec_file(tmp_path, "s3://my-data-bucket/train/")
    doc = run_json(["plan", spec, "--offline", "--layout", "g5.12xlarge:1:on-demand"], tmp_path)
    assert any("data channel train not measured and not priced; give data.NAME.size_gb" in w for w in doc["warnings"])
    o = doc["options"][0]
    assert o["data"]["priced"] is False
    assert any("give data.train.size_gb" in w for w in o["why"])
