"""The conditions a `trainctl bench` measurement was taken in (date, steps, network regime), kept as the job's
"bench" event in the store (usecases/bench/record.py writes them), and the planner's measured rates marked with
them: a plan says which of its measurements came from a bench, and in which regime."""
from __future__ import annotations

import dataclasses
import json

from trainctl.state.job_store import JobStore

EVENT = "bench"


def bench_conditions(store: JobStore, job_id: str) -> dict | None:
    for _, detail in reversed(store.events(job_id, EVENT)):
        try:
            doc = json.loads(detail)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return None


def with_bench_origin(store: JobStore, measured: dict) -> dict:
    """The planner's measured rates, those of a bench marked with where they came from and their regime."""
    out = {}
    for key, rate in measured.items():
        conds = bench_conditions(store, rate.job_id)
        if conds is not None:
            rate = dataclasses.replace(rate, origin=f"bench job {rate.job_id} ({conds.get('date')}, "
                                                    f"{conds.get('steps')} steps, network {conds.get('regime')})",
                                       network=conds.get("regime"))
        out[key] = rate
    return out
