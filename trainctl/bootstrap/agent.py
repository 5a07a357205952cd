"""trainctl node agent: runs on every EC2 instance of a job, started by the user data.

Standard library plus boto3 only (the Deep Learning AMIs' Python has both); no credentials anywhere:
boto3 finds the instance profile's through IMDS. The job's settings come from config.json, which the
user data writes beside this file. What it does:
1. asks IMDS (IMDSv2: token first) who it is: instance id, private IP;
2. fetches the job's code tarball from S3 by its content hash and checks its sha256 against the config's;
   reads the job's secrets (SSM SecureString / Secrets Manager ARNs in the config) into the training's env;
3. finds its peers by the tag trainctl:job through the EC2 API, waits for all N, ranks the nodes by
   sorted private IP (rank 0 is the master), restores the newest complete checkpoint from S3 (checkpoints.py);
4. runs `torchrun --nnodes N --node_rank R --master_addr <rank 0> --nproc_per_node P <script> ...`,
   shipping every output line to CloudWatch Logs (/trainctl/<job>, one stream per instance),
   syncing checkpoints to S3 while it runs (pruning S3 to the job's last K), and watching for the stop mark
   and the job's maximum runtime: either stops the training as a Spot notice does, checkpointed and uploaded;
5. polls IMDS spot/instance-action; on a notice it tags itself trainctl:state=interrupted (so the
   peers leave it out), SIGTERMs torchrun (the entrypoint checkpoints and exits 0), syncs, and stops;
6. when a peer's interruption stopped the training, it waits for the replacement node and starts
   again from the checkpoint; when the training finished it writes s3://<bucket>/<job>/status/completed.
The IMDS endpoint is configurable (TRAINCTL_IMDS_ENDPOINT) so that a test can give each fake host its own.
"""
from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time

from . import budget
from .accelerator_check import check as check_accelerators
from .channels import Channels, ml_root
from .checkpoints import CheckpointSync
from .launch_command import torchrun_command
from .outputs import Outputs
from .node_io import (DEFAULT_IMDS, Imds, LogShipper, aws_session, children, install_requirements,
                      read_secrets, say)

JOB_TAG = "trainctl:job"
STATE_TAG = "trainctl:state"
LOG_FLUSH_S = 30  # how long a failing agent waits for its last log lines to reach CloudWatch


def keep_of(cfg: dict) -> int:
    """How many checkpoint steps the job keeps: the entrypoint's --keep when the job sets it, else its default."""
    args = [str(a) for a in cfg.get("args", [])]
    if "--keep" in args[:-1]:
        return int(args[args.index("--keep") + 1])
    return int(cfg.get("keep_checkpoints", 3))


class Agent:
    def __init__(self, cfg: dict, root: str, imds: Imds):
        self.cfg, self.root, self.imds = cfg, root, imds
        self.job = cfg["job_id"]
        client = aws_session(cfg["region"])
        self.ec2, self.s3 = client("ec2"), client("s3")
        self.client = client
        # Every S3 call names the bucket's owner: a bucket of another account is refused (403), never used.
        self.owner = {"ExpectedBucketOwner": cfg["bucket_owner"]} if cfg.get("bucket_owner") else {}
        self.secrets: dict[str, str] = {}
        self.instance_id = imds.get("instance-id")
        self.ip = imds.get("local-ipv4")
        self.log = LogShipper(client("logs"), f"/trainctl/{self.job}", self.instance_id)
        self.log.start()
        self.code_dir = os.path.join(root, "code")
        self.ckpt_dir = os.path.join(root, "checkpoints")
        self.checkpoints = CheckpointSync(self.s3, cfg["bucket"], self.key("checkpoints"), self.ckpt_dir,
                                          keep_of(cfg), self.log.add, self.owner)
        ml = ml_root(root)  # /opt/ml beside the agent's folder: SageMaker's paths, on EC2 (channels.py)
        self.channels = Channels(self.s3, cfg.get("channels") or {}, ml, self.log.add)
        self.outputs = Outputs(self.s3, cfg["bucket"], self.job, ml, self.log.add, self.owner)
        self.notice = threading.Event()
        self.stop_requested = threading.Event()
        self.finished = threading.Event()  # run() returned: the watchers end too
        self.proc: subprocess.Popen | None = None

    def setting(self, name: str, default: float) -> float:
        """A timing from the environment (TRAINCTL_SPOT_POLL_S, ...: tests poll faster), the config, or the default."""
        return float(os.environ.get(f"TRAINCTL_{name.upper()}") or self.cfg.get(name, default))

    # ---------------------------------------------------------------- S3
    def key(self, *parts: str) -> str:
        return "/".join([self.job, *parts])

    def fetch_code(self) -> None:
        path = os.path.join(self.root, "code.tar.gz")
        self.s3.download_file(self.cfg["bucket"], self.cfg["code_key"], path, ExtraArgs=self.owner)
        want = self.cfg.get("code_sha256")
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if want and got != want:  # only the CLI writes code; anything else at the key is not this job's code
            raise SystemExit(f"trainctl-agent: code object sha256 {got[:12]} is not the job's {want[:12]}; "
                             "refusing to run it")
        os.makedirs(self.code_dir, exist_ok=True)
        with tarfile.open(path) as tar:
            try:
                tar.extractall(self.code_dir, filter="data")  # no absolute paths, no links out of the folder
            except TypeError:  # a Python from before extraction filters (< 3.10.12): check the names ourselves
                if any(m.name.startswith("/") or ".." in m.name.split("/") or m.islnk() or m.issym()
                       for m in tar.getmembers()):
                    raise SystemExit("trainctl-agent: the code tarball has unsafe paths")
                tar.extractall(self.code_dir)
        self.log.add(f"trainctl-agent: code s3://{self.cfg['bucket']}/{self.cfg['code_key']} -> {self.code_dir}")

    def restore_checkpoints(self) -> None:
        """Only the newest complete checkpoint (or the newest `restore_checkpoints` steps), never the history."""
        self.checkpoints.restore(int(self.cfg.get("restore_checkpoints", 1)))

    def sync_checkpoints(self) -> None:
        self.checkpoints.sync()

    def marker(self) -> str | None:
        page = self.s3.list_objects_v2(Bucket=self.cfg["bucket"], Prefix=self.key("status") + "/", **self.owner)
        names = {o["Key"].rsplit("/", 1)[-1] for o in page.get("Contents", [])}
        for status in ("stopped", "completed", "failed"):
            if status in names:
                return status
        return None

    def put_marker(self, status: str, detail: str) -> None:
        self.s3.put_object(Bucket=self.cfg["bucket"], Key=self.key("status", status), Body=detail.encode(),
                           **self.owner)

    def record_failure(self, error: BaseException) -> None:
        """Why this node shuts itself down, as the job's `failed` marker: `watch` names it, nothing replaces it."""
        try:
            if not self.marker():
                self.put_marker("failed", f"{self.instance_id}: the node agent failed: {error}"[:1000])
        except Exception as e:  # noqa: BLE001 - S3 unreachable: the log (if it gets out) says why
            self.log.add(f"trainctl-agent: could not record the failure: {e}")

    # ---------------------------------------------------------------- peers
    def peers(self) -> list[str]:
        """Private IPs of the job's live, not interrupted instances."""
        ips = []
        pages = self.ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": f"tag:{JOB_TAG}", "Values": [self.job]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        for page in pages:
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                    if tags.get(STATE_TAG) == "interrupted" or not inst.get("PrivateIpAddress"):
                        continue
                    ips.append(inst["PrivateIpAddress"])
        return sorted(set(ips), key=ipaddress.ip_address)

    def wait_for_peers(self) -> list[str]:
        n, said = int(self.cfg["nnodes"]), None
        deadline = time.time() + float(self.cfg.get("peer_wait_s", 3600))
        while time.time() < deadline:
            ips = self.peers()
            if len(ips) == n and self.ip in ips:
                return ips
            if said != len(ips):
                self.log.add(f"trainctl-agent: {len(ips)} of {n} nodes up; waiting for the rest")
                said = len(ips)
            if self.marker() or self.notice.is_set():
                return []
            time.sleep(self.setting("peer_poll_s", 5.0))
        raise SystemExit(f"trainctl-agent: gave up waiting for {n} nodes")

    # ---------------------------------------------------------------- watchers
    def watch_spot_notice(self) -> None:
        interval = self.setting("spot_poll_s", 5.0)
        while not self.finished.is_set():
            try:
                action = self.imds.get("spot/instance-action")
            except Exception as e:  # noqa: BLE001 - an IMDS hiccup must not end the poll
                action = None
                print(f"trainctl-agent: IMDS: {e}", flush=True)
            if action:
                self.on_notice(action)
                return
            self.finished.wait(interval)

    def on_notice(self, action: str) -> None:
        self.log.add(f"trainctl-agent: spot interruption notice {action.strip()}; checkpointing")
        # Peers must leave this node out of the next rendezvous: tag first, then stop the training.
        try:
            self.ec2.create_tags(Resources=[self.instance_id], Tags=[{"Key": STATE_TAG, "Value": "interrupted"}])
        except Exception as e:  # noqa: BLE001
            self.log.add(f"trainctl-agent: could not tag this instance interrupted: {e}")
        self.notice.set()
        self.terminate_training()

    def terminate_training(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        # SIGTERM the ranks, not torchrun: they checkpoint and exit 0, and this node's torchrun then
        # finishes normally, meeting the other nodes' torchrun at the exit barrier. A SIGTERMed torchrun
        # would die without it and leave every other node waiting there for minutes.
        ranks = children(proc.pid)
        for pid in ranks or [proc.pid]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def past_deadline(self) -> bool:
        """The job's maximum runtime (`--max-runtime-hours`, SageMaker's StoppingCondition on EC2) has passed:
        mark the job stopped, so every node and `watch --recover` see it, and say why."""
        not_after = self.cfg.get("not_after")
        if not not_after or time.time() < float(not_after):
            return budget.reached(self)  # the job's budget ends it too (budget.py writes the stop mark and why)
        self.log.add(f"trainctl-agent: the job's maximum runtime ended at {float(not_after):.0f}; stopping it")
        if self.marker() != "stopped":
            self.put_marker("stopped", f"maximum runtime reached ({self.cfg.get('max_runtime_s')} s)")
        return True

    def watch_stop(self, done: threading.Event) -> None:
        """While torchrun runs: a stop mark (`trainctl stop`/`down`) or the maximum runtime stops the training
        the way a Spot notice does (the entrypoint checkpoints and exits 0); the final sync uploads it before
        the agent returns and the node shuts down. No reliance on the shutdown's SIGTERM arriving in time."""
        while not done.wait(self.setting("stop_poll_s", 30.0)):
            try:
                why = "marked stopped" if self.marker() == "stopped" else (
                    "past its maximum runtime" if self.past_deadline() else None)
            except Exception as e:  # noqa: BLE001 - S3 hiccup: look again next round
                self.log.add(f"trainctl-agent: could not read the job's status: {e}")
                continue
            if why:
                self.log.add(f"trainctl-agent: the job is {why}; checkpointing and stopping the training")
                self.stop_requested.set()
                self.terminate_training()
                return

    def sync_loop(self, done: threading.Event) -> None:
        while not done.wait(self.setting("checkpoint_sync_s", 60.0)):
            try:
                self.sync_checkpoints()
            except Exception as e:  # noqa: BLE001 - the next round or the final sync retries
                self.log.add(f"trainctl-agent: checkpoint sync failed: {e}")

    # ---------------------------------------------------------------- training
    def command(self, ips: list[str]) -> tuple[list[str], dict[str, str]]:
        return torchrun_command(self.cfg, ips, self.ip, self.code_dir, self.ckpt_dir,
                                int(self.setting("master_port", 29500)),
                                dict(os.environ, **self.secrets, **self.channels.env(), PYTHONUNBUFFERED="1",
                                     TRAINCTL_JOB=self.job))

    def train_once(self, ips: list[str]) -> tuple[int, bool]:
        """Run torchrun once; (exit code, whether the training was stopped rather than finished)."""
        cmd, env = self.command(ips)
        self.log.add(f"trainctl-agent: node_rank={ips.index(self.ip)} nnodes={len(ips)} master={ips[0]} "
                     f"peers={','.join(ips)}")
        stopped = False
        done = threading.Event()
        syncer = threading.Thread(target=self.sync_loop, args=(done,), daemon=True)
        stopper = threading.Thread(target=self.watch_stop, args=(done,), daemon=True)
        threading.Thread(target=self.outputs.sync_loop, args=(done, self.setting("checkpoint_sync_s", 60.0)),
                         daemon=True).start()
        self.proc = subprocess.Popen(cmd, cwd=self.code_dir, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        syncer.start()
        stopper.start()
        if self.notice.is_set():  # the notice came while starting
            self.terminate_training()
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if "trainctl stopped " in line:
                stopped = True
            self.log.add(line)
        rc = self.proc.wait()
        done.set()
        self.sync_checkpoints()
        self.outputs.sync_tensorboard()
        return rc, stopped or self.notice.is_set() or self.stop_requested.is_set()

    def run(self) -> int:
        try:
            return self._run()
        finally:
            self.finished.set()

    def _run(self) -> int:
        self.log.add(f"trainctl-agent: instance {self.instance_id} ip {self.ip} job {self.job}")
        check_accelerators(self.cfg, self.log.add)  # the GPUs/Neuron devices paid for, or fail now
        threading.Thread(target=self.watch_spot_notice, daemon=True).start()
        self.fetch_code()
        install_requirements(self.code_dir, self.log.add)  # as SageMaker's toolkit does
        self.secrets = read_secrets(self.client, self.cfg.get("secrets") or {})
        if self.secrets:
            self.log.add(f"trainctl-agent: secrets {', '.join(sorted(self.secrets))} read into the environment")
        failures = 0
        while True:
            status = self.marker()
            if status:
                self.log.add(f"trainctl-agent: job is {status}; nothing to do")
                if status == "stopped":
                    self.stop_requested.set()
                return 0
            if self.past_deadline():
                self.stop_requested.set()
                return 0
            ips = self.wait_for_peers()
            if self.notice.is_set():
                # Reclaimed before (or between) runs: nothing to checkpoint here. Leave now rather than loop
                # on S3 and EC2 until the reclaim, on every node that got the notice.
                self.log.add("trainctl-agent: interrupted outside training; leaving the job to the others")
                return 0
            if not ips:
                continue  # the job got a status marker: the top of the loop ends it
            self.restore_checkpoints()
            self.channels.prepare(ips.index(self.ip), len(ips))
            rc, stopped = self.train_once(ips)
            if self.notice.is_set():
                self.log.add("trainctl-agent: interrupted; checkpoints synced, leaving the job to the others")
                return 0
            if self.stop_requested.is_set():
                self.log.add("trainctl-agent: training stopped; its checkpoint is in S3")
                return 0
            if rc == 0 and not stopped:
                if ips.index(self.ip) == 0:
                    self.outputs.upload_model()  # before the marker: `fetch` after `completed` finds it
                    self.put_marker("completed", f"{self.instance_id} {time.time():.0f}")
                self.log.add("trainctl-agent: training finished")
                return 0
            if rc != 0:
                # A peer that vanished without a notice breaks the collective; retry a few times.
                failures += 1
                self.log.add(f"trainctl-agent: torchrun exited {rc} (failure {failures})")
                if failures > int(self.cfg.get("max_restarts", 3)):
                    if ips.index(self.ip) == 0:
                        self.put_marker("failed", f"torchrun exited {rc} on {self.instance_id}")
                    return rc
            else:
                self.log.add("trainctl-agent: a peer was interrupted; waiting for its replacement")
            time.sleep(self.setting("peer_poll_s", 5.0))


def main(argv: list[str] | None = None) -> int:
    """Run the agent; whatever happens, a node that is done, or cannot do its work, stops billing.

    Any fatal error (IMDS or AWS unreachable, code missing, torchrun failing past its restarts) is logged,
    the log is shipped as far as it can be within LOG_FLUSH_S, and the node shuts down at once; a node that
    finished shuts down after a minute, one stopped at once. The launch template makes shutdown terminate the
    instance."""
    parser = argparse.ArgumentParser(description="trainctl node agent")
    parser.add_argument("--config", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args(argv)
    agent, rc = None, 1
    try:
        with open(args.config) as f:
            cfg = json.load(f)
        agent = Agent(cfg, args.root, Imds(os.environ.get("TRAINCTL_IMDS_ENDPOINT") or DEFAULT_IMDS))
        # A shutdown (the reclaim itself, or `trainctl down`) SIGTERMs the agent: stop the training cleanly.
        signal.signal(signal.SIGTERM, lambda *_: agent.terminate_training())
        rc = agent.run()
    except BaseException as e:  # noqa: BLE001 - every failure ends in the shutdown below
        (agent.log.add if agent else say)(f"trainctl-agent: failed: {e!r}; shutting this node down")
        rc = 1
        if agent is not None:
            agent.record_failure(e)
    finally:
        if agent is not None:
            agent.log.stopping.set()
            agent.log.join(timeout=LOG_FLUSH_S)
    shut_down(rc, stopped=agent is not None and agent.stop_requested.is_set())
    return rc


def shut_down(rc: int, stopped: bool = False) -> None:
    if os.environ.get("TRAINCTL_NO_SHUTDOWN"):
        say(f"exit {rc}: TRAINCTL_NO_SHUTDOWN is set; not shutting down")
        return
    # Finished: a minute's grace (someone may be reading the node). Failed: now, nothing is left to do. Stopped
    # (the stop mark, the maximum runtime): now too, its checkpoint is uploaded and `trainctl stop` is waiting
    # for the node to go within its grace before it terminates it.
    subprocess.run(["shutdown", "-h", "+1" if rc == 0 and not stopped else "now"], check=False)


if __name__ == "__main__":
    sys.exit(main())
