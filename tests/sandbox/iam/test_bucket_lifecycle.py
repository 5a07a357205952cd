"""Incomplete multipart uploads are billed until aborted: the job roles may abort their own (within the
boundary), and trainctl's job bucket carries a lifecycle rule that aborts what is left after a week, beside the
rules someone else put there."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from tests.support.policy_eval import Request, decide
from trainctl.backends.bucket_calls import ABORT_AFTER_DAYS, ABORT_RULE_ID
from trainctl.iam.boundary import boundary_policy
from trainctl.iam.execution_role import execution_policy
from trainctl.iam.node_role import node_policy
from trainctl.naming.bucket import code_key

ACCOUNT, REGION = "123456789012", "us-east-1"
BUCKET = f"trainctl-{ACCOUNT}-{REGION}"
IMAGE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"


def _abort(key: str) -> Request:
    return Request("s3:AbortMultipartUpload", f"arn:aws:s3:::{BUCKET}/{key}",
                   {"aws:PrincipalAccount": ACCOUNT, "s3:ResourceAccount": ACCOUNT})


def test_a_job_role_may_abort_its_own_multipart_uploads_only():
    boundary = boundary_policy()
    for policy in (node_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64)),
                   execution_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64), IMAGE)):
        assert decide(_abort("job-1/checkpoints/step-9.pt"), [policy], boundary) == "Allow"
        assert decide(_abort("job-2/checkpoints/step-9.pt"), [policy], boundary) == "ImplicitDeny"


def _launch(sb, tmp_path, *extra: str):
    return run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                    "--layout", "g5.xlarge:1:on-demand", "--region", REGION, *extra], tmp_path / "home", env=sb.env)


def test_the_job_bucket_aborts_incomplete_uploads_and_keeps_other_rules(sandbox_env, tmp_path):
    sb = sandbox_env
    s3 = sb.client("s3")
    theirs = {"ID": "expire-scratch", "Status": "Enabled", "Filter": {"Prefix": "scratch/"},
              "Expiration": {"Days": 30}}
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": [theirs]})
    proc = _launch(sb, tmp_path, "--yes")
    assert proc.returncode == 0, proc.stderr
    rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]}
    assert set(rules) == {"expire-scratch", ABORT_RULE_ID}
    assert rules[ABORT_RULE_ID]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": ABORT_AFTER_DAYS}
    assert rules["expire-scratch"]["Expiration"] == {"Days": 30}
    # the next launch finds the rule and writes nothing
    again = _launch(sb, tmp_path, "--dry-run")
    assert again.returncode == 0, again.stderr
    assert not any(r["operation"] == "PutBucketLifecycleConfiguration" for r in json.loads(again.stdout)["requests"])
    assert run_cli(["down", json.loads(proc.stdout)["job_id"]], tmp_path / "home", env=sb.env).returncode == 0


def test_the_cli_may_set_lifecycle_rules_on_its_own_job_buckets_only():
    """A lifecycle rule can expire every object of a bucket: the CLI policy grants it on trainctl's job buckets of
    the caller's account (trainctl-ACCOUNT-REGION), not on any bucket whose name starts with trainctl-."""
    from trainctl.iam.calls import cli_policy

    def put(bucket: str) -> str:
        return decide(Request("s3:PutLifecycleConfiguration", f"arn:aws:s3:::{bucket}",
                              {"aws:PrincipalAccount": ACCOUNT, "s3:ResourceAccount": ACCOUNT}), [cli_policy()])

    assert put(BUCKET) == "Allow" and put(f"trainctl-{ACCOUNT}-eu-west-1") == "Allow"
    assert put("trainctl-datasets") == "ImplicitDeny"
    assert put("trainctl-210987654321-us-east-1") == "ImplicitDeny"
