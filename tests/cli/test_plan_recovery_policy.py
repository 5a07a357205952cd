"""`trainctl plan` prices the recovery the spec asks for (docs/cost-model.md, "Recovery: elastic and the Spot
shortage"): the reference spec with `elastic` and each `on_spot_shortage`, through the CLI as a user runs it."""
from __future__ import annotations

from tests.support.helpers import CONFIGS, run_json

LAYOUT = ["--layout", "g5.2xlarge:4:spot", "--layout", "g5.2xlarge:1:spot"]


def _plan(tmp_path, extra: str, name: str) -> dict[tuple, dict]:
    spec = tmp_path / f"{name}.yaml"
    text = (CONFIGS / "vit-base-g5.yaml").read_text()
    if extra.startswith("  "):   # a constraint: the reference spec's constraints block is its last
        text = text.rstrip("\n") + "\n" + extra + "\n"
    else:
        text += extra + "\n"
    spec.write_text(text)
    doc = run_json(["plan", str(spec), "--offline", "--top", "100", *LAYOUT], tmp_path / name)
    return {(o["platform"], o["region"], o["count"]): o for o in doc["options"]}


def test_elastic_and_the_shortage_policies_change_only_what_they_apply_to(tmp_path):
    base = _plan(tmp_path, "", "base")
    elastic = _plan(tmp_path, "elastic: {min_nodes: 2}", "elastic")
    od = _plan(tmp_path, "  on_spot_shortage: on-demand", "od")
    fail = _plan(tmp_path, "  on_spot_shortage: fail", "fail")
    four, one, sm = ("ec2", "us-east-1", 4), ("ec2", "us-east-1", 1), ("sagemaker", "us-east-1", 4)

    # EC2, 4 nodes: the survivors train on 3 instead of idling, billed, until the replacement comes
    assert elastic[four]["expected_cost_usd"] < base[four]["expected_cost_usd"]
    assert elastic[four]["wall_hours"] < base[four]["wall_hours"]
    assert any(w.startswith("elastic: trains on 3 of 4 nodes while a node is replaced") for w in elastic[four]["why"])
    # one node has no survivors; SageMaker cannot change a job's size: both priced as before
    assert elastic[one]["expected_cost_usd"] == base[one]["expected_cost_usd"]
    assert elastic[sm]["expected_cost_usd"] == base[sm]["expected_cost_usd"]
    assert any("SageMaker cannot change a running job's size" in w for w in elastic[sm]["why"])

    # on-demand: a wait past max_spot_wait_hours (4 h) is cut, the premium is added and said in dollars
    words = [w for w in od[four]["why"] if w.startswith("on-demand fallback: +$")]
    assert words and od[four]["wall_hours"] < base[four]["wall_hours"]
    # fail: the chance is said; the dollars are those of a run that finishes (waits capped at 4 h)
    assert any("chance the job ends unfinished" in w for w in fail[four]["why"])
    assert fail[four]["expected_cost_usd"] < base[four]["expected_cost_usd"]
    # the default says none of it
    assert not any(w.startswith(("elastic", "on-demand fallback", "on_spot_shortage")) for w in base[four]["why"])
