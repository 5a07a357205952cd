"""The node bootstrap for real: network namespaces act as EC2 hosts with their own private IPs.

The EC2 backend launches a 2-node job into the sandbox (in a VPC whose subnet is the test's own private
range); each sandbox instance gets a namespace with the instance's private IP on a bridge, a fake IMDSv2
of its own, and a TCP forwarder to the sandbox. The user data from the job's launch template runs in each
namespace exactly as cloud-init would run it: the agents fetch the code from S3, find each other by tag,
rendezvous as a 2-node torchrun job on the CPU and train. Then one host gets a Spot notice: the job
checkpoints and stops, the host is reclaimed, the survivor's agent launches a replacement, a third namespace runs its
user data, and the job resumes from the checkpoint and completes.
"""
from __future__ import annotations

from tests.support.helpers import gpu_stand_in

import base64
import http.server
import ipaddress
import os
import secrets
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.free_block import free_block, used_networks
from trainctl.aws import clients as aws
from trainctl.backends.base import JOB_TAG, LaunchSettings
from trainctl.backends.ec2 import Ec2Backend, log_group
from trainctl.spec import load_spec

# A 10.X.0.0/16 that nothing on this machine uses and no other run holds (tests/support/free_block.py): a fixed
# block once collided with a shared machine's own network.
BLOCK, _BLOCK_LOCK = free_block()
BRIDGE_IP = f"10.{BLOCK}.0.1"      # the "host" side: forwarder and IMDS fakes listen here
# Instances get random addresses in the subnet (moto draws them): a /17 makes two equal ones unlikely.
VPC_CIDR, SUBNET_CIDR = f"10.{BLOCK}.0.0/16", f"10.{BLOCK}.128.0/17"
STEPS = 240
SPEC = f"""\
name: netns-test
entrypoint: {{bundled: ddp, args: {{model: vit_micro, batch-size: 8, steps: {STEPS}, device: cpu, bf16: false,
                                   checkpoint-every: 20, log-every: 10, checkpoint-seconds: 0}}}}
model: {{architecture: vit_micro}}
workload: {{samples: 1000, batch_size_per_accelerator: 8}}
"""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _netns_usable() -> str | None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        return "needs root and iproute2 (ip netns)"
    name = f"tcprobe{os.getpid() % 100000}"
    if _ip("netns", "add", name, check=False).returncode != 0:
        return "ip netns add is not permitted here"
    _ip("netns", "del", name, check=False)
    return None


pytestmark = pytest.mark.skipif(_netns_usable() is not None, reason=str(_netns_usable()))


class Network:
    """A bridge with BRIDGE_IP and one namespace per host, each with a veth on the bridge. All removed by close()."""

    def __init__(self):
        self.tag = f"{os.getpid() % 10000}{secrets.token_hex(1)}"
        self.bridge = f"tcb{self.tag}"
        self.hosts: dict[str, str] = {}   # namespace -> host-side veth
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{BRIDGE_IP}/16", "dev", self.bridge)
            # A bridge takes the lowest MAC of its ports unless given one: adding the replacement's veth could
            # change it, and the hosts' ARP entries for BRIDGE_IP then point nowhere (the IMDS and the sandbox
            # time out). A fixed, locally administered MAC keeps it.
            _ip("link", "set", self.bridge, "address", "02:7c:00:00:00:01")
            _ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    def add_host(self, n: int, address: str) -> str:
        ns, outer, inner = f"tcns{self.tag}{n}", f"tcv{self.tag}{n}", f"tci{self.tag}{n}"
        self.hosts[ns] = outer  # first, so that close() removes whatever part of it was made
        _ip("netns", "add", ns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        for args in (("addr", "add", f"{address}/16", "dev", inner), ("link", "set", inner, "up"),
                     ("link", "set", "lo", "up")):
            _ip("-n", ns, *args)
        return ns

    def close(self) -> None:
        for ns, outer in self.hosts.items():
            _ip("link", "del", outer, check=False)
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)


class Forwarder(socketserver.ThreadingTCPServer):
    """BRIDGE_IP:port -> the sandbox on 127.0.0.1 (which the namespaces cannot reach)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: tuple[str, int]):
        self.target = target
        super().__init__((BRIDGE_IP, 0), _Pipe)


class _Pipe(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.create_connection(self.server.target)

        def pump(a: socket.socket, b: socket.socket) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pump, args=(upstream, self.request), daemon=True)
        t.start()
        pump(self.request, upstream)
        t.join()
        upstream.close()


class FakeImds(http.server.ThreadingHTTPServer):
    """IMDSv2 of one host: PUT /latest/api/token, then GETs with the token; spot/instance-action on request."""

    daemon_threads = True

    def __init__(self, instance_id: str, ip: str, region: str):
        self.data = {"instance-id": instance_id, "local-ipv4": ip, "placement/region": region}
        self.token = secrets.token_hex(16)
        super().__init__((BRIDGE_IP, 0), _ImdsHandler)

    @property
    def endpoint(self) -> str:
        return f"http://{BRIDGE_IP}:{self.server_address[1]}"

    def notice(self) -> None:
        self.data["spot/instance-action"] = '{"action": "terminate", "time": "2026-11-23T03:00:00Z"}'


class _ImdsHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: str = "") -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_PUT(self) -> None:
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._send(400)
        self._send(200, self.server.token)

    def do_GET(self) -> None:
        if self.headers.get("X-aws-ec2-metadata-token") != self.server.token:
            return self._send(401)  # IMDSv2 required: no token, no answer
        value = self.server.data.get(self.path.removeprefix("/latest/meta-data/"))
        self._send(200, value) if value is not None else self._send(404)


class Host:
    def __init__(self, net: Network, n: int, instance: dict, user_data: str, workdir: Path, env: dict):
        self.instance_id, self.ip = instance["InstanceId"], instance["PrivateIpAddress"]
        self.ns = net.add_host(n, self.ip)
        self.imds = FakeImds(self.instance_id, self.ip, "us-east-1")
        threading.Thread(target=self.imds.serve_forever, daemon=True).start()
        self.root = workdir / f"host{n}"
        self.root.mkdir()
        script = self.root / "user-data.sh"
        script.write_text(user_data)
        self.out_path = self.root / "console.log"
        self.lines: list[str] = []
        run_env = {**env, "TRAINCTL_ROOT": str(self.root / "opt"), "TRAINCTL_IMDS_ENDPOINT": self.imds.endpoint}
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "bash", str(script)], env=run_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with open(self.out_path, "w") as f:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                f.write(line)
                f.flush()

    def wait_for(self, text: str, timeout: float, proc_may_exit: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((ln for ln in list(self.lines) if text in ln), None)
            if hit:
                return hit
            if self.proc.poll() is not None and not proc_may_exit:
                self.reader.join(5)
                raise AssertionError(f"{self.instance_id} exited {self.proc.returncode} before {text!r}:\n"
                                     + "\n".join(self.lines[-40:]))
            time.sleep(0.2)
        raise AssertionError(f"{self.instance_id}: no {text!r} within {timeout}s:\n" + "\n".join(self.lines[-40:]))

    def close(self) -> None:
        if self.proc.poll() is None:
            # Everything the host ran is in this session: the agent, torchrun and its ranks.
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self.imds.shutdown()
        self.imds.server_close()


@pytest.fixture
def network(request):
    """The bridge and namespaces, removed by a finaliser whatever happens in the test."""
    net = Network()
    request.addfinalizer(net.close)
    return net


def _live(ec2, job: str) -> list[dict]:
    return [i for r in ec2.describe_instances(Filters=[
        {"Name": f"tag:{JOB_TAG}", "Values": [job]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]


def test_two_hosts_train_get_interrupted_and_resume_on_a_replacement(sandbox_env, network, tmp_path):
    sb = sandbox_env
    aws.reset_session()
    ec2 = sb.client("ec2")
    vpc = ec2.create_vpc(CidrBlock=VPC_CIDR)["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=SUBNET_CIDR, AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    # a public subnet, as the launch requires for nodes that must reach AWS: an internet gateway route and a
    # public IPv4 on launch
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    main = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]},
                                              {"Name": "association.main", "Values": ["true"]}])["RouteTables"][0]
    ec2.create_route(RouteTableId=main["RouteTableId"], DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(SPEC)
    backend = Ec2Backend()
    job = "netns-1"
    from tests.support.ec2_jobs import option
    from trainctl.backends.options import Ec2Options

    request = backend.prepare(option("g5.xlarge", 2, "spot", "us-east-1a"), load_spec(spec_path),
                              LaunchSettings(job_id=job, spec_path=str(spec_path), options=Ec2Options(subnet=subnet)))
    net = network
    forwarder = Forwarder(("127.0.0.1", int(sb.endpoint_url.rsplit(":", 1)[1])))
    threading.Thread(target=forwarder.serve_forever, daemon=True).start()
    hosts: list[Host] = []
    try:
        out = backend.submit(request)
        instances = _live(ec2, job)
        ips = [i["PrivateIpAddress"] for i in instances]
        # moto draws private IPs at random from the subnet; two equal ones cannot be two hosts.
        assert len(set(ips)) == 2 and all(ipaddress.ip_address(ip) in ipaddress.ip_network(SUBNET_CIDR) for ip in ips)
        lt = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": [job]}])["LaunchTemplates"][0]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"], Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        user_data = base64.b64decode(data["UserData"]).decode()
        # What the instance profile gives a real node, the sandbox's fake keys give these hosts.
        smi = gpu_stand_in(tmp_path / "bin", 1)  # each host's one A10G (g5.xlarge), as the image's driver lists it
        # CUDA shows these hosts' processes no GPU (this machine has none): the agent tells the training
        # SM_NUM_GPUS=0 and the bundled script runs on the CPU, as on a sandbox node (sandbox ec2/machines.py)
        env = {"PATH": f"{smi}:{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
               "CUDA_VISIBLE_DEVICES": "",
               "AWS_ENDPOINT_URL": f"http://{BRIDGE_IP}:{forwarder.server_address[1]}",
               "AWS_ACCESS_KEY_ID": sb.env["AWS_ACCESS_KEY_ID"],
               "AWS_SECRET_ACCESS_KEY": sb.env["AWS_SECRET_ACCESS_KEY"],
               "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
               "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
               "TRAINCTL_PYTHON": sys.executable, "TRAINCTL_NO_SHUTDOWN": "1",
               "TRAINCTL_SPOT_POLL_S": "0.5", "TRAINCTL_PEER_POLL_S": "0.5", "TRAINCTL_CHECKPOINT_SYNC_S": "2"}
        for n, inst in enumerate(instances):
            hosts.append(Host(net, n, inst, user_data, tmp_path, env))
        a, b = hosts
        for h in hosts:
            h.wait_for("node_rank=", 90)
        ranks = {h.instance_id: int(h.wait_for("node_rank=", 1).split("node_rank=")[1].split()[0]) for h in hosts}
        assert sorted(ranks.values()) == [0, 1]
        assert ranks[min(hosts, key=lambda h: ipaddress.ip_address(h.ip)).instance_id] == 0
        master = min(hosts, key=lambda h: ipaddress.ip_address(h.ip))
        master.wait_for("trainctl step=40 ", 120)
        # The Spot notice reaches host b: it marks itself, the job checkpoints and stops on every rank.
        b.imds.notice()
        b.wait_for("leaving the job to the others", 60, proc_may_exit=True)
        assert b.proc.wait(30) == 0
        a.wait_for("waiting for its replacement", 60)
        stopped_at = int(a.wait_for("trainctl stopped ", 1).split("step=")[1].split()[0])
        assert 0 < stopped_at < STEPS
        ec2.terminate_instances(InstanceIds=[b.instance_id])   # the reclaim
        b.close()
        # nobody runs `watch --recover`: the survivor's agent launches the replacement itself (bootstrap/replacement.py)
        a.wait_for("trainctl-agent: replacement 1: ", 120)
        assert backend.describe(job, "us-east-1").interruptions == 1
        new = next(i for i in _live(ec2, job) if i["InstanceId"] not in (a.instance_id, b.instance_id))
        assert new["Placement"]["AvailabilityZone"] == "us-east-1a"
        assert new["PrivateIpAddress"] != a.ip
        c = Host(net, 2, new, user_data, tmp_path, env)
        hosts.append(c)
        for h in (a, c):
            h.wait_for("training finished", 180, proc_may_exit=True)
            assert h.proc.wait(30) == 0
        # The replacement restored the checkpoints from S3, and the job went on from where it stopped
        # (rank 0, wherever it runs now, says so).
        assert any("trainctl-agent: restored " in ln and " checkpoint files from s3://" in ln for ln in c.lines)
        resumed = [ln for h in (a, c) for ln in h.lines if "trainctl resume step=" in ln]
        assert resumed and int(resumed[0].split("step=")[1].split()[0]) == stopped_at
        assert any(f"trainctl step={STEPS} " in ln for h in (a, c) for ln in h.lines)
        assert any("final_state_sha256=" in ln for h in (a, c) for ln in h.lines)
        view = backend.describe(job, "us-east-1")
        assert view.status == "Completed" and view.interruptions == 1
        # Every host's lines reached CloudWatch Logs, one stream per instance.
        lines, _ = backend.logs(job, "us-east-1", None)
        assert {ln.host for ln in lines} == {a.instance_id, b.instance_id, c.instance_id}
        assert any("trainctl step=" in ln.message for ln in lines)
        streams = sb.client("logs").describe_log_streams(logGroupName=log_group(job))["logStreams"]
        assert len(streams) == 3
        assert out["instance_ids"]
    finally:
        for h in hosts:
            h.close()
        forwarder.shutdown()
        forwarder.server_close()
        net.close()
        backend.cleanup(job, "us-east-1")
        aws.reset_session()


def test_the_test_network_is_free_here_and_held_by_this_run_alone():
    # nothing on this machine is in the block, and a second run (another pick while this one holds it) gets another
    block = ipaddress.ip_network(VPC_CIDR)
    assert not any(block.overlaps(n) for n in used_networks())
    other, handle = free_block(first=BLOCK)
    try:
        assert other != BLOCK
    finally:
        handle.close()
