"""The sandbox's pytest plugin: one sandbox server per test session, reset before every test that uses it.

trainctl's tests (tests/) and the sandbox's own (sandbox/tests/) load it from their conftest.py with
`pytest_plugins = ["trainctl_sandbox.testing"]`; pytest registers it once, so both folders share one
server in a run. The fixtures: `sandbox`, `sandbox_env`, `sm` (and the session's `sandbox_server`).

The server runs as a subprocess, as users meet it (`trainctl sandbox up --detach`), on a free
port, with its state files in a temporary TRAINCTL_HOME. It watches pytest's pid and stops by
itself if pytest dies; at the end of the session it is stopped with everything it started.

    def test_x(sandbox):                 # a clean, freshly seeded sandbox
        ec2 = sandbox.client("ec2")      # boto3 over HTTP, fake credentials, standard retries
        sandbox.admin.throttle("RunInstances", 2)

    def test_y(sandbox_env):             # the same, with AWS_* pointing at it in os.environ
        ...
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trainctl_sandbox.server import process
from trainctl_sandbox.admin import SandboxAdmin


@dataclass
class Sandbox:
    endpoint_url: str
    env: dict[str, str]
    admin: SandboxAdmin
    state_dir: Path
    pid: int
    _clients: dict = field(default_factory=dict, repr=False)

    def client(self, service: str, region: str = process.DEFAULT_REGION, **config: Any):
        """A boto3 client of the sandbox (standard retry mode unless `retries` says otherwise)."""
        import boto3
        from botocore.config import Config

        key = (service, region, repr(sorted(config.items())))
        if key not in self._clients:
            cfg = Config(retries=config.pop("retries", {"mode": "standard"}), **config)
            self._clients[key] = boto3.session.Session().client(
                service, region_name=region, endpoint_url=self.endpoint_url, config=cfg,
                aws_access_key_id=process.FAKE_ACCESS_KEY, aws_secret_access_key=process.FAKE_SECRET_KEY)
        return self._clients[key]


@pytest.fixture(scope="session")
def sandbox_server(tmp_path_factory) -> Sandbox:
    directory = tmp_path_factory.mktemp("trainctl-home") / "sandbox"
    state = process.start_detached(port=0, seed=0, directory=directory, parent_pid=os.getpid(), wait_ec2=True)
    sb = Sandbox(endpoint_url=state["endpoint_url"], env=process.sandbox_env(state["endpoint_url"]),
                 admin=SandboxAdmin(state["endpoint_url"]), state_dir=directory, pid=state["pid"])
    try:
        yield sb
    finally:
        _read_call_log(sb)
        process.stop(directory)


@pytest.fixture
def sandbox(sandbox_server: Sandbox) -> Sandbox:
    """The session's sandbox, reset (moto state, extensions, faults, quotas) and seeded again. Its instances stay
    idle (no user data runs): most tests check the control plane, and an instance of theirs would otherwise
    start a node agent and a training; `ec2_nodes` is the sandbox whose instances run, as `sandbox up`'s do."""
    sandbox_server.admin.reset()
    sandbox_server.admin.action("configure_instances", run_user_data=False)
    return sandbox_server


@pytest.fixture
def ec2_nodes(sandbox_env: Sandbox) -> Sandbox:
    """`sandbox_env` whose EC2 instances run their user data (the node agent) as the sandbox normally does."""
    sandbox_env.admin.action("configure_instances", run_user_data=True)
    yield sandbox_env
    sandbox_env.admin.action("configure_instances", run_user_data=False)


@pytest.fixture
def sandbox_env(sandbox: Sandbox, monkeypatch, tmp_path) -> Sandbox:
    """The sandbox, with the environment pointing boto3, the AWS CLI and trainctl at it.

    Every AWS_* variable of the developer's shell is removed first (a profile, a session token or a
    per-service endpoint would otherwise leak into the test), config files are pointed at nothing,
    and TRAINCTL_HOME is a fresh folder."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "trainctl-home"))
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    return sandbox


# ------------------------------------------------------------------ session-wide IAM policy check
# The sandbox counts every call whose User-Agent carries trainctl/ (sandbox/trainctl_sandbox/server/call_log.py). When
# the session's sandbox stops, its log is read; at the end of the session any call that the policy of
# trainctl/iam/ does not cover fails the run (tests/sandbox/iam/test_iam_policy.py checks the other direction).
_SESSION_CALLS: set[str] = set()


def _read_call_log(sb: Sandbox) -> None:
    try:
        _SESSION_CALLS.update(f"{c['service']}:{c['operation']}" for c in sb.admin.call_log())
    except Exception as e:  # noqa: BLE001 - a sandbox that died is reported by its own tests
        print(f"\ncould not read the sandbox's call log: {e}")


def _uncovered() -> list[str]:
    from trainctl.iam import CALLS

    return sorted(_SESSION_CALLS - {c.operation for c in CALLS})


def pytest_sessionfinish(session, exitstatus):
    if _SESSION_CALLS and _uncovered() and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _SESSION_CALLS:
        return
    missing = _uncovered()
    if missing:
        terminalreporter.write_line(f"IAM policy check FAILED: trainctl made calls that trainctl/iam/ does not "
                                    f"allow: {', '.join(missing)}", red=True)
    else:
        terminalreporter.write_line(f"IAM policy check: all {len(_SESSION_CALLS)} kinds of AWS call trainctl made "
                                    "in this session are allowed by `trainctl iam-policy`")


def default_vpc(sb: Sandbox, region: str = process.DEFAULT_REGION) -> tuple[str, str]:
    """(the default VPC's id, its main route table's id)."""
    ec2 = sb.client("ec2", region)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]
    return vpc, next(t["RouteTableId"] for t in tables if any(a.get("Main") for a in t.get("Associations", [])))


def add_nat(sb: Sandbox, region: str = process.DEFAULT_REGION) -> str:
    """What a user adds to the default VPC (which has public subnets only, AWS's as the sandbox's) for hosts
    without a public IPv4 (SageMaker VPC jobs, multi-card EC2 nodes): a NAT gateway in a new public subnet,
    and the main route table's default route through it, so that the default subnets become private with NAT.
    Made with EC2's own calls, as the user would; returns the NAT gateway's id."""
    ec2 = sb.client("ec2", region)
    vpc, main = default_vpc(sb, region)
    routes = ec2.describe_route_tables(RouteTableIds=[main])["RouteTables"][0]["Routes"]
    made = next((r["NatGatewayId"] for r in routes if r.get("DestinationCidrBlock") == "0.0.0.0/0"
                 and r.get("NatGatewayId")), None)
    if made:  # already there (a test that launches twice): one NAT is enough
        return made
    igw = ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [vpc]}])[
        "InternetGateways"][0]["InternetGatewayId"]
    az = ec2.describe_availability_zones()["AvailabilityZones"][0]["ZoneName"]
    public = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.240.0/24", AvailabilityZone=az)["Subnet"]["SubnetId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    ec2.associate_route_table(RouteTableId=table, SubnetId=public)
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=eip)["NatGateway"]["NatGatewayId"]
    ec2.replace_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    return nat


def admit_data_buckets(sb: Sandbox, *buckets: str) -> None:
    """What an administrator does for a team's data (docs/security.md): a new default version of the permissions
    boundary that lets job roles read `buckets` (`trainctl iam-policy --role boundary --data-bucket B`)."""
    import json

    from trainctl.iam import BOUNDARY_POLICY
    from trainctl.iam.boundary import boundary_policy

    iam = sb.client("iam")
    arn = f"arn:aws:iam::{sb.client('sts').get_caller_identity()['Account']}:policy/{BOUNDARY_POLICY}"
    iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(boundary_policy(tuple(buckets))),
                              SetAsDefault=True)


def add_endpoints(sb: Sandbox, services: tuple[str, ...] = ("ec2", "logs"), s3: bool = True,
                  region: str = process.DEFAULT_REGION) -> None:
    """VPC endpoints in the default VPC: an S3 gateway endpoint on the main route table, and interface
    endpoints (private DNS on) for `services`."""
    ec2 = sb.client("ec2", region)
    vpc, main = default_vpc(sb, region)
    if s3:
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.s3", VpcEndpointType="Gateway",
                                RouteTableIds=[main])
    subnets = [s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]]
    for service in services:
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.{service}",
                                VpcEndpointType="Interface", SubnetIds=subnets[:1], PrivateDnsEnabled=True)


@pytest.fixture
def sm(sandbox: Sandbox):
    """The sandbox with SageMaker's simulated waits (capacity retries, restarts) at x0.3, so launch tests stay
    short (the previous scale is put back afterwards), and a NAT for the default VPC (`add_nat`)."""
    before = sandbox.admin.action("configure_training_jobs")
    sandbox.admin.action("configure_training_jobs", time_scale=0.3)
    add_nat(sandbox)  # a job of several nodes runs in a VPC: the code download and pip need a NAT
    yield sandbox
    sandbox.admin.action("configure_training_jobs", time_scale=before["time_scale"])
