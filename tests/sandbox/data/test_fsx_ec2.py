"""FSx for Lustre channels on EC2: the launch gives the nodes the file system's DNS and mount names and shows the
mount; a sandbox instance, running the node agent's own channel code, sees exactly the file system's files at
/opt/ml/input/data/train, and a wrong mount name or an unknown file system fails it in one line, as Lustre's
mount does on AWS."""
from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

from tests.support.data_jobs import default_subnets as _subnets, lustre_file_system, lustre_group, project
from tests.support.helpers import run_cli

FILES = 12
NODE_WAIT_S = 20

# The user data of an instance that does what the agent does with its config's channels (bootstrap/channels.py,
# bootstrap/fsx.py) and prints what the channel's folder holds.
USER_DATA = """#!/bin/bash
exec "$TRAINCTL_PYTHON" - <<'EOF'
import json, os, sys
from trainctl.bootstrap.channels import Channels, ml_root
channels = Channels(None, {"train": json.loads(%r)}, ml_root(os.environ["TRAINCTL_ROOT"]), print)
channels.prepare(0, 1)
path = channels.env()["SM_CHANNEL_TRAIN"]
files = {os.path.relpath(os.path.join(top, n), path): open(os.path.join(top, n)).read()
         for top, _, names in os.walk(path, followlinks=True) for n in names}
print("CHANNEL", path, json.dumps(files, sort_keys=True), flush=True)
EOF
"""


def _on_a_node(sb, subnet: str, channel: dict, groups: list[str] | None = None) -> str:
    """Runs USER_DATA with the channel on a sandbox instance in the subnet (in the VPC's default group unless
    `groups` says otherwise); its console output once it ends."""
    from trainctl_sandbox.server.seed import ami_id

    instance = sb.client("ec2").run_instances(
        ImageId=ami_id("us-east-1", "gpu-pytorch-2.7"), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
        SubnetId=subnet, UserData=USER_DATA % json.dumps(channel), **({"SecurityGroupIds": groups} if groups else {})
    )["Instances"][0]["InstanceId"]
    deadline = time.monotonic() + NODE_WAIT_S
    while time.monotonic() < deadline:
        node = sb.admin.action("instance_nodes")["nodes"].get(instance)
        if node and not node["running"]:
            sb.client("ec2").terminate_instances(InstanceIds=[instance])  # room for the next (max_nodes)
            return Path(node["console"]).read_text()
        time.sleep(0.2)
    raise AssertionError(f"instance {instance} not done after {NODE_WAIT_S} s: {sb.admin.action('instance_nodes')}")


def _config(fs: dict, path: str) -> dict:
    return {"mode": "mount", "fsx": fs["FileSystemId"], "dns_name": fs["DNSName"],
            "mount_name": fs["LustreConfiguration"]["MountName"], "path": path}


def test_an_instance_sees_exactly_the_file_system_s_directory_at_its_channel_path(ec2_nodes):
    sandbox = ec2_nodes
    subnet = _subnets(sandbox)["us-east-1b"]
    fs = lustre_file_system(sandbox, subnet)
    mount_name = fs["LustreConfiguration"]["MountName"]
    console = _on_a_node(sandbox, subnet, _config(fs, f"/{mount_name}/shards"))
    (line,) = [ln for ln in console.splitlines() if ln.startswith("CHANNEL ")]
    _, path, files = line.split(" ", 2)
    assert path.endswith("/ml/input/data/train"), console  # /opt/ml on a node with its own mounts, else its folder's ml/
    assert json.loads(files) == {f"part-{i:03d}.txt": str(i) for i in range(FILES)}
    assert (f"channel train: FSx for Lustre {fs['FileSystemId']} /{mount_name}/shards mounted read-only at {path} "
            "(mount -t lustre -o ro,relatime,flock)") in console


def test_a_wrong_mount_name_or_an_unknown_file_system_fails_the_mount_in_one_line(ec2_nodes):
    sandbox = ec2_nodes
    subnet = _subnets(sandbox)["us-east-1b"]
    fs = lustre_file_system(sandbox, subnet)
    wrong = _on_a_node(sandbox, subnet, _config(fs, "/notmine/shards"))
    assert "CHANNEL" not in wrong  # no training on an empty folder
    (line,) = [ln for ln in wrong.splitlines() if "trainctl-agent:" in ln]
    assert line.startswith(f"trainctl-agent: channel train: mounting FSx for Lustre {fs['FileSystemId']} "
                           f"({fs['DNSName']}@tcp:/notmine/shards) at ")
    assert "Is the filesystem name correct?" in line and "TCP 988" in line
    unknown = _on_a_node(sandbox, subnet, dict(_config(fs, "/x/shards"), dns_name="fs-0aaaaaaa.fsx.us-east-1."
                                                                                  "amazonaws.com"))
    assert "does not resolve" in unknown and "CHANNEL" not in unknown
    missing = _on_a_node(sandbox, subnet, _config(fs, f"/{fs['LustreConfiguration']['MountName']}/nothing"))
    assert "No such file or directory" in missing and "CHANNEL" not in missing
    # an instance whose group lets nothing in from the file system's: Lustre cannot connect
    closed = sandbox.client("ec2").create_security_group(GroupName="closed", Description="nothing in")["GroupId"]
    shut = _on_a_node(sandbox, subnet, _config(fs, f"/{fs['LustreConfiguration']['MountName']}/shards"), [closed])
    assert "Connection timed out" in shut and "CHANNEL" not in shut


def test_an_ec2_launch_with_an_fsx_channel_shows_the_mount_and_gives_the_nodes_its_names(sandbox_env, tmp_path):
    subnet = _subnets(sandbox_env)["us-east-1b"]
    group = lustre_group(sandbox_env)
    fs = lustre_file_system(sandbox_env, subnet, [group])
    mount_name = fs["LustreConfiguration"]["MountName"]
    spec = project(tmp_path, f"{{train: {{fsx: {fs['FileSystemId']}, path: /{mount_name}/shards}}}}")
    proc = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--dry-run"],  # no --subnet: the file
                   tmp_path / "home", env=sandbox_env.env, timeout=150)                # system's AZ is chosen
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert f"subnets in us-east-1b: {subnet}" in out["notes"], out["notes"]
    mount = (f"mount -t lustre -o ro,relatime,flock {fs['DNSName']}@tcp:/{mount_name}/shards "
             "/opt/ml/input/data/train")
    assert any(mount in note for note in out["notes"]), out["notes"]
    (template,) = [r["params"] for r in out["requests"] if r["operation"] == "CreateLaunchTemplate"]
    user_data = base64.b64decode(template["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(re.search(r"(?s)<<'TRAINCTL_CONFIG'\n(.*?)\nTRAINCTL_CONFIG", user_data)[1])
    assert config["channels"] == {"train": dict(_config(fs, f"/{mount_name}/shards"), security_groups=[group])}
    # the job's own group lets the file system's in on Lustre's ports, and only those
    lustre = [r["params"]["IpPermissions"] for r in out["requests"] if r["operation"] == "AuthorizeSecurityGroupIngress"
              and any(p.get("FromPort") == 988 for p in r["params"]["IpPermissions"])]
    assert [[(p["IpProtocol"], p["FromPort"], p["ToPort"], [g["GroupId"] for g in p["UserIdGroupPairs"]])
             for p in perms] for perms in lustre] == [[("tcp", 988, 988, [group]), ("tcp", 1018, 1023, [group])]]


def test_an_ec2_launch_is_refused_in_one_line_when_the_file_system_s_groups_keep_the_nodes_out(sandbox_env,
                                                                                                tmp_path):
    subnet = _subnets(sandbox_env)["us-east-1b"]
    fs = lustre_file_system(sandbox_env, subnet)  # the VPC's default group: lets in only its own members
    spec = project(tmp_path, f"{{train: {{fsx: {fs['FileSystemId']}, "
                              f"path: /{fs['LustreConfiguration']['MountName']}/shards}}}}")
    proc = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--subnet", subnet, "--dry-run"],
                   tmp_path / "home", env=sandbox_env.env, timeout=150)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"data: channel train {fs['FileSystemId']}: its security groups sg-" in proc.stderr
    assert "let no TCP 988 and TCP 1018-1023 in from the job's nodes" in proc.stderr
    assert "--security-group" in proc.stderr


def test_a_node_whose_mount_fails_records_the_one_line_and_shuts_down_without_training(ec2_nodes, tmp_path):
    """The launch cannot see inside the file system: a directory that is not there fails the node's mount, and the
    agent's failure path records why (the job's `failed` mark, which `watch` shows) and shuts the node down."""
    sb, home = ec2_nodes, tmp_path / "home"
    subnet = _subnets(sb)["us-east-1b"]
    fs = lustre_file_system(sb, subnet, [lustre_group(sb)])
    spec = project(tmp_path, f"{{train: {{fsx: {fs['FileSystemId']}, path: "
                              f"/{fs['LustreConfiguration']['MountName']}/not-there}}}}")
    launched = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--subnet", subnet, "--yes"], home,
                       env=sb.env, timeout=150)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    watched = run_cli(["-o", "json", "watch", job, "--interval", "0.3"], home, env=sb.env, timeout=150)
    assert watched.returncode != 0
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed", doc
    assert f"mounting FSx for Lustre {fs['FileSystemId']}" in doc["failure_reason"]
    assert "No such file or directory" in doc["failure_reason"]
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "read_files=" not in logs  # the script never ran
    (node,) = [i for r in sb.client("ec2").describe_instances(Filters=[
        {"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"] for i in r["Instances"]]
    assert node["State"]["Name"] in ("shutting-down", "terminated")
