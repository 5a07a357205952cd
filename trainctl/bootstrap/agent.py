"""trainctl node agent: runs on every EC2 instance of a job, started by the user data.

Standard library plus boto3 only (the Deep Learning AMIs' Python has both); no credentials anywhere:
boto3 finds the instance profile's through IMDS. The job's settings come from config.json, which the
user data writes beside this file. The script runs under SageMaker's training contract (docs/your-script.md):
its arguments are exactly the job's, its folders /opt/ml/... (sm_env.py, channels.py) and the agent decides
everything from what it knows, never from what the script prints or accepts. What it does:
1. asks IMDS (IMDSv2: token first) who it is: instance id, private IP;
2. fetches the job's code tarball from S3 by its content hash and checks its sha256 against the config's;
   installs its requirements.txt once per node; reads the job's secrets into the training's env;
3. finds its peers by the tag trainctl:job through the EC2 API, waits for all N, ranks the nodes by
   sorted private IP (rank 0 is the master), restores the whole checkpoint folder from S3 (checkpoints.py); an
   elastic job (elastic_min_nodes) trains on the generation of live nodes its agents agree on (membership.py);
4. runs `torchrun --nnodes N --node_rank R --master_addr <rank 0> --nproc_per_node P <script> <args>`,
   shipping every output line to CloudWatch Logs (/trainctl/<job>, one stream per instance), syncing the
   checkpoint folder to S3 while it runs, and watching the job's limits (outcome.py);
5. decides the run's outcome (outcome.py): a Spot notice or reclaim of any node -> interrupted (it waits for
   the replacement); a stop mark, budget or maximum runtime -> stopped; another node's failure -> it stops and
   shuts down; exit 0 with none of these -> completed; non-zero -> failed with the script's error, rerun only
   `max_retries` times.
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

from . import block_end, budget, membership, outcome, replacement, sm_env
from .accelerator_check import check as check_accelerators
from .channels import Channels, ml_root
from .checkpoints import CheckpointSync
from .launch_command import interface_of, torchrun_command
from .outputs import Outputs
from .node_io import (DEFAULT_IMDS, Imds, LogShipper, aws_session, install_requirements, read_secrets, say)
from .training import Training

JOB_TAG = "trainctl:job"
STATE_TAG = "trainctl:state"
LOG_FLUSH_S = 30  # how long a failing agent waits for its last log lines to reach CloudWatch
STOP_GRACE_S = 120.0  # SIGTERM -> SIGKILL of a script that does not exit (SageMaker gives 120 s)


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
        # SageMaker's folders: /opt/ml beside the agent's folder (/opt/trainctl -> /opt/ml; channels.py)
        self.ml = ml_root(root)
        self.code_dir = os.path.join(root, "code")
        self.ckpt_dir = os.path.join(self.ml, "checkpoints")
        self.checkpoints = CheckpointSync(self.s3, cfg["bucket"], self.key("checkpoints"), self.ckpt_dir,
                                          self.log.add, self.owner, self.setting("checkpoint_settle_s", 2.0))
        self.channels = Channels(self.s3, cfg.get("channels") or {}, self.ml, self.log.add)
        self.outputs = Outputs(self.s3, cfg["bucket"], self.job, self.ml, self.log.add, self.owner)
        self.notice = threading.Event()          # this node got its Spot notice
        self.stop_requested = threading.Event()  # the job is stopped: stop mark, budget, maximum runtime
        self.shutting_down = threading.Event()   # SIGTERM: the instance itself is going down (a reclaim, a
                                                 # termination), whatever this node was doing
        self.peer_failed = threading.Event()     # another node failed the job: stop and shut down
        self.peer_lost = threading.Event()       # another node got its notice or was reclaimed
        self.finished = threading.Event()  # run() returned: the watchers end too
        self.training: Training | None = None
        self.known_notices: set[str] = set()  # the job's notice marks before this run: an earlier run's
        self.stop_reason = ""
        self.devices: dict[str, int] = {}  # SM_NUM_GPUS/SM_NUM_NEURONS, as the accelerator check counted them
        self.members = membership.Membership(self)  # an elastic job's generations (membership.py)

    def setting(self, name: str, default: float) -> float:
        """A timing from the environment (TRAINCTL_SPOT_POLL_S, ...: tests poll faster), the config, or the default."""
        return float(os.environ.get(f"TRAINCTL_{name.upper()}") or self.cfg.get(name) or default)

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
        """The whole checkpoint folder, as SageMaker restores CheckpointConfig's S3 prefix before a start."""
        self.checkpoints.restore()

    def sync_checkpoints(self, final: bool = False) -> None:
        self.checkpoints.sync(final=final)

    def status_names(self) -> set[str]:
        page = self.s3.list_objects_v2(Bucket=self.cfg["bucket"], Prefix=self.key("status") + "/", **self.owner)
        return {o["Key"].rsplit("/", 1)[-1] for o in page.get("Contents", [])}

    def marker(self) -> str | None:
        names = self.status_names()
        return next((s for s in ("stopped", "completed", "failed") if s in names), None)

    def put_marker(self, status: str, detail: str, only_first: bool = False) -> None:
        extra = {"IfNoneMatch": "*"} if only_first else {}  # the first node's reason stays (S3 conditional write)
        try:
            self.s3.put_object(Bucket=self.cfg["bucket"], Key=self.key("status", status), Body=detail.encode(),
                               **extra, **self.owner)
        except Exception as e:  # noqa: BLE001
            if not only_first or ("PreconditionFailed" not in str(e) and "412" not in str(e)):
                raise

    def record_failure(self, error: BaseException) -> None:
        """Why this node shuts itself down, as the job's `failed` marker: `watch` names it, nothing replaces it."""
        try:
            if not self.marker():
                self.put_marker("failed", f"{self.instance_id}: the node agent failed: {error}"[:1000], True)
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
        """All N nodes' IPs; [] when the job ended meanwhile (a status, a limit, this node's notice). The limits
        are checked on every round, whatever S3 and EC2 answer."""
        n, said = int(self.cfg["nnodes"]), None
        deadline = time.time() + float(self.cfg.get("peer_wait_s", 3600))
        while time.time() < deadline:
            if outcome.limit_reached(self) or self.notice.is_set():
                return []
            try:
                if self.marker():
                    return []
                ips = self.peers()
            except Exception as e:  # noqa: BLE001 - throttled or unreachable: look again next round
                self.log.add(f"trainctl-agent: could not look for the job's nodes: {e}")
                ips = []
            if len(ips) == n and self.ip in ips:
                return ips
            if self.ip in ips:
                replacement.tend(self, ips)  # the survivors replace a reclaimed node themselves (no laptop)
            if said != len(ips):
                self.log.add(f"trainctl-agent: {len(ips)} of {n} nodes up; waiting for the rest")
                said = len(ips)
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
                outcome.on_notice(self, action)
                return
            self.finished.wait(interval)

    def stop_grace_s(self) -> float:
        return min(STOP_GRACE_S, self.setting("stop_grace_s", STOP_GRACE_S))

    def terminate_training(self, grace_s: float | None = None) -> None:
        if self.training is not None:
            self.training.stop(self.stop_grace_s() if grace_s is None else grace_s)

    def sync_loop(self, done: threading.Event) -> None:
        while not done.wait(self.setting("checkpoint_sync_s", 60.0)):
            try:
                self.sync_checkpoints()
            except Exception as e:  # noqa: BLE001 - the next round or the final sync retries
                self.log.add(f"trainctl-agent: checkpoint sync failed: {e}")

    # ---------------------------------------------------------------- training
    def command(self, ips: list[str]) -> tuple[list[str], dict[str, str]]:
        rank = ips.index(self.ip)
        sm = sm_env.sm_variables(self.cfg, self.ml, rank, len(ips), self.channels.env(),
                                 self.cfg.get("instance_type") or "", interface_of(self.ip) or "eth0", self.devices)
        base = dict(os.environ, **self.secrets, PYTHONUNBUFFERED="1", TRAINCTL_JOB=self.job,
                    TRAINING_JOB_NAME=self.job, CURRENT_HOST=sm["SM_CURRENT_HOST"])
        if os.path.abspath(self.ml) != "/opt/ml":  # the toolkit's own relocation of /opt/ml (SAGEMAKER_BASE_DIR)
            base["SAGEMAKER_BASE_DIR"] = self.ml
        port = membership.master_port(int(self.setting("master_port", 29500)), self.members.generation)
        return torchrun_command(self.cfg, ips, self.ip, self.code_dir, port, dict(base, **sm))

    def train_once(self, ips: list[str]) -> int:
        """Run torchrun once, watching the job while it runs; its exit code."""
        cmd, env = self.command(ips)
        self.log.add(f"trainctl-agent: node_rank={ips.index(self.ip)} nnodes={len(ips)} master={ips[0]} "
                     f"peers={','.join(ips)}")
        os.makedirs(os.path.join(self.ml, "output"), exist_ok=True)
        try:
            os.remove(os.path.join(self.ml, "output", "failure"))  # an earlier attempt's
        except FileNotFoundError:
            pass
        done = threading.Event()
        known = self.known_notices = outcome.notices_now(self)
        threading.Thread(target=self.outputs.sync_loop, args=(done, self.setting("checkpoint_sync_s", 60.0)),
                         daemon=True).start()
        self.training = Training(cmd, env, self.code_dir, lambda line: self.log.add(line))
        threading.Thread(target=self.sync_loop, args=(done,), daemon=True).start()
        threading.Thread(target=outcome.watch_job, args=(self, done, known, ips), daemon=True).start()
        if self.notice.is_set():  # the notice came while starting
            self.terminate_training()
        rc = self.training.wait()
        done.set()
        try:
            self.sync_checkpoints(final=True)
        except Exception as e:  # noqa: BLE001 - said; what the periodic syncs uploaded stays
            self.log.add(f"trainctl-agent: the final checkpoint sync failed: {e}")
        self.outputs.sync_tensorboard()
        return rc

    def run(self) -> int:
        try:
            return self._run()
        finally:
            replacement.announce_end(self)  # the end as news to the job's topic, once per job
            self.finished.set()

    def _run(self) -> int:
        self.log.add(f"trainctl-agent: instance {self.instance_id} ip {self.ip} job {self.job}")
        # the GPUs/Neuron devices paid for, or fail now; what it counts is what the training is told it has
        self.devices = check_accelerators(self.cfg, self.log.add)
        threading.Thread(target=self.watch_spot_notice, daemon=True).start()
        threading.Thread(target=block_end.watch, args=(self.cfg, self.finished, lambda why: outcome.on_notice(self, why, "notice:"),
                         time.time, block_end.reader(self.ec2, self.cfg)),
                         daemon=True).start()  # a Capacity Block's end, as a Spot notice (block_end.py)
        self.fetch_code()
        install_requirements(self.code_dir, self.root, self.log.add)  # as SageMaker's toolkit does, once per node
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
                if status == "failed":
                    self.peer_failed.set()
                    return 1
                return 0
            if outcome.limit_reached(self):
                return 0
            ips = (self.members.wait(lambda: outcome.limit_reached(self) or self.notice.is_set())
                   if membership.min_nodes(self.cfg) else self.wait_for_peers())
            if self.notice.is_set():
                # Reclaimed before (or between) runs: nothing to checkpoint here. Leave now rather than loop
                # on S3 and EC2 until the reclaim, on every node that got the notice.
                self.log.add("trainctl-agent: interrupted outside training; leaving the job to the others")
                return 0
            if not ips:
                if self.stop_requested.is_set():
                    return 0
                continue  # the job got a status marker: the top of the loop ends it
            self.restore_checkpoints()
            self.channels.prepare(ips.index(self.ip), len(ips))
            self.peer_lost.clear()
            rc = self.train_once(ips)
            verdict = outcome.decide(self, rc, ips)
            if verdict == "retry":
                failures += 1
                if failures > int(self.cfg.get("max_retries", 0)):
                    return outcome.fail_job(self, rc)
                self.log.add(f"trainctl-agent: retry {failures} of {int(self.cfg.get('max_retries', 0))}: the "
                             f"script exited {rc}; starting it again from its checkpoint")
            elif verdict is not None:
                return verdict
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
        signal.signal(signal.SIGTERM, lambda *_: (agent.shutting_down.set(), agent.terminate_training()))
        rc = agent.run()
    except BaseException as e:  # noqa: BLE001 - every failure ends in the shutdown below
        (agent.log.add if agent else say)(f"trainctl-agent: failed: {e!r}; shutting this node down")
        rc = 1
        # A node reclaimed mid-setup did not fail the job: the survivors replace it (replacement.py). Nor did one
        # whose instance was already going down (SIGTERM) when its setup failed: a reclaim whose notice came
        # before the agent looked, or no notice at all; what failed was the machine leaving, not the job.
        if agent is not None and agent.shutting_down.is_set() and not agent.notice.is_set():
            agent.log.add("trainctl-agent: this instance was already shutting down (SIGTERM): not recorded as "
                          "the job's failure")
        elif agent is not None and not agent.notice.is_set():
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
