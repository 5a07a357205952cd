"""Spot hazard per instance type: the advisor's band scaled to the level of published GPU lifetime traces.

Reads `spot_hazard.json` (derived numbers with their sources and the derivation; never the raw traces).
Stdlib only. The assumption that combines the two sources is stated in the data file and in
docs/cost-model.md ("Spot interruptions").
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache

from trainctl.catalog import BAND_MONTHLY_FRACTION, CATALOG_PATH, HOURS_PER_MONTH

HAZARD_PATH = CATALOG_PATH.with_name("spot_hazard.json")  # the data stays with the catalog
# The advisor's five bands; its '>20%' band has no upper bound (the catalog's midpoint 25% is pessimistic).
BANDS = tuple(BAND_MONTHLY_FRACTION)


def band_hazard(band: str) -> float:
    """Advisor-only hazard per instance-hour: the band's monthly reclaim share as a constant rate."""
    return -math.log(1.0 - BAND_MONTHLY_FRACTION[band]) / HOURS_PER_MONTH


@dataclass(frozen=True)
class SpotHazard:
    band: str
    per_instance_hour: float      # node losses per node-hour of a running layout of `nodes`
    log_sd: float                 # spread of the level between traces (a run draws its own level)
    advisor_only: float           # what the band alone would say, for the plan's words
    events_per_hour: float        # reclaim events of the whole layout per hour it runs
    nodes_per_event: float


@dataclass(frozen=True)
class HazardTable:
    reference_band: str
    per_node_event_rate: float       # events a node starts per hour, in the reference band (4-node traces)
    log_sd: float
    same_event_probability: float    # each other node goes in the same event with this probability
    wait_one: tuple[float, float]    # (median h, log sd) to replace one lost node
    wait_four: tuple[float, float]   # (median h, log sd) to make a 4-node layout whole again
    notice_seconds: float
    layout_traces: dict = field(default_factory=dict)   # per 4-node trace: events, whole_hours, nodes_lost

    def layout_events(self, band: str, nodes: int) -> tuple[float, float]:
        """(events per hour of a whole layout of `nodes`, nodes lost per event): n nodes start n x rate events
        an hour, each taking 1 + (n - 1) x p nodes."""
        ratio = band_hazard(band) / band_hazard(self.reference_band)
        return nodes * self.per_node_event_rate * ratio, 1.0 + (nodes - 1) * self.same_event_probability

    def for_band(self, band: str, nodes: int = 1) -> SpotHazard:
        """The hazard a layout of `nodes` sees. per_instance_hour is node losses per node-hour, so that
        simulation.RunModel's events = hazard x n / (1 + (n - 1) p) give back n x rate."""
        events, per_event = self.layout_events(band, nodes)
        return SpotHazard(band, events * per_event / nodes, self.log_sd, band_hazard(band), events, per_event)

    def wait_median_hours(self, nodes_lost: float) -> float:
        """Median wait to replace `nodes_lost` nodes: a power law through the 1-node and 4-node traces."""
        (m1, _), (m4, _) = self.wait_one, self.wait_four
        exponent = math.log(m4 / m1) / math.log(4.0)
        return m1 * max(1.0, nodes_lost) ** exponent

    def wait_log_sd(self, nodes_lost: float) -> float:
        return self.wait_one[1] if nodes_lost <= 1 else self.wait_four[1]


@lru_cache(maxsize=1)
def load_hazard_table() -> HazardTable:
    data = json.loads(HAZARD_PATH.read_text())
    layout, wait = data["layout_events"], data["replacement_wait_hours"]
    return HazardTable(reference_band=layout["band"], per_node_event_rate=layout["per_node_event_rate"],
                       log_sd=layout["log_sd_between_traces"], same_event_probability=layout["same_event_probability"],
                       wait_one=(wait["one_node"]["median"], wait["one_node"]["log_sd"]),
                       wait_four=(wait["four_nodes"]["median"], wait["four_nodes"]["log_sd"]),
                       notice_seconds=float(data["notice_seconds"]["value"]), layout_traces=layout["traces"])
