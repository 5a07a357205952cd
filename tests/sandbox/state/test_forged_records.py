"""A colleague's forged account record (issue 36, item 6), through the CLI against the sandbox.

Anyone who may launch may write `X/job.json` in the account's bucket. A body naming another job (V, running on
EC2) as SageMaker in another region must not rewrite V's row on V's launcher machine, and `down V` must never
delete the other platform's resources: --platform decides, and a wrong one removes nothing."""
from __future__ import annotations

import json
import time

from tests.support.helpers import CONFIGS, run_cli

ME = "123456789012"


def test_a_forged_record_rewrites_no_row_and_down_keeps_to_the_jobs_platform(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    spec = str(CONFIGS / "vit-base-g5.yaml")
    launched = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand",
                        "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job, region = json.loads(launched.stdout)["job_id"], json.loads(launched.stdout)["region"]
    s3, bucket = sb.client("s3", region), f"trainctl-{ME}-{region}"
    real = json.loads(s3.get_object(Bucket=bucket, Key=f"{job}/job.json")["Body"].read())
    other = "us-west-2" if region != "us-west-2" else "us-east-1"
    forged = {**real, "platform": "sagemaker", "region": other}  # still names V, under the key of X
    s3.put_object(Bucket=bucket, Key="forged-x/job.json", Body=json.dumps(forged))
    s3.put_object(Bucket=bucket, Key="trainctl/measurements/forged-x.json", Body=json.dumps(
        {"format": 1, "job_id": "forged-x", "account": ME, "model": real["model"], "batch_size": real["batch_size"],
         "instance_type": "g5.xlarge", "count": 1, "samples_per_s": 50.0, "measured_at": time.time() - 60}))

    plan = run_cli(["plan", spec, "--explain"], home, env=sb.env)  # every warning whole
    assert plan.returncode == 0, plan.stderr
    rows = {r["job_id"]: r for r in json.loads(run_cli(["-o", "json", "ls"], home, env=sb.env).stdout)["jobs"]}
    assert (rows[job]["platform"], rows[job]["region"]) == ("ec2", region)
    assert "forged-x/job.json names job_id" in " ".join((plan.stdout + plan.stderr).split())

    # the wrong platform named: refused before anything is touched
    wrong = run_cli(["down", job, "--platform", "sagemaker"], home, env=sb.env)
    assert wrong.returncode != 0 and f"{job} runs on EC2" in wrong.stderr, wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1
    iam = sb.client("iam")
    role = next(r["RoleName"] for r in iam.list_roles(PathPrefix="/trainctl/")["Roles"] if job in r["RoleName"])
    assert iam.list_role_policies(RoleName=role)["PolicyNames"] == ["trainctl-node"]
    ec2 = sb.client("ec2", region)
    live = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]
    assert live

    down = run_cli(["-o", "json", "down", job], home, env=sb.env)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["platform"] == "ec2"
    assert any(r.startswith("instance i-") for r in json.loads(down.stdout)["removed"])


def test_with_platform_a_record_nobody_can_read_is_a_warning_and_the_tags_decide(sandbox_env, tmp_path):
    """Item 8: a record of an unknown format, or not JSON, must not block `stop --platform`/`down --platform` on every
    other machine; without --platform it is still refused in one line."""
    sb = sandbox_env
    spec = str(CONFIGS / "vit-base-g5.yaml")
    launched = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand",
                        "--yes"], tmp_path / "launcher", env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job, region = json.loads(launched.stdout)["job_id"], json.loads(launched.stdout)["region"]
    sb.client("s3", region).put_object(Bucket=f"trainctl-{ME}-{region}", Key=f"{job}/job.json", Body=b"not json {")
    other = tmp_path / "colleague"  # a machine that never saw the job
    refused = run_cli(["--region", region, "down", job], other, env=sb.env)
    assert refused.returncode != 0 and "is not JSON" in refused.stderr
    down = run_cli(["-o", "json", "--region", region, "down", job, "--platform", "ec2"], other, env=sb.env)
    assert down.returncode == 0, down.stderr
    assert "is not JSON" in down.stderr and "--platform ec2 given" in down.stderr
    assert any(r.startswith("instance i-") for r in json.loads(down.stdout)["removed"])
