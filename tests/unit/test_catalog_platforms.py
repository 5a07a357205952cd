"""catalog/platforms.py is the one list of platforms the pure layers know: the spec, the plan contract, the schema
and the IAM table take their names from it, in its order, and the planner's per-platform kinds from its entries."""
from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from trainctl.catalog.platforms import NAMES, PLATFORMS, either, facts
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
