"""The spec's `elastic: {min_nodes: N}` against the layout a launch is about to start, before any AWS call.

EC2 keeps training on at least min_nodes of the layout's nodes while a lost one is replaced (bootstrap/membership.py):
a layout of fewer nodes than that cannot honour it, and is refused in one line. SageMaker cannot change a running
job's size: the bound does not apply there, one warning line says so, and SageMaker's managed Spot restart (the
whole job, from its checkpoint) stays.
"""
from __future__ import annotations

from typing import Any, Callable

from trainctl.catalog.platforms import facts
from trainctl.errors import UsageError


def check(spec: Any, options: list[Any], say: Callable[[str], None]) -> None:
    elastic = getattr(spec, "elastic", None)
    if elastic is None:
        return
    warned = False
    for option in options:
        if (own := facts(option.platform)).restarts_whole_job:
            if not warned:
                say(f"warning: elastic.min_nodes {elastic.min_nodes} does not apply on {own.title}, which cannot "
                    "change a running job's size: a Spot interruption restarts the whole job from its checkpoint")
                warned = True
        elif option.count < elastic.min_nodes:
            raise UsageError(f"elastic.min_nodes {elastic.min_nodes} is more than the {option.count} node(s) of "
                             f"layout {option.layout}; lower min_nodes or launch a layout of at least "
                             f"{elastic.min_nodes} nodes")
