"""`trainctl schema`: the job spec's JSON Schema, or the plan document's (--plan)."""
from __future__ import annotations

import typer

from trainctl.cli.app import app


@app.command()
def schema(
    plan_schema: bool = typer.Option(False, "--plan", help="The plan document's schema (`plan -o json`, "
                                                          "`launch --plan`) instead of the job spec's."),
) -> None:
    """Print the job spec's JSON Schema (or the plan's: --plan)."""
    from trainctl import render

    if plan_schema:
        from trainctl.plans import plan_schema as schema_of_plan

        render.print_json(schema_of_plan())
    else:
        from trainctl.spec import json_schema

        render.print_json(json_schema())
