"""A colleague in the `viewer` role (`trainctl iam-policy --role viewer`, created as a role of the sandbox's account
and assumed with sts:AssumeRole) lists and watches the account's jobs through the CLI, but cannot fetch their
checkpoints, nor read their code: the sandbox decides an assumed role's S3 requests by its policies, as IAM does
(trainctl_sandbox/server/s3_iam.py). Before, the viewer's s3:GetObject covered every object of every trainctl
bucket, and the fetch went through."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl.naming.bucket import checkpoints_prefix

BUCKET = "trainctl-123456789012-us-east-1"


def _viewer(sb, home) -> dict:
    """The environment of a colleague signed in as the viewer role the CLI prints."""
    policy = json.loads(run_cli(["-o", "json", "iam-policy", "--role", "viewer"], home).stdout)["policy"]
    iam = sb.client("iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"AWS": "arn:aws:iam::123456789012:root"}}]}
    arn = iam.create_role(RoleName="trainctl-viewer", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName="trainctl-viewer", PolicyName="viewer", PolicyDocument=json.dumps(policy))
    creds = sb.client("sts").assume_role(RoleArn=arn, RoleSessionName="carol")["Credentials"]
    return {**sb.env, "AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
            "AWS_SESSION_TOKEN": creds["SessionToken"]}


def test_the_viewer_lists_and_watches_jobs_but_cannot_fetch_their_checkpoints(sandbox_env, tmp_path):
    sb = sandbox_env
    launched = run_cli(["-o", "json", "--region", "us-east-1", "launch", str(CONFIGS / "vit-base-g5.yaml"),
                        "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"], tmp_path / "alice", env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    sb.client("s3").put_object(Bucket=BUCKET, Key=f"{checkpoints_prefix(job)}step-10/model.pt", Body=b"weights")
    viewer, home = _viewer(sb, tmp_path / "carol"), tmp_path / "carol"

    listed = run_cli(["-o", "json", "ls", "--all"], home, env=viewer)
    assert listed.returncode == 0, listed.stderr
    assert [j["job_id"] for j in json.loads(listed.stdout)["jobs"]] == [job]
    watched = run_cli(["-o", "json", "watch", job, "--once"], home, env=viewer)
    assert watched.returncode == 0 and json.loads(watched.stdout)["status"] == "InProgress", watched.stderr

    fetched = run_cli(["fetch", job, str(tmp_path / "got"), "--what", "checkpoints"], home, env=viewer)
    assert fetched.returncode != 0 and len(fetched.stderr.strip().splitlines()) == 1, fetched.stderr
    assert "AccessDenied" in fetched.stderr, fetched.stderr
    # the checkpoint was not read, and the refused fetch leaves nothing behind: no empty file, no empty folder
    assert not (tmp_path / "got").exists(), sorted((tmp_path / "got").rglob("*"))
