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
    bob_env, bob_arn = _user(sandbox, "bob")
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

    # the Tagging API answers for the job's resources (botocore speaks its CBOR protocol to the sandbox)
    tagged = sandbox.client("resourcegroupstaggingapi", region).get_resources(
        TagFilters=[{"Key": "trainctl:job", "Values": [job]}], ResourceTypeFilters=["ec2:instance"])
    assert [r["ResourceARN"].split(":")[2] for r in tagged["ResourceTagMappingList"]] == ["ec2"]

    before = _calls(sandbox)
    listed = run_cli(["--output", "json", "ls", "--all"], bob, env=bob_env)
    assert listed.returncode == 0, listed.stderr
    (row,) = [j for j in json.loads(listed.stdout)["jobs"] if j["job_id"] == job]
    assert row["launched_by"] == alice_arn and row["platform"] == "ec2" and row["layout"] == "1x g5.xlarge"
    assert row["status"] == "InProgress" and row["cost_usd"] is not None
    assert json.loads(listed.stdout)["warnings"] == []
    # the second home's store is now a cache of the account's record: the same job, option and spec, offline
    cached = run_cli(["--output", "json", "ls", "--no-status"], bob, env=bob_env)
    (mine,) = json.loads(cached.stdout)["jobs"]
    assert (mine["job_id"], mine["layout"], mine["spec"], mine["expected_cost_usd"]) == \
        (job, "1x g5.xlarge", SPEC, record["option"]["expected_cost_usd"])
    # the table names who launched it (at 80 columns `by` is one of the columns left to -o json)
    assert "alice" in run_cli(["ls", "--all"], bob, env={**bob_env, "COLUMNS": "200"}).stdout

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
    record = json.loads(sandbox.client("s3", region).get_object(Bucket=f"trainctl-123456789012-{region}",
                                                                Key=f"{job}/job.json")["Body"].read())
    assert record["status"] == "Stopping" and record["status_by"] == bob_arn
    assert record["launched_by"] == alice_arn
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


def test_a_plan_and_calibration_on_a_second_home_use_the_accounts_measurements(sandbox_env, tmp_path):
    """What a completed job measured, written to the account by whichever machine followed it to its end,
    ranks the next plan on any machine of the account, and `calibration` there compares it with its prediction."""
    import time

    from trainctl.aws import clients as aws
    from trainctl.state import account as job_records
    from trainctl.state.documents import JobDocument, MeasurementDocument, spec_sha256
    from trainctl.spec import load_spec

    aws.reset_session()
    spec, region = load_spec(SPEC), "us-east-1"
    planned = run_cli(["--output", "json", "--region", region, "plan", SPEC, "--platform", "ec2", "--layout",
                       "g5.xlarge:1:spot"], tmp_path / "a", env=sandbox_env.env)
    assert planned.returncode == 0, planned.stderr
    option = json.loads(planned.stdout)["options"][0]
    assert option["throughput_source"] == "model"
    sandbox_env.client("s3", region).create_bucket(Bucket=BUCKET)
    now, text = time.time(), open(SPEC).read()
    job_records.create(JobDocument(
        job_id="measured-elsewhere-1", platform="ec2", region=region, account="123456789012", spec_path=SPEC,
        spec_name=spec.name, spec_text=text, spec_sha256=spec_sha256(text), model=spec.model.name,
        batch_size=spec.workload.batch_size_per_accelerator, option=option, launched_by="arn:aws:iam::123456789012:user/alice",
        launched_at=now, status="Completed", updated_at=now, samples_per_s=123.0))
    job_records.write_measurement(MeasurementDocument(
        job_id="measured-elsewhere-1", account="123456789012", model=spec.model.name,
        batch_size=spec.workload.batch_size_per_accelerator, instance_type="g5.xlarge", count=1, samples_per_s=123.0,
        measured_at=now), region)
    aws.reset_session()

    second = tmp_path / "b"
    replanned = run_cli(["--output", "json", "--region", region, "plan", SPEC, "--platform", "ec2", "--layout",
                         "g5.xlarge:1:spot"], second, env=sandbox_env.env)
    assert replanned.returncode == 0, replanned.stderr
    again = json.loads(replanned.stdout)["options"][0]
    assert again["throughput_source"] == "measured" and again["throughput_samples_per_s"] == 123.0
    calibration = run_cli(["--output", "json", "--region", region, "calibration"], second, env=sandbox_env.env)
    assert calibration.returncode == 0, calibration.stderr
    (row,) = json.loads(calibration.stdout)["jobs"]
    assert row["job_id"] == "measured-elsewhere-1" and row["measured_samples_per_s"] == 123.0
    assert row["predicted_samples_per_s"] == option["throughput_samples_per_s"]
    # forgotten on this machine, the account's copy is not read back into its plans
    forgot = run_cli(["--region", region, "calibration", "--forget", "measured-elsewhere-1"], second,
                     env=sandbox_env.env)
    assert forgot.returncode == 0, forgot.stderr
    third = run_cli(["--output", "json", "--region", region, "plan", SPEC, "--platform", "ec2", "--layout",
                     "g5.xlarge:1:spot"], second, env=sandbox_env.env)
    assert json.loads(third.stdout)["options"][0]["throughput_source"] == "model"


def test_the_viewer_role_only_reads_what_the_read_commands_call(tmp_path):
    from trainctl import iam
    from trainctl.iam.viewer import VIEWER_OPERATIONS, reads, viewer_policy

    doc = json.loads(run_cli(["-o", "json", "iam-policy", "--role", "viewer"], tmp_path).stdout)
    assert doc["role"] == "viewer" and doc["policy"] == viewer_policy()
    actions = iam.granted_actions(doc["policy"])
    assert actions and all(reads(a) for a in actions), sorted(a for a in actions if not reads(a))
    assert {"tag:GetResources", "s3:GetObject", "s3:ListBucket", "sagemaker:DescribeTrainingJob",
            "logs:FilterLogEvents"} <= actions
    assert not any(a.split(":")[1].startswith(("Stop", "Terminate", "Delete", "Put", "Create", "Run"))
                   for a in actions)
    assert set(VIEWER_OPERATIONS) <= {c.operation for c in iam.CALLS}  # each one a call the table knows
    s3 = [st for st in doc["policy"]["Statement"] if any(a.startswith("s3:") for a in st["Action"])]
    assert s3 and all(st["Condition"] == iam.SAME_ACCOUNT for st in s3)


def test_a_launch_that_fails_after_its_record_was_written_leaves_the_outcome_in_the_record(sandbox, tmp_path):
    sandbox.admin.action("set_fleet_error", code="UnauthorizedOperation")
    proc = run_cli(LAUNCH, tmp_path / "home", env=sandbox.env)
    assert proc.returncode not in (0, 4) and "UnauthorizedOperation" in proc.stderr.strip().splitlines()[-1]
    records = []
    for region in ("us-east-1", "us-west-2"):
        s3, bucket = sandbox.client("s3", region), f"trainctl-123456789012-{region}"
        if bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
            records += [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys
                        if k.endswith("/job.json")]
    assert [r["status"] for r in records] == ["SubmitFailed"]
