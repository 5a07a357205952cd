"""Runs one sandbox SageMaker training job for real: the lifecycle thread behind sagemaker_jobs.py.

A job here is what SageMaker does with a script-mode PyTorch job, on this machine:
- Starting: a simulated wait for instances (scaled by `Settings.time_scale`); capacity faults
  (`ctx.faults.no_capacity`) hold a Spot job here until MaxWait, and fail an On-Demand one.
- Downloading: fetch `sagemaker_submit_directory` from the sandbox's S3, extract it per host
  ("algo-1".."algo-N", each an /opt/ml tree under the job's folder), restore CheckpointConfig.S3Uri
  into every host's checkpoint folder, copy input channels.
- Training: one process per host (torchrun when `sagemaker_torch_distributed_enabled`, else
  python, like the SageMaker PyTorch container), each in its own session, its stdout and stderr
  sent line by line to CloudWatch Logs; checkpoints synced to S3 while it runs.
- Interrupted/Restarting (managed Spot, on request): SIGTERM, wait for the checkpoint, sync, a
  simulated wait for capacity, then a fresh attempt (fresh host folders, new log streams).
- Uploading/Completed, Failed, Stopping/Stopped, MaxRuntimeExceeded, MaxWaitTimeExceeded.

The state that DescribeTrainingJob returns lives in `JobState`; moto-facing code is elsewhere.
Every process a job starts carries MARKER_ENV in its environment, so the job can find and kill
all of them, including ranks that torchrun starts in sessions of their own (killing torchrun's
session alone leaves them running).
"""
from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil
from moto.core.utils import utcnow

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
MARKER_ENV = "TRAINCTL_SANDBOX_JOB"
NPROC_ENV = "TRAINCTL_SANDBOX_NPROC_PER_NODE"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
MAX_EVENT_BYTES = 256 * 1024 - 26  # CloudWatch's limit on one event (message bytes + 26)
STEP_RE = re.compile(r"\btrainctl step=(\d+)")
# What the SageMaker toolkit treats as its own hyperparameters (not passed to the script's SM_HPS).
TOOLKIT_HYPERPARAMETERS = {
    "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_container_log_level", "sagemaker_job_name", "sagemaker_region", "sagemaker_s3_output",
}
# A line that names an error, e.g. "ValueError: boom" (torchrun prefixes a rank's lines with
# "[rank1]: "); torchrun's own summary lines are not the cause.
_RANK_PREFIX_RE = re.compile(r"^\[(?:default)?rank\d+\]:\s?")
_ERROR_LINE_RE = re.compile(r"^\s*([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit)\b")
_NOT_CAUSE_RE = re.compile(r"ChildFailedError|torch\.distributed\.elastic|^\s*raise\b")
_DECORATION_RE = re.compile(r"^[\s=\-*#_]*$")


@dataclass
class Settings:
    """Simulated durations in sandbox seconds; real seconds = value x time_scale.

    Defaults are short enough for a demo; tests use a smaller time_scale. User-given limits
    (MaxRuntimeInSeconds, MaxWaitTimeInSeconds, after_seconds) are never scaled.
    """

    time_scale: float = 1.0
    starting_s: float = 2.0          # instances launching (AWS: minutes)
    restart_wait_s: float = 4.0      # capacity wait after a Spot interruption
    stop_grace_s: float = 30.0       # SIGTERM -> SIGKILL (AWS: 120 s)
    sync_interval_s: float = 2.0     # checkpoint folder -> S3
    capacity_retry_s: float = 4.0    # how long an On-Demand job retries before CapacityError

    def real(self, name: str) -> float:
        return getattr(self, name) * self.time_scale


class Aborted(Exception):
    """The job was forgotten (reset/shutdown): stop at once, touch no AWS state."""


# ----------------------------------------------------------------------------- process helpers

_ENDED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def marked_pids(prefix: str) -> list[int]:
    """Live (non-zombie) processes whose MARKER_ENV value starts with `prefix`."""
    me = os.getpid()
    found = []
    # environ is None where it cannot be read (another user's process); a zombie's is empty
    for proc in psutil.process_iter(["environ", "status"]):
        env = proc.info["environ"] or {}
        if (proc.pid != me and env.get(MARKER_ENV, "").startswith(prefix)
                and proc.info["status"] not in (None, *_ENDED)):
            found.append(proc.pid)
    return sorted(found)


def _descendants(root: int) -> list[int]:
    """root's live descendants (catches children that dropped MARKER_ENV)."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [child.pid for child in children]


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_marked(prefix: str, rounds: int = 20) -> None:
    """SIGKILL every marked process until none is left (a dying torchrun may still fork)."""
    for _ in range(rounds):
        pids = marked_pids(prefix)
        if not pids:
            return
        signal_pids(pids, signal.SIGKILL)
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- moto adapters

def parse_s3_uri(uri: str) -> tuple[str, str]:
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key


class MotoS3:
    """The sandbox's S3, through moto's in-process backend (same data the HTTP API serves)."""

    def __init__(self, account_id: str, region: str):
        from moto.s3.models import s3_backends
        from moto.utilities.utils import get_partition

        self.backend = s3_backends[account_id][get_partition(region)]

    def get(self, bucket: str, key: str) -> bytes:
        obj = self.backend.get_object(bucket, key)  # raises MissingBucket for an unknown bucket
        if obj is None or not hasattr(obj, "value"):
            raise FileNotFoundError(f"s3://{bucket}/{key}: NoSuchKey")
        return obj.value

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.backend.put_object(bucket, key, data)

    def keys(self, bucket: str, prefix: str) -> list[str]:
        b = self.backend.get_bucket(bucket)
        return sorted(k for k in list(b.keys.keys()) if k.startswith(prefix))


class MotoLogs:
    """CloudWatch Logs through moto's in-process backend, so FilterLogEvents/GetLogEvents see them."""

    lock = threading.Lock()  # moto's logs backend is not thread-safe; one writer at a time

    def __init__(self, account_id: str, region: str, allowed: Callable[[], bool]):
        from moto.logs.models import logs_backends

        self.backend = logs_backends[account_id][region]
        self.allowed = allowed  # False once the job is forgotten: then nothing is written
        self._last_ts: dict[str, int] = {}

    def create_stream(self, stream: str) -> None:
        with self.lock:
            if not self.allowed():
                return
            if LOG_GROUP not in self.backend.groups:
                self.backend.create_log_group(LOG_GROUP, tags={})
            if stream not in self.backend.groups[LOG_GROUP].streams:
                self.backend.create_log_stream(LOG_GROUP, stream)

    def put(self, stream: str, message: str, when: float) -> None:
        with self.lock:
            if not self.allowed() or LOG_GROUP not in self.backend.groups:
                return
            # one stream's events must not go back in time (stdout and stderr race)
            ts = max(int(when * 1000), self._last_ts.get(stream, 0))
            self._last_ts[stream] = ts
            self.backend.put_log_events(LOG_GROUP, stream, [{"timestamp": ts, "message": message}])


# ----------------------------------------------------------------------------- job state

class JobState:
    """Status, transitions and times of one job; every field DescribeTrainingJob derives from."""

    def __init__(self, spot: bool):
        self.lock = threading.RLock()
        self.spot = spot
        now = utcnow()
        self.creation_time = now
        self.created_wall = time.time()
        self.last_modified_time = now
        self.status = "InProgress"
        self.secondary = "Starting"
        self.transitions: list[dict[str, Any]] = [
            {"Status": "Starting", "StartTime": now, "StatusMessage": "Launching requested ML instances"}
        ]
        self.failure_reason: str | None = None
        self.training_start_time = None
        self.training_end_time = None
        self._start_wall: float | None = None
        self._end_wall: float | None = None
        # Spot: instance time not billed (from reclaim after an interruption to the next
        # attempt's instances being ready); closed seconds plus the open segment's start.
        self._unbilled_s = 0.0
        self._unbilled_since: float | None = None
        self.interruptions = 0

    @property
    def ended(self) -> bool:
        with self.lock:
            return self.status in ("Completed", "Failed", "Stopped")

    def transition(self, status: str, message: str) -> None:
        with self.lock:
            now = utcnow()
            last = self.transitions[-1] if self.transitions else None
            if last is not None and last["Status"] == status and "EndTime" not in last:
                last["StatusMessage"] = message  # same secondary status, newer detail (as AWS does)
            else:
                if last is not None and "EndTime" not in last:
                    last["EndTime"] = now
                self.transitions.append({"Status": status, "StartTime": now, "StatusMessage": message})
            self.secondary = status
            self.last_modified_time = now

    def set_status(self, status: str) -> None:
        with self.lock:
            self.status = status
            self.last_modified_time = utcnow()

    def instances_ready(self) -> None:
        """An attempt's instances are up: billing (re)starts; the first time, training starts."""
        with self.lock:
            now = time.time()
            if self._start_wall is None:
                self._start_wall = now
                self.training_start_time = utcnow()
            if self._unbilled_since is not None:
                self._unbilled_s += now - self._unbilled_since
                self._unbilled_since = None

    def instances_reclaimed(self) -> None:
        with self.lock:
            self.interruptions += 1
            self._unbilled_since = time.time()

    def running_seconds(self) -> float:
        """Billed time so far: what MaxRuntimeInSeconds limits."""
        with self.lock:
            if self._start_wall is None:
                return 0.0
            end = self._end_wall or time.time()
            open_gap = (end - self._unbilled_since) if self._unbilled_since is not None else 0.0
            return end - self._start_wall - self._unbilled_s - open_gap

    def finish(self, status: str, secondary: str, message: str, failure_reason: str | None = None) -> None:
        with self.lock:
            if self.ended:
                return
            if self._unbilled_since is not None:  # ended while waiting for capacity: not billed
                self._unbilled_s += time.time() - self._unbilled_since
                self._unbilled_since = None
            self.transition(secondary, message)
            self.transitions[-1]["EndTime"] = self.transitions[-1]["StartTime"]
            if failure_reason:
                self.failure_reason = failure_reason[:1024]
            if self._start_wall is not None:
                self._end_wall = time.time()
                self.training_end_time = utcnow()
            self.status = status
            self.last_modified_time = utcnow()

    def times(self) -> dict[str, int]:
        """TrainingTimeInSeconds/BillableTimeInSeconds, once the job has ended (as AWS reports them)."""
        with self.lock:
            if self._start_wall is None or self._end_wall is None:
                return {}
            training = self._end_wall - self._start_wall
            # floor both: a >= 1 s unbilled gap always shows as Billable < Training; AWS bills >= 1 s
            training_s = max(int(training), 1)
            billable_s = min(max(int(training - self._unbilled_s), 1), training_s) if self.spot else training_s
            return {"TrainingTimeInSeconds": training_s, "BillableTimeInSeconds": billable_s}


# ----------------------------------------------------------------------------- hosts

@dataclass
class Host:
    index: int                      # 1-based: algo-1 .. algo-N
    base: Path                      # this host's /opt/ml
    proc: subprocess.Popen | None = None
    stream: str = ""
    readers: tuple[threading.Thread, ...] = ()
    last_error: str = ""
    last_stderr: str = ""
    command: str = ""
    exited_at: float | None = None

    @property
    def name(self) -> str:
        return f"algo-{self.index}"

    @property
    def code(self) -> Path:
        return self.base / "code"

    @property
    def model(self) -> Path:
        return self.base / "model"

    @property
    def checkpoints(self) -> Path:
        return self.base / "checkpoints"

    @property
    def output_data(self) -> Path:
        return self.base / "output" / "data"


def decode_hyperparameter(value: str) -> Any:
    """SageMaker's toolkit JSON-decodes each value and keeps the raw string when that fails."""
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def to_cmd_args(hps: dict[str, Any]) -> list[str]:
    """The toolkit's mapping.to_cmd_args: sorted keys, `--key value` (`-k` for one letter)."""
    args: list[str] = []
    for key in sorted(hps):
        value = hps[key]
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        args += [f"--{key}" if len(key) > 1 else f"-{key}", "" if value is None else str(value)]
    return args


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _tar_folders(folders: list[Path]) -> bytes:
    """One tar.gz of several folders' contents; on a name clash the first folder wins."""
    buf = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder).as_posix()
                if rel in seen or not (path.is_file() or path.is_dir()):
                    continue
                seen.add(rel)
                tar.add(path, arcname=rel, recursive=False)
    return buf.getvalue()


# ----------------------------------------------------------------------------- the runner

class JobRunner(threading.Thread):
    """Drives one job from Starting to a terminal status. Control methods are thread-safe."""

    def __init__(self, *, name: str, arn: str, account_id: str, region: str, request: dict[str, Any],
                 state: JobState, ctx: Any, settings: Settings, marker: str,
                 registered: Callable[[], bool], availability_zones: list[str | None]):
        super().__init__(name=f"sagemaker-job-{name}", daemon=True)
        self.job_name = name
        self.arn = arn
        self.region = region
        self.request = request
        self.state = state
        self.ctx = ctx
        self.settings = settings
        self.marker = marker
        self.registered = registered
        self.azs = availability_zones  # the job's subnets' AZs, or [None] outside a VPC
        self.job_dir = Path(ctx.workdir) / "sagemaker" / name
        if (account_id, region) != (ctx.account_id, ctx.regions[0]):  # same name elsewhere: no clash
            self.job_dir = Path(ctx.workdir) / "sagemaker" / account_id / region / name
        self.s3 = MotoS3(account_id, region)
        self.logs = MotoLogs(account_id, region, allowed=lambda: not self._abort.is_set() and registered())
        resource = request.get("ResourceConfig") or {}
        self.instance_type = resource.get("InstanceType", "")
        self.instance_count = int(resource.get("InstanceCount", 1))
        stopping = request.get("StoppingCondition") or {}
        self.max_runtime = stopping.get("MaxRuntimeInSeconds")
        self.max_wait = stopping.get("MaxWaitTimeInSeconds") if state.spot else None
        ckpt = request.get("CheckpointConfig") or {}
        self.checkpoint_uri = ckpt.get("S3Uri")
        self.checkpoint_local = (ckpt.get("LocalPath") or DEFAULT_CHECKPOINT_PATH).rstrip("/")
        self._wake = threading.Event()
        self._abort = threading.Event()
        self._stop_requested = False
        self._interrupt: dict[str, Any] | None = None  # {"at": wall time | None, "at_step": int | None}
        self._interrupt_due = False
        self._hosts: list[Host] = []
        self._synced: dict[tuple[int, str], tuple[int, int]] = {}
        self._epoch = 0
        self._failure = "InternalServerError"
        self.sync_error: str | None = None
        self.attempts = 0

    # ---- control (called from request threads)

    def request_stop(self) -> None:
        with self.state.lock:
            self._stop_requested = True
            if not self.state.ended:
                self.state.set_status("Stopping")
                self.state.transition("Stopping", "Stopping the training job")
        self._wake.set()

    def request_interrupt(self, after_seconds: float | None, at_step: int | None) -> dict[str, Any]:
        with self.state.lock:
            at = time.time() + float(after_seconds) if after_seconds is not None else None
            if at is None and at_step is None:
                at = time.time()
            self._interrupt = {"at": at, "at_step": int(at_step) if at_step is not None else None}
            self._interrupt_due = False
        self._wake.set()
        return {"name": self.job_name, "after_seconds": after_seconds, "at_step": at_step, "scheduled": True}

    def abort(self) -> None:
        """Forget the job: kill its processes now (synchronously) and end the thread."""
        self._abort.set()
        self._wake.set()
        kill_marked(self.marker)

    def pids(self) -> list[int]:
        return marked_pids(self.marker)

    def info(self) -> dict[str, Any]:
        return {"name": self.job_name, "workdir": str(self.job_dir), "attempts": self.attempts,
                "interruptions": self.state.interruptions,
                "hosts": [str(h.base) for h in self._hosts], "checkpoint_sync_error": self.sync_error,
                "log_streams": [h.stream for h in self._hosts if h.stream]}

    # ---- the lifecycle

    def run(self) -> None:
        try:
            self._lifecycle()
        except Aborted:
            kill_marked(self.marker)
            self._reap()
        except Exception as exc:  # a sandbox bug must end the job visibly, not hang it
            kill_marked(self.marker)
            self._reap()
            if not self._abort.is_set():
                self.state.finish("Failed", "Failed", "Training job failed",
                                  f"InternalServerError: sandbox error: {exc!r}")

    def _reap(self) -> None:
        # killed host processes are our children: wait for them so no zombie stays behind
        for host in self._hosts:
            if host.proc is not None:
                try:
                    host.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    def _check_abort(self) -> None:
        if self._abort.is_set() or not self.registered():
            raise Aborted()

    def _max_wait_exceeded(self) -> bool:
        return self.max_wait is not None and time.time() - self.state.created_wall >= self.max_wait

    def _sleep(self, seconds: float) -> str | None:
        """Wait, waking for control; returns "stopped"/"max_wait" when the wait must end the job."""
        deadline = time.time() + seconds
        while True:
            self._check_abort()
            if self._stop_requested:
                return "stopped"
            if self._max_wait_exceeded():
                return "max_wait"
            left = deadline - time.time()
            if left <= 0:
                return None
            self._wake.wait(min(left, 0.1))
            self._wake.clear()

    def _lifecycle(self) -> None:
        shutil.rmtree(self.job_dir, ignore_errors=True)
        self.job_dir.mkdir(parents=True, exist_ok=True)
        while True:
            ended = self._provision(restart=self.attempts > 0)
            if ended:
                return self._end(ended)
            self.attempts += 1
            self.state.instances_ready()
            ended = self._download()
            if ended:
                return self._end(ended)
            outcome = self._train()
            if outcome != "interrupted":
                return self._end(outcome)

    def _provision(self, restart: bool) -> str | None:
        if restart:
            self.state.transition("Restarting", "Restarting the training job after a Spot interruption")
            # at least 1 s however small the time scale: the unbilled wait must show in the whole
            # seconds AWS reports (Billable < Training after an interruption)
            ended = self._sleep(max(1.0, self.settings.real("restart_wait_s")))
        else:
            ended = self._sleep(self.settings.real("starting_s"))
        if ended:
            return ended
        retry_until = time.time() + self.settings.real("capacity_retry_s")
        while not self._take_capacity():
            if not self.state.spot and time.time() >= retry_until:
                self._failure = (
                    "CapacityError: Unable to provision requested ML compute capacity "
                    f"(InsufficientInstanceCapacity: {self.instance_type}"
                    f"{' in ' + ', '.join(a for a in self.azs if a) if any(self.azs) else ''}). "
                    "Please retry using a different ML instance type.")
                return "failed"
            status = "Restarting" if restart else "Starting"
            self.state.transition(status, "Insufficient capacity error from EC2 while launching instances, retrying!")
            ended = self._sleep(0.2)
            if ended:
                return ended
        if not restart:
            self.state.transition("Starting", "Preparing the instances for training")
        return None

    def _take_capacity(self) -> bool:
        """All InstanceCount instances in one of the job's subnets' AZs (SageMaker needs the whole
        cluster); a limited pool (FaultSwitches.capacity_limit) is drawn down by what launches."""
        faults = self.ctx.faults
        for az in self.azs:
            if faults.no_capacity(self.instance_type, az):
                continue
            take = getattr(faults, "take_capacity", None)
            if take is None or take(self.instance_type, az, self.instance_count, self.instance_count):
                return True
        return False

    def _download(self) -> str | None:
        self.state.transition("Downloading", "Downloading input data")
        hps_raw = self.request.get("HyperParameters") or {}
        program = decode_hyperparameter(hps_raw.get("sagemaker_program", "null"))
        submit = decode_hyperparameter(hps_raw.get("sagemaker_submit_directory", "null"))
        if not program or not submit:
            self._failure = ("AlgorithmError: the sandbox runs script-mode jobs only: HyperParameters need "
                             "sagemaker_program and sagemaker_submit_directory (an s3:// URI of sourcedir.tar.gz)")
            return "failed"
        attempt_dir = self.job_dir / f"attempt-{self.attempts}"
        hosts = [Host(index=i, base=attempt_dir / f"algo-{i}") for i in range(1, self.instance_count + 1)]
        self._hosts = hosts
        try:
            tarball = self.s3.get(*parse_s3_uri(str(submit)))
        except Exception as exc:
            self._failure = f"AlgorithmError: could not download sagemaker_submit_directory {submit}: {_s3_error(exc)}"
            return "failed"
        restored = self._checkpoint_objects()
        channels = self._channel_objects()
        if isinstance(channels, str):
            self._failure = channels
            return "failed"
        for host in hosts:
            for sub in ("code", "model", "checkpoints", "output/data", "output/intermediate", "input/config"):
                (host.base / sub).mkdir(parents=True, exist_ok=True)
            try:
                with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:*") as tar:
                    tar.extractall(host.code, filter="data")
            except (tarfile.TarError, OSError) as exc:
                self._failure = f"AlgorithmError: could not extract {submit}: {exc}"
                return "failed"
            for rel, data in restored:
                _write_file(host.checkpoints / rel, data)
            for channel, files in channels.items():
                (host.base / "input" / "data" / channel).mkdir(parents=True, exist_ok=True)
                for rel, data in files:
                    _write_file(host.base / "input" / "data" / channel / rel, data)
            self._write_config(host, hosts)
        if not (hosts[0].code / str(program)).is_file():
            self._failure = f"AlgorithmError: entry point {program} not found in {submit}"
            return "failed"
        # restored files count as already synced: only new or changed ones go back up
        for host in hosts:
            for rel, _ in restored:
                st = (host.checkpoints / rel).stat()
                self._synced[(host.index, rel)] = (st.st_size, st.st_mtime_ns)
        return None

    def _checkpoint_objects(self) -> list[tuple[str, bytes]]:
        if not self.checkpoint_uri:
            return []
        bucket, prefix = parse_s3_uri(self.checkpoint_uri)
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        try:
            keys = self.s3.keys(bucket, prefix)
        except Exception:  # no bucket yet: nothing to restore (the first upload will say so)
            return []
        return [(k[len(prefix):], self.s3.get(bucket, k)) for k in keys if k[len(prefix):]]

    def _channel_objects(self) -> dict[str, list[tuple[str, bytes]]] | str:
        out: dict[str, list[tuple[str, bytes]]] = {}
        for channel in self.request.get("InputDataConfig") or []:
            name = channel["ChannelName"]
            src = (channel.get("DataSource") or {}).get("S3DataSource") or {}
            uri = src.get("S3Uri")
            out[name] = []
            if not uri:
                continue
            bucket, prefix = parse_s3_uri(uri)
            try:
                keys = self.s3.keys(bucket, prefix)
            except Exception as exc:
                return f"ClientError: Data download failed: could not list {uri}: {_s3_error(exc)}"
            if not keys:
                return f"ClientError: Data download failed: no objects found under {uri}"
            for key in keys:
                # files land relative to the prefix; a prefix that is one object keeps its base name
                rel = key[len(prefix):].lstrip("/") or key.rsplit("/", 1)[-1]
                if not rel.endswith("/"):
                    out[name].append((rel, self.s3.get(bucket, key)))
        return out

    # ---- the container contract

    def _write_config(self, host: Host, hosts: list[Host]) -> None:
        cfg = host.base / "input" / "config"
        (cfg / "hyperparameters.json").write_text(json.dumps(self.request.get("HyperParameters") or {}))
        (cfg / "resourceconfig.json").write_text(json.dumps(self._resource_config(host, hosts)))
        (cfg / "inputdataconfig.json").write_text(json.dumps(self._input_data_config()))
        if self.checkpoint_uri:
            (cfg / "checkpointconfig.json").write_text(
                json.dumps({"LocalPath": self.checkpoint_local, "S3Uri": self.checkpoint_uri}))

    def _resource_config(self, host: Host, hosts: list[Host]) -> dict[str, Any]:
        names = [h.name for h in hosts]
        return {"current_host": host.name, "current_instance_type": self.instance_type,
                "current_group_name": "homogeneousCluster", "hosts": names,
                "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                     "instance_type": self.instance_type, "hosts": names}],
                "network_interface_name": "eth0"}

    def _input_data_config(self) -> dict[str, Any]:
        out = {}
        for channel in self.request.get("InputDataConfig") or []:
            src = (channel.get("DataSource") or {}).get("S3DataSource") or {}
            out[channel["ChannelName"]] = {
                "TrainingInputMode": channel.get("InputMode") or
                (self.request.get("AlgorithmSpecification") or {}).get("TrainingInputMode", "File"),
                "S3DistributionType": src.get("S3DataDistributionType", "FullyReplicated"),
                "RecordWrapperType": channel.get("RecordWrapperType", "None"),
                **({"ContentType": channel["ContentType"]} if channel.get("ContentType") else {}),
            }
        return out

    def _map_path(self, value: str, host: Host) -> str:
        """/opt/ml paths of the container -> this host's folder (the checkpoint path first)."""
        if value == self.checkpoint_local or value.startswith(self.checkpoint_local + "/"):
            return str(host.checkpoints) + value[len(self.checkpoint_local):]
        if value == "/opt/ml" or value.startswith("/opt/ml/"):
            return str(host.base) + value[len("/opt/ml"):]
        return value

    def _command(self, host: Host, hosts: list[Host], port: int) -> tuple[list[str], dict[str, str]]:
        hps_raw = self.request.get("HyperParameters") or {}
        decoded = {k: decode_hyperparameter(v) for k, v in hps_raw.items()}
        sm_params = {k: v for k, v in decoded.items() if k.startswith("sagemaker_")}
        user_hps = {k: v for k, v in decoded.items() if not k.startswith("sagemaker_")}
        framework_params = {k: v for k, v in sm_params.items() if k not in TOOLKIT_HYPERPARAMETERS}
        program = str(decoded["sagemaker_program"])
        user_args = to_cmd_args(user_hps)
        args = [self._map_path(a, host) for a in user_args]
        # /opt/ml/checkpoints does not exist here: hand the script its host folder, unless the
        # user chose a checkpoint path (mapped above when it is the container's one).
        if not any(k in user_hps for k in ("checkpoint-dir", "checkpoint_dir")):
            args += ["--checkpoint-dir", str(host.checkpoints)]
        distributed = decoded.get("sagemaker_torch_distributed_enabled") in (True, "true", "True")
        user_env = self.request.get("Environment") or {}
        nproc = int(user_env.get(NPROC_ENV) or os.environ.get(NPROC_ENV) or 1)
        if distributed:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(hosts)),
                   "--node_rank", str(host.index - 1), "--nproc_per_node", str(nproc),
                   "--master_addr", "127.0.0.1", "--master_port", str(port), program, *args]
            shown = ["torchrun", *cmd[3:]]
        elif program.endswith(".py"):
            cmd = [sys.executable, program, *args]
            shown = ["python", *cmd[1:]]
        else:
            cmd = ["/bin/sh", program, *args]
            shown = cmd
        host.command = shlex.join(shown)

        base = host.base
        names = [h.name for h in hosts]
        channels = {c["ChannelName"]: str(base / "input" / "data" / c["ChannelName"])
                    for c in self.request.get("InputDataConfig") or []}
        resource_config = self._resource_config(host, hosts)
        input_data_config = self._input_data_config()
        training_env = {
            "additional_framework_parameters": framework_params, "channel_input_dirs": channels,
            "current_host": host.name, "current_instance_group": "homogeneousCluster",
            "current_instance_group_hosts": names, "current_instance_type": self.instance_type,
            "distribution_hosts": names if distributed else [], "distribution_instance_groups":
            ["homogeneousCluster"] if distributed else [], "framework_module":
            "sagemaker_pytorch_container.training:main", "hosts": names, "hyperparameters": user_hps,
            "input_config_dir": str(base / "input" / "config"), "input_data_config": input_data_config,
            "input_dir": str(base / "input"), "instance_groups": ["homogeneousCluster"],
            "instance_groups_dict": {"homogeneousCluster": resource_config["instance_groups"][0]},
            "is_hetero": False, "is_master": host.index == 1, "is_modelparallel_enabled": None,
            "job_name": self.job_name, "log_level": int(sm_params.get("sagemaker_container_log_level", 20)),
            "master_hostname": "algo-1", "model_dir": str(host.model),
            "module_dir": str(decoded.get("sagemaker_submit_directory")),
            "module_name": program[:-3] if program.endswith(".py") else program,
            "network_interface_name": "eth0", "num_cpus": os.cpu_count() or 1, "num_gpus": 0,
            "num_neurons": 0, "output_data_dir": str(host.output_data), "output_dir": str(base / "output"),
            "output_intermediate_dir": str(base / "output" / "intermediate"),
            "resource_config": resource_config, "user_entry_point": program,
        }
        sm = {
            "hosts": names, "network_interface_name": "eth0", "hps": user_hps, "user_entry_point": program,
            "framework_params": framework_params, "resource_config": resource_config,
            "input_data_config": input_data_config, "output_data_dir": str(host.output_data),
            "channels": sorted(channels), "current_host": host.name,
            "current_instance_type": self.instance_type, "current_instance_group": "homogeneousCluster",
            "current_instance_group_hosts": names, "instance_groups": ["homogeneousCluster"],
            "instance_groups_dict": training_env["instance_groups_dict"],
            "distribution_instance_groups": training_env["distribution_instance_groups"],
            "is_hetero": False, "module_name": training_env["module_name"],
            "log_level": training_env["log_level"], "framework_module": training_env["framework_module"],
            "input_dir": str(base / "input"), "input_config_dir": str(base / "input" / "config"),
            "output_dir": str(base / "output"), "num_cpus": training_env["num_cpus"], "num_gpus": 0,
            "num_neurons": 0, "model_dir": str(host.model), "module_dir": training_env["module_dir"],
            "training_env": training_env, "user_args": user_args,
            "output_intermediate_dir": training_env["output_intermediate_dir"],
        }
        sm.update({f"channel_{name}": path for name, path in channels.items()})
        sm.update({f"hp_{key}": value for key, value in user_hps.items()})

        env = dict(os.environ)  # the "image": this interpreter and its packages
        for key in [k for k in env if k.startswith(("SM_", "TORCHELASTIC_")) or k in ("RANK", "WORLD_SIZE",
                                                                                       "LOCAL_RANK", "MASTER_ADDR",
                                                                                       "MASTER_PORT")]:
            del env[key]  # the server's own environment must not leak into the job's contract
        env.update({
            # AWS calls from the job go to the sandbox, never to a real account
            "AWS_ENDPOINT_URL": self.ctx.endpoint_url, "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "PYTHONUNBUFFERED": "TRUE", "OMP_NUM_THREADS": "1",
            "TRAINING_JOB_NAME": self.job_name, "TRAINING_JOB_ARN": self.arn,
            "SAGEMAKER_BASE_DIR": str(base), "CURRENT_HOST": host.name,
        })
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        if Path("/sys/class/net/lo").exists():
            env["GLOO_SOCKET_IFNAME"] = "lo"  # all "hosts" share this machine's loopback
        env.update({k: self._map_path(str(v), host) for k, v in user_env.items()})
        env.update({f"SM_{k.upper()}": _env_value(v) for k, v in sm.items()})
        env[MARKER_ENV] = self.marker
        return cmd, env

    # ---- training

    def _next_epoch(self) -> int:
        self._epoch = max(int(time.time()), self._epoch + 1)  # a restart always gets new streams
        return self._epoch

    def _train(self) -> str:
        hosts = self._hosts
        epoch = self._next_epoch()
        port = _free_port()
        for host in hosts:
            self._check_abort()
            cmd, env = self._command(host, hosts, port)
            host.stream = f"{self.job_name}/{host.name}-{epoch}"
            self.logs.create_stream(host.stream)
            host.proc = subprocess.Popen(cmd, cwd=host.code, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True)
            host.readers = tuple(
                threading.Thread(target=self._pump, args=(host, pipe, is_err), daemon=True,
                                 name=f"{self.job_name}-{host.name}-{'err' if is_err else 'out'}")
                for pipe, is_err in ((host.proc.stdout, False), (host.proc.stderr, True)))
            for reader in host.readers:
                reader.start()
        self.state.transition("Training", "Training image download completed. Training in progress.")
        next_sync = time.time() + self.settings.real("sync_interval_s")
        while True:
            if self._abort.is_set() or not self.registered():
                raise Aborted()
            outcome = self._control_outcome()
            if outcome:
                return self._after_training(outcome, hosts)
            codes = [h.proc.poll() for h in hosts]
            now = time.time()
            for host, code in zip(hosts, codes):
                if code is not None and host.exited_at is None:
                    host.exited_at = now
            if any(c not in (None, 0) for c in codes):
                return self._after_training("failed", hosts)
            if all(c == 0 for c in codes):
                return self._after_training("completed", hosts)
            if now >= next_sync:
                try:
                    self._sync_checkpoints(hosts)
                except Exception as exc:  # e.g. no bucket yet: retried, and the final sync decides
                    self.sync_error = _s3_error(exc)
                next_sync = time.time() + self.settings.real("sync_interval_s")
            self._wake.wait(0.1)
            self._wake.clear()

    def _control_outcome(self) -> str | None:
        with self.state.lock:
            if self._stop_requested:
                return "stopped"
            itr = self._interrupt
            if itr is not None and (self._interrupt_due or (itr["at"] is not None and time.time() >= itr["at"])):
                self._interrupt = None
                self._interrupt_due = False
                return "interrupted"
        if self.max_runtime is not None and self.state.running_seconds() >= self.max_runtime:
            return "max_runtime"
        if self._max_wait_exceeded():
            return "max_wait"
        return None

    def _pump(self, host: Host, pipe: Any, is_err: bool) -> None:
        """One host's stdout or stderr -> its log stream, a local file, and the step watcher."""
        local = self.job_dir / "logs" / f"{host.stream.split('/', 1)[1]}.log"
        local.parent.mkdir(parents=True, exist_ok=True)
        with pipe, open(local, "a", encoding="utf-8") as out:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                now = time.time()
                message = line
                if len(line) > MAX_EVENT_BYTES // 4:  # only a long line can be too many bytes
                    message = line.encode()[:MAX_EVENT_BYTES].decode("utf-8", "ignore")
                self.logs.put(host.stream, message, now)
                out.write(line + "\n")
                out.flush()
                text = _RANK_PREFIX_RE.sub("", line).strip()
                if is_err and text and not _DECORATION_RE.match(text):
                    host.last_stderr = text
                    if _ERROR_LINE_RE.match(text) and not _NOT_CAUSE_RE.search(text):
                        host.last_error = text
                m = STEP_RE.search(line)
                if m:
                    with self.state.lock:
                        itr = self._interrupt
                        if itr and itr["at_step"] is not None and int(m.group(1)) >= itr["at_step"]:
                            self._interrupt_due = True
                            self._wake.set()

    def _terminate(self, hosts: list[Host], grace: float) -> None:
        """SIGTERM every process of the job, wait up to `grace`, then SIGKILL what is left."""
        pids = set(marked_pids(self.marker))
        for host in hosts:
            if host.proc is not None and host.proc.poll() is None:
                pids.add(host.proc.pid)
                pids.update(_descendants(host.proc.pid))
        signal_pids(sorted(pids), signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline and not self._abort.is_set():
            if all(h.proc is None or h.proc.poll() is not None for h in hosts) and not marked_pids(self.marker):
                break
            time.sleep(0.05)
        kill_marked(self.marker)
        for host in hosts:
            if host.proc is not None:
                try:
                    host.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    host.proc.kill()

    def _join_readers(self, hosts: list[Host]) -> None:
        # every log line is in CloudWatch before the job reports its next status
        for host in hosts:
            for reader in host.readers:
                reader.join(timeout=10)

    def _after_training(self, outcome: str, hosts: list[Host]) -> str:
        if outcome == "completed":
            self._join_readers(hosts)
        elif outcome == "failed":
            # one host's failure ends the job: the others are stopped at once
            self._terminate(hosts, grace=min(1.0, self.settings.real("stop_grace_s")))
            self._join_readers(hosts)
            failed = sorted((h for h in hosts if h.proc.returncode not in (None, 0)),
                            key=lambda h: h.exited_at or float("inf"))
            self._failure = self._algorithm_error(failed[0] if failed else hosts[0])
        else:
            if outcome == "interrupted":
                self.state.transition("Interrupted", "Spot capacity was reclaimed: the training job was interrupted")
            self._terminate(hosts, grace=self.settings.real("stop_grace_s"))
            self._join_readers(hosts)
        self._check_abort()
        try:
            self._sync_checkpoints(hosts)
        except Exception as exc:
            if outcome in ("completed", "interrupted"):
                self._failure = f"ClientError: checkpoint upload to {self.checkpoint_uri} failed: {_s3_error(exc)}"
                return "failed"
        if outcome == "interrupted":
            self.state.instances_reclaimed()
        return outcome

    def _algorithm_error(self, host: Host) -> str:
        failure_file = host.base / "output" / "failure"
        code = host.proc.returncode if host.proc else None
        if failure_file.is_file() and failure_file.read_text(errors="replace").strip():
            return "AlgorithmError: " + failure_file.read_text(errors="replace").strip()
        message = host.last_error or host.last_stderr or f"exit code {code}"
        return (f"AlgorithmError: ExecuteUserScriptError:\nExitCode {code}\n"
                f"ErrorMessage \"{message}\"\nCommand \"{host.command}\", exit code: {code}")

    def _sync_checkpoints(self, hosts: list[Host]) -> None:
        """Upload new or changed files of every host's checkpoint folder to CheckpointConfig.S3Uri."""
        if not self.checkpoint_uri:
            return
        bucket, prefix = parse_s3_uri(self.checkpoint_uri)
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        for host in hosts:
            if not host.checkpoints.is_dir():
                continue
            for path in sorted(host.checkpoints.rglob("*")):
                try:
                    st = path.stat()
                    if not path.is_file():
                        continue
                    rel = path.relative_to(host.checkpoints).as_posix()
                    sig = (st.st_size, st.st_mtime_ns)
                    if self._synced.get((host.index, rel)) == sig:
                        continue
                    data = path.read_bytes()
                except FileNotFoundError:  # a temp file renamed away while we looked
                    continue
                self.s3.put(bucket, prefix + rel, data)
                self._synced[(host.index, rel)] = sig

    # ---- endings

    def _upload_artifacts(self) -> None:
        out = (self.request.get("OutputDataConfig") or {}).get("S3OutputPath", "")
        bucket, prefix = parse_s3_uri(out)
        prefix = (prefix.rstrip("/") + "/" if prefix.strip("/") else "") + f"{self.job_name}/output/"
        hosts = self._hosts
        self.s3.put(bucket, prefix + "model.tar.gz", _tar_folders([h.model for h in hosts]))
        if any(h.output_data.is_dir() and any(h.output_data.iterdir()) for h in hosts):
            self.s3.put(bucket, prefix + "output.tar.gz", _tar_folders([h.output_data for h in hosts]))

    def _end(self, outcome: str) -> None:
        self._check_abort()
        st = self.state
        if outcome == "failed":
            st.finish("Failed", "Failed", "Training job failed", self._failure)
            return
        if outcome == "completed" and not self._stop_requested:
            st.transition("Uploading", "Uploading generated training model")
        try:
            if self._hosts:
                self._upload_artifacts()
        except Exception as exc:
            st.finish("Failed", "Failed", "Training job failed",
                      f"ClientError: could not upload the model to "
                      f"{(self.request.get('OutputDataConfig') or {}).get('S3OutputPath')}: {_s3_error(exc)}")
            return
        if outcome == "completed" and not self._stop_requested:
            st.finish("Completed", "Completed", "Training job completed")
        elif outcome == "max_runtime":
            st.finish("Stopped", "MaxRuntimeExceeded", "Training job runtime exceeded MaxRuntimeInSeconds provided")
        elif outcome == "max_wait":
            st.finish("Stopped", "MaxWaitTimeExceeded",
                      "Training job exceeded MaxWaitTimeInSeconds provided (time spent waiting for Spot "
                      "capacity plus training time)")
        else:
            st.finish("Stopped", "Stopped", "Training job stopped")


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _s3_error(exc: Exception) -> str:
    code = getattr(exc, "code", None) or type(exc).__name__
    return f"{code}: {exc}" if str(exc) else str(code)
