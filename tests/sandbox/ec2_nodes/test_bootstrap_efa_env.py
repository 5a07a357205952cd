"""The node agent's libfabric settings: FI_EFA_USE_DEVICE_RDMA=1 only on EFA devices with RDMA read (libfabric's
EFA provider aborts every rank that sets it on a device without, fi_efa(7)); the launch tells the agent which
types have it (p4d, p4de, p5, trn1.32xlarge, trn1n; not g5/g6 or p3dn)."""
from __future__ import annotations

import base64
import json

import pytest

from tests.support.helpers import CONFIGS, run_cli
from tests.support.node_agent_helpers import FakeImds, make_agent
from trainctl_sandbox.testing import add_nat


def _agent_env(sb, tmp_path, **cfg) -> dict[str, str]:
    imds = FakeImds("i-0efa000000000001", "10.0.0.7")
    agent = make_agent(sb, tmp_path / "node", "efa-job", imds, **cfg)
    try:
        return agent.command([agent.ip])[1]
    finally:
        agent.log.stopping.set()
        imds.close()


@pytest.mark.parametrize("accelerator", ["gpu", "neuron"])
def test_efa_without_rdma_read_uses_the_efa_provider_without_device_rdma(sandbox_env, tmp_path, monkeypatch,
                                                                         accelerator):
    monkeypatch.delenv("FI_EFA_USE_DEVICE_RDMA", raising=False)
    env = _agent_env(sandbox_env, tmp_path, efa=True, efa_rdma=False, accelerator=accelerator)
    assert env["FI_PROVIDER"] == "efa"
    assert "FI_EFA_USE_DEVICE_RDMA" not in env


def test_efa_with_rdma_read_turns_device_rdma_on(sandbox_env, tmp_path, monkeypatch):
    monkeypatch.delenv("FI_EFA_USE_DEVICE_RDMA", raising=False)
    env = _agent_env(sandbox_env, tmp_path, efa=True, efa_rdma=True)
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"


def _node_config(sb, tmp_path, layout: str) -> dict:
    spec = CONFIGS / ("vit-base-trn1.yaml" if layout.startswith("trn1") else "vit-base-g5.yaml")
    proc = run_cli(["--output", "json", "launch", str(spec), "--platform", "ec2", "--layout", layout,
                    "--region", "us-east-1", "--dry-run"], tmp_path / layout, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    template = next(r for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateLaunchTemplate")
    script = base64.b64decode(template["params"]["LaunchTemplateData"]["UserData"]).decode()
    return json.loads(script.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG\n", 1)[0])


def test_the_launch_marks_rdma_read_only_on_the_types_that_have_it(sandbox_env, tmp_path):
    add_nat(sandbox_env, "us-east-1")  # several network cards: no public IPv4
    rdma = {layout.split(":")[0]: _node_config(sandbox_env, tmp_path, layout)["efa_rdma"]
            for layout in ("g5.48xlarge:2:on-demand", "g6.12xlarge:2:on-demand",
                           "p4d.24xlarge:2:on-demand", "trn1.32xlarge:2:on-demand")}
    assert rdma == {"g5.48xlarge": False, "g6.12xlarge": False,
                    "p4d.24xlarge": True, "trn1.32xlarge": True}
