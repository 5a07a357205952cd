"""The spec a bench job launches with: the user's own spec (entrypoint, its arguments, model, precision, data,
secrets, role) with only what bounds the bench changed:
- `workload.samples` = (warm-up + measured steps) x the per-rank batch x the layout's ranks, so a bundled
  entrypoint runs exactly those steps (backends/job_args.py derives `--steps` from it). A user's script gets
  its own arguments unchanged and the environment variable is not needed: the bench stops the job once its
  metric lines passed the steps, and the hard maximum runtime bounds it in any case;
- `candidates`: the one layout, platform, market and region the plan chose (the launch re-plans it);
- `constraints`: no deadline or budget (they were the big run's);
- paths relative to the spec (`entrypoint.source_dir`, `model.config`) made absolute, since the bench spec
  lives under $TRAINCTL_HOME/bench/.
Written as YAML so that the launch loads it like any spec, with the same checks.
"""
from __future__ import annotations

import re
from pathlib import Path

from trainctl.plans import Option
from trainctl.state.job_store import home


def bench_samples(steps: int, warmup_steps: int, batch: int, ranks: int) -> int:
    return (steps + warmup_steps) * batch * max(1, ranks)


def bench_spec_text(spec_path: str, option: Option, steps: int, warmup_steps: int) -> str:
    import yaml

    source = Path(spec_path)
    raw = yaml.safe_load(source.read_text())
    base = source.resolve().parent
    entry = dict(raw.get("entrypoint") or {})
    if isinstance(entry.get("source_dir"), str):
        entry["source_dir"] = str((base / Path(entry["source_dir"]).expanduser()).resolve())
    model = dict(raw.get("model") or {})
    if isinstance(model.get("config"), str):
        model["config"] = str((base / model["config"]).resolve())
    work = dict(raw.get("workload") or {})
    batch = int(work["batch_size_per_accelerator"])
    for key in ("epochs", "dataset_size"):
        work.pop(key, None)
    work["samples"] = bench_samples(steps, warmup_steps, batch, option.accelerators)
    constraints = {k: v for k, v in (raw.get("constraints") or {}).items() if k not in ("deadline_hours", "budget_usd")}
    layout = f"{option.type_label}:{option.count}:{option.market}"
    candidates = {"layouts": [layout], "platforms": [option.platform], "regions": [option.region],
                  "markets": [option.market], "nodes": {"min": 1, "max": option.count}}
    if option.flexible:
        candidates["flexible"] = True
    out = {**raw, "entrypoint": entry, "model": model, "workload": work, "candidates": candidates,
           "constraints": constraints}
    return yaml.safe_dump(out, sort_keys=False)


def write_bench_spec(spec_path: str, option: Option, steps: int, warmup_steps: int, stamp: str) -> str:
    """The bench spec's path, under $TRAINCTL_HOME/bench/STAMP/."""
    folder = home() / "bench" / stamp
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", f"{option.platform}-{option.type_label}-{option.count}-{option.market}")
    path = folder / f"{name[:100]}.yaml"
    path.write_text(bench_spec_text(spec_path, option, steps, warmup_steps))
    return str(path)
