"""config.json's entries for unattended recovery (bootstrap/replacement.py): what a Spot job's survivors need to
replace a reclaimed node themselves, with no trainctl process running. An On-Demand job gets none: its lost node
is not a Spot reclaim, and the job fails instead (backends/ec2/status.py)."""
from __future__ import annotations

from trainctl.backends.ec2.common import name_for

MAX_REPLACEMENTS = 10  # as `watch --recover`'s MAX_RECOVERIES: a job reclaimed this often is better moved by hand
PEER_WAIT_MARGIN_S = 900.0  # the survivors wait for the last Spot try, and a little longer for its boot


def node_config(spec, option, job_id: str) -> dict:
    if option.market != "spot":
        return {}
    from trainctl.catalog import load_catalog

    c = spec.constraints
    od = load_catalog().on_demand_price("ec2", option.region, option.instance_type)
    max_wait_s = float(c.max_spot_wait_hours) * 3600
    return {"replacement": {"launch_template": name_for(job_id), "market": option.market,
                            "on_spot_shortage": c.on_spot_shortage, "max_spot_wait_s": max_wait_s,
                            "deadline_hours": c.deadline_hours, "restart_s": float(c.restart_minutes) * 60,
                            "on_demand_hourly_usd": od.usd_per_hour if od else None,
                            "max_replacements": MAX_REPLACEMENTS},
            # the survivors outwait the replacement's tries (the agent's default wait is an hour)
            "peer_wait_s": max(3600.0, max_wait_s + PEER_WAIT_MARGIN_S)}
