"""Runs one sandbox SageMaker training job for real: the lifecycle thread behind jobs.py.

A job here is what SageMaker does with a script-mode PyTorch job, on this machine:
- Starting: the wait for instances (provision.py: the capacity pool, or the job's training plan, which also ends
  the job from 30 minutes before the plan's end).
- Downloading: fetch `sagemaker_submit_directory`, extract it per host ("algo-1".."algo-N", each an /opt/ml
  tree under the job's folder), restore CheckpointConfig.S3Uri into every host, copy input channels.
- Training: one process per host (torchrun when `sagemaker_torch_distributed_enabled`, else python, like the
  PyTorch container), its output line by line to CloudWatch Logs; checkpoints synced to S3. Interrupted and
  Restarting (managed Spot, on request): SIGTERM, the checkpoint synced, a simulated wait, a fresh attempt. Then
  Uploading/Completed, Failed, Stopped, MaxRuntime/MaxWaitTimeExceeded. This drives the lifecycle.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from trainctl_sandbox.ec2 import vpc_reach
from trainctl_sandbox.sagemaker import training_plans
from trainctl_sandbox.sagemaker.container import DEFAULT_CHECKPOINT_PATH, Container, Host
from trainctl_sandbox.sagemaker.provision import Provisioning
from trainctl_sandbox.sagemaker.output import algorithm_error, pump
from trainctl_sandbox.sagemaker.state import Aborted, JobState, Settings
from trainctl_sandbox.sagemaker.channels import fsx_files, input_channels, log_notes, sync_tensorboard
from trainctl_sandbox.sagemaker.storage import CheckpointSync, MotoLogs, upload_artifacts
from trainctl_sandbox.sagemaker.validation import script_mode_refusal
from trainctl_sandbox.server.marked_processes import free_port, kill_marked, marked_pids, terminate
from trainctl_sandbox.server.moto_s3 import MotoS3, parse_s3_uri, s3_error


class JobRunner(Provisioning, threading.Thread):
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
        self.s3, self.s3_account = MotoS3(account_id, region), account_id
        self.logs = MotoLogs(account_id, region, allowed=lambda: not self._abort.is_set() and registered())
        resource = request.get("ResourceConfig") or {}
        self.instance_type = resource.get("InstanceType", "")
        self.instance_count = int(resource.get("InstanceCount", 1))
        self.plan = training_plans.of_job(request, account_id, region)  # its capacity is the plan's (provision.py)
        if self.plan is not None:
            training_plans.hold(self.plan, self, self.instance_count)
        stopping = request.get("StoppingCondition") or {}
        self.max_runtime = stopping.get("MaxRuntimeInSeconds")
        self.max_wait = stopping.get("MaxWaitTimeInSeconds") if state.spot else None
        ckpt = request.get("CheckpointConfig") or {}
        self.checkpoint_uri = ckpt.get("S3Uri")
        self.checkpoints = CheckpointSync(self.s3, self.checkpoint_uri)
        self.container = Container(
            job_name=name, arn=arn, region=region, request=request, instance_type=self.instance_type,
            checkpoint_uri=self.checkpoint_uri, endpoint_url=ctx.endpoint_url, marker=marker,
            checkpoint_local=(ckpt.get("LocalPath") or DEFAULT_CHECKPOINT_PATH).rstrip("/"))
        self._wake = threading.Event()
        self._abort = threading.Event()
        self._stop_requested = False
        self._interrupt: dict[str, Any] | None = None  # {"at": wall time | None, "at_step": int | None}
        self._interrupt_due = False
        self._hosts: list[Host] = []
        self._epoch = 0
        self._failure = "InternalServerError"
        self.sync_error: str | None = None
        self._tensorboard_synced: dict = {}
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
                "private_opt_ml": self.container.private, "log_streams": [h.stream for h in self._hosts if h.stream]}

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

    def _download(self) -> str | None:
        self.state.transition("Downloading", "Downloading input data")
        refused, program, submit = script_mode_refusal(self.request)
        if refused:
            self._failure = refused
            return "failed"
        attempt_dir = self.job_dir / f"attempt-{self.attempts}"
        hosts = [Host(index=i, base=attempt_dir / f"algo-{i}") for i in range(1, self.instance_count + 1)]
        self._hosts = hosts
        try:
            tarball = self.s3.get(*parse_s3_uri(str(submit)))
        except Exception as exc:
            self._failure = f"AlgorithmError: could not download sagemaker_submit_directory {submit}: {s3_error(exc)}"
            return "failed"
        restored = self.checkpoints.objects()
        fsx = functools.partial(fsx_files, self.ctx, self.s3_account, self.region, vpc=self.request.get("VpcConfig"))
        channels = input_channels(self.s3, self.request, self.region, len(hosts), fsx, self.settings.disk_gb_bytes)
        if isinstance(channels, str):
            self._failure = channels
            return "failed"
        for host in hosts:
            try:
                self.container.prepare(host, hosts, tarball, restored, channels[host.index - 1])
            except (tarfile.TarError, OSError) as exc:
                self._failure = f"AlgorithmError: could not extract {submit}: {exc}"
                return "failed"
        if not (hosts[0].code / str(program)).is_file():
            self._failure = f"AlgorithmError: entry point {program} not found in {submit}"
            return "failed"
        unreachable = vpc_reach.sagemaker_failure(self.s3_account, self.region, self.request, hosts[0].code)
        if unreachable:  # a VPC without the routes the job needs (the download, pip, EFA's rendezvous)
            self._failure = unreachable
            return "failed"
        for host in hosts:
            self.checkpoints.mark_synced(host.index, host.checkpoints, [rel for rel, _ in restored])
        return None

    # ---- training

    def _next_epoch(self) -> int:
        self._epoch = max(int(time.time()), self._epoch + 1)  # a restart always gets new streams
        return self._epoch

    def _train(self) -> str:
        hosts = self._hosts
        epoch = self._next_epoch()
        port = free_port()
        for host in hosts:
            self._check_abort()
            cmd, env = self.container.command(host, hosts, port)
            env.update(training_plans.environment(self.plan) if self.plan else {})
            host.stream = f"{self.job_name}/{host.name}-{epoch}"
            self.logs.create_stream(host.stream)
            log_notes(self.logs, host.stream, self.request)
            host.proc = subprocess.Popen(cmd, cwd=host.code, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            host.readers = tuple(
                threading.Thread(target=pump, args=(host, pipe, is_err, self.logs, self._local_log(host),
                                                    self._step_seen), daemon=True,
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
                    self.sync_error = s3_error(exc)
                next_sync = time.time() + self.settings.real("sync_interval_s")
            self._wake.wait(0.1)
            self._wake.clear()

    def _local_log(self, host: Host) -> Path:
        return self.job_dir / "logs" / f"{host.stream.split('/', 1)[1]}.log"

    def _step_seen(self, step: int) -> None:
        """A host printed `trainctl step=N`: an interruption scheduled at that step is due."""
        with self.state.lock:
            itr = self._interrupt
            if itr and itr["at_step"] is not None and step >= itr["at_step"]:
                self._interrupt_due = True
                self._wake.set()

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
        if self._plan_ended():
            return "plan_ended"
        if self._max_wait_exceeded():
            return "max_wait"
        return None

    def _terminate(self, hosts: list[Host], grace: float) -> None:
        terminate(self.marker, [h.proc for h in hosts if h.proc is not None], grace, self._abort.is_set)

    def _join_readers(self, hosts: list[Host]) -> None:
        # every log line is in CloudWatch before the job reports its next status
        for host in hosts:
            for reader in host.readers:
                reader.join(timeout=10)

    def _sync_checkpoints(self, hosts: list[Host]) -> None:
        self.checkpoints.sync([(host.index, host.checkpoints) for host in hosts])
        sync_tensorboard(self.s3, self.request, [host.base for host in hosts], self._tensorboard_synced)

    def _after_training(self, outcome: str, hosts: list[Host]) -> str:
        if outcome == "completed":
            self._join_readers(hosts)
        elif outcome == "failed":
            # one host's failure ends the job: the others are stopped at once
            self._terminate(hosts, grace=min(1.0, self.settings.real("stop_grace_s")))
            self._join_readers(hosts)
            failed = sorted((h for h in hosts if h.proc.returncode not in (None, 0)),
                            key=lambda h: h.exited_at or float("inf"))
            self._failure = algorithm_error(failed[0] if failed else hosts[0])
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
                self._failure = f"ClientError: checkpoint upload to {self.checkpoint_uri} failed: {s3_error(exc)}"
                return "failed"
        if outcome == "interrupted":
            self.state.instances_reclaimed()
        return outcome

    # ---- endings

    def _end(self, outcome: str) -> None:
        self._check_abort()
        st = self.state
        if outcome in ("failed", "plan_ended"):
            st.finish("Failed", "Failed", "Training job failed",
                      self._failure if outcome == "failed" else self.plan_end_reason())
            return
        if outcome == "completed" and not self._stop_requested:
            st.transition("Uploading", "Uploading generated training model")
        try:
            if self._hosts:
                upload_artifacts(self.s3, (self.request.get("OutputDataConfig") or {}).get("S3OutputPath", ""),
                                 self.job_name, [h.model for h in self._hosts], [h.output_data for h in self._hosts])
        except Exception as exc:
            st.finish("Failed", "Failed", "Training job failed",
                      f"ClientError: could not upload the model to "
                      f"{(self.request.get('OutputDataConfig') or {}).get('S3OutputPath')}: {s3_error(exc)}")
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
