"""Tables for people: the plan (ranked options, why, what was excluded) and the catalog."""
from __future__ import annotations

from trainctl.render import table_console


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
# never cut. (header, justify, the cell of an option)
_COLUMNS = (
    ("#", "right", lambda o: str(o.rank)),
    ("layout", "left", lambda o: f"{o.count}x {o.instance_type}"),
    ("market", "left", lambda o: o.market),
    ("expected $", "right", lambda o: _money(o.expected_cost_usd)),
    ("p90 $", "right", lambda o: _money(o.cost_p90_usd) if o.cost_p90_usd else "-"),
    ("hours", "right", lambda o: f"{o.hours:,.1f}"),
    ("platform", "left", lambda o: o.platform),
    ("where", "left", lambda o: o.availability_zone or o.region),
    ("$/h", "right", lambda o: _money(o.hourly_usd)),
    ("samples/s", "right", lambda o: f"{o.throughput_samples_per_s:,.0f} {o.throughput_source}"),
    ("score", "right", lambda o: "-" if o.spot_placement_score is None else f"{o.spot_placement_score}/10"),
    ("interr.", "right", lambda o: "-" if o.market != "spot" else f"{o.interruptions_expected:.2f}"),
    ("notes", "left", lambda o: " ".join(n for n, on in (("pareto", o.pareto), (o.strategy, o.strategy != "ddp"),
                                                          ("over-quota", o.quota_ok is False),
                                                          ("input-bound", o.input_bound)) if on)),
)


def _options_table(options, width: int):
    """The ranked options with as many columns as fit `width`, in the order of _COLUMNS' importance."""
    from rich.table import Table

    cells = [[cell(o) for _, _, cell in _COLUMNS] for o in options]
    widths = [max(len(head), *(len(row[i]) for row in cells)) for i, (head, _, _) in enumerate(_COLUMNS)]
    keep, used = [], 1
    for i, w in enumerate(widths):
        if used + w + 3 > width and i > 2:  # rank, layout and market always stay
            break
        keep.append(i)
        used += w + 3
    t = Table(header_style="bold", pad_edge=False)
    for i in keep:
        t.add_column(_COLUMNS[i][0], justify=_COLUMNS[i][1], no_wrap=True)
    for row in cells:
        t.add_row(*(row[i] for i in keep))
    left_out = [_COLUMNS[i][0] for i in range(len(_COLUMNS)) if i not in keep]
    if left_out:
        t.caption = f"not shown at this width: {', '.join(left_out)} (-o json has every field)"
    return t


def plan_table(plan, spec_path: str, top: int, show_excluded: bool, explain: int = 3) -> None:
    from rich.table import Table

    con = table_console(160)
    src = (_live_source() if plan.source == "live"
           else f"the bundled catalog dated {plan.catalog_date} (offline)")
    con.print(f"[bold]{plan.spec_name}[/] ({spec_path}): planned from {src}; ranked by "
              f"{'expected cost' if plan.objective == 'cost' else 'expected hours'}")
    for w in plan.warnings:
        con.print(f"[yellow]warning:[/] {w}")
    if plan.options:
        con.print(_options_table(plan.options[:top], con.width))
        shown = min(top, len(plan.options))
        con.print(f"{len(plan.options)} options, top {shown} shown (--top N for more). $/h is the whole layout; "
                  "hours include expected interruption rework; pareto: no other option is both cheaper and faster.")
        for o in plan.options[:explain]:
            con.print(f"[bold]#{o.rank}[/] {o.count}x {o.instance_type} {o.market} on {o.platform}, "
                      f"{o.availability_zone or o.region}:")
            for line in o.why:
                con.print(f"   - {line}")
    if plan.excluded:
        if show_excluded:
            t = Table(title="excluded layouts", header_style="bold")
            t.add_column("layout", no_wrap=True)
            t.add_column("where", no_wrap=True)
            t.add_column("reason", overflow="fold")
            for e in plan.excluded:
                where = " ".join(x for x in (e.platform, e.region, e.market) if x) or "all"
                t.add_row(f"{e.count}x {e.instance_type}", where, e.reason)
            con.print(t)
        else:
            con.print(f"{len(plan.excluded)} layouts excluded (--show-excluded says why).")


def catalog_rows(cat, filter: str | None, region: str) -> list[dict]:
    """`trainctl catalog`'s rows (its JSON document's "instances"): specs, prices and Spot data, with sources."""
    rows = []
    for name, inst in sorted(cat.instances.items(), key=lambda kv: (kv[1].family, kv[1].vcpus)):
        if filter and filter not in name:
            continue
        ec2 = cat.on_demand_price("ec2", region, name)
        sm = cat.on_demand_price("sagemaker", region, name)
        spot = cat.spot_advice(region, name)
        rows.append({"instance_type": name, "family": inst.family, "accelerator": inst.accelerator.key,
                     "accelerator_count": inst.accelerator_count,
                     "accelerator_memory_gib": inst.accelerator_memory_gib, "vcpus": inst.vcpus,
                     "ram_gib": inst.ram_gib, "network_gbps_baseline": inst.network_gbps_baseline,
                     "network_gbps_burst": inst.network_gbps_burst, "network_up_to": inst.network_up_to,
                     "efa_interfaces": inst.efa_interfaces, "sagemaker_training": inst.sagemaker_training,
                     "peak_tflops": inst.accelerator.peak_tflops, "region": region,
                     "ec2_usd_per_hour": ec2.usd_per_hour if ec2 else None,
                     "sagemaker_usd_per_hour": sm.usd_per_hour if sm else None,
                     "price_sources": {"ec2": ec2.source if ec2 else None, "sagemaker": sm.source if sm else None},
                     "spot_savings_pct": spot.savings_pct if spot else None,
                     "interruption_band": spot.interruption_band if spot else None, "sources": inst.sources})
    return rows


def catalog_table(catalog, rows, region: str) -> None:
    from rich.table import Table

    con = table_console(150)
    t = Table(title=f"trainctl catalog dated {catalog.date} ({region})", header_style="bold")
    for col in ("type", "accelerators", "mem/acc GiB", "vCPU", "RAM GiB", "network Gbps", "EFA", "EC2 $/h",
                "SageMaker $/h", "Spot savings", "interruptions"):
        t.add_column(col, justify="left" if col in ("type", "accelerators") else "right")
    for r in rows:
        t.add_row(r["instance_type"], f"{r['accelerator_count']} x {r['accelerator']}",
                  f"{r['accelerator_memory_gib']:g}", str(r["vcpus"]), f"{r['ram_gib']:g}",
                  (f"{r['network_gbps_baseline']:g} (burst {r['network_gbps_burst']:g})" if r["network_up_to"]
                   else f"{r['network_gbps_burst']:g}"), str(r["efa_interfaces"] or "-"),
                  "-" if r["ec2_usd_per_hour"] is None else f"{r['ec2_usd_per_hour']:.4g}",
                  "-" if r["sagemaker_usd_per_hour"] is None else f"{r['sagemaker_usd_per_hour']:.4g}",
                  "-" if r["spot_savings_pct"] is None else f"{r['spot_savings_pct']}%",
                  r["interruption_band"] or "-")
    con.print(t)
    con.print("Sources: " + "; ".join(f"{k} = {v}" for k, v in catalog.sources.items() if k in
                                      {s for r in rows for s in r["sources"].split("; ")} | {"V", "SA", "SM"}))
