"""Pure: from a job spec, the catalog and the market's quotes to a ranked `Plan`.

`ranking` (valid layouts, priced options, the objective's order, Pareto front, the words of `why`),
`pricing` (one option's hours, dollars and risk), `quotes` (what the market says, as one value), `spot/` (the
Spot interruption model). No I/O: `trainctl/usecases/plan.py` gathers the quotes and measurements.
"""
from trainctl.perf.estimator import MeasuredRate
from trainctl.planner.planning import Planner, plan
from trainctl.planner.ranking import OBJECTIVES, PlanRequest, candidates, model_shape
from trainctl.plans import Plan

__all__ = ["OBJECTIVES", "MeasuredRate", "Plan", "PlanRequest", "Planner", "candidates", "model_shape", "plan"]
