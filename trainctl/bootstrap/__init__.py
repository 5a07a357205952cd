"""The node bootstrap of EC2 jobs: the user data (userdata.sh) and the node agent it installs (agent.py).

`render_user_data(config)` fills the template with the job's settings (JSON, no credentials) and the
agent itself, so a node needs nothing but the AMI, its instance profile and the job's S3 prefix.
"""
from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
USER_DATA_LIMIT = 16 * 1024  # EC2's limit on user data before base64 encoding
PYTHONS = {
    "neuron": "/opt/aws_neuronx_venv_pytorch_2_9/bin/python /opt/aws_neuronx_venv_pytorch_2_8/bin/python "
              "/opt/aws_neuronx_venv_pytorch/bin/python",
    "gpu": "/opt/pytorch/bin/python /opt/conda/envs/pytorch/bin/python",
}


def agent_source() -> str:
    return (HERE / "agent.py").read_text()


def render_user_data(config: dict) -> str:
    """The user data script (text); config is written verbatim to config.json on the node."""
    agent = base64.encodebytes(gzip.compress(agent_source().encode(), mtime=0)).decode().strip()
    text = ((HERE / "userdata.sh").read_text()
            .replace("__JOB_ID__", config["job_id"])
            .replace("__PYTHONS__", PYTHONS.get(config.get("accelerator", "gpu"), PYTHONS["gpu"]))
            .replace("__CONFIG__", json.dumps(config, indent=1, sort_keys=True))
            .replace("__AGENT__", agent))
    if len(text.encode()) > USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(text.encode())} bytes, over EC2's {USER_DATA_LIMIT}")
    return text
