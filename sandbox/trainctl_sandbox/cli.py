"""`trainctl sandbox up|status|down` and the fault switches (interrupt, capacity, throttle, ...), and `ensure_sandbox_env()` behind the global `--sandbox` flag.

trainctl finds both through `plugin`, which the entry point `trainctl.plugins:sandbox` names
(sandbox/pyproject.toml); `python -m trainctl_sandbox.cli` runs the same commands on their own.

stdout carries only the `export ...` lines, so `eval "$(trainctl sandbox up --detach)"` works;
everything said to a person goes to stderr. Nothing heavy is imported at module level: moto is
imported only by the server itself (`up` in the foreground, or the detached server process).
"""
from __future__ import annotations

import sys
import time

import typer

from trainctl.cli.plugins import Plugin
from trainctl_sandbox.faults import commands as fault_commands
from trainctl_sandbox.server import process

# rich_markup_mode=None: plain help text, like the rest of trainctl's commands
app = typer.Typer(help="A local AWS for demos and tests: moto's server plus what moto lacks, and its fault "
                       "switches (Spot interruptions, capacity, throttling, latency, quotas).",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _print_env(endpoint_url: str) -> None:
    for line in process.env_lines(process.sandbox_env(endpoint_url)):
        typer.echo(line)


@app.command()
def up(port: int = typer.Option(process.DEFAULT_PORT, "--port", "-p", help="Port on 127.0.0.1 (0: any free port)."),
       detach: bool = typer.Option(False, "--detach", "-d", help="Run in the background; stop with `down`."),
       seed: int = typer.Option(0, "--seed", help="Seed of the market model (placement scores, Spot prices)."),
       fresh: bool = typer.Option(False, "--fresh", help="Start a new account instead of the one the last sandbox "
                                                         "kept (buckets, IAM, jobs).")) -> None:
    """Start the sandbox and print its environment.

    It keeps the account of the last sandbox (buckets, IAM, jobs) unless --fresh; the first one is seeded as a
    new account. The printed environment points AWS tools (and trainctl) at it."""
    directory = process.state_dir()
    existing = process.running(directory)
    if existing:
        _say(f"a sandbox is already running at {existing['endpoint_url']} (pid {existing['pid']}); "
             "stop it with `trainctl sandbox down`")
        _print_env(existing["endpoint_url"])
        return
    if port and not process.port_free(port):
        _say(f"port {port} on {process.HOST} is in use; choose another with --port (0 picks a free one)")
        raise typer.Exit(2)
    if detach:
        t0 = time.perf_counter()
        try:
            state = process.start_detached(port=port, seed=seed, directory=directory, fresh=fresh)
        except process.SandboxProcessError as e:
            _say(str(e))
            raise typer.Exit(1) from None
        _say(f"sandbox running at {state['endpoint_url']} (pid {state['pid']}, up in "
             f"{time.perf_counter() - t0:.1f}s, log {state.get('log')}); {_account(state.get('restored'))}; "
             "stop it with `trainctl sandbox down`")
        _print_env(state["endpoint_url"])
        return
    from trainctl_sandbox.server.main import serve

    def ready(server) -> None:
        _print_env(server.ctx.endpoint_url)
        sys.stdout.flush()
        _say(f"sandbox serving at {server.ctx.endpoint_url}; {_account(server.restored)}; Ctrl-C stops it")

    serve(port=port, seed=seed, state_dir=directory, on_ready=ready, fresh=fresh)


def _account(restored: dict | None) -> str:
    """Which account this is: the one the last sandbox kept, or a new one."""
    if restored is None:
        return "a new account"
    return "the account the last sandbox kept (" + ", ".join(f"{n} {what}" for what, n in restored.items()) + \
        "; `sandbox up --fresh` starts a new one)"


@app.command()
def status() -> None:
    """Say whether a sandbox runs, and where.

    Prints its environment lines too."""
    state = process.running()
    if not state:
        _say("no sandbox running (start one with `trainctl sandbox up --detach`)")
        raise typer.Exit(1)
    _say(f"sandbox running at {state['endpoint_url']} (pid {state['pid']}, started {state['started']}, "
         f"seed {state['seed']})")
    _print_env(state["endpoint_url"])


@app.command()
def down() -> None:
    """Stop the sandbox and every job process it started."""
    pid = process.stop()
    _say("no sandbox running" if pid is None else f"sandbox stopped (pid {pid})")


# The fault switches: `sandbox interrupt JOB`, `sandbox capacity TYPE AZ off`, ... (faults/commands.py)
fault_commands.add_to(app)


def ensure_sandbox_env() -> dict[str, str]:
    """The environment of the running sandbox, starting a detached one first if none runs."""
    directory = process.state_dir()
    state = process.running(directory)
    recorded = process.read_state(directory)
    if state is None and recorded and process.is_alive(int(recorded["pid"])):
        # Its process lives but did not answer within 2 s (busy with a training job on a small machine): use it.
        # A second sandbox on another port would hide the first one's jobs, which are kept per endpoint.
        _say(f"the sandbox at {recorded['endpoint_url']} (pid {recorded['pid']}) is slow to answer; using it")
        state = recorded
    if state is None:
        port = process.DEFAULT_PORT if process.port_free(process.DEFAULT_PORT) else 0
        state = process.start_detached(port=port, directory=directory)
        _say(f"started a sandbox at {state['endpoint_url']} (pid {state['pid']}); "
             "stop it with `trainctl sandbox down`")
    return process.sandbox_env(state["endpoint_url"])


plugin = Plugin(app=app, environment=ensure_sandbox_env)

if __name__ == "__main__":
    app()
