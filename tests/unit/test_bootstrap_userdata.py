"""EC2 user data holds at most 16 KB before base64 (EC2 User Guide, "Instance user data"): the user data
carries the node config and a loader, never the node agent, which the launch puts in the job bucket."""
from __future__ import annotations

import base64
import json

from trainctl.backends.ec2.data import node_channels
from trainctl.bootstrap import USER_DATA_LIMIT, agent_archive, render_user_data
from trainctl.naming.bucket import agent_key
from trainctl.spec.data import S3Channel

SHA = "ab" * 32


def _large_config() -> dict:
    """A job with many entrypoint arguments, data channels and secrets: what makes a config large."""
    channels = {f"channel{i:02d}": S3Channel(uri=f"s3://my-datasets-{i}/corpus/shard-{i:04d}/", mode="sharded")
                for i in range(16)}
    secrets = {f"SECRET_{i:02d}": f"arn:aws:secretsmanager:us-east-1:123456789012:secret:trainctl/token-{i:02d}-AbCdEf"
               for i in range(16)}
    args = [f"--option-{i:03d}={'value-' * 4}{i}" for i in range(60)]
    return {"job_id": "llm-tiny-20260101-000000-abcdef", "region": "us-east-1",
            "bucket": "trainctl-123456789012-us-east-1", "bucket_owner": "123456789012",
            "code_key": f"trainctl/code/{SHA}/sourcedir.tar.gz", "code_sha256": SHA,
            "agent_key": agent_key(SHA), "agent_sha256": SHA, "secrets": secrets, "script": "train.py",
            "args": args, "nnodes": 16, "nproc_per_node": 8, "accelerator": "gpu", "efa": True, "efa_rdma": True,
            "master_port": 29500, "shutdown_when_done": True, "max_runtime_s": 90000, "not_after": 1893456000,
            "instance_types": ["p4d.24xlarge", "p4de.24xlarge"], "max_node_usd": 40.0,
            **node_channels(channels)}


def test_the_user_data_of_a_large_config_is_far_under_ec2s_limit():
    config = _large_config()
    size = len(render_user_data(config).encode())
    assert len(json.dumps(config, indent=1)) > 6_000  # the config is large indeed
    assert size < USER_DATA_LIMIT * 3 // 4, size


def test_the_user_data_holds_the_config_and_a_loader_not_the_agent():
    """What is not the config is a fixed few KB, whatever the agent's modules weigh: the agent is in S3."""
    config = _large_config()
    text = render_user_data(config)
    overhead = len(text.encode()) - len(json.dumps(config, indent=1, sort_keys=True).encode())
    assert overhead < 4_096, overhead
    assert len(base64.encodebytes(agent_archive())) > overhead  # the agent alone would not fit in that
    archive = base64.encodebytes(agent_archive()).decode()
    assert archive.splitlines()[1] not in text
    assert config["agent_key"] in text and config["agent_sha256"] in text  # the loader reads them from the config
