"""The account is the shared state: two homes (two laptops, each with its own TRAINCTL_HOME and its own IAM user)
against one sandbox. The first launches; the second, which has never heard of the job, lists it (with the
launcher's ARN), watches, stops and takes it down from the job's record in the account's bucket."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
LAUNCH = ["--output", "json", "launch", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"]
BUCKET = "trainctl-123456789012-us-east-1"


def _user(sb, name: str) -> tuple[dict, str]:
    """An IAM user of the sandbox's account: (the environment that signs as it, its ARN)."""
    iam = sb.client("iam")
    arn = iam.create_user(UserName=name)["User"]["Arn"]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {**sb.env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}, arn


def _calls(sb) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in sb.admin.call_log():
        out[f"{c['service']}:{c['operation']}"] = out.get(f"{c['service']}:{c['operation']}", 0) + c["count"]
    return out


@pytest.mark.timeout(240)
def test_a_second_home_lists_watches_stops_and_takes_down_the_first_homes_job(sandbox, tmp_path):
    from trainctl.iam.viewer import VIEWER_OPERATIONS

    alice_env, alice_arn = _user(sandbox, "alice")
    bob_env, _ = _user(sandbox, "bob")
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    launched = run_cli(LAUNCH, alice, env=alice_env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]

    region = json.loads(launched.stdout)["region"]
    record = json.loads(sandbox.client("s3", region).get_object(Bucket=f"trainctl-123456789012-{region}",
                                                                Key=f"{job}/job.json")["Body"].read())
    assert record["format"] == 1 and record["launched_by"] == alice_arn and record["status"] == "InProgress"
    assert record["option"]["instance_type"] == "g5.xlarge" and record["platform_ids"]
    assert len(record["spec_sha256"]) == 64 and "vit" in record["spec_text"]

    before = _calls(sandbox)
    listed = run_cli(["--output", "json", "ls", "--all"], bob, env=bob_env)
    assert listed.returncode == 0, listed.stderr
    (row,) = [j for j in json.loads(listed.stdout)["jobs"] if j["job_id"] == job]
    assert row["launched_by"] == alice_arn and row["platform"] == "ec2" and row["layout"] == "1x g5.xlarge"
    assert row["status"] == "InProgress" and row["cost_usd"] is not None
    assert json.loads(listed.stdout)["warnings"] == []
    assert "alice" in run_cli(["ls", "--all"], bob, env=bob_env).stdout  # the table names who launched it

    watched = run_cli(["--output", "json", "watch", job, "--once"], bob, env=bob_env)
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["status"] == "InProgress"
    assert run_cli(["logs", job], bob, env=bob_env).returncode == 0
    # what a viewer needs: every call of ls --all, watch and logs is one the viewer role allows
    read_calls = {k for k, n in _calls(sandbox).items() if n > before.get(k, 0)}
    assert read_calls <= set(VIEWER_OPERATIONS), read_calls - set(VIEWER_OPERATIONS)
    assert {"resourcegroupstaggingapi:GetResources", "s3:GetObject"} <= read_calls

    stopped = run_cli(["stop", job, "--grace-seconds", "0"], bob, env=bob_env)
    assert stopped.returncode == 0, stopped.stderr
    down = run_cli(["--output", "json", "down", job], bob, env=bob_env)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["removed"]
    instances = sandbox.client("ec2", region).describe_instances(Filters=[
        {"Name": "tag:trainctl:job", "Values": [job]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
    assert instances == []


def test_a_record_of_an_unknown_format_is_refused_in_one_line(sandbox, tmp_path):
    s3 = sandbox.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="future-job-1/job.json", Body=json.dumps({"format": 7, "job_id": "x"}))
    for command in (["watch", "future-job-1", "--once"], ["stop", "future-job-1"], ["down", "future-job-1"]):
        proc = run_cli(command, tmp_path / "home", env=sandbox.env)
        assert proc.returncode == 1 and proc.stdout == ""
        (line,) = proc.stderr.strip().splitlines()
        assert "future-job-1" in line and "record format 7" in line and "upgrade trainctl" in line


def test_a_job_no_home_and_no_record_knows_is_still_named_in_one_line(sandbox, tmp_path):
    proc = run_cli(["watch", "nobody-knows-1", "--once"], tmp_path / "home", env=sandbox.env)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "nobody-knows-1: no job of that id" in line
