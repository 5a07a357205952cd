"""Quotas a newcomer can act on: when the options the plan would rank first are over quota, one warning names
each quota (name and code) and the exact `aws service-quotas request-service-quota-increase` request; `doctor`
checks the quota of that option, not of the best one that happens to fit; an answer taken from the cache says how
old it is, and `--refresh` asks AWS again. Through the CLI against the strict sandbox."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
EC2 = ["--platform", "ec2"]
G_SPOT = "L-3819A6DF"  # All G and VT Spot Instance Requests


def plan(sandbox, home, *args, env=None):
    proc = run_cli(["--output", "json", "plan", SPEC, *EC2, *args], home, env={**sandbox.env, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cheapest_options_over_quota_are_one_warning_with_the_increase_request(sandbox, tmp_path):
    sandbox.admin.set_quota("ec2", G_SPOT, 0)
    doc = plan(sandbox, tmp_path / "home", env={"TRAINCTL_CACHE_TTL": "0"})
    held = [w for w in doc["warnings"] if "over quota and ranked after those within it" in w]
    assert len(held) == 1, doc["warnings"]
    assert "'All G and VT Spot Instance Requests' (L-3819A6DF)" in held[0]
    assert ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF "
            "--desired-value 4 --region us-") in held[0]
    first = doc["options"][0]
    assert first["market"] == "on-demand" and f"the best within quota is #1, {first['count']}x" in held[0]


def test_no_warning_when_the_first_option_fits(sandbox, tmp_path):
    doc = plan(sandbox, tmp_path / "home", env={"TRAINCTL_CACHE_TTL": "0"})
    assert doc["options"][0]["quota_ok"] is True
    assert not any("over quota" in w for w in doc["warnings"])


def test_doctor_checks_the_quota_of_the_option_the_plan_would_rank_first(sandbox, tmp_path):
    sandbox.admin.set_quota("ec2", G_SPOT, 0)
    proc = run_cli(["--output", "json", "doctor", SPEC, "--platform", "ec2"], tmp_path / "home",
                   env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=120)
    quota = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["quotas (ec2)"]
    assert quota["status"] == "fail", quota
    assert "spot" in quota["detail"] and "the best that fits is" in quota["detail"]
    assert quota["fix"].startswith("aws service-quotas request-service-quota-increase --service-code ec2 "
                                   "--quota-code L-3819A6DF")


def test_a_cached_quota_says_its_age_and_refresh_reads_it_again(sandbox, tmp_path):
    home = tmp_path / "home"
    first = plan(sandbox, home)
    assert not any(w.startswith("cached answers") for w in first["warnings"])
    sandbox.admin.set_quota("ec2", G_SPOT, 0)  # raised or lowered since: the cache still has the old value
    cached = plan(sandbox, home)
    line = next(w for w in cached["warnings"] if w.startswith("cached answers"))
    assert "Service Quotas" in line and " s old" in line and "`--refresh` asks AWS again" in line
    assert cached["options"][0]["market"] == "spot"
    fresh = plan(sandbox, home, "--refresh")
    assert not any(w.startswith("cached answers") for w in fresh["warnings"])
    assert fresh["options"][0]["market"] == "on-demand"  # the new quota holds the Spot options back
