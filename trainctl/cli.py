"""The trainctl command line: parse, call one core function, render. No logic lives here.

Start-up must stay light: `trainctl --help` imports neither boto3 nor torch, so every heavy import
happens inside the command that needs it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import typer

from trainctl import __version__
from trainctl.backends.options import with_launch_flags
from trainctl.commandline import attach_global_options, run
from trainctl.errors import UsageError
from trainctl.plugins import SANDBOX, SandboxGroup, sandbox_environment

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Plan, launch and watch deep-learning training on AWS for the fewest dollars.")


@dataclass
class GlobalOptions:
    output: str = "table"
    debug: bool = False


OPTS = GlobalOptions()
# Options that work before AND after the subcommand, as in the AWS CLI and kubectl: declared once (on the
# group below) and attached to every command by `attach_global_options`; the later value wins.
GLOBAL_OPTIONS = ("profile", "region", "output", "debug", "sandbox")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", help="AWS profile to use."),
    region: Optional[str] = typer.Option(None, "--region", help="AWS region: for calls that need one, and the one region `plan`, `launch` and `doctor` plan in (instead of the spec's candidates.regions)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json: one document on stdout)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    sandbox: bool = typer.Option(False, "--sandbox", help="Use the local sandbox AWS (starts one if needed)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    for name, value in (("output", output), ("profile", profile), ("region", region), ("debug", debug),
                        ("sandbox", sandbox)):
        if value or name == "output":
            apply_global_option(name, value)


def apply_global_option(name: str, value) -> None:
    """Put one global option into effect (before or after the subcommand: the later one wins)."""
    from trainctl import aws

    if name == "output":
        if value not in ("table", "json"):
            raise UsageError(f"--output {value!r}: use table or json")
        OPTS.output = value
    elif name == "debug":
        OPTS.debug = bool(value)
    elif name == "profile":
        aws.SETTINGS.profile = value
        aws.reset_session()
    elif name == "region":
        from trainctl.regions import check_region

        aws.SETTINGS.region = check_region(value)
        aws.reset_session()
    elif name == "sandbox" and value:
        _use_sandbox()


def _use_sandbox() -> None:
    from trainctl import aws

    # through the sandbox plugin (trainctl/plugins.py); one line when it is not installed
    os.environ.update(sandbox_environment())
    aws.reset_session()


def _store():
    """The command's one connection to the job store (closed when the command ends)."""
    from trainctl.store import JobStore

    return JobStore()


@app.command()
def plan(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    objective: str = typer.Option("cost", "--objective",
                                  help="cost (lowest expected $), p90-cost (lowest 90th-percentile $ over simulated "
                                       "Spot runs) or time (fewest hours)."),
    layout: list[str] = typer.Option([], "--layout", help="Compare only TYPE:COUNT[:MARKET] (repeatable)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2: only that platform's options "
                                                                     "(default: both)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog; ask AWS nothing."),
    top: int = typer.Option(10, "--top", min=1, help="How many options to show (table) or return (json: all)."),
    show_excluded: bool = typer.Option(False, "--show-excluded", help="List excluded layouts and why."),
    window_hours: float = typer.Option(168.0, "--window-hours", min=1, help="Spot price history window."),
    plot: bool = typer.Option(False, "--plot", help="Draw expected cost against hours, the Pareto front marked."),
) -> None:
    """Rank training layouts by expected cost, p90 cost or time.

    Every valid layout with its hours, dollars and why; --plot draws cost against hours."""
    from trainctl import render
    from trainctl.planning import PlanInputs, make_plan

    with _store() as store:
        _, result = make_plan(PlanInputs(spec_path=spec, objective=objective, layouts=tuple(layout),
                                         platform=platform, offline=offline, window_hours=window_hours), store)
    if OPTS.output == "json":
        render.print_json(result.model_dump(mode="json"))
    elif plot and result.options:
        from trainctl.render.plot import print_plot

        print_plot(result, spec)
    else:
        from trainctl.render.tables import plan_table

        plan_table(result, spec, top=top, show_excluded=show_excluded)
    if not result.options:
        raise typer.Exit(3)


@app.command()
def catalog(
    filter: Optional[str] = typer.Argument(None, help="Substring of the instance type, e.g. g5 or 12xlarge."),
    region: str = typer.Option("us-east-1", "--region-prices", help="Region whose prices to show."),
) -> None:
    """Show the catalog: specs, prices, Spot data and sources."""
    from trainctl import render
    from trainctl.catalog import load_catalog
    from trainctl.render.tables import catalog_rows, catalog_table

    cat = load_catalog()
    rows = catalog_rows(cat, filter, region)
    if not rows:
        raise UsageError(f"no instance type matches {filter!r}; known families: {', '.join(cat.families)}")
    if OPTS.output == "json":
        render.print_json({"catalog_date": cat.date, "data_dates": cat.data_dates, "sources": cat.sources,
                           "instances": rows})
    else:
        catalog_table(cat, rows, region)


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


@app.command()
@with_launch_flags
def launch(
    spec: str = typer.Argument(..., help="Job spec YAML."),
    option: Optional[int] = typer.Option(None, "--option", min=1, help="Launch the plan's option with this rank."),
    plan_file: Optional[str] = typer.Option(None, "--plan", help="A saved `trainctl plan -o json` document."),
    layout: list[str] = typer.Option([], "--layout", help="Plan exactly TYPE:COUNT[:MARKET] (repeatable: "
                                                          "the others are failover options)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2: launch only options of "
                                                                     "this platform."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the AWS calls a launch makes; create nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    failover: bool = typer.Option(False, "--failover", help="When capacity is refused, move to the next option."),
    allow_duplicate: bool = typer.Option(False, "--allow-duplicate",
                                         help="Launch even while an earlier job of the same spec still runs "
                                              "(otherwise launch asks, and --yes refuses)."),
    objective: str = typer.Option("cost", "--objective", help="cost or time (when re-planning)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog."),
    poll_seconds: float = typer.Option(10.0, "--poll-seconds", min=0.05,
                                       help="--failover: how often to check that the job got capacity."),
    **platform_flags: Optional[str],
) -> None:
    """Launch the best option of the plan (or the one you choose).

    Shows the option, the settings the job gets and every AWS call, asks, then makes exactly those calls."""
    from trainctl.launch import LaunchArgs
    from trainctl.launch import launch as do_launch
    from trainctl.render import launch as shown

    args = LaunchArgs(spec_path=spec, option_rank=option, plan_path=plan_file, layouts=tuple(layout),
                      platform=platform, objective=objective, offline=offline, dry_run=dry_run, yes=yes,
                      failover=failover, allow_duplicate=allow_duplicate, poll_seconds=poll_seconds,
                      platform_options=platform_flags)
    with _store() as store:
        result = do_launch(args, store, say=shown.say, show=shown.show, confirm=shown.confirm)
    shown.result(result, OPTS.output)


PLATFORM_OF_UNKNOWN_JOB = typer.Option(None, "--platform", help="sagemaker or ec2: for a job trainctl did not "
                                                                 "launch (it is not in `trainctl ls`); --region "
                                                                 "names its region.")


@app.command()
def watch(
    job: str = typer.Argument(..., help="Job id (as printed by launch)."),
    once: bool = typer.Option(False, "--once", help="Look once and exit (with --output json: one document)."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls after a change; "
                                                                      "backs off to 8x while nothing changes."),
    no_logs: bool = typer.Option(False, "--no-logs", help="Status only."),
    recover: bool = typer.Option(False, "--recover", help="EC2: relaunch reclaimed Spot nodes (same AZ first); "
                                                          "the job resumes from its last checkpoint."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Follow a job: status, logs, throughput, savings, dollars.

    Exits with the job's outcome: 0 Completed, 1 Failed, 3 Stopped."""
    from trainctl import render
    from trainctl import watch as w
    from trainctl.backends import get_backend
    from trainctl.render import watch as shown

    with _store() as store:
        ref = w.locate(store, job, platform)
        backend = get_backend(ref.platform)
        recoverer = w.recoverer(backend, ref, store, say=shown.say) if recover else None
        if once:
            if recoverer is not None:
                recoverer(backend.describe(job, ref.region))
            view, progress, _ = w.read_all(backend, job, ref.region)
        else:
            view, progress = shown.follow_live(backend, ref, interval=interval, logs=not no_logs, recover=recoverer,
                                               to_stderr=OPTS.output == "json")
        doc = w.summary(view, progress, ref.record)
        note = w.record_outcome(store, view, progress, ref.record) if view.finished else None
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        shown.summary_table(doc)
    for warning in doc["warnings"]:
        shown.say(f"warning: {warning}")
    if note:
        shown.say(note)
    raise typer.Exit(w.exit_code(view))


@app.command()
def logs(
    job: str = typer.Argument(..., help="Job id."),
    host: Optional[int] = typer.Option(None, "--host", min=1, help="Only host N (1-based)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="--follow: seconds between polls."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Print a job's log lines, all hosts in time order, in full."""
    from trainctl import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import log_line

    with _store() as store:
        ref = w.locate(store, job, platform)
    backend = get_backend(ref.platform)
    only = w.check_host(backend.describe(job, ref.region), host)

    def show(ln) -> None:
        if only is None or ln.host == only:
            typer.echo(log_line(ln, with_host=only is None))

    if follow:
        w.follow(backend, job, ref.region, interval=interval, on_line=show)
    else:
        for ln in w.read_all(backend, job, ref.region)[2]:
            show(ln)


@app.command("ls")
def list_jobs(
    limit: int = typer.Option(20, "--limit", min=1, help="Newest N jobs."),
    no_status: bool = typer.Option(False, "--no-status", help="Do not ask AWS for live status."),
) -> None:
    """List the jobs launched here, with their live status."""
    from trainctl import render
    from trainctl import watch as w
    from trainctl.render.watch import jobs_table

    with _store() as store:
        out = w.list_jobs(store, limit, live=not no_status)
    if OPTS.output == "json":
        render.print_json({"jobs": out})
    else:
        jobs_table(out)


@app.command()
def calibration(
    account: Optional[str] = typer.Option(None, "--account", help="Only the jobs this AWS account launched."),
) -> None:
    """Compare the model's throughput with what jobs measured.

    Per completed job: the prediction stored at launch, the measured rate and the error, then a summary."""
    from trainctl import render
    from trainctl.calibration_report import report
    from trainctl.render.calibration import calibration_table

    with _store() as store:
        doc = report(store, account)
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        calibration_table(doc)


@app.command()
def stop(job: str = typer.Argument(..., help="Job id."), platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB) -> None:
    """Stop a running job (it checkpoints first).

    SIGTERM: the entrypoint checkpoints; the model is still uploaded."""
    from trainctl import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import say

    with _store() as store:
        ref = w.locate(store, job, platform)
        get_backend(ref.platform).stop(job, ref.region)
        if ref.record:
            store.add_event(job, "stop", "requested by the user")
    say(f"stopping {job}; `trainctl watch {job}` follows it to the end")


@app.command()
def down(job: str = typer.Argument(..., help="Job id."), platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB) -> None:
    """Delete every resource tagged for a job (safe to repeat).

    Instances, fleet, launch template, placement group, security groups, role; S3 output stays."""
    from trainctl import render
    from trainctl import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import removed_lines

    with _store() as store:
        ref = w.locate(store, job, platform)
        removed = get_backend(ref.platform).cleanup(job, ref.region)
        if ref.record:
            store.add_event(job, "down", ", ".join(removed) or "nothing left")
    if OPTS.output == "json":
        render.print_json({"job_id": job, "platform": ref.platform, "region": ref.region, "removed": removed})
    else:
        removed_lines(job, ref.region, removed)


@app.command()
def doctor(
    spec: Optional[str] = typer.Argument(None, help="Job spec YAML: also check the quotas its layouts need."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2: check only what that "
                                                                     "platform needs (default: both)."),
    role: Optional[str] = typer.Option(None, "--role", help="SageMaker execution role name or ARN to check."),
    bucket: Optional[str] = typer.Option(None, "--bucket", help="Job bucket (default trainctl-ACCOUNT-REGION)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet id(s) as given to launch (default: the "
                                                               "subnet launch would choose for the plan's AZ)."),
) -> None:
    """Check that this account and region can launch the spec.

    One pass/fail line per check (credentials, quotas, role, route to S3, bucket, scores), with the fix."""
    from trainctl import doctor as d
    from trainctl.render import table_console

    width = table_console(100).width  # each check wrapped under its text; a `command` is never split
    on_check = None if OPTS.output == "json" else (lambda c: typer.echo(d.render([c], width).rsplit("\n", 1)[0]))
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
    split: bool = typer.Option(False, "--split", help="Print a JSON list of policies, each under the 6,144 "
                                                      "characters of a managed policy; attach them all."),
) -> None:
    """Print the least-privilege IAM policies trainctl needs."""
    import json as _json

    from trainctl import aws, iam, render
    from trainctl.awsinfra.naming import partition

    # ARNs carry the partition of the region asked (--region): aws, aws-cn or aws-us-gov
    doc = iam.in_partition(iam.documents(platform, role, execution_role), partition(aws.default_region()))
    size = iam.policy_size(doc["policy"])
    say = lambda message: render.stderr_console().print(message, markup=False, soft_wrap=True)  # noqa: E731
    if split:
        doc["policies"] = iam.split_policy(doc.pop("policy"))
        if OPTS.output != "json":
            typer.echo(_json.dumps(doc["policies"], indent=2))
            say(f"{len(doc['policies'])} policies of at most {iam.MANAGED_POLICY_LIMIT:,} characters "
                             "each (whitespace not counted): attach them all (jq '.[0]', '.[1]', ...)")
            return
    elif size > iam.MANAGED_POLICY_LIMIT:
        say(f"warning: this policy is {size:,} characters (whitespace not counted), over the "
                         f"{iam.MANAGED_POLICY_LIMIT:,} of a managed policy: --split prints "
                         f"{len(iam.split_policy(doc['policy']))} that fit, or put it inline on a role (10,240)")
    if OPTS.output == "json":
        render.print_json(doc)
    else:  # the policy itself, ready for `aws iam put-role-policy --policy-document file://...`
        typer.echo(_json.dumps(doc["policy"], indent=2))
        if "trust_policy" in doc:
            render.stderr_console().print("trust policy (--output json shows it with the policy): "
                                          + _json.dumps(doc["trust_policy"]), markup=False, soft_wrap=True)


# `trainctl sandbox`: the trainctl-sandbox distribution's commands, found through its entry point only
# when used (trainctl/plugins.py), so start-up reads no distribution metadata and imports no sandbox code.
app.add_typer(typer.Typer(), name=SANDBOX.name, cls=SandboxGroup, help=SANDBOX.help, no_args_is_help=True)


def main() -> None:
    command = typer.main.get_command(app)
    attach_global_options(command, GLOBAL_OPTIONS, apply_global_option)
    run(command, debug=lambda: OPTS.debug)


if __name__ == "__main__":
    main()
