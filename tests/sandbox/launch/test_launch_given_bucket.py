"""`launch --bucket` with a bucket outside `trainctl-*`: every role trainctl creates carries the permissions
boundary, which allows S3 only in `trainctl-*` buckets, so such a job could not read its code; the launch
refuses in one line before creating anything. With `--role` (SageMaker) the user's role decides."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from tests.support.policy_eval import Request, decide
from trainctl import iam
from trainctl.iam.boundary import boundary_policy
from trainctl.iam.node_role import node_policy
from trainctl.naming.bucket import code_key

SPEC = str(CONFIGS.parent / "tests" / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
ACCOUNT = "123456789012"


def test_the_boundary_cancels_a_role_policy_on_another_bucket():
    """Why the launch refuses: the node role's own policy names the bucket, the boundary does not."""
    policy = node_policy("job-1", "my-data", "us-east-1", ACCOUNT, code_key("a" * 64))
    read = Request("s3:GetObject", f"arn:aws:s3:::my-data/{code_key('a' * 64)}",
                   {"aws:PrincipalAccount": ACCOUNT, "s3:ResourceAccount": ACCOUNT})
    assert decide(read, [policy]) == "Allow"
    assert decide(read, [policy], boundary_policy()) == "ImplicitDeny"


def _nothing_created(sb) -> None:
    assert sb.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []
    for region in ("us-east-1", "us-west-2"):
        ec2 = sb.client("ec2", region)
        assert ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [iam.JOB_TAG]}])[
            "SecurityGroups"] == []
        assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert sb.client("s3").list_objects_v2(Bucket="my-data").get("KeyCount", 0) == 0


def _refusal(proc) -> str:
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_bucket_outside_trainctl_star_is_refused_before_anything_is_created(sandbox_env, tmp_path):
    sb = sandbox_env
    sb.client("s3").create_bucket(Bucket="my-data")
    for args in (["launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout", "g5.xlarge:2:spot"],
                 ["launch", SPEC, "--layout", "g5.xlarge:1:on-demand"]):
        err = _refusal(run_cli([*args, "--bucket", "my-data", "--yes"], tmp_path / "home", env=sb.env))
        assert "--bucket my-data" in err and "trainctl-*" in err and "docs/security.md" in err, err
        _nothing_created(sb)


def test_a_given_role_takes_a_bucket_outside_trainctl_star(sandbox_env, tmp_path):
    sb = sandbox_env
    sb.client("s3").create_bucket(Bucket="my-data")
    sb.client("iam").create_role(RoleName="my-sagemaker-role", AssumeRolePolicyDocument=json.dumps(iam.SAGEMAKER_TRUST))
    proc = run_cli(["--output", "json", "launch", SPEC, "--layout", "g5.xlarge:1:on-demand", "--bucket", "my-data",
                    "--role", "my-sagemaker-role", "--dry-run"], tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = next(r for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateTrainingJob")
    assert job["params"]["OutputDataConfig"]["S3OutputPath"].startswith("s3://my-data/")
