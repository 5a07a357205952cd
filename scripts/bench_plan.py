"""Planning time of the reference plan, simulation included: configs/vit-base-g5.yaml offline, every layout.

In-process `planning.make_plan` (spec load, catalog, offline quotes, plan with Monte Carlo and sensitivity), after one
warm-up call (imports, catalog), with the simulation caches cleared before each call; median, min and max of N calls. The target (< 0.5 s) is met here, never asserted in tests.
Usage: python scripts/bench_plan.py [N]
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(n: int = 15) -> None:
    os.environ.setdefault("TRAINCTL_HOME", tempfile.mkdtemp(prefix="trainctl-bench-"))
    sys.path.insert(0, str(ROOT))
    from trainctl.planner.spot import simulation as simulate
    from trainctl.usecases.plan import PlanInputs, make_plan

    inputs = PlanInputs(spec_path=str(ROOT / "configs" / "vit-base-g5.yaml"), offline=True)
    _, first = make_plan(inputs)  # warm-up: imports, catalog parse, numpy
    times, cpu = [], []
    for _ in range(n):
        simulate.clear_caches()  # cold, as in one CLI process: no simulation reused from the previous call
        start, start_cpu = time.perf_counter(), time.process_time()
        make_plan(inputs)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    spot = sum(o.market == "spot" for o in first.options)
    print(json.dumps({"options": len(first.options), "spot_options_simulated": spot,
                      "median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4),
                      "max_s": round(max(times), 4), "cpu_median_s": round(statistics.median(cpu), 4),
                      "load_average_1m": round(os.getloadavg()[0], 2), "runs": n, "python": platform.python_version(),
                      "machine": platform.processor() or platform.machine()}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
