"""Fixtures of the backend tests: the sandbox with a NAT (p4d nodes get no public IPv4) and the EC2 test spec."""
from __future__ import annotations

import pytest

from tests.support.ec2_jobs import SPEC
from trainctl.aws import clients as aws
from trainctl.spec import load_spec
from trainctl_sandbox.testing import add_nat


@pytest.fixture
def env(sandbox_env, tmp_path):
    """(the sandbox, the EC2 test spec loaded, its path), trainctl's session fresh before and after."""
    add_nat(sandbox_env)  # p4d nodes get no public IPv4: the default VPC routed through a NAT, as a user would
    aws.reset_session()
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(SPEC)
    yield sandbox_env, load_spec(spec_path), str(spec_path)
    aws.reset_session()
