"""The sandbox server: moto's server app behind the sandbox middleware, plus its extensions.

Structure (one server per process):
- `SandboxApp` (middleware.py) is the WSGI app; moto's DomainDispatcherApplication sits behind it.
- Extension modules add what moto lacks. Each may define `install(ctx)`, `seed(ctx)` (what a new account
  has, after the core seed and again after each reset), `reset(ctx)`, `shutdown(ctx)`, `stopping(ctx)` (before a
  kept account is saved), `kept_state(ctx)` / `restore_state(ctx, data)` (its part of a kept account), `ADMIN_ACTIONS`
  {name: fn(ctx, payload) -> dict}, `JSON_OPERATIONS` {(service, operation): fn(ctx, call, params) -> dict} and
  `PATHS` {path prefix: WSGI handler fn(ctx, environ, start_response)}. EC2 extensions patch moto's EC2Response
  (server/ec2_actions.py); JSON-protocol services moto lacks are answered by the middleware.
- Start-up is split for speed: importing moto's EC2 takes about a second (its data files), so the
  server listens as soon as the core is ready and a warm-up thread imports EC2, installs the EC2
  extensions and seeds EC2/SSM; only EC2-dependent calls wait for it.
- `trainctl_sandbox.sagemaker.jobs` (another module's job), when importable, is installed with the
  core extensions, reset after moto's reset and shut down at stop; its ADMIN_ACTIONS are routed.

`python -m trainctl_sandbox.server.main --port N --seed S --state-dir DIR` runs it in the foreground
and writes the state files of process.py once it listens.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from trainctl_sandbox.server import process, speedups
from trainctl_sandbox.server.context import AdminError, SandboxContext
from trainctl_sandbox.server.middleware import SandboxApp
from trainctl_sandbox.server.protocol import AwsCall, AwsError

# Installed before serving. sagemaker.jobs is optional (installed only when the module exists, so a stale
# path here would switch SageMaker jobs off silently: sandbox/tests/test_sandbox_layout.py checks them all).
CORE_EXTENSIONS = ("trainctl_sandbox.faults.switches", "trainctl_sandbox.market.pricing",
                   "trainctl_sandbox.market.quotas", "trainctl_sandbox.ec2.service_linked_roles",
                   "trainctl_sandbox.ec2.fleet_errors", "trainctl_sandbox.sagemaker.channels",
                   "trainctl_sandbox.sagemaker.training_plans")
OPTIONAL_EXTENSIONS = ("trainctl_sandbox.sagemaker.jobs",)
# Installed by the warm-up thread, after moto's EC2 is imported.
EC2_EXTENSIONS = ("trainctl_sandbox.ec2.placement_groups", "trainctl_sandbox.market.spot_scores",
                  "trainctl_sandbox.market.cost_explorer", "trainctl_sandbox.ec2.capacity_blocks",
                  "trainctl_sandbox.ec2.capacity_reservations",
                  "trainctl_sandbox.market.spot_prices", "trainctl_sandbox.ec2.launch", "trainctl_sandbox.ec2.fleet",
                  "trainctl_sandbox.ec2.interrupts", "trainctl_sandbox.ec2.nodes", "trainctl_sandbox.ec2.imds",
                  "trainctl_sandbox.ec2.lustre", "trainctl_sandbox.ec2.restart")
# Services whose moto backends do not import moto's EC2: their calls need not wait for the warm-up.
NO_EC2_NEEDED = frozenset({"s3", "iam", "sts", "sagemaker", "logs", "pricing", "service-quotas"})
WARMUP_TIMEOUT_S = 120.0


class SandboxServer:
    def __init__(self, port: int = 0, seed: int = 0, host: str = process.HOST, state_dir: Path | None = None,
                 fresh: bool = False):
        self.host, self.port, self.seed = host, port, seed
        # where the account is kept between runs (persist.py); None: not kept (a server of its own)
        self.state_dir, self.fresh = state_dir, fresh
        self.restored: dict | None = None
        self.ctx: SandboxContext | None = None
        self.modules: list[ModuleType] = []
        self.admin_actions: dict[str, Any] = {}
        self.json_operations: dict[tuple[str, str], Any] = {}
        self.paths: dict[str, Any] = {}
        self.warm = threading.Event()
        self.warm_error: BaseException | None = None
        self.reset_lock = threading.Lock()
        self.stopped = threading.Event()   # set once stop() has finished
        self._stop_lock = threading.Lock()
        self.started_at: datetime | None = None
        self._httpd = None
        self._serve_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SandboxServer:
        """Listen, install the core extensions, seed, serve; EC2 warms up in the background."""
        # The default AMIs cost ~0.5 s per region backend (again after every reset); the sandbox
        # seeds the images trainctl launches instead. Read when each EC2 backend is created.
        os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
        speedups.parse_botocore_files_once()
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self.started_at = datetime.now(timezone.utc)
        # Bind first: the context needs the real port (port 0 picks a free one).
        self._httpd = make_server(self.host, self.port, self._dispatch, threaded=True,
                                  request_handler=MotoRequestHandler)
        self.port = self._httpd.server_address[1]
        self.ctx = SandboxContext(endpoint_url=f"http://{self.host}:{self.port}",
                                  workdir=Path(tempfile.mkdtemp(prefix="trainctl-sandbox-")), seed=self.seed)
        self.app = SandboxApp(self.ctx, DomainDispatcherApplication(create_backend_app), self.admin,
                              self.json_operations, self._wait_ready, self.paths)
        from trainctl_sandbox.server import seed

        names = list(CORE_EXTENSIONS) + [n for n in OPTIONAL_EXTENSIONS if importlib.util.find_spec(n) is not None]
        self._install(names)
        seed.seed_core(self.ctx)
        if self.state_dir is not None:  # the last run's account in place of the new one (`up --fresh`: not)
            from trainctl_sandbox.server import persist

            if self.fresh:
                persist.forget(self.state_dir)
            self.restored = persist.restore(self.state_dir)
            self._restore_extensions(self.modules)
        self._seed_extensions()  # after the restore: each seed adds only what the account lacks
        self._serve_thread = threading.Thread(target=self._httpd.serve_forever, name="sandbox-http", daemon=True)
        self._serve_thread.start()
        threading.Thread(target=self._warm_up, name="sandbox-warmup", daemon=True).start()
        return self

    def _dispatch(self, environ: dict, start_response: Any) -> Any:
        return self.app(environ, start_response)

    def _install(self, names: list[str]) -> None:
        for name in names:
            module = importlib.import_module(name)
            if hasattr(module, "install"):
                module.install(self.ctx)
            for table, mine in ((self.admin_actions, getattr(module, "ADMIN_ACTIONS", {})),
                                (self.json_operations, getattr(module, "JSON_OPERATIONS", {})),
                                (self.paths, getattr(module, "PATHS", {}))):
                clash = sorted(map(str, set(table) & set(mine)))
                if clash:  # two extensions answering one name would silently shadow each other
                    raise RuntimeError(f"{name} redefines {', '.join(clash)}")
                table.update(mine)
            self.modules.append(module)

    def _seed_extensions(self) -> None:
        for module in self.modules:
            if hasattr(module, "seed"):
                module.seed(self.ctx)

    def _restore_extensions(self, modules: list[ModuleType]) -> None:
        if self.state_dir is None:
            return
        from trainctl_sandbox.server import persist

        kept = persist.extension_state(self.state_dir)
        for module in modules:
            if module.__name__ in kept and hasattr(module, "restore_state"):
                module.restore_state(self.ctx, kept[module.__name__])

    def _save(self) -> None:
        """The account as it is now, into the state folder: EC2 only once it has warmed up (else the kept one
        stays as it was saved, rather than an empty one: persist.save carries it over)."""
        from trainctl_sandbox.server import persist

        warm = self.warm.is_set() and self.warm_error is None
        for module in self.modules:  # e.g. the instances that run end with the server (ec2/restart.py)
            if hasattr(module, "stopping"):
                module.stopping(self.ctx)
        services = persist.SERVICES + (persist.EC2_SERVICES if warm else ())
        extensions = {m.__name__: m.kept_state(self.ctx) for m in self.modules if hasattr(m, "kept_state")}
        persist.save(self.state_dir, [m.saved_as for m in self.modules if hasattr(m, "saved_as")], services,
                     extensions)

    def _warm_up(self) -> None:
        try:
            import moto.ec2.responses  # noqa: F401 - the slow import, done off the serving path

            from trainctl_sandbox.server import seed

            if self.state_dir is not None:  # the kept account's EC2 (`up --fresh` removed it already)
                from trainctl_sandbox.server import persist

                persist.restore(self.state_dir, persist.EC2_SERVICES)
            first = len(self.modules)
            self._install(list(EC2_EXTENSIONS))
            self._restore_extensions(self.modules[first:])
            seed.seed_ec2(self.ctx)
        except BaseException as e:  # noqa: BLE001 - reported to every EC2 call and to `info`
            self.warm_error = e
            logging.getLogger(__name__).exception("sandbox warm-up failed")
        finally:
            self.warm.set()

    def _wait_ready(self, call: AwsCall | None = None, timeout: float = WARMUP_TIMEOUT_S) -> None:
        if call is not None and call.service in NO_EC2_NEEDED:
            return
        if not self.warm.wait(timeout):
            raise AwsError("ServiceUnavailable", "The sandbox is still starting; try again.", 503)
        if self.warm_error is not None:
            raise AwsError("ServiceUnavailable", f"The sandbox failed to start EC2: {self.warm_error}", 503)

    def stop(self) -> None:
        """Stop serving, then let every extension stop what it started (job processes).

        Safe to call from several threads: the first does the work, the others wait for it, so
        that nobody exits the process while job processes are still being stopped."""
        with self._stop_lock:
            if self.stopped.is_set():
                return
            if self._httpd is not None:
                self._httpd.shutdown()
                self._httpd.server_close()
            if self.state_dir is not None and self.ctx is not None:  # before the jobs end: they are kept as they are
                try:
                    self._save()
                except Exception:  # noqa: BLE001 - a stop must stop
                    logging.getLogger(__name__).exception("the sandbox's account was not saved")
            for module in reversed(self.modules):
                if hasattr(module, "shutdown"):
                    try:
                        module.shutdown(self.ctx)
                    except Exception:  # noqa: BLE001 - one failing must not keep the others' processes alive
                        logging.getLogger(__name__).exception("shutdown of %s failed", module.__name__)
            if self.ctx is not None:
                shutil.rmtree(self.ctx.workdir, ignore_errors=True)
            self.stopped.set()

    # ------------------------------------------------------------------ admin
    def admin(self, action: str, payload: dict) -> dict:
        builtin = {"reset": self.reset, "info": self.info, "wait_ready": self._admin_wait_ready,
                   "shutdown": self._admin_shutdown}
        if action in builtin:
            return builtin[action](payload)
        if action not in self.admin_actions:
            if not self.warm.is_set():  # an EC2 extension's action may not be installed yet
                self.warm.wait(WARMUP_TIMEOUT_S)
            if action not in self.admin_actions:
                raise AdminError(f"unknown admin action {action!r}; known: "
                                 f"{', '.join(sorted([*builtin, *self.admin_actions]))}", 404)
        return self.admin_actions[action](self.ctx, payload)

    def reset(self, payload: dict) -> dict:
        """moto's reset, then each extension's (SageMaker jobs included), then the seed again."""
        self._wait_ready()
        from moto.moto_api._internal.models import moto_api_backend

        from trainctl_sandbox.server import seed

        t0 = time.perf_counter()
        with self.reset_lock:
            if "seed" in payload:
                self.ctx.seed = int(payload["seed"])
            moto_api_backend.reset()
            for module in self.modules:
                if hasattr(module, "reset"):
                    module.reset(self.ctx)
            self.ctx.faults.clear()
            seed.seed_core(self.ctx)
            self._seed_extensions()
            seed.seed_ec2(self.ctx)
        return {"reset": True, "seed": self.ctx.seed, "seconds": round(time.perf_counter() - t0, 4)}

    def info(self, payload: dict) -> dict:
        return {"pid": os.getpid(), "endpoint_url": self.ctx.endpoint_url, "seed": self.ctx.seed,
                "regions": list(self.ctx.regions), "account_id": self.ctx.account_id,
                "started": self.started_at.isoformat() if self.started_at else None,
                "ec2_ready": self.warm.is_set() and self.warm_error is None,
                "warm_up_error": str(self.warm_error) if self.warm_error else None,
                "extensions": [m.__name__ for m in self.modules], "admin_actions": sorted(self.admin_actions),
                "faults": self.ctx.faults.snapshot(), "workdir": str(self.ctx.workdir)}

    def _admin_wait_ready(self, payload: dict) -> dict:
        self._wait_ready(timeout=float(payload.get("timeout", WARMUP_TIMEOUT_S)))
        return {"ec2_ready": True}

    def _admin_shutdown(self, payload: dict) -> dict:
        # Answer first; stopping from the request thread would wait for this very request.
        threading.Timer(0.05, self.stop).start()
        return {"stopping": True, "pid": os.getpid()}

    def state(self) -> dict:
        return {"port": self.port, "pid": os.getpid(), "started": self.started_at.isoformat(),
                "endpoint_url": self.ctx.endpoint_url, "seed": self.ctx.seed, "workdir": str(self.ctx.workdir),
                "restored": self.restored}


def _watch_parent(parent_pid: int, server: SandboxServer) -> None:
    while not server.stopped.is_set():
        if not process.is_alive(parent_pid):
            server.stop()
            return
        time.sleep(0.5)


def serve(port: int = 0, seed: int = 0, state_dir: Path | None = None, parent_pid: int | None = None,
          on_ready: Any = None, log_path: Path | None = None, fresh: bool = False) -> int:
    """Run a sandbox until SIGINT/SIGTERM/SIGHUP, an admin shutdown, or the parent's end; with a state folder, the
    account is kept there between runs (persist.py; `fresh`: start a new one)."""
    server = SandboxServer(port=port, seed=seed, state_dir=state_dir, fresh=fresh).start()
    if state_dir is not None:
        process.write_state(state_dir, {**server.state(), "log": str(log_path) if log_path else None})

    def on_signal(signum: int, frame: Any) -> None:
        threading.Thread(target=server.stop, name="sandbox-stop").start()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if parent_pid:
        threading.Thread(target=_watch_parent, args=(parent_pid, server), daemon=True).start()
    if on_ready is not None:
        on_ready(server)
    try:
        while not server.stopped.wait(0.5):
            pass
    finally:
        server.stop()
        if state_dir is not None:
            process.remove_state(state_dir, os.getpid())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainctl_sandbox.server.main", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the market model")
    parser.add_argument("--state-dir", type=Path, help="write sandbox.pid and state.json here once listening")
    parser.add_argument("--parent-pid", type=int, help="stop when this process ends")
    parser.add_argument("--fresh", action="store_true", help="a new account, not the one kept in --state-dir")
    args = parser.parse_args(argv)
    log_path = args.state_dir / process.LOG_FILE if args.state_dir else None  # where start_detached logs
    return serve(args.port, args.seed, args.state_dir, args.parent_pid, log_path=log_path, fresh=args.fresh)


if __name__ == "__main__":
    sys.exit(main())
