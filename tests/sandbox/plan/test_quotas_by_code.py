"""Quotas are matched by QuotaCode, not by name; p5 Spot draws on its own quota ("All P5 Spot
Instance Requests", L-C4BD4855); a quota with no applied value (left out of ListServiceQuotas) is read with
GetAWSDefaultServiceQuota. Through the CLI against the strict sandbox, whose quotas carry AWS's codes and names."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
ARGS = ["--platform", "ec2", "--layout", "p5.48xlarge:1:spot", "--layout", "p4d.24xlarge:1:spot"]


def plan(sandbox, home) -> dict[str, dict]:
    proc = run_cli(["--output", "json", "plan", SPEC, *ARGS], home, env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    assert proc.returncode == 0, proc.stderr
    return {(o["instance_type"], o["region"]): o for o in json.loads(proc.stdout)["options"]}


def test_p5_spot_draws_on_its_own_quota_read_by_code_with_the_default_as_fallback(sandbox, tmp_path):
    home = tmp_path / "home"
    sandbox.admin.set_quota("ec2", "L-7212CCBC", 0)  # P4, P3 and P2 Spot
    options = plan(sandbox, home)
    p5, p4d = options[("p5.48xlarge", "us-east-1")], options[("p4d.24xlarge", "us-east-1")]
    # P5 Spot has no applied value in the account: its AWS default (0) is what holds
    assert p5["quota_ok"] is False
    assert any("'All P5 Spot Instance Requests' (L-C4BD4855) is 0" in w for w in p5["why"]), p5["why"]
    assert p4d["quota_ok"] is False
    assert any("(L-7212CCBC) is 0" in w for w in p4d["why"])

    sandbox.admin.set_quota("ec2", "L-C4BD4855", 192)  # raised: now applied, and enough for one p5.48xlarge
    options = plan(sandbox, home)
    assert options[("p5.48xlarge", "us-east-1")]["quota_ok"] is True
    assert options[("p4d.24xlarge", "us-east-1")]["quota_ok"] is False  # its own quota is still 0
