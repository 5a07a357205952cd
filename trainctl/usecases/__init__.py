"""I/O use cases over the typed plan, the job state (`trainctl/state/`) and the `Backend` contract, grouped by
concept: `plan.py` (the I/O shell of planning: live or offline quotes, measured throughput), `launch/`, `jobs/`
(watch, ls, fetch, notifications), `bench/`, `doctor/`, `cost.py`, `calibration.py` (prediction vs measurement).
No rich and no SQL here: the CLI renders, the store queries."""
