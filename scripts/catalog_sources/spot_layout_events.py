"""Layout-level Spot reclaim events of the 4-node GPU traces (trainctl/catalog/spot_hazard.json `layout_events`).

    git clone https://github.com/skypilot-org/spot-traces && python scripts/catalog_sources/spot_layout_events.py spot-traces

Each trace (preemption/4-node/aws-08-03-2023, 4 x p3.2xlarge, 300 s ticks) is the number of instances running at
each tick. A training job runs only while its layout is whole, so an event is a decrease from 4 running nodes; its
size is the nodes it took; the exposure is the hours at 4. Prints the per-trace numbers and the fit: the per-node
event rate (events / (4 x whole hours)) and the chance that each other node goes in the same event.
"""
import json
import sys
from pathlib import Path

TRACES = ("us-east-1f", "us-east-2a", "us-west-2c")


def layout_events(counts: list[int], tick_hours: float, nodes: int = 4) -> dict:
    events = lost = 0
    for before, after in zip(counts, counts[1:]):
        if before == nodes and after < before:
            events += 1
            lost += before - after
    whole = sum(tick_hours for c in counts[:-1] if c == nodes)
    return {"events": events, "whole_hours": round(whole, 3), "nodes_lost": lost}


def main(root: str) -> None:
    out = {}
    for zone in TRACES:
        data = json.loads((Path(root) / "preemption/4-node/aws-08-03-2023" / f"{zone}_v100_1.json").read_text())
        out[f"4-node {zone} 2023-08-03"] = layout_events(data["data"], data["metadata"]["gap_seconds"] / 3600)
    events = sum(t["events"] for t in out.values())
    hours = sum(t["whole_hours"] for t in out.values())
    lost = sum(t["nodes_lost"] for t in out.values())
    print(json.dumps({"traces": out, "events_per_whole_layout_hour": round(events / hours, 4),
                      "nodes_lost_per_event": round(lost / events, 3),
                      "per_node_event_rate": round(events / (4 * hours), 5),
                      "same_event_probability": round((lost / events - 1) / 3, 4)}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
