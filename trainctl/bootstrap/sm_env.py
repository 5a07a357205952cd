"""SageMaker's training contract on an EC2 node: the SM_* environment and the /opt/ml/input/config files, as the
SageMaker training toolkit sets them (sagemaker-training-toolkit `environment.Environment.to_env_vars` and
`mapping.to_env_vars`: names SM_<PROPERTY>, strings as they are, everything else JSON with sorted keys and no
spaces), so a script written for SageMaker reads the same names and formats on both platforms.

Hosts are named as SageMaker names them, `algo-1` ... `algo-N`, by rank (the agent ranks the nodes by sorted
private IP); on EC2 these names do not resolve: the master's address is torchrun's MASTER_ADDR, as on SageMaker.
The script's arguments are exactly `entrypoint.args` (the config's `args`, already in the toolkit's form:
`mapping.to_cmd_args`), and SM_HPS holds them decoded as the toolkit decodes hyperparameters.json.
"""
from __future__ import annotations

import json
import os

GROUP = "homogeneousCluster"


def env_value(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def decode(value: str):
    """A command-line value as the toolkit's SM_HPS holds it: JSON where it parses, Python's True/False as
    booleans (the rule trainctl passes booleans by), the string otherwise."""
    if value in ("True", "False"):
        return value == "True"
    try:
        return json.loads(value)
    except ValueError:
        return value


def hyperparameters(args: list[str]) -> dict:
    """`--key value` pairs back into the mapping they were made from."""
    args = [str(a) for a in args]
    return {k.lstrip("-"): decode(v) for k, v in zip(args[::2], args[1::2])}


def resource_config(rank: int, nnodes: int, instance_type: str, iface: str) -> dict:
    hosts = [f"algo-{i + 1}" for i in range(nnodes)]
    return {"current_host": hosts[rank], "current_instance_type": instance_type, "current_group_name": GROUP,
            "current_instance_group": GROUP,
            "hosts": hosts, "instance_groups": [{"instance_group_name": GROUP, "instance_type": instance_type,
                                                 "hosts": hosts}], "network_interface_name": iface}


def write_config(ml: str, hps: dict, resources: dict) -> None:
    """hyperparameters.json (every value a string, as CreateTrainingJob's HyperParameters) and resourceconfig.json;
    inputdataconfig.json is the channels' (channels.py)."""
    folder = os.path.join(ml, "input", "config")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "hyperparameters.json"), "w") as f:
        json.dump({k: json.dumps(v) for k, v in hps.items()}, f)
    with open(os.path.join(folder, "resourceconfig.json"), "w") as f:
        json.dump(resources, f)


def sm_variables(cfg: dict, ml: str, rank: int, nnodes: int, channel_env: dict[str, str], instance_type: str,
                 iface: str, devices: dict[str, int]) -> dict[str, str]:
    """The SM_* variables of this node's training (channel variables from channels.py included). `devices` is what
    the node has, counted as the toolkit counts it (accelerator_check.check), never the plan's guess: the bundled
    scripts take their device from SM_NUM_GPUS/SM_NUM_NEURONS."""
    hps = hyperparameters(cfg.get("args") or [])
    resources = resource_config(rank, nnodes, instance_type, iface)
    program = cfg["script"]
    channels = json.loads(channel_env.get("SM_CHANNELS", "[]"))
    props = {
        "hosts": resources["hosts"], "current_host": resources["current_host"],
        "current_instance_type": instance_type, "current_instance_group": GROUP,
        "current_instance_group_hosts": resources["hosts"], "instance_groups": [GROUP],
        "network_interface_name": iface, "hps": hps, "user_entry_point": program,
        "module_name": program[:-3] if program.endswith(".py") else program,
        "module_dir": os.path.join(ml, "code"), "framework_params": {}, "framework_module": "",
        "resource_config": resources, "log_level": 20, "is_hetero": False,
        "input_dir": os.path.join(ml, "input"), "input_config_dir": os.path.join(ml, "input", "config"),
        "output_dir": os.path.join(ml, "output"), "output_data_dir": os.path.join(ml, "output", "data"),
        "output_intermediate_dir": os.path.join(ml, "output", "intermediate"),
        "model_dir": os.path.join(ml, "model"), "num_cpus": os.cpu_count() or 1,
        "num_gpus": int(devices.get("num_gpus", 0)), "num_neurons": int(devices.get("num_neurons", 0)),
        "user_args": [str(a) for a in cfg.get("args") or []], "channels": channels,
    }
    props["training_env"] = {**{k: v for k, v in props.items() if k not in ("hps", "user_args", "framework_params")},
                             "hyperparameters": hps, "additional_framework_parameters": {},
                             "channel_input_dirs": {c: channel_env.get(f"SM_CHANNEL_{c.upper()}") for c in channels},
                             "input_data_config": json.loads(channel_env.get("SM_INPUT_DATA_CONFIG", "{}")),
                             "job_name": cfg["job_id"], "is_master": rank == 0,
                             "master_hostname": resources["hosts"][0]}
    props.update({f"hp_{k}": v for k, v in hps.items()})
    env = {f"SM_{k.upper()}": env_value(v) for k, v in props.items()}
    env.update(channel_env)
    write_config(ml, hps, resources)
    return env
