"""Spot hazard per instance type: the advisor's band scaled to the level of published GPU lifetime traces.

Reads `spot_hazard.json` (derived numbers with their sources and the derivation; never the raw traces).
Stdlib only. The assumption that combines the two sources is stated in the data file and in
docs/cost-model.md ("Spot interruptions").
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
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
    per_instance_hour: float      # mean hazard of one running instance
    log_sd: float                 # spread of the hazard between traces (a run draws its own level)
    advisor_only: float           # what the band alone would say, for the plan's words


@dataclass(frozen=True)
class HazardTable:
    reference_band: str
    reference_hazard: float
    log_sd: float
    same_event_probability: float
    wait_one: tuple[float, float]    # (median h, log sd) to replace one lost node
    wait_four: tuple[float, float]   # (median h, log sd) to make a 4-node layout whole again
    notice_seconds: float

    def for_band(self, band: str, level: float = 1.0) -> SpotHazard:
        ratio = band_hazard(band) / band_hazard(self.reference_band)
        return SpotHazard(band, self.reference_hazard * ratio * level, self.log_sd, band_hazard(band))

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
    ref, corr, wait = data["trace_reference"], data["correlation"], data["replacement_wait_hours"]
    return HazardTable(reference_band=ref["band"], reference_hazard=ref["hazard_per_instance_hour"],
                       log_sd=ref["log_sd_between_traces"], same_event_probability=corr["same_event_probability"],
                       wait_one=(wait["one_node"]["median"], wait["one_node"]["log_sd"]),
                       wait_four=(wait["four_nodes"]["median"], wait["four_nodes"]["log_sd"]),
                       notice_seconds=float(data["notice_seconds"]["value"]))
