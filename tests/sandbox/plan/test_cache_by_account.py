"""The market cache is keyed by endpoint and account, and the account is
read live, so a plan made after `sandbox down` never comes from the sandbox's cached answers."""
from __future__ import annotations

import json
import os

from tests.support.helpers import run_cli
from trainctl_sandbox.server import process

SPEC = "configs/vit-base-g5.yaml"


def test_a_plan_after_sandbox_down_is_not_served_from_the_sandboxs_cache(tmp_path):
    home, state_dir = tmp_path / "home", tmp_path / "sandbox"
    state = process.start_detached(port=0, seed=0, directory=state_dir, parent_pid=os.getpid(), wait_ec2=True)
    env = {**process.sandbox_env(state["endpoint_url"]), "TRAINCTL_CACHE_TTL": "600"}
    try:
        first = run_cli(["--output", "json", "plan", SPEC], home, env=env)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["source"] == "live"
        assert list((home / "cache").glob("*.json"))  # the answers were cached
    finally:
        process.stop(state_dir)
    assert process.running(state_dir) is None

    # The same environment (what `eval $(trainctl sandbox up --detach)` left in the shell), the sandbox gone.
    after = run_cli(["plan", SPEC], home, env={**env, "COLUMNS": "200"})
    assert after.returncode == 0, after.stderr
    assert "planned from the local sandbox" not in after.stdout
    assert "planned from the bundled catalog" in after.stdout
    assert f"{state['endpoint_url']} did not answer GetCallerIdentity" in after.stdout
    doc = json.loads(run_cli(["--output", "json", "plan", SPEC], home, env=env).stdout)
    assert doc["source"] == "offline"
    assert all(o["spot_placement_score"] is None for o in doc["options"])
