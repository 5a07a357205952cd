"""`trainctl catalog`: the bundled catalog's instance types, prices, Spot data and images."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.errors import UsageError


@app.command()
def catalog(
    filter: Optional[str] = typer.Argument(None, help="Substring of the instance type, e.g. g5 or 12xlarge."),
    region: str = typer.Option("us-east-1", "--region-prices", help="Region whose prices to show."),
) -> None:
    """Show the catalog: specs, prices, Spot data and sources."""
    from trainctl import render
    from trainctl.catalog import load_catalog
    from trainctl.render.tables import catalog_rows, catalog_table, image_rows

    cat = load_catalog()
    rows = catalog_rows(cat, filter, region)
    if not rows:
        raise UsageError(f"no instance type matches {filter!r}; known families: {', '.join(cat.families)}")
    if OPTS.output == "json":
        render.print_json({"catalog_date": cat.date, "data_dates": cat.data_dates, "sources": cat.sources,
                           "instances": rows, "images": image_rows()})
    else:
        catalog_table(cat, rows, region)
