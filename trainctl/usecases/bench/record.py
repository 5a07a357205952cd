"""What a bench measured, with its conditions, in the job store; and those conditions read back for the plan.

No schema change: the rate goes into the store's measured throughput (keyed by endpoint, so the sandbox's
figures never rank a plan against AWS) exactly as a completed job's does, and the conditions (layout,
transport, network regime, entrypoint arguments, precision, code and spec hashes, date, endpoint, account)
are the bench job's `bench` event, a JSON document. The plan marks a measured rate whose job has that event
as a bench's, and a `burst` regime is not applied as-is to a long job's network term (perf/estimator.py).

Network regime of the measurement ("up to N Gbps" instances burst on fresh credits, then fall to the baseline):
- `none`: one node, no inter-node traffic;
- `sustained`: an instance without burst (its bandwidth is its baseline);
- `burst`: an "up to" instance measured within the ~5 minutes of burst credits a fresh instance starts with
  (perf/network.py BURST_MINUTES), so it saw burst bandwidth; a long job will not;
- `unknown`: an "up to" instance measured longer than that; only the node's ENA counters
  (`bw_in_allowance_exceeded`, `bw_out_allowance_exceeded` in `ethtool -S`) would tell, and trainctl does not
  read them yet.
"""
from __future__ import annotations

import json
import time

from trainctl.state.job_store import JobRow, JobStore

from trainctl.state.bench_conditions import EVENT, bench_conditions, with_bench_origin  # noqa: F401 (re-exported)


def regime(instance_up_to: bool, count: int, training_seconds: float | None) -> str:
    from trainctl.perf.network import BURST_MINUTES

    if count <= 1:
        return "none"
    if not instance_up_to:
        return "sustained"
    if training_seconds is not None and training_seconds <= BURST_MINUTES * 60:
        return "burst"
    return "unknown"


def conditions(spec, option, view, inputs, *, spec_hash: str, code_hash: str) -> dict:
    from trainctl.catalog import load_catalog
    from trainctl.state.job_store import current_endpoint

    inst = load_catalog().instances.get(option.instance_type)
    up_to = bool(getattr(inst, "network_up_to", False))
    from trainctl.perf.network import efa_in_use

    transport = "none" if option.count <= 1 else ("efa" if inst is not None and efa_in_use(inst, option.platform)
                                                  else "tcp")
    return {"layout": f"{option.type_label}:{option.count}:{option.market}", "platform": option.platform,
            "region": option.region, "transport": transport,
            "regime": regime(up_to, option.count, view.training_seconds),
            "entrypoint": spec.entrypoint.bundled and f"bundled {spec.entrypoint.bundled}" or spec.entrypoint.script,
            "args": dict(spec.entrypoint.args), "precision": spec.model.precision,
            "steps": inputs.steps, "warmup_steps": inputs.warmup_steps, "code_hash": code_hash,
            "spec_hash": spec_hash, "spec": inputs.spec_path,
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "endpoint": current_endpoint() or "aws",
            "status": view.status, "interruptions": view.interruptions,
            "predicted_samples_per_s": option.throughput_samples_per_s,
            "band": list(option.throughput_band) if option.throughput_band else None}


def record(store: JobStore, job: JobRow, view, rate: float | None, conds: dict) -> None:
    """The conditions as the job's `bench` event; the rate (when one was measured) as its measured throughput,
    and as its calibration comparison (`trainctl calibration` lists it beside the prediction)."""
    from trainctl.usecases.calibration import record_comparison

    store.add_event(job.job_id, EVENT, json.dumps({**conds, "account": job.account, "measured_samples_per_s": rate}))
    if rate is None or not job.model or job.batch_size is None:
        return
    store.record_measured(model=job.model, batch_size=int(job.batch_size), instance_type=view.instance_type or
                          (job.option.instance_type if job.option else ""), count=int(view.count or 1),
                          samples_per_s=rate, job_id=job.job_id, account=job.account)
    record_comparison(store, job, rate)
