"""The node's torchrun command line and environment: its rank among the job's nodes (sorted private IPs), the
master's address, the socket interface gloo/NCCL use, and the EFA and Neuron settings of the instance type.
The script gets exactly the job's arguments (`entrypoint.args` and, for a bundled entrypoint, the plan's), nothing
appended: where to checkpoint and write the model is SageMaker's contract (/opt/ml/..., SM_* in sm_env.py)."""
from __future__ import annotations

import os
import subprocess
import sys


def interface_of(ip: str) -> str | None:
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == ip:
            return fields[1]
    return None


def torchrun_command(cfg: dict, ips: list[str], ip: str, code_dir: str, master_port: int,
                     env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    rank, master = ips.index(ip), ips[0]
    reach = os.environ.get("TRAINCTL_MASTER_ADDR") or master  # nodes sharing one host (the sandbox's)
    nproc = int(os.environ.get("TRAINCTL_NPROC_PER_NODE") or cfg["nproc_per_node"])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(ips)), "--node_rank", str(rank),
           "--master_addr", reach, "--master_port", str(master_port),
           "--nproc_per_node", str(nproc),
           # the ranks' stderr through a file and back to the console, each line marked with its rank: the agent
           # tells the script's error (the failure reason) from torchrun's own report (training.py)
           "--redirects", "2", "--tee", "2", os.path.join(code_dir, cfg["script"]),
           *[str(a) for a in cfg.get("args", [])]]
    env.setdefault("OMP_NUM_THREADS", "1")
    iface = interface_of(ip)
    if iface:  # gloo/NCCL would otherwise pick whatever the host name resolves to
        for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
            env.setdefault(name, iface)
    if cfg.get("accelerator") == "neuron":
        env.setdefault("NEURON_RT_ROOT_COMM_ID", f"{master}:46820")
    if cfg.get("efa"):
        env.setdefault("FI_PROVIDER", "efa")
        if cfg.get("accelerator") == "neuron":
            env.setdefault("FI_EFA_FORK_SAFE", "1")
    if cfg.get("efa_rdma"):  # only where the device has RDMA read: libfabric aborts every rank elsewhere
        env.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
    return cmd, env
