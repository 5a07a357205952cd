"""The plan document's JSON contract (docs/architecture.md, "Contracts") as a script reads it: its keys, each option's
keys and types, ranks in order. Every test that reads `plan -o json` checks it."""
from __future__ import annotations

OPTION_KEYS = {"rank": int, "platform": str, "instance_type": str, "count": int, "market": str, "region": str,
               "availability_zone": (str, type(None)), "accelerators": int, "hourly_usd": float,
               "throughput_samples_per_s": float, "throughput_source": str, "hours": float,
               "expected_cost_usd": float, "spot_placement_score": (int, type(None)),
               "interruptions_expected": float, "fits_memory": bool, "pareto": bool, "why": list}


def check_contract(doc: dict) -> None:
    assert set(doc) >= {"spec", "source", "catalog_date", "options", "excluded", "warnings"}
    assert doc["source"] in ("live", "offline")
    assert len(doc["catalog_date"]) == 10
    for o in doc["options"]:
        for key, typ in OPTION_KEYS.items():
            assert isinstance(o[key], typ) or (typ is float and isinstance(o[key], int)), (key, o[key])
        assert o["platform"] in ("sagemaker", "ec2") and o["market"] in ("spot", "on-demand")
        assert o["throughput_source"] in ("measured", "given", "model")
        assert all(isinstance(w, str) for w in o["why"]) and o["why"]
    assert [o["rank"] for o in doc["options"]] == list(range(1, len(doc["options"]) + 1))
    for e in doc["excluded"]:
        assert isinstance(e["instance_type"], str) and isinstance(e["count"], int) and isinstance(e["reason"], str)
    assert all(isinstance(w, str) for w in doc["warnings"])
