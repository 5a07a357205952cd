"""The permissions boundary lets a job role pull images only from the accounts of trainctl's images (AWS's Deep
Learning Containers, per region, and SMP's) and the caller's own account, not from any ECR repository; a
SageMaker launch that would create a role refuses another account's --image in one line."""
from __future__ import annotations

from tests.support.helpers import CONFIGS, run_cli
from tests.support.policy_eval import Request, decide
from trainctl.iam.boundary import boundary_policy

ME = "123456789012"
ANY_PULL = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetAuthorizationToken"], "Resource": "*"}]}


def _pull(account: str, repository: str) -> str:
    return decide(Request("ecr:BatchGetImage", f"arn:aws:ecr:us-east-1:{account}:repository/{repository}",
                          {"aws:PrincipalAccount": ME}), [ANY_PULL], boundary_policy())


def test_a_job_role_pulls_only_trainctls_image_accounts_and_its_own():
    assert _pull("763104351884", "pytorch-training") == "Allow"
    assert _pull("975050140332", "pytorch-training") == "Allow"  # ap-east-2's DLC account
    assert _pull("658645717510", "smdistributed-modelparallel") == "Allow"
    assert _pull(ME, "my-image") == "Allow"
    assert _pull("999988887777", "someone-elses") == "ImplicitDeny"
    assert decide(Request("ecr:GetAuthorizationToken", "*", {"aws:PrincipalAccount": ME}), [ANY_PULL],
                  boundary_policy()) == "Allow"


def test_another_accounts_image_is_refused_when_trainctl_makes_the_role(sandbox_env, tmp_path):
    spec = CONFIGS.parent / "tests" / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml"
    image = "999988887777.dkr.ecr.us-east-1.amazonaws.com/their-image:1"
    proc = run_cli(["launch", str(spec), "--layout", "g5.xlarge:1:on-demand", "--image", image, "--dry-run"],
                   tmp_path / "home", env=sandbox_env.env)
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--image {image}" in lines[0] and "--role" in lines[0], lines
    mine = f"{ME}.dkr.ecr.us-east-1.amazonaws.com/my-image:1"
    ok = run_cli(["launch", str(spec), "--layout", "g5.xlarge:1:on-demand", "--image", mine, "--dry-run"],
                 tmp_path / "home", env=sandbox_env.env)
    assert ok.returncode == 0, ok.stderr
