"""The SageMaker container contract of a sandbox training job: each host's /opt/ml tree, its config
files, the command (torchrun, python or sh) and the SM_* environment the SageMaker PyTorch container
gives a script-mode entry point.

Each host's process runs in a mount namespace of its own where its folder is /opt/ml (private_mounts.py), so
the script sees SageMaker's paths literally and gets exactly its hyperparameters as arguments, as the training
toolkit passes them (nothing appended). Where private mounts are not possible, the paths are the host folders'
own: SM_* variables name them, /opt/ml values of hyperparameters and Environment are rewritten to them, and
the script is given `--checkpoint-dir <host folder>/checkpoints` (unless its hyperparameters name one), which
real SageMaker never passes; the server's log says so once."""
from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainctl_sandbox.server import private_mounts
from trainctl_sandbox.server.marked_processes import MARKER_ENV
from trainctl_sandbox.sagemaker.storage import write_file

NPROC_ENV = "TRAINCTL_SANDBOX_NPROC_PER_NODE"
OPT_ML = "/opt/ml"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
FALLBACK = ("each host's /opt/ml is a folder of its own: SM_* variables name it, /opt/ml values of hyperparameters "
            "and Environment are rewritten to it, and the script gets `--checkpoint-dir <host folder>/checkpoints` "
            "appended (real SageMaker passes no such argument); a script that hard-codes /opt/ml paths fails")
GROUP = "homogeneousCluster"
# What the SageMaker toolkit treats as its own hyperparameters (not passed to the script's SM_HPS).
TOOLKIT_HYPERPARAMETERS = {
    "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_container_log_level", "sagemaker_job_name", "sagemaker_region", "sagemaker_s3_output",
}
# The server's own environment must not leak into the job's contract.
_SERVER_ONLY_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


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


def env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Container:
    """One job's container contract (the same for every host and attempt)."""

    job_name: str
    arn: str
    region: str
    request: dict[str, Any]
    instance_type: str
    checkpoint_uri: str | None
    checkpoint_local: str
    endpoint_url: str
    marker: str
    # Each host sees its own folder at /opt/ml (a private mount namespace), decided once per job.
    private: bool = field(default_factory=lambda: private_mounts.unavailable() is None)

    def seen(self, host: Host) -> Path:
        """The host's /opt/ml as its script sees it."""
        return Path(OPT_ML) if self.private else host.base

    def prepare(self, host: Host, hosts: list[Host], code_tarball: bytes, checkpoints: list[tuple[str, bytes]],
                channels: dict[str, list[tuple[str, bytes]]]) -> None:
        """The host's /opt/ml tree: the code extracted, restored checkpoints, input channels, config files.
        Raises tarfile.TarError or OSError when the code cannot be extracted."""
        for sub in ("code", "model", "checkpoints", "output/data", "output/intermediate", "input/config"):
            (host.base / sub).mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(code_tarball), mode="r:*") as tar:
            tar.extractall(host.code, filter="data")
        for rel, data in checkpoints:
            write_file(host.checkpoints / rel, data)
        for channel, files in channels.items():
            (host.base / "input" / "data" / channel).mkdir(parents=True, exist_ok=True)
            for rel, data in files:
                write_file(host.base / "input" / "data" / channel / rel, data)
        self.write_config(host, hosts)

    def write_config(self, host: Host, hosts: list[Host]) -> None:
        cfg = host.base / "input" / "config"
        (cfg / "hyperparameters.json").write_text(json.dumps(self.request.get("HyperParameters") or {}))
        (cfg / "resourceconfig.json").write_text(json.dumps(self.resource_config(host, hosts)))
        (cfg / "inputdataconfig.json").write_text(json.dumps(self.input_data_config()))
        if self.checkpoint_uri:
            (cfg / "checkpointconfig.json").write_text(
                json.dumps({"LocalPath": self.checkpoint_local, "S3Uri": self.checkpoint_uri}))

    def resource_config(self, host: Host, hosts: list[Host]) -> dict[str, Any]:
        names = [h.name for h in hosts]
        return {"current_host": host.name, "current_instance_type": self.instance_type,
                "current_group_name": GROUP, "hosts": names,
                "instance_groups": [{"instance_group_name": GROUP,
                                     "instance_type": self.instance_type, "hosts": names}],
                "network_interface_name": "eth0"}

    def input_data_config(self) -> dict[str, Any]:
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

    def map_path(self, value: str, host: Host) -> str:
        """/opt/ml paths of the container -> this host's folder (the checkpoint path first), where the host
        has no private /opt/ml; unchanged where it has."""
        if self.private:
            return value
        if value == self.checkpoint_local or value.startswith(self.checkpoint_local + "/"):
            return str(host.checkpoints) + value[len(self.checkpoint_local):]
        if value == OPT_ML or value.startswith(OPT_ML + "/"):
            return str(host.base) + value[len(OPT_ML):]
        return value

    def command(self, host: Host, hosts: list[Host], port: int) -> tuple[list[str], dict[str, str]]:
        """The host's command line and environment; sets `host.command` (what error messages show)."""
        hps = _Hyperparameters.of(self.request)
        user_args = to_cmd_args(hps.user)
        args = [self.map_path(a, host) for a in user_args]
        if not self.private:
            private_mounts.fallback_note("SageMaker", FALLBACK)
            # /opt/ml/checkpoints is not this host's: hand the script its host folder, unless the user chose
            # a checkpoint path (mapped above when it is the container's one).
            if not any(k in hps.user for k in ("checkpoint-dir", "checkpoint_dir")):
                args += ["--checkpoint-dir", str(host.checkpoints)]
        cmd, shown = self._launcher(hps, host, len(hosts), port, args)
        host.command = shlex.join(shown)
        sm = self._sm_variables(hps, host, hosts, user_args)
        env = self._environment(host, sm)
        if self.private:
            binds = {OPT_ML: str(host.base)}
            if self.checkpoint_local != DEFAULT_CHECKPOINT_PATH:  # CheckpointConfig.LocalPath elsewhere
                binds[self.checkpoint_local] = str(host.checkpoints)
            cmd = private_mounts.wrap(cmd, binds, str(self.seen(host) / "code"))
        return cmd, env

    def _launcher(self, hps: "_Hyperparameters", host: Host, nnodes: int, port: int,
                  args: list[str]) -> tuple[list[str], list[str]]:
        """torchrun when distribution is on, else python (or sh), like the SageMaker PyTorch container."""
        user_env = self.request.get("Environment") or {}
        nproc = int(user_env.get(NPROC_ENV) or os.environ.get(NPROC_ENV) or 1)
        if hps.distributed:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
                   "--node_rank", str(host.index - 1), "--nproc_per_node", str(nproc),
                   "--master_addr", "127.0.0.1", "--master_port", str(port), hps.program, *args]
            return cmd, ["torchrun", *cmd[3:]]
        if hps.program.endswith(".py"):
            cmd = [sys.executable, hps.program, *args]
            return cmd, ["python", *cmd[1:]]
        cmd = ["/bin/sh", hps.program, *args]
        return cmd, cmd

    def _training_env(self, hps: "_Hyperparameters", host: Host, hosts: list[Host],
                      channels: dict[str, str]) -> dict[str, Any]:
        """SM_TRAINING_ENV: everything the toolkit knows about the job, as one document."""
        base, names, program = self.seen(host), [h.name for h in hosts], hps.program
        resource_config = self.resource_config(host, hosts)
        return {
            "additional_framework_parameters": hps.framework, "channel_input_dirs": channels,
            "current_host": host.name, "current_instance_group": GROUP,
            "current_instance_group_hosts": names, "current_instance_type": self.instance_type,
            "distribution_hosts": names if hps.distributed else [], "distribution_instance_groups":
            [GROUP] if hps.distributed else [], "framework_module":
            "sagemaker_pytorch_container.training:main", "hosts": names, "hyperparameters": hps.user,
            "input_config_dir": str(base / "input" / "config"), "input_data_config": self.input_data_config(),
            "input_dir": str(base / "input"), "instance_groups": [GROUP],
            "instance_groups_dict": {GROUP: resource_config["instance_groups"][0]},
            "is_hetero": False, "is_master": host.index == 1, "is_modelparallel_enabled": None,
            "job_name": self.job_name, "log_level": int(hps.sagemaker.get("sagemaker_container_log_level", 20)),
            "master_hostname": "algo-1", "model_dir": str(base / "model"),
            "module_dir": str(hps.all.get("sagemaker_submit_directory")),
            "module_name": program[:-3] if program.endswith(".py") else program,
            "network_interface_name": "eth0", "num_cpus": os.cpu_count() or 1, "num_gpus": 0,
            "num_neurons": 0, "output_data_dir": str(base / "output" / "data"), "output_dir": str(base / "output"),
            "output_intermediate_dir": str(base / "output" / "intermediate"),
            "resource_config": resource_config, "user_entry_point": program,
        }

    def _sm_variables(self, hps: "_Hyperparameters", host: Host, hosts: list[Host],
                      user_args: list[str]) -> dict[str, Any]:
        """The SM_* variables (without the prefix), as the SageMaker training toolkit sets them."""
        base, names = self.seen(host), [h.name for h in hosts]
        channels = {c["ChannelName"]: str(base / "input" / "data" / c["ChannelName"])
                    for c in self.request.get("InputDataConfig") or []}
        env = self._training_env(hps, host, hosts, channels)
        sm = {
            "hosts": names, "network_interface_name": "eth0", "hps": hps.user, "user_entry_point": hps.program,
            "framework_params": hps.framework, "resource_config": env["resource_config"],
            "input_data_config": env["input_data_config"], "output_data_dir": str(base / "output" / "data"),
            "channels": sorted(channels), "current_host": host.name,
            "current_instance_type": self.instance_type, "current_instance_group": GROUP,
            "current_instance_group_hosts": names, "instance_groups": [GROUP],
            "instance_groups_dict": env["instance_groups_dict"],
            "distribution_instance_groups": env["distribution_instance_groups"],
            "is_hetero": False, "module_name": env["module_name"],
            "log_level": env["log_level"], "framework_module": env["framework_module"],
            "input_dir": str(base / "input"), "input_config_dir": str(base / "input" / "config"),
            "output_dir": str(base / "output"), "num_cpus": env["num_cpus"], "num_gpus": 0,
            "num_neurons": 0, "model_dir": str(base / "model"), "module_dir": env["module_dir"],
            "training_env": env, "user_args": user_args,
            "output_intermediate_dir": env["output_intermediate_dir"],
        }
        sm.update({f"channel_{name}": path for name, path in channels.items()})
        sm.update({f"hp_{key}": value for key, value in hps.user.items()})
        return sm

    def _environment(self, host: Host, sm: dict[str, Any]) -> dict[str, str]:
        env = dict(os.environ)  # the "image": this interpreter and its packages
        for key in [k for k in env if k.startswith(("SM_", "TORCHELASTIC_")) or k in _SERVER_ONLY_ENV]:
            del env[key]
        env.update({
            # AWS calls from the job go to the sandbox, never to a real account
            "AWS_ENDPOINT_URL": self.endpoint_url, "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "PYTHONUNBUFFERED": "TRUE", "OMP_NUM_THREADS": "1",
            "TRAINING_JOB_NAME": self.job_name, "TRAINING_JOB_ARN": self.arn,
            "SAGEMAKER_BASE_DIR": str(self.seen(host)), "CURRENT_HOST": host.name,
        })
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        if Path("/sys/class/net/lo").exists():
            env["GLOO_SOCKET_IFNAME"] = "lo"  # all "hosts" share this machine's loopback
        user_env = self.request.get("Environment") or {}
        env.update({k: self.map_path(str(v), host) for k, v in user_env.items()})
        env.update({f"SM_{k.upper()}": env_value(v) for k, v in sm.items()})
        env[MARKER_ENV] = self.marker
        return env


@dataclass(frozen=True)
class _Hyperparameters:
    """HyperParameters decoded as the toolkit does, split into the script's and the toolkit's."""

    all: dict[str, Any]
    user: dict[str, Any]          # passed to the script (SM_HPS, command-line arguments)
    sagemaker: dict[str, Any]     # sagemaker_* ones
    framework: dict[str, Any]     # sagemaker_* ones that are not the toolkit's own

    @classmethod
    def of(cls, request: dict[str, Any]) -> "_Hyperparameters":
        decoded = {k: decode_hyperparameter(v) for k, v in (request.get("HyperParameters") or {}).items()}
        sagemaker = {k: v for k, v in decoded.items() if k.startswith("sagemaker_")}
        return cls(all=decoded, user={k: v for k, v in decoded.items() if not k.startswith("sagemaker_")},
                   sagemaker=sagemaker,
                   framework={k: v for k, v in sagemaker.items() if k not in TOOLKIT_HYPERPARAMETERS})

    @property
    def program(self) -> str:
        return str(self.all["sagemaker_program"])

    @property
    def distributed(self) -> bool:
        return self.all.get("sagemaker_torch_distributed_enabled") in (True, "true", "True")
