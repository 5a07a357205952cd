"""Cost Explorer has one endpoint per partition (botocore endpoints.json, service `ce`: us-east-1 in aws,
cn-northwest-1 in aws-cn); trainctl asked us-east-1 whatever the partition, which a China account cannot reach.
Through the CLI: `doctor` in cn-north-1 asks Cost Explorer in cn-northwest-1 (the sandbox's call log says where)."""
from __future__ import annotations

from tests.support.helpers import run_cli


def test_doctor_asks_the_cost_explorer_of_the_caller_s_partition(sandbox_env, tmp_path):
    sb = sandbox_env
    sb.admin.call_log(clear=True)
    run_cli(["--region", "cn-north-1", "doctor"], tmp_path, env=sb.env, timeout=150)
    ce = {c["region"] for c in sb.admin.call_log() if c["service"] == "ce"}
    assert ce == {"cn-northwest-1"}, sb.admin.call_log()
