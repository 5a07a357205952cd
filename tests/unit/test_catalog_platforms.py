"""catalog/platforms.py is the one list of platforms the pure layers know: the spec, the plan contract, the schema
and the IAM table take their names from it, in its order, and the planner's per-platform kinds from its entries.
It reads each backend's own `platform.toml` (data): the template's `.example` is no platform, and a file with a
field wrong is refused naming the file."""
from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from trainctl.catalog.platforms import BACKENDS_DIR, NAMES, PLATFORMS, either, facts, read_platforms
from trainctl.iam import PLATFORMS as IAM_PLATFORMS
from trainctl.plans import Option
from trainctl.spec.model import Candidates


def test_the_spec_the_plan_schema_and_iam_take_the_registry_s_names_in_its_order():
    assert Candidates().platforms == list(NAMES)
    enum = Candidates.model_json_schema()["properties"]["platforms"]["items"]["enum"]
    assert tuple(enum) == NAMES == IAM_PLATFORMS
    assert tuple(Option.model_json_schema()["properties"]["platform"]["enum"]) == NAMES


def test_a_platform_not_in_the_registry_is_refused_by_the_spec():
    with pytest.raises(ValidationError, match="sagemaker"):
        Candidates(platforms=["batch"])


def test_each_entry_is_named_by_its_key_and_says_every_kind_the_planner_reads():
    for name, entry in PLATFORMS.items():
        assert entry.name == name and entry.title
        assert entry.spot_price in ("ec2-history", "ec2-discount") and entry.disk in ("root-volume", "training-volume")
        assert all(getattr(entry, f.name) is not None or f.name in ("type_quota", "efa_types")
                   for f in dataclasses.fields(entry))


def test_a_per_type_quota_is_named_as_service_quotas_names_it():
    assert facts("sagemaker").quota_name("g5.xlarge", "spot") == "ml.g5.xlarge for spot training job usage"
    assert facts("sagemaker").quota_name("g5.xlarge", "on-demand") == "ml.g5.xlarge for training job usage"
    assert either() == "sagemaker or ec2"


def test_the_entries_are_the_backends_platform_files_in_their_order_and_the_template_is_none():
    assert NAMES == ("sagemaker", "ec2")
    assert sorted(p.parent.name for p in BACKENDS_DIR.glob("*/platform.toml")) == sorted(NAMES)
    assert (BACKENDS_DIR / "template" / "platform.toml.example").is_file() and "template" not in PLATFORMS
    assert facts("sagemaker").efa_types and "p5.48xlarge" in facts("sagemaker").efa_types
    assert facts("ec2").efa_types is None and facts("ec2").type_quota is None   # left out of the file: None


def _folder(root, name: str, text: str) -> None:
    (root / name).mkdir()
    (root / name / "platform.toml").write_text(text)


def test_a_new_folder_is_a_new_platform_in_its_order(tmp_path):
    template = (BACKENDS_DIR / "template" / "platform.toml.example").read_text()
    _folder(tmp_path, "batch", template.replace('name = "template"', 'name = "batch"').replace("order = 3", "order = 0"))
    _folder(tmp_path, "ec2", (BACKENDS_DIR / "ec2" / "platform.toml").read_text())
    assert list(read_platforms(tmp_path)) == ["batch", "ec2"]
    assert read_platforms(tmp_path)["ec2"] == facts("ec2")


@pytest.mark.parametrize("change,message", [
    (lambda t: t.replace('title = "EC2"\n', ""), r"missing fields \['title'\]"),
    (lambda t: t + 'colour = "red"\n', r"unknown fields \['colour'\]"),
    (lambda t: t.replace("order = 2\n", ""), r"missing fields \['order'\]"),
    (lambda t: t.replace('name = "ec2"', 'name = "eks"'), "name 'eks' is not its folder's name 'ec2'"),
])
def test_a_platform_file_with_a_field_wrong_is_refused_naming_the_file(tmp_path, change, message):
    _folder(tmp_path, "ec2", change((BACKENDS_DIR / "ec2" / "platform.toml").read_text()))
    with pytest.raises(ValueError, match=message) as refused:
        read_platforms(tmp_path)
    assert str(tmp_path / "ec2" / "platform.toml") in str(refused.value)
