"""Tables for people: the plan (ranked options, why, what was excluded) and the catalog."""
from __future__ import annotations

from trainctl.catalog.platforms import NAMES, facts
from trainctl.render import table_console
from trainctl.render.columns import Column, fitted_table


def _count(n: int, noun: str) -> str:
    from trainctl.text.wrap import count

    return count(n, noun)


def _money(x: float) -> str:
    return f"${x:,.2f}" if x < 1000 else f"${x:,.0f}"


def _live_source() -> str:
    """Say where 'live' data came from: AWS, or an endpoint that only looks like it (the sandbox)."""
    import os

    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return "live AWS market data"
    if os.environ.get("TRAINCTL_SANDBOX"):
        return f"the local sandbox at {endpoint} (AWS-shaped data, not AWS)"
    return f"live market data from {endpoint}"


# The plan table's columns, most important first: at a narrow terminal the last ones are left out whole,
# never cut. What tells two options apart (rank, layout with its market, platform and region) always stays, and
# so do the two numbers a plan is read for: the expected cost and the wall-clock hours the deadline is checked on.
# samples/s comes next: it says whether the model understood the job (at 100 columns it must still be there).
_COLUMNS = (
    Column("#", lambda o: str(o.rank), "right", keep=True),
    # an On-Demand option inside a Capacity Reservation the account holds says so (its row is otherwise the plain one's)
    Column("layout", lambda o: f"{o.count}x {o.type_label} {o.market}" + (" (held)" if o.capacity_reservation else ""),
           keep=True),
    Column("where", lambda o: f"{o.platform} {o.availability_zone or o.region}", keep=True),
    Column("expected $", lambda o: _money(o.expected_cost_usd), "right", keep=True),
    Column("wall\nhours", lambda o: f"{o.wall_hours:,.1f}", "right", keep=True),
    Column("samples/s", lambda o: f"{o.throughput_samples_per_s:,.0f} {o.throughput_source}", "right"),
    Column("p90 $", lambda o: _money(o.cost_p90_usd) if o.cost_p90_usd else "-", "right"),
    Column("$/h", lambda o: _money(o.hourly_usd), "right"),
    Column("billed\nhours", lambda o: f"{o.hours:,.1f}", "right"),
    Column("score", lambda o: "-" if o.spot_placement_score is None else f"{o.spot_placement_score}/10", "right"),
    Column("interr.", lambda o: "-" if o.market != "spot" else f"{o.interruptions_expected:.2f}", "right"),
    Column("notes", lambda o: " ".join(n for n, on in (("pareto", o.pareto), (o.strategy, o.strategy != "ddp"),
                                                        ("over-quota", o.quota_ok is False),
                                                        ("unverified-price", "not verified" in o.price_source.lower()),
                                                        ("input-bound", o.input_bound)) if on), wrap=True),
)
_WARNINGS_SHOWN = 5     # more than this under the table: the rest are counted (--explain shows them all)


def plan_table(plan, spec_path: str, top: int, show_excluded: bool, explain: bool = False) -> None:
    """The table first (within the first lines of a terminal), then its footnote, the top option's reason, the
    warnings condensed and what was excluded; `explain` adds every shown option's why and each warning whole."""
    from rich.text import Text

    from trainctl.render.columns import shown_headers
    from trainctl.render.plan_notes import column_notes, condensed, people_warning, people_why

    con = table_console(160)
    src = (_live_source() if plan.source == "live"
           else f"the bundled catalog dated {plan.catalog_date} (offline)")
    con.print(f"[bold]{plan.spec_name}[/] ({spec_path}): planned from {src}; ranked by "
              f"{'expected cost' if plan.objective == 'cost' else 'expected hours'}")
    shown_options = plan.options[:top]
    if shown_options:
        con.print(fitted_table(_COLUMNS, shown_options, con.width))
        more = "" if explain else "; --explain for why each ranks where it does"
        con.print(f"{_count(len(plan.options), 'option')}, top {len(shown_options)} shown (--top N for more{more}). "
                  f"{column_notes(shown_headers(_COLUMNS, shown_options, con.width), shown_options)}",
                  markup=False, highlight=False)
        if explain:
            for o in shown_options:
                con.print(f"[bold]#{o.rank}[/] {o.count}x {o.type_label} {o.market} on {o.platform}, "
                          f"{o.availability_zone or o.region}:")
                for line in people_why(o, o.why):
                    con.print(_hanging(line, con.width), markup=False, highlight=False)
        elif shown_options[0].why:
            con.print(_hanging(f"#1: {people_why(shown_options[0], shown_options[0].why[:1])[0]}", con.width,
                               indent=""), markup=False, highlight=False)
    cut = False
    whole = explain or not shown_options   # nothing to launch: the warnings are the answer, said whole
    warnings = plan.warnings if whole else plan.warnings[:_WARNINGS_SHOWN]
    for w in map(people_warning, warnings):
        lines, was_cut = ([_hanging(w, con.width, indent="warning: ")], False) if whole else condensed(w, con.width)
        cut = cut or was_cut
        text = "\n".join(lines)
        con.print(Text("warning:", style="yellow") + Text(text[len("warning:"):]))
    hidden = len(plan.warnings) - len(warnings)
    if cut or hidden:
        con.print(("" if not hidden else f"and {_count(hidden, 'more warning')}; ")
                  + "--explain shows every warning whole (-o json has them too).", markup=False, highlight=False)
    if plan.excluded:
        if show_excluded:
            con.print(fitted_table(_EXCLUDED_COLUMNS, plan.excluded, con.width, title="excluded layouts"))
        elif not plan.options:  # nothing to launch: say why right away, grouped
            con.print(fitted_table(_GROUP_COLUMNS, plan.excluded_summary, con.width,
                                   title="no layout is left; why, grouped (--show-excluded lists each)"))
        else:
            groups = ", ".join(f"{g.count} {g.reason}" for g in plan.excluded_summary)
            con.print(f"{_count(len(plan.excluded), 'layout')} excluded: {groups} (--show-excluded lists them).",
                      markup=False)


_EXCLUDED_COLUMNS = (
    Column("layout", lambda e: f"{e.count}x {e.instance_type}", keep=True),
    Column("where", lambda e: " ".join(x for x in (e.platform, e.region, e.market) if x) or "all"),
    Column("reason", lambda e: e.reason, wrap=True, keep=True),
)


_GROUP_COLUMNS = (
    Column("layouts", lambda g: str(g.count), "right", keep=True),
    Column("reason", lambda g: g.reason, keep=True),
    Column("for example", lambda g: "; ".join(f"{e.count}x {e.instance_type}: {e.reason}" for e in g.examples[:1]),
           wrap=True),
)


def _hanging(text: str, width: int, indent: str = "   - ") -> str:
    """A bullet line wrapped at `width` with the continuation under its first word (textwrap: plain text)."""
    import textwrap

    return textwrap.fill(text, width=max(40, width), initial_indent=indent, subsequent_indent=" " * len(indent),
                         break_long_words=False, break_on_hyphens=False)


# The catalog's On-Demand prices per platform (catalog/platforms.py), in the order of the platforms' names
PRICE_ORDER = tuple(sorted(NAMES))


def catalog_rows(cat, filter: str | None, region: str) -> list[dict]:
    """`trainctl catalog`'s rows (its JSON document's "instances"): specs, prices and Spot data, with sources."""
    rows = []
    for name, inst in sorted(cat.instances.items(), key=lambda kv: (kv[1].family, kv[1].vcpus)):
        if filter and filter not in name:
            continue
        prices = {p: cat.on_demand_price(p, region, name) for p in PRICE_ORDER}
        spot = cat.spot_advice(region, name)
        rows.append({"instance_type": name, "family": inst.family, "accelerator": inst.accelerator.key,
                     "accelerator_count": inst.accelerator_count,
                     "accelerator_memory_gib": inst.accelerator_memory_gib, "vcpus": inst.vcpus,
                     "ram_gib": inst.ram_gib, "network_gbps_baseline": inst.network_gbps_baseline,
                     "network_gbps_burst": inst.network_gbps_burst, "network_up_to": inst.network_up_to,
                     "efa_interfaces": inst.efa_interfaces, "sagemaker_training": inst.sagemaker_training,
                     "peak_tflops": inst.accelerator.peak_tflops, "region": region,
                     **{f"{p}_usd_per_hour": price.usd_per_hour if price else None for p, price in prices.items()},
                     "price_sources": {p: price.source if price else None for p, price in prices.items()},
                     "spot_savings_pct": spot.savings_pct if spot else None,
                     "interruption_band": spot.interruption_band if spot else None, "sources": inst.sources})
    return rows


def _network(r: dict) -> str:
    if r["network_up_to"]:
        return f"{r['network_gbps_baseline']:g} (burst {r['network_gbps_burst']:g})"
    return f"{r['network_gbps_burst']:g}"


def _price(x) -> str:
    return "-" if x is None else f"{x:.4g}"


# The catalog's columns, most important first (the type and its accelerators always stay).
_CATALOG_COLUMNS = (
    Column("type", lambda r: r["instance_type"], keep=True),
    Column("accelerators", lambda r: f"{r['accelerator_count']} x {r['accelerator']}", keep=True),
    Column("mem/acc GiB", lambda r: f"{r['accelerator_memory_gib']:g}", "right"),
    *(Column(f"{facts(p).title} $/h", lambda r, p=p: _price(r[f"{p}_usd_per_hour"]), "right") for p in PRICE_ORDER),
    Column("Spot savings", lambda r: "-" if r["spot_savings_pct"] is None else f"{r['spot_savings_pct']}%", "right"),
    Column("interruptions", lambda r: r["interruption_band"] or "-", "right"),
    Column("vCPU", lambda r: str(r["vcpus"]), "right"),
    Column("RAM GiB", lambda r: f"{r['ram_gib']:g}", "right"),
    Column("network Gbps", _network, "right"),
    Column("EFA", lambda r: str(r["efa_interfaces"] or "-"), "right"),
)


def catalog_table(catalog, rows, region: str) -> None:
    con = table_console(150)
    con.print(fitted_table(_CATALOG_COLUMNS, rows, con.width,
                           title=f"trainctl catalog dated {catalog.date} ({region})"))
    con.print(fitted_table(_IMAGE_COLUMNS, image_rows(), con.width, title="Images trainctl chooses (--image/--ami "
                                                                           "give another)"))
    con.print("Sources: " + "; ".join(f"{k} = {v}" for k, v in catalog.sources.items() if k in
                                      {s for r in rows for s in r["sources"].split("; ")} | {"V", "SA", "SM"}),
              markup=False)


def image_rows() -> list[dict]:
    """The images trainctl chooses, with the date AWS stops patching each (catalog/images.py, sourced per row)."""
    import datetime

    from trainctl.catalog.images import support_rows

    return support_rows(datetime.date.today().isoformat())


_IMAGE_COLUMNS = (
    Column("platform", lambda r: r["platform"], keep=True),
    Column("accelerator", lambda r: r["accelerator"], keep=True),
    Column("patched until", lambda r: r["end_of_patch"] or "not published", keep=True),
    Column("framework", lambda r: r["framework"] or "-", wrap=True),
    Column("image", lambda r: r["image"], wrap=True),
)
