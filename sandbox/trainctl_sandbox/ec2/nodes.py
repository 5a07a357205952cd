"""EC2 instances that really run: every instance the sandbox launches (CreateFleet, RunInstances) runs its
launch's own user data, as cloud-init runs it on first boot (EC2 User Guide, "Run commands when you launch an
EC2 instance with user data input"), as a local process: a session of its own, its own root folder, the
instance's IMDS (imds.py, with the instance profile's credentials) and the sandbox as its AWS endpoint.

What an instance is, on one machine:
- its network is this machine's loopback. Nodes of one job rank each other by their private IPs (from IMDS and
  DescribeInstances, as on AWS) and reach the master at 127.0.0.1 on a port of the job's own
  (TRAINCTL_MASTER_ADDR/TRAINCTL_MASTER_PORT in the node's environment, GLOO_SOCKET_IFNAME=lo): no namespace,
  no root, and two jobs never share a rendezvous port;
- `shutdown` inside it is a command on the node's PATH that asks the sandbox to shut the instance down
  (`shutdown_instance`: its InstanceInitiatedShutdownBehavior decides, terminate or stop); `shutdown -h +N`
  does so N minutes later, as on Linux;
- when the instance stops or terminates, whatever ended it (its owner, a Spot reclaim, its own shutdown), its
  processes get SIGTERM, then SIGKILL after STOP_GRACE_S: the operating system going down;
- the machine has room for `max_nodes` running instances, a Spot one in its interruption notice not counted
  (default: its CPU count, at least 2;
  TRAINCTL_SANDBOX_MAX_NODES or the admin action `configure_instances` change it). An instance launched beyond
  that cannot run: it ends at once with StateReason Server.InsufficientInstanceCapacity (EC2 API Reference,
  StateReason), naming the limit, and bills nothing.
Its accelerators are its type's, as its image lets it see them (machines.py: a stand-in `nvidia-smi`, the Neuron
device files): an image that does not list the instance's family drives no GPU there.
- its disk: the node's folder (its "root"), a filesystem the size of the free part of its root volume
  (node_disks.py: a node whose data does not fit gets ENOSPC, as on a full disk), seen by the node's processes at the paths of a real node: the user
  data and everything it starts run in a mount namespace of their own (private_mounts.py) where the folder's
  `ml/` is /opt/ml (SageMaker's paths, which the node agent gives the script) and its `opt/` is /opt/trainctl
  (the agent's own folder, TRAINCTL_ROOT). Without root the node uses the folders' own paths instead
  (TRAINCTL_ROOT=<root>/opt, so the agent's /opt/ml is <root>/ml), and the server's log says so once;
An instance whose subnet cannot reach S3, EC2 and CloudWatch Logs (vpc_reach) runs nothing, as its agent
could reach nothing on AWS: it never checks in, and `trainctl watch` says so. An instance without user data
runs nothing either. `configure_instances(run_user_data=False)` keeps every instance idle (the tests of the
control plane use it); the sandbox's check-in stands in for the agent then (node_agents.py).
"""
from __future__ import annotations

import base64
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainctl_sandbox.server import private_mounts
from trainctl_sandbox.ec2 import imds, lustre, machines, mountpoint, node_disks, node_paths
from trainctl_sandbox.ec2.node_paths import AGENT_ROOT, OPT_ML
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.marked_processes import MARKER_ENV, port_block, terminate

JOB_TAG = "trainctl:job"
FALLBACK = ("each node's /opt/ml is <node folder>/ml and its agent's /opt/trainctl is <node folder>/opt: the node agent "
            "names those paths (SM_* variables), and a script that hard-codes /opt/ml paths fails")
STOP_GRACE_S = 10.0         # SIGTERM -> SIGKILL when an instance goes down
WATCH_INTERVAL_S = 0.25     # how soon a node's processes follow its instance's state
NO_ROOM = ("Server.InsufficientInstanceCapacity",
           "There was insufficient capacity available to satisfy the launch request")
# The node agent's timings (trainctl/bootstrap/agent.py reads TRAINCTL_<NAME>): shorter here, as the SageMaker
# jobs' simulated waits are, so that a demo's interruption and recovery take seconds.
AGENT_TIMINGS = {"TRAINCTL_SPOT_POLL_S": "1", "TRAINCTL_PEER_POLL_S": "1", "TRAINCTL_STOP_POLL_S": "2",
                 "TRAINCTL_CHECKPOINT_SYNC_S": "3",
                 # unattended recovery (bootstrap/replacement.py): refused tries again after 2 s (AWS: 15 s, doubling),
                 # and an on-demand fallback after 20 s of Spot refusals (AWS: 10 minutes)
                 "TRAINCTL_REPLACE_BACKOFF_S": "2", "TRAINCTL_SPOT_TRY_S": "20"}

SHUTDOWN_SCRIPT = """#!{python}
# `shutdown` inside sandbox instance {instance}: asks the sandbox (its EC2) to shut this instance down.
import json, sys, urllib.request
when = next((a for a in sys.argv[1:] if a == "now" or a.startswith("+")), "now")
if "-c" in sys.argv[1:]:
    sys.exit(0)
after = 0 if when == "now" else 60 * int(when[1:] or 0)
body = json.dumps({{"instance_id": "{instance}", "after_seconds": after}}).encode()
req = urllib.request.Request("{endpoint}/_trainctl/admin/shutdown_instance", data=body, method="POST",
                             headers={{"Content-Type": "application/json"}})
try:
    urllib.request.urlopen(req, timeout=10).read()
except Exception as e:
    print(f"shutdown: {{e}}", file=sys.stderr)
    sys.exit(1)
"""


@dataclass
class Node:
    instance: Any            # moto's Instance
    job: str | None
    root: Path
    proc: subprocess.Popen | None = None
    stopped: bool = False
    private: bool = False    # its processes see its folders at /opt/ml and /opt/trainctl


@dataclass
class Nodes:
    run_user_data: bool = True
    max_nodes: int = 0
    cuda: str = "host"   # the GPUs CUDA shows a node's processes (machines.py CUDA_MODES)
    disk_gib_bytes: int = node_disks.GIB   # bytes a GiB of a node's volume holds (node_disks.py: the scale)
    mount_s3: bool = False   # whether the nodes' image has Mountpoint for Amazon S3 (mountpoint.py)
    nodes: dict[str, Node] = field(default_factory=dict)
    refused: list[tuple[Any, str]] = field(default_factory=list)   # (instance, StateReason message)
    ports: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    watcher: threading.Thread | None = None
    closing: threading.Event = field(default_factory=threading.Event)


def default_max_nodes() -> int:
    configured = os.environ.get("TRAINCTL_SANDBOX_MAX_NODES")
    return int(configured) if configured else max(2, os.cpu_count() or 1)


def _nodes(ctx: SandboxContext) -> Nodes:
    return ctx.state.setdefault("ec2_nodes", Nodes(max_nodes=default_max_nodes(),
                                                   disk_gib_bytes=node_disks.default_gib_bytes()))


def console_path(node: Node) -> Path:
    """What GetConsoleOutput would show: the serial console, not on the node's disk (a full disk keeps it)."""
    return node.root.with_name(node.root.name + ".console.log")


def _live(instance: Any) -> bool:
    return instance._state.name in ("pending", "running")


def _leaving(instance: Any) -> bool:
    """A Spot node in its interruption notice: it only checkpoints and is gone within two minutes, so it takes
    no room from its replacement (on a 2-CPU machine counting it refused the replacement, and `watch --recover`
    failed the job)."""
    from trainctl_sandbox.ec2.interrupts import notice_of

    return notice_of(instance.id) is not None


def _user_data(instance: Any) -> str | None:
    raw = getattr(instance, "user_data", None)
    if raw is None:
        return None
    if isinstance(raw, list):  # moto keeps RunInstances' user data as a one-element list
        raw = raw[0] if raw else None
    if raw is None:
        return None
    text = raw.decode() if hasattr(raw, "as_bytes") else base64.b64decode(raw if isinstance(raw, (str, bytes))
                                                                         else str(raw)).decode(errors="replace")
    return text if text.strip() else None


def _tag(instance: Any, key: str) -> str | None:
    return next((t["value"] for t in instance.get_tags() if t["key"] == key), None)


def _environment(ctx: SandboxContext, node: Node, port: int) -> dict[str, str]:
    base = imds.endpoint(ctx, node.instance.id)
    env = {"PATH": f"{node.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(node.root / "home"), "LANG": "C.UTF-8",
           "TRAINCTL_ROOT": AGENT_ROOT if node.private else str(node.root / "opt"),
           "TRAINCTL_PYTHON": sys.executable, "TRAINCTL_IMDS_ENDPOINT": base,
           # boto3 on the node: the sandbox as its endpoint, credentials from this instance's IMDS only
           "AWS_ENDPOINT_URL": ctx.endpoint_url, "AWS_EC2_METADATA_SERVICE_ENDPOINT": base + "/",
           "AWS_CONFIG_FILE": str(node.root / "no-aws-config"),
           "AWS_SHARED_CREDENTIALS_FILE": str(node.root / "no-aws-credentials"),
           "TRAINCTL_MASTER_ADDR": "127.0.0.1", "TRAINCTL_MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo",
           "TRAINCTL_NPROC_PER_NODE": os.environ.get("TRAINCTL_SANDBOX_NPROC_PER_NODE", "1"),
           "OMP_NUM_THREADS": "1", MARKER_ENV: f"ec2/{node.instance.id}", **AGENT_TIMINGS}
    if os.environ.get("PYTHONPATH"):  # a checkout run without installing: the node imports what the sandbox does
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _refuse(refused: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """End the instances that cannot run; the ones whose launch has not finished yet (moto's fleet record is
    made after its instances) wait for the next round."""
    from trainctl_sandbox.ec2.interrupts import ended

    later = []
    for instance, message in refused:
        if not _live(instance):
            continue
        try:
            instance.terminate()
        except AttributeError:
            later.append((instance, message))
            continue
        ended(instance, NO_ROOM[0], message)
    return later


def _reachable(account: str, region: str, instance: Any) -> bool:
    from trainctl_sandbox.ec2 import vpc_reach

    if not instance.subnet_id:
        return True
    route = vpc_reach.reach(account, region, instance.subnet_id)
    return all(route.reaches(service, bool(instance.public_ip)) for service in vpc_reach.AGENT_SERVICES)


def start(ctx: SandboxContext, account: str, region: str, instances: list[Any]) -> list[str]:
    """Boot `instances`: run each one's user data. Returns the ids that run a process (the others are idle,
    or could not run and ended)."""
    state = _nodes(ctx)
    if not state.run_user_data:
        return []
    started = []
    for instance in instances:
        script = _user_data(instance)
        if script is None or not _reachable(account, region, instance):
            continue
        with state.lock:
            running = sum(1 for n in state.nodes.values() if _live(n.instance) and not _leaving(n.instance))
            if running >= state.max_nodes:
                # It fails as it boots, once its launch has answered (the watcher ends it).
                state.refused.append((instance, f"{NO_ROOM[1]} (the sandbox runs at most {state.max_nodes} "
                                                f"instances at once on this machine and {running} are running; "
                                                "TRAINCTL_SANDBOX_MAX_NODES sets it)"))
                continue
            job = _tag(instance, JOB_TAG)
            key = job or instance.id
            if key not in state.ports:  # the job's block of ports (marked_processes.port_block)
                state.ports[key] = port_block(set(state.ports.values()))
            port = state.ports[key]
            node = Node(instance, job, Path(ctx.workdir) / "ec2" / instance.id)
            state.nodes[instance.id] = node
        _boot(ctx, node, script, port, region)
        started.append(instance.id)
    _ensure_watcher(ctx, state)
    return started


def _boot(ctx: SandboxContext, node: Node, script: str, port: int, region: str) -> None:
    node_disks.mount(node.root, node_disks.free_bytes(node.instance, _nodes(ctx).disk_gib_bytes))
    for sub in ("bin", "home", "opt", "ml"):
        (node.root / sub).mkdir(parents=True, exist_ok=True)
    node.private = private_mounts.unavailable() is None
    if not node.private:
        private_mounts.fallback_note("EC2", FALLBACK)
    shutdown = node.root / "bin" / "shutdown"
    shutdown.write_text(SHUTDOWN_SCRIPT.format(python=sys.executable, instance=node.instance.id,
                                               endpoint=ctx.endpoint_url))
    shutdown.chmod(0o755)
    (node.root / "bin" / "poweroff").symlink_to(shutdown)
    lustre.helpers(ctx, node.root / "bin", node.instance.id)  # the AMI's Lustre client: mount -t lustre
    if _nodes(ctx).mount_s3:
        mountpoint.install(node.root / "bin", node.instance.id)
    # its GPUs/Neuron devices, as its image sees them, and the ones CUDA shows its processes
    devices = machines.install(node.root, node.instance, region, _nodes(ctx).cuda)
    user_data = node.root / "user-data"
    user_data.write_text(script)
    console = open(console_path(node), "ab")
    shell = ["bash", str(user_data)] if not script.startswith("#!") else shlex.split(script.splitlines()[0][2:]) \
        + [str(user_data)]
    if node.private:
        folders = {OPT_ML: node.root / "ml", AGENT_ROOT: node.root / "opt"}
        node_paths.register(ctx, node.instance.id, folders)
        shell = private_mounts.wrap(shell, {k: str(v) for k, v in folders.items()}, str(node.root))
    node.proc = subprocess.Popen(shell, cwd=node.root, env={**_environment(ctx, node, port), **devices},
                                 stdin=subprocess.DEVNULL,
                                 stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
    console.close()


def _ensure_watcher(ctx: SandboxContext, state: Nodes) -> None:
    with state.lock:
        if state.watcher is not None and state.watcher.is_alive():
            return
        state.watcher = threading.Thread(target=_watch, args=(state,), name="sandbox-ec2-nodes", daemon=True)
        state.watcher.start()


def _watch(state: Nodes) -> None:
    """Each node's processes follow its instance: an instance that is no longer pending or running goes down."""
    while not state.closing.wait(WATCH_INTERVAL_S):
        with state.lock:
            ending = [n for n in state.nodes.values() if not n.stopped and not _live(n.instance)]
            for node in ending:
                node.stopped = True
            state.refused = _refuse(state.refused)
            done = [i for i, n in state.nodes.items() if n.stopped and (n.proc is None or n.proc.poll() is not None)]
            for instance_id in done:
                gone = state.nodes.pop(instance_id)
                if gone.instance._state.name == "terminated":  # its volume is deleted with it (DeleteOnTermination)
                    node_disks.unmount(gone.root)
        for node in ending:
            threading.Thread(target=_power_off, args=(node, STOP_GRACE_S), daemon=True).start()


def _power_off(node: Node, grace: float) -> None:
    if node.proc is not None:
        terminate(f"ec2/{node.instance.id}", [node.proc], grace, lambda: False)


def info(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    state = _nodes(ctx)
    with state.lock:
        return {"run_user_data": state.run_user_data, "max_nodes": state.max_nodes, "cuda": state.cuda,
                "disk_gib_bytes": state.disk_gib_bytes, "mount_s3": state.mount_s3,
                "nodes": {i: {"job": n.job, "root": str(n.root), "console": str(console_path(n)),
                              "private_opt_ml": n.private,
                              "running": n.proc is not None and n.proc.poll() is None}
                          for i, n in state.nodes.items()}}


def configure_instances(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """run_user_data (bool), max_nodes (int >= 1), cuda (machines.CUDA_MODES), disk_gib_bytes (int >= 1024, or 0: the
    disk scale of node_disks.py, 0 for none, for instances launched afterwards), mount_s3 (bool: the nodes have
    mount-s3, mountpoint.py); answers the settings now in force."""
    state = _nodes(ctx)
    known = ("run_user_data", "max_nodes", "cuda", "disk_gib_bytes", "mount_s3")
    unknown = set(payload) - set(known)
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    if "disk_gib_bytes" in payload and 0 < int(payload["disk_gib_bytes"]) < 1024:
        raise ValueError("disk_gib_bytes must be 0 (no disk sizes) or >= 1024")
    if "cuda" in payload and payload["cuda"] not in machines.CUDA_MODES:
        raise ValueError(f"cuda must be one of {', '.join(machines.CUDA_MODES)}")
    with state.lock:
        if "cuda" in payload:
            state.cuda = payload["cuda"]
        if "run_user_data" in payload:
            state.run_user_data = bool(payload["run_user_data"])
        if "disk_gib_bytes" in payload:
            state.disk_gib_bytes = int(payload["disk_gib_bytes"])
        if "mount_s3" in payload:
            state.mount_s3 = bool(payload["mount_s3"])
        if "max_nodes" in payload:
            if int(payload["max_nodes"]) < 1:
                raise ValueError("max_nodes must be >= 1")
            state.max_nodes = int(payload["max_nodes"])
    return info(ctx, {})


def _stop_all(ctx: SandboxContext) -> None:
    state = _nodes(ctx)
    with state.lock:
        nodes = list(state.nodes.values())
        state.nodes.clear()
        state.ports.clear()
        state.refused.clear()
    threads = [threading.Thread(target=_power_off, args=(n, 0.5), daemon=True) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    node_disks.unmount_all(Path(ctx.workdir) / "ec2")


def reset(ctx: SandboxContext) -> None:
    """Every instance is gone with moto's state: its processes too; the settings go back to their defaults."""
    _stop_all(ctx)
    state = _nodes(ctx)
    with state.lock:
        state.run_user_data, state.max_nodes = True, default_max_nodes()
        state.disk_gib_bytes = node_disks.default_gib_bytes()


def shutdown(ctx: SandboxContext) -> None:
    _nodes(ctx).closing.set()
    _stop_all(ctx)


ADMIN_ACTIONS = {"configure_instances": configure_instances, "instance_nodes": info}
