"""The node bootstrap of EC2 jobs: the user data (userdata.sh) and the node agent it installs (agent.py,
node_io.py and the other AGENT_MODULES, shipped as the package `trainctl_node`).

`render_user_data(config)` fills the template with the job's settings (JSON, no credentials) and a small
loader. The agent itself is not in the user data (EC2 allows 16 KB, which the agent outgrew): the launch
uploads `agent_archive()` to the job bucket under its sha256 (backends/ec2/agent_upload.py) and the config
names it (`agent_key`, `agent_sha256`); the loader downloads it with the instance profile, checks the hash
and extracts it. A node needs nothing but the AMI, its instance profile and the job bucket.
"""
from __future__ import annotations

import ast
import io
import json
import re
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
USER_DATA_LIMIT = 16 * 1024  # EC2's limit on user data before base64 encoding
PYTHONS = {
    "neuron": "/opt/aws_neuronx_venv_pytorch_2_9/bin/python /opt/aws_neuronx_venv_pytorch_2_8/bin/python "
              "/opt/aws_neuronx_venv_pytorch/bin/python",
    "gpu": "/opt/pytorch/bin/python /opt/conda/envs/pytorch/bin/python",
}


AGENT_MODULES = ("agent.py", "node_io.py", "checkpoints.py", "budget.py", "launch_command.py", "channels.py",
                 "outputs.py", "fsx.py", "outcome.py", "sm_env.py", "training.py", "accelerator_check.py",
                 "relaunch_claim.py", "membership.py", "replacement.py",
                 "block_end.py")
NODE_PACKAGE = "trainctl_node"  # the agent's package name on the node


def shipped_source(source: str) -> str:
    """A module as the node gets it: the same code without comments and docstrings, which are for people
    reading this repository and would only make every node's download larger."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


def agent_archive() -> bytes:
    """The agent's modules as a deterministic tar.gz (package `trainctl_node`), so the same agent gives the
    same bytes, the same sha256 and so the same S3 key (uploaded once, reused by every job)."""
    buf = io.BytesIO()
    modules = [(m, shipped_source((HERE / m).read_text()).encode()) for m in AGENT_MODULES]
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("__init__.py", b""), *modules]:
            info = tarfile.TarInfo(f"{NODE_PACKAGE}/{name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    data = bytearray(buf.getvalue())
    data[4:8] = b"\0\0\0\0"  # gzip's timestamp
    return bytes(data)


def render_user_data(config: dict) -> str:
    """The user data script (text); config is written verbatim to config.json on the node and must name the
    agent's S3 object (`agent_key`, `agent_sha256`)."""
    values = {"__JOB_ID__": config["job_id"],
              "__PYTHONS__": PYTHONS.get(config.get("accelerator", "gpu"), PYTHONS["gpu"]),
              "__CONFIG__": json.dumps(config, indent=1, sort_keys=True),
              "__NODE_PACKAGE__": NODE_PACKAGE}
    # one pass over the template: a value put in (the config holds the user's arguments) is never read again,
    # so no user value can meet a placeholder
    text = re.sub("|".join(map(re.escape, values)), lambda m: values[m.group(0)], (HERE / "userdata.sh").read_text())
    if len(text.encode()) > USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(text.encode())} bytes, over EC2's {USER_DATA_LIMIT}")
    return text
