"""Launching on an EC2 Capacity Block option never buys it implicitly: `--yes` alone (the plan's first option is
the block) stops before any AWS call that creates or buys anything, says the fee, the dates and that the purchase
cannot be undone, and names the option to launch instead; the sandbox has sold nothing. Through the CLI."""
from __future__ import annotations

from tests.support.capacity_blocks import block_wins
from tests.support.helpers import run_cli

CHANGES = ("PurchaseCapacityBlock", "CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateBucket",
           "CreateRole", "PutObject")


def test_yes_alone_buys_no_block_and_launches_nothing(sandbox, tmp_path):
    spec = block_wins(sandbox, tmp_path)
    sandbox.admin.call_log(clear=True)
    proc = run_cli(["launch", spec, "--yes", "--failover"], tmp_path / "home",
                   env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = " ".join(proc.stderr.split())
    assert "nothing bought" in err and "cannot be undone" in err and "--yes never buys it" in err
    assert "paid up front whether used or not" in err and "us-west-2" in err
    assert "launch option 2 (1 x p4d.24xlarge on-demand on ec2) with --option 2" in err
    assert sandbox.admin.action("capacity_blocks")["bought"] == {}
    made = {c["operation"] for c in sandbox.admin.call_log()}
    assert not made & set(CHANGES), made
