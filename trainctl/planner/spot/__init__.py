"""Pure: the Spot interruption model in one place: `hazard` (reclaim rates from the Spot advisor's bands and
measured traces), `risk` (expected interruptions, correlated reclaims, notice checkpoints, rework, capacity
odds), `simulation` (the seeded Monte Carlo of one option's run: p10/p50/p90), `launch_overheads` (the
fixed costs of starting and restarting a job), `recovery` (one interruption's cost under the job's recovery:
elastic survivors, an On-Demand fallback or a failure past the slack)."""
