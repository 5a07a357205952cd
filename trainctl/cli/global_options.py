"""How trainctl's command line runs, apart from its commands (cli.py): global options that work before and
after the subcommand, and every error as one line with an exit code (a traceback only with --debug)."""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable

import typer

from trainctl.errors import TrainctlError
from trainctl.text.safe import clean


def attach_global_options(group, names: tuple[str, ...], apply: Callable[[str, Any], None]) -> None:
    """Give every command the group's global options too, as in the AWS CLI and kubectl (`trainctl plan x.yaml
    -o json` as well as `trainctl -o json plan x.yaml`). Each command gets a copy of the group's declaration
    that only acts on a value given on the command line; it is parsed after the group's, so the later wins."""
    declared = [p for p in group.params if p.name in names]

    def given_later(ctx, param, value):
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name == "COMMANDLINE":
            apply(param.name, value)
        return value

    def attach(command, wanted: set[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is not None:  # a group: its commands get them
            for sub in subcommands.values():
                # the sandbox's own commands run the sandbox: --sandbox there would start a second one
                attach(sub, wanted - {"sandbox"} if sub.name == "sandbox" else wanted)
            return
        taken = {opt for p in command.params for opt in p.opts}
        for param in declared:
            if param.name in wanted and not taken & set(param.opts):
                later = copy.copy(param)
                later.expose_value, later.callback = False, given_later
                command.params.append(later)

    attach(group, set(names))


def _exit_now(code: int) -> None:
    """Exit at once after Ctrl-C. A normal exit joins every worker thread first (concurrent.futures registers that
    at exit), and `ls`, `plan --refresh` and `ls --all` ask AWS from pools of them: under latency each worker
    still waits out its call and its retries, so Ctrl-C took 19 to 29 s. What Ctrl-C must do (a launch's cleanup,
    the record of an interruption) is done before this point; the output is flushed, then the process ends."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run(command, debug: Callable[[], bool]) -> None:
    """Run the click command; turn every error into one line on stderr and an exit code (`debug()`: re-raise)."""
    # typer vendors click; its exception classes are reached through the names typer exports
    click_exception = typer.BadParameter.__mro__[2]  # ClickException (BadParameter < UsageError < it)
    try:
        # standalone_mode=False: click's usage errors come back here and become one line too
        code = command(standalone_mode=False)
        if isinstance(code, int) and code:
            if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into a silent Exit(130)
                sys.stderr.write("trainctl: interrupted\n")
                _exit_now(130)
            sys.exit(code)
    except typer.Abort as e:  # click turns Ctrl-C (and EOF at a prompt) into Abort
        interrupted = isinstance(e.__context__, KeyboardInterrupt)
        sys.stderr.write("trainctl: interrupted\n" if interrupted else "trainctl: aborted\n")
        if interrupted:
            _exit_now(130)
        sys.exit(1)
    except click_exception as e:
        if debug():
            raise
        sys.stderr.write(f"trainctl: error: {_usage_message(e)}\n")
        sys.exit(e.exit_code)
    except TrainctlError as e:
        if debug():
            raise
        sys.stderr.write(f"trainctl: error: {clean(e, one_line=True)}\n")  # always one line, no control sequences
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("trainctl: interrupted\n")
        _exit_now(130)
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug():
            raise
        if type(e).__name__ in ("NoCredentialsError", "PartialCredentialsError"):  # botocore's, by name: no import
            sys.stderr.write("trainctl: error: no AWS credentials found; configure them (`aws configure`, "
                             "AWS_PROFILE or --profile), or try it locally with `trainctl --sandbox ...`\n")
            sys.exit(2)
        from trainctl.aws.clients import error_summary, unreachable_endpoint

        if (down := unreachable_endpoint(e)) is not None:  # nothing to debug: the endpoint is not there
            sys.stderr.write(f"trainctl: error: {clean(down, one_line=True)}\n")
            sys.exit(1)
        sys.stderr.write(f"trainctl: error: {clean(error_summary(e), one_line=True)} (run with --debug for the "
                         "traceback)\n")
        sys.exit(1)


def _usage_message(e) -> str:
    """click's message in one line, with the command whose --help explains it."""
    message = " ".join(e.format_message().split()).rstrip(".")
    names, ctx = [], getattr(e, "ctx", None)
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return f"{message}; see `{' '.join(['trainctl', *reversed(names)])} --help`"
