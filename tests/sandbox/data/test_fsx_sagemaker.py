"""FSx for Lustre channels on SageMaker get what EC2's get (backends/lustre_network.py): the file system's groups
are checked against the job's subnets and `--security-group` (one line, before anything is created), and the job's
own group gets TCP 988 and 1018-1023 in from the file system's groups. Before, a SageMaker launch did neither, and
its mount would have failed after the instances started billing. The sandbox checks the same ports for a
SageMaker job's VpcConfig as for an EC2 node (trainctl_sandbox/ec2/lustre.py, sagemaker/channels.py)."""
from __future__ import annotations

import json

from tests.support.data_jobs import default_subnets as _subnets, lustre_file_system, lustre_group, project as _project
from tests.support.helpers import run_cli


def _spec(tmp_path, fs: dict) -> str:
    return _project(tmp_path, f"{{train: {{fsx: {fs['FileSystemId']}, "
                              f"path: /{fs['LustreConfiguration']['MountName']}/shards}}}}")


def test_a_sagemaker_launch_is_refused_when_the_file_system_s_groups_keep_the_job_out(sm, sandbox_env, tmp_path):
    subnet = _subnets(sandbox_env)["us-east-1b"]
    fs = lustre_file_system(sandbox_env, subnet)  # the VPC's default group: lets in only its own members
    proc = run_cli(["-o", "json", "launch", _spec(tmp_path, fs), "--platform", "sagemaker", "--subnet", subnet,
                    "--dry-run"], tmp_path / "home", env=sandbox_env.env, timeout=150)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"data: channel train {fs['FileSystemId']}: its security groups sg-" in proc.stderr
    assert "let no TCP 988 and TCP 1018-1023 in from the job's nodes" in proc.stderr


def test_a_sagemaker_job_s_group_lets_lustre_in_from_the_file_system(sm, sandbox_env, tmp_path):
    subnet = _subnets(sandbox_env)["us-east-1b"]
    group = lustre_group(sandbox_env)
    fs = lustre_file_system(sandbox_env, subnet, [group])
    proc = run_cli(["-o", "json", "launch", _spec(tmp_path, fs), "--platform", "sagemaker", "--subnet", subnet,
                    "--dry-run"], tmp_path / "home", env=sandbox_env.env, timeout=150)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    lustre = [r["params"]["IpPermissions"] for r in out["requests"] if r["operation"] == "AuthorizeSecurityGroupIngress"
              and any(p.get("FromPort") == 988 for p in r["params"]["IpPermissions"])]
    assert [[(p["IpProtocol"], p["FromPort"], p["ToPort"], [g["GroupId"] for g in p["UserIdGroupPairs"]])
             for p in perms] for perms in lustre] == [[("tcp", 988, 988, [group]), ("tcp", 1018, 1023, [group])]]
