"""The node agent's budget rule (trainctl/bootstrap/budget.py): when the job's dollars so far, with what it
spends until the stop has ended or the projected remainder, pass the budget; and the agent ships it."""
from __future__ import annotations

import io
import tarfile

from trainctl.bootstrap import NODE_PACKAGE, agent_archive
from trainctl.bootstrap.budget import Progress, verdict


def test_a_budget_is_reached_once_the_spend_until_the_stop_has_ended_would_pass_it():
    # $1/h for the whole job, 90 s to the next look and the stop's grace: $0.025
    assert verdict(1.0, 0.97, 1.0, 90, None) is None
    why = verdict(1.0, 0.98, 1.0, 90, None)
    assert why is not None and why.startswith("budget $1 reached: $0.9800 spent")


def test_a_budget_is_reached_when_the_projected_remainder_would_pass_it():
    assert verdict(1.0, 0.10, 2.0, 0, 0.44 * 3600) is None          # 0.10 + 0.88 fits
    why = verdict(1.0, 0.10, 2.0, 0, 0.46 * 3600)                   # 0.10 + 0.92 does not
    assert why is not None and "$1.0200 projected" in why


def test_progress_projects_the_remainder_from_the_metric_lines_of_the_run():
    progress = Progress(total_steps=1000)
    assert progress.seconds_left() is None
    progress.feed("trainctl step=10 loss=2.0 samples_per_s=5.0")
    progress.first = (10, 100.0)
    progress.feed("trainctl step=110 loss=1.0 samples_per_s=5.0")
    progress.last = (110, 200.0)                                    # 100 steps in 100 s
    assert progress.seconds_left() == 890.0
    progress.feed("not a metric line")
    assert progress.last == (110, 200.0)


def test_the_node_agent_ships_its_budget_module():
    with tarfile.open(fileobj=io.BytesIO(agent_archive())) as tar:
        assert f"{NODE_PACKAGE}/budget.py" in tar.getnames()


def test_progress_measures_a_resumed_run_from_its_own_start():
    progress = Progress(total_steps=100)
    for line in ("trainctl step=10 loss=1 samples_per_s=1", "trainctl step=20 loss=1 samples_per_s=1",
                 "trainctl step=15 loss=1 samples_per_s=1"):  # resumed from the checkpoint of step 15
        progress.feed(line)
    assert progress.first[0] == 15 and progress.seconds_left() is None  # one line of the new run: no rate yet


def test_a_script_without_total_steps_or_steps_is_projected_from_the_plan_s_steps():
    """Issue 37: any script, not only the bundled ones, is stopped on a projected overrun: the steps come from the
    node config's total_steps (the spec's samples over every rank's batch) when neither the arguments (--steps)
    nor the metric lines (total_steps=) say them."""
    from trainctl.bootstrap.budget import _steps

    assert _steps({"args": ["--lr", "0.1"], "total_steps": 300}) == 300
    assert _steps({"args": ["--steps", "50"], "total_steps": 300}) == 50
    assert _steps({"args": []}) is None


def _instance(itype: str, state: str = "running", hours: float = 1.0, now: float = 10 * 3600.0) -> dict:
    from datetime import datetime, timezone

    return {"InstanceType": itype, "State": {"Name": state}, "StateTransitionReason": "",
            "LaunchTime": datetime.fromtimestamp(now - hours * 3600, tz=timezone.utc)}


def test_each_instance_is_counted_at_its_own_types_price():
    """Issue 36, item 11 (the agent's part): a flexible layout's fleet launched one node of the plan's $0.589/h type
    and one of a $1.624/h type; the agent counts each at its own price from the config's node_hourly_by_type, not
    every node at one price."""
    from trainctl.bootstrap.budget import dollars, node_prices

    cfg = {"budget_usd": 5.0, "node_hourly_usd": 1.624, "node_hourly_by_type": {"g5.xlarge": 0.589,
                                                                                "g5.4xlarge": 1.624}}
    by_type, other = node_prices(cfg)
    assert by_type == {"g5.xlarge": 0.589, "g5.4xlarge": 1.624} and other == 1.624
    now = 10 * 3600.0
    spent, hourly, running = dollars([_instance("g5.xlarge"), _instance("g5.4xlarge")], by_type, other, now)
    assert round(spent, 6) == 0.589 + 1.624 and round(hourly, 6) == 2.213 and running == 2
    # an ended node counts its lifetime, not its price per hour from now; a type the config does not price: the dearest
    ended = _instance("g5.xlarge", state="terminated", hours=2.0)
    ended["StateTransitionReason"] = "User initiated (1970-01-01 09:00:00 GMT)"  # an hour after its launch
    spent, hourly, running = dollars([ended, _instance("g5.8xlarge")], by_type, other, now)
    assert round(spent, 6) == 0.589 + 1.624 and round(hourly, 6) == 1.624 and running == 1


def test_an_older_config_without_prices_per_type_counts_every_node_at_its_one_price():
    from trainctl.bootstrap.budget import dollars, node_prices

    by_type, other = node_prices({"budget_usd": 1.0, "node_hourly_usd": 0.5})
    assert by_type == {} and other == 0.5
    assert dollars([_instance("g5.xlarge"), _instance("g6.xlarge")], by_type, other, 10 * 3600.0)[0] == 1.0
