"""The trainctl command line: parse, call one core function, render. No logic lives here.

Start-up must stay light: `trainctl --help` imports neither boto3 nor torch, so every heavy import
happens inside the command that needs it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

import typer

from trainctl import __version__
from trainctl.errors import TrainctlError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Plan, launch and watch deep-learning training on AWS for the fewest dollars.")


@dataclass
class GlobalOptions:
    output: str = "table"
    debug: bool = False


OPTS = GlobalOptions()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", help="AWS profile to use."),
    region: Optional[str] = typer.Option(None, "--region", help="AWS region for calls that need one."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json: one document on stdout)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    sandbox: bool = typer.Option(False, "--sandbox", help="Use the local sandbox AWS (starts one if needed)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    if output not in ("table", "json"):
        raise UsageError(f"--output {output!r}: use table or json")
    OPTS.output, OPTS.debug = output, debug
    from trainctl import aws

    aws.SETTINGS.profile, aws.SETTINGS.region = profile, region
    if sandbox:
        from trainctl.sandbox.cli import ensure_sandbox_env

        os.environ.update(ensure_sandbox_env())
        aws.reset_session()


@app.command()
def plan(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    objective: str = typer.Option("cost", "--objective",
                                  help="cost (lowest expected $), p90-cost (lowest 90th-percentile $ over simulated "
                                       "Spot runs) or time (fewest hours)."),
    layout: list[str] = typer.Option([], "--layout", help="Compare only TYPE:COUNT[:MARKET] (repeatable)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2 only."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog; ask AWS nothing."),
    top: int = typer.Option(10, "--top", min=1, help="How many options to show (table) or return (json: all)."),
    show_excluded: bool = typer.Option(False, "--show-excluded", help="List excluded layouts and why."),
    window_hours: float = typer.Option(168.0, "--window-hours", min=1, help="Spot price history window."),
) -> None:
    """Rank training layouts by expected cost (or time) to train the job."""
    from trainctl import render
    from trainctl.planning import PlanInputs, make_plan

    _, result = make_plan(PlanInputs(spec_path=spec, objective=objective, layouts=tuple(layout),
                                     platform=platform, offline=offline, window_hours=window_hours))
    if OPTS.output == "json":
        render.print_json(result.model_dump(mode="json"))
    else:
        render.plan_table(result, spec, top=top, show_excluded=show_excluded)
    if not result.options:
        raise typer.Exit(3)


@app.command()
def catalog(
    filter: Optional[str] = typer.Argument(None, help="Substring of the instance type, e.g. g5 or 12xlarge."),
    region: str = typer.Option("us-east-1", "--region-prices", help="Region whose prices to show."),
) -> None:
    """Show the bundled catalog: specs, prices, Spot data, with sources."""
    from trainctl import render
    from trainctl.catalog import load_catalog

    cat = load_catalog()
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
    if not rows:
        raise UsageError(f"no instance type matches {filter!r}; known families: {', '.join(cat.families)}")
    if OPTS.output == "json":
        render.print_json({"catalog_date": cat.date, "data_dates": cat.data_dates, "sources": cat.sources,
                           "instances": rows})
    else:
        render.catalog_table(cat, rows, region)


@app.command()
def schema(
    plan_schema: bool = typer.Option(False, "--plan", help="The plan document's schema (`plan -o json`, "
                                                          "`launch --plan`) instead of the job spec's."),
) -> None:
    """Print the job spec's JSON Schema (for editor validation), or the plan's with --plan."""
    from trainctl import render

    if plan_schema:
        from trainctl.plans import plan_schema as schema_of_plan

        render.print_json(schema_of_plan())
    else:
        from trainctl.spec import json_schema

        render.print_json(json_schema())


@app.command()
def launch(
    spec: str = typer.Argument(..., help="Job spec YAML."),
    option: Optional[int] = typer.Option(None, "--option", min=1, help="Launch the plan's option with this rank."),
    plan_file: Optional[str] = typer.Option(None, "--plan", help="A saved `trainctl plan -o json` document."),
    layout: list[str] = typer.Option([], "--layout", help="Plan exactly TYPE:COUNT[:MARKET] (repeatable: "
                                                          "the others are failover options)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker (ec2 when its backend exists)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the AWS calls a launch makes; create nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    failover: bool = typer.Option(False, "--failover", help="When capacity is refused, move to the next option."),
    role: Optional[str] = typer.Option(None, "--role", help="SageMaker execution role name or ARN."),
    image: Optional[str] = typer.Option(None, "--image", help="Training image URI (default: trainctl's table)."),
    bucket: Optional[str] = typer.Option(None, "--bucket", help="Job bucket (default trainctl-ACCOUNT-REGION)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet id (default: the default VPC's subnet "
                                                                 "in the best-scored AZ)."),
    security_group: Optional[str] = typer.Option(None, "--security-group", help="Security group id (default: "
                                                                                 "a new one open only to itself)."),
    ami: Optional[str] = typer.Option(None, "--ami", help="EC2: AMI id (default: the AWS Deep Learning AMI from "
                                                          "its public SSM parameter)."),
    ssh_cidr: Optional[str] = typer.Option(None, "--ssh-cidr", help="EC2: allow SSH from this CIDR only (no SSH "
                                                                    "by default; 0.0.0.0/0 is refused)."),
    max_runtime_hours: Optional[float] = typer.Option(None, "--max-runtime-hours", min=0.02),
    objective: str = typer.Option("cost", "--objective", help="cost or time (when re-planning)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog."),
    poll_seconds: float = typer.Option(10.0, "--poll-seconds", min=0.05,
                                       help="--failover: how often to check that the job got capacity."),
) -> None:
    """Plan (or take a saved plan or layout), show the chosen option and its calls, confirm, submit."""
    from trainctl import render
    from trainctl.launch import LaunchArgs, describe_option
    from trainctl.launch import launch as do_launch

    err = render.stderr_console()

    def show(request) -> None:
        err.print(f"{request.job_id}: {describe_option(request.option)}", markup=False, soft_wrap=True)
        for note in request.notes:
            err.print(f"  - {note}", markup=False, soft_wrap=True)
        for i, call in enumerate(request.calls, 1):
            err.print(f"  {i}. {call.service}:{call.operation}" + (f"  ({call.why})" if call.why else ""),
                      markup=False, soft_wrap=True)

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            raise UsageError("no terminal to confirm the launch on: add --yes (or --dry-run to only look)")
        return typer.confirm(question, default=False, err=True)

    args = LaunchArgs(spec_path=spec, option_rank=option, plan_path=plan_file, layouts=tuple(layout),
                      platform=platform, objective=objective, offline=offline, dry_run=dry_run, yes=yes,
                      failover=failover, role=role, image=image, bucket=bucket, subnet=subnet,
                      security_group=security_group, ami=ami, ssh_cidr=ssh_cidr, max_runtime_hours=max_runtime_hours,
                      poll_seconds=poll_seconds)
    result = do_launch(args, say=lambda m: err.print(m, markup=False, soft_wrap=True), show=show, confirm=confirm)
    if OPTS.output == "json":
        render.print_json(result)
    elif dry_run:
        import json as _json

        typer.echo(_json.dumps(result, indent=2))
    else:
        typer.echo(result["job_id"])


@app.command()
def watch(
    job: str = typer.Argument(..., help="Job id (as printed by launch)."),
    once: bool = typer.Option(False, "--once", help="Look once and exit (with --output json: one document)."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls after a change; "
                                                                      "backs off to 8x while nothing changes."),
    no_logs: bool = typer.Option(False, "--no-logs", help="Status only."),
    recover: bool = typer.Option(False, "--recover", help="EC2: relaunch reclaimed Spot nodes (same AZ first); "
                                                          "the job resumes from its last checkpoint."),
) -> None:
    """Follow a job: status transitions, every host's logs, throughput, interruptions, savings, dollars."""
    from trainctl import render
    from trainctl import watch as w
    from trainctl.backends import get_backend

    platform, region, row = w.locate(job)
    backend = get_backend(platform)
    err = render.stderr_console()
    recoverer = w.recoverer(backend, job, region, say=lambda m: err.print(m, markup=False)) if recover else None
    if once:
        if recoverer is not None:
            recoverer(backend.describe(job, region))
        view, progress, _ = w.read_all(backend, job, region)
    else:
        view, progress = w.follow_live(backend, job, region, row, interval=interval, logs=not no_logs,
                                       recover=recoverer, to_stderr=OPTS.output == "json")
    doc = w.summary(view, progress, row)
    note = w.record_outcome(view, progress, row) if view.finished else None
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        w.render_summary(doc)
    if note:
        err.print(note, markup=False)
    raise typer.Exit(w.exit_code(view))


@app.command()
def logs(
    job: str = typer.Argument(..., help="Job id."),
    host: Optional[int] = typer.Option(None, "--host", min=1, help="Only host N (1-based)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="--follow: seconds between polls."),
) -> None:
    """Print a job's log lines, every host interleaved in time order (or one host)."""
    from trainctl import watch as w
    from trainctl.backends import get_backend

    platform, region, _ = w.locate(job)
    backend = get_backend(platform)
    view = backend.describe(job, region)
    only = w.check_host(view, host)

    def show(ln) -> None:
        if only is None or ln.host == only:
            line = ln.message if only else f"{ln.host} {ln.message}"
            typer.echo(f"{w.fmt_time(ln.timestamp_ms / 1000)} {line}")

    if follow:
        w.follow(backend, job, region, interval=interval, on_line=show)
    else:
        for ln in w.read_all(backend, job, region)[2]:
            show(ln)


@app.command("ls")
def list_jobs(
    limit: int = typer.Option(20, "--limit", min=1, help="Newest N jobs."),
    no_status: bool = typer.Option(False, "--no-status", help="Do not ask AWS for live status."),
) -> None:
    """Jobs trainctl launched (from the state database), with their live status."""
    from trainctl import render
    from trainctl import watch as w

    out = w.list_jobs(limit, live=not no_status)
    if OPTS.output == "json":
        render.print_json({"jobs": out})
    else:
        w.render_jobs(out)


@app.command()
def stop(job: str = typer.Argument(..., help="Job id.")) -> None:
    """Stop a running job (SIGTERM: the entrypoint checkpoints; the model is still uploaded)."""
    from trainctl import render, state
    from trainctl import watch as w
    from trainctl.backends import get_backend

    platform, region, row = w.locate(job)
    get_backend(platform).stop(job, region)
    if row:
        state.add_event(job, "stop", "requested by the user")
    render.stderr_console().print(f"stopping {job}; `trainctl watch {job}` follows it to the end", markup=False)


@app.command()
def down(
    job: str = typer.Argument(..., help="Job id."),
    platform: Optional[str] = typer.Option(None, "--platform",
                                           help="ec2 or sagemaker, for a job the state database does not know "
                                                "(default ec2); --region names its region."),
) -> None:
    """Delete everything tagged for a job (instances, fleet, launch template, placement group, security group,
    instance profile, role). Safe to repeat; prints what it removed."""
    from trainctl import aws, render, state
    from trainctl import watch as w
    from trainctl.backends import get_backend

    row = w.job_record(job)
    if row:
        platform, region = row["platform"], row["region"] or aws.default_region()
    else:
        platform, region = platform or "ec2", aws.default_region()
    removed = get_backend(platform).cleanup(job, region)
    if row:
        state.add_event(job, "down", ", ".join(removed) or "nothing left")
    if OPTS.output == "json":
        render.print_json({"job_id": job, "platform": platform, "region": region, "removed": removed})
    else:
        for line in removed:
            typer.echo(f"removed {line}")
        render.stderr_console().print(f"{job}: {len(removed)} resources removed" if removed
                                      else f"{job}: nothing tagged trainctl:job={job} is left in {region}",
                                      markup=False)


@app.command()
def doctor(
    spec: Optional[str] = typer.Argument(None, help="Job spec YAML: also check the quotas its layouts need."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2 only."),
    role: Optional[str] = typer.Option(None, "--role", help="SageMaker execution role name or ARN to check."),
    bucket: Optional[str] = typer.Option(None, "--bucket", help="Job bucket (default trainctl-ACCOUNT-REGION)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet a SageMaker job would use (default: the "
                                                               "default VPC's first)."),
) -> None:
    """Check credentials, quotas, the execution role, the subnet's route to S3, the job bucket and placement
    scores: one pass/fail line each, with the fix. Exit code 1 when a check fails."""
    from trainctl import doctor as d

    on_check = None if OPTS.output == "json" else (lambda c: typer.echo(d.render([c]).rsplit("\n", 1)[0]))
    checks = d.run(spec, role=role, bucket=bucket, subnet=subnet, platform=platform, on_check=on_check)
    if OPTS.output == "json":
        from trainctl import render

        render.print_json(d.to_json(checks))
    else:
        typer.echo(d.render(checks).rsplit("\n", 1)[1])
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)


@app.command("iam-policy")
def iam_policy(
    platform: str = typer.Option("all", "--platform", help="sagemaker, ec2 or all: the calls of which backends."),
    role: str = typer.Option("cli", "--role", help="cli (whoever runs trainctl), sagemaker-execution (the "
                                                   "training job's role) or ec2-node (the EC2 nodes' role)."),
    execution_role: str = typer.Option("trainctl-sagemaker-execution", "--execution-role",
                                       help="The SageMaker execution role name the cli policy may pass."),
) -> None:
    """Print least-privilege IAM policy documents for trainctl (docs/security.md explains them)."""
    import json as _json

    from trainctl import iam, render

    doc = iam.documents(platform, role, execution_role)
    if OPTS.output == "json":
        render.print_json(doc)
    else:  # the policy itself, ready for `aws iam put-role-policy --policy-document file://...`
        typer.echo(_json.dumps(doc["policy"], indent=2))
        if "trust_policy" in doc:
            render.stderr_console().print("trust policy (--output json shows it with the policy): "
                                          + _json.dumps(doc["trust_policy"]), markup=False, soft_wrap=True)


def _mount_subcommands() -> None:
    # The sandbox's own module keeps moto and boto3 out of start-up (imports happen inside its commands).
    try:
        from trainctl.sandbox.cli import app as sandbox_app
    except ImportError:
        return
    app.add_typer(sandbox_app, name="sandbox", help="A local AWS (moto plus what moto lacks) for demos and tests.")


_mount_subcommands()


def main() -> None:
    debug = "--debug" in sys.argv
    # typer vendors click; its exception classes are reached through the names typer exports
    click_exception = typer.BadParameter.__mro__[2]  # ClickException (BadParameter < UsageError < it)

    try:
        # standalone_mode=False: click's usage errors come back here and become one line too
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into a silent Exit(130)
                sys.stderr.write("trainctl: interrupted\n")
            sys.exit(code)
    except typer.Abort as e:  # click turns Ctrl-C (and EOF at a prompt) into Abort
        interrupted = isinstance(e.__context__, KeyboardInterrupt)
        sys.stderr.write("trainctl: interrupted\n" if interrupted else "trainctl: aborted\n")
        sys.exit(130 if interrupted else 1)
    except click_exception as e:
        if debug:
            raise
        message = " ".join(e.format_message().split()).rstrip(".")
        names, ctx = [], getattr(e, "ctx", None)
        while ctx is not None and ctx.parent is not None:
            names.append(ctx.info_name)
            ctx = ctx.parent
        command = " ".join(["trainctl", *reversed(names)])
        sys.stderr.write(f"trainctl: error: {message}; see `{command} --help`\n")
        sys.exit(e.exit_code)
    except TrainctlError as e:
        if debug:
            raise
        sys.stderr.write(f"trainctl: error: {' '.join(str(e).splitlines())}\n")  # always one line
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("trainctl: interrupted\n")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug:
            raise
        if type(e).__name__ in ("NoCredentialsError", "PartialCredentialsError"):  # botocore's, by name: no import
            sys.stderr.write("trainctl: error: no AWS credentials found; configure them (`aws configure`, "
                             "AWS_PROFILE or --profile), or try it locally with `trainctl --sandbox ...`\n")
            sys.exit(2)
        from trainctl.aws import error_summary

        sys.stderr.write(f"trainctl: error: {error_summary(e)} (run with --debug for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
