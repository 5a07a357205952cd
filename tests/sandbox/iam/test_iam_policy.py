"""The generated IAM policy against the calls trainctl really makes.

How calls are recorded: trainctl's clients carry the user agent `trainctl/<version>`; the sandbox's
middleware counts every request that carries it (service, operation), throttled attempts included, and
the admin action `call_log` reads the counts. This sees the CLI subprocesses, which an in-process botocore
hook cannot; `recorder` below adds a `before-call` hook for in-process callers too.

Two checks, robust to test order and to running a subset of the suite:
- here, `test_policy_matches_the_calls_of_every_command` runs a representative set of commands itself
  (doctor; plan live; SageMaker launch --dry-run, launch, watch, logs, stop, down; EC2 the same) and
  requires both directions: every call is in the table of trainctl/iam/calls.py, and every row of the table was
  called (the policy grants nothing trainctl never calls).
- session-wide, tests/conftest.py reads the sandbox's call log when the session ends and fails the run
  if any test made a call the policy does not cover (the other direction needs the full set of commands,
  so it is only checked here).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.capacity_blocks import block_wins, sagemaker_spec
from tests.support.helpers import CONFIGS, run_cli
from trainctl import iam
from trainctl_sandbox.testing import add_nat, admit_data_buckets

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
ACCOUNT_BUCKET = "trainctl-123456789012-us-east-1"


def recorded(sandbox) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in sandbox.admin.call_log():
        key = f"{c['service']}:{c['operation']}"
        out[key] = out.get(key, 0) + c["count"]
    return out


def made_since(sandbox, before: dict[str, int]) -> set[str]:
    return {k for k, n in recorded(sandbox).items() if n > before.get(k, 0)}


@pytest.fixture
def recorder(sandbox_env, monkeypatch):
    """In-process callers: a botocore before-call hook on trainctl's session records service:Operation."""
    from trainctl.aws import clients as aws

    monkeypatch.setenv("TRAINCTL_CACHE_TTL", "0")
    aws.reset_session()
    seen: set[str] = set()

    def hook(model, **_):
        seen.add(f"{model.service_model.service_name}:{model.name}")

    aws.session().events.register("before-call", hook)
    yield seen
    aws.session().events.unregister("before-call", hook)
    aws.reset_session()


@pytest.mark.timeout(300)
def test_policy_matches_the_calls_of_every_command(sandbox, tmp_path, recorder, monkeypatch):
    sandbox.admin.action("configure_training_jobs", time_scale=0.3)
    home = tmp_path / "home"

    def cli(*args: str, ok=(0,)) -> str:
        proc = run_cli(list(args), home, env=sandbox.env, timeout=200)
        assert proc.returncode in ok, (args, proc.stderr)
        return proc.stdout

    add_nat(sandbox)  # a SageMaker job of several nodes runs in the VPC: its code download and pip need a NAT
    sm_before = recorded(sandbox)
    cli("doctor", SPEC, ok=(0, 1))  # the calls doctor makes are what counts here, not its verdict
    data_spec = tmp_path / "data.yaml"  # data: channels are checked before billing (bucket region, keys, FSx)
    data_spec.write_text(Path(SPEC).read_text() + "data: {train: s3://my-datasets/x/, "
                                                  "tables: {fsx: fs-0123456789abcdef0, path: /fsx/t}}\n")
    sandbox.client("s3").create_bucket(Bucket="my-datasets")
    cli("doctor", str(data_spec), ok=(0, 1))
    cli("plan", SPEC)
    cli("plan", SPEC, "--layout", "p4d.24xlarge:1:on-demand")  # a layout AWS reserves: training plan offers asked
    cli("launch", SPEC, "--dry-run")
    sandbox.client("s3").delete_bucket(Bucket=ACCOUNT_BUCKET)  # the first launch of an account creates it
    topic = sandbox.client("sns").create_topic(Name="trainctl-news")["TopicArn"]
    long_spec = tmp_path / "long-vit.yaml"  # still running when `stop` comes, however slow this machine is
    long_spec.write_text(Path(SPEC).read_text().replace("samples: 192", "samples: 192000000"))
    job = json.loads(cli("-o", "json", "launch", str(long_spec), "--yes", "--layout", "g5.xlarge:1:on-demand",
                         "--notify", topic))["job_id"]
    cli("watch", job, "--once", ok=(0, 1, 3, 4))  # publishes the job's state to the topic
    cli("cost", job)
    cli("logs", job)
    cli("stop", job)
    cli("down", job)
    # a SageMaker training plan bought (its held plans read first); it starts in three days, so the job waits for it
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[72])
    plan_spec = sagemaker_spec(tmp_path)
    offer = next(o for o in json.loads(cli("-o", "json", "plan", plan_spec))["options"]
                 if o["market"] == "capacity-block")
    cli("launch", plan_spec, "--option", str(offer["rank"]), "--yes", "--buy-capacity-block")
    sagemaker_calls = made_since(sandbox, sm_before)

    ec2_before = recorded(sandbox)
    sandbox.admin.action("remove_spot_service_linked_role")  # the account's first Spot launch creates it
    spec = str(CONFIGS / "vit-base-g5.yaml")
    cli("launch", spec, "--platform", "ec2", "--layout", "g5.xlarge:2:spot", "--dry-run")
    # a layout AWS sells as Capacity Blocks: the plan asks its offers
    cli("plan", spec, "--platform", "ec2", "--layout", "p4d.24xlarge:1:on-demand")
    # an FSx channel on EC2: the file system's groups are read from its network interfaces (refused here: the
    # VPC's default group lets in only its own members)
    subnet = sandbox.client("ec2").describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
        "Subnets"][0]["SubnetId"]
    fs = sandbox.client("fsx").create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                                  LustreConfiguration={"DeploymentType": "SCRATCH_1"})["FileSystem"]
    fsx_spec = tmp_path / "fsx.yaml"
    fsx_spec.write_text(Path(spec).read_text() + f"data: {{train: {{fsx: {fs['FileSystemId']}, path: /fsx/t}}}}\n")
    cli("--region", "us-east-1", "launch", str(fsx_spec), "--platform", "ec2", "--subnet", subnet, "--dry-run", ok=(2,))
    # an S3 channel: the launch reads the boundary's document (does it admit the data bucket?)
    sandbox.client("s3").put_object(Bucket="my-datasets", Key="x/part-0", Body=b"0")
    admit_data_buckets(sandbox, "my-datasets")
    s3_spec = tmp_path / "s3-data.yaml"
    s3_spec.write_text(Path(spec).read_text() + "data: {train: s3://my-datasets/x/}\n")
    cli("--region", "us-east-1", "launch", str(s3_spec), "--platform", "ec2", "--layout", "g5.xlarge:2:spot",
        "--dry-run")
    # a Capacity Block bought and launched into (its held blocks read first), then taken down (the block is read)
    add_nat(sandbox, "us-west-2")
    block_spec = block_wins(sandbox, tmp_path, starts=(0,))
    block_job = json.loads(cli("-o", "json", "launch", block_spec, "--yes", "--buy-capacity-block"))["job_id"]
    cli("down", block_job)
    # the work resumed from that job's checkpoints (launch --resume-from: CopyObject for the small file, a multipart
    # copy for the one above boto3's 8 MiB threshold), into the block it holds
    for name, size in (("a", 1), ("b", 9 << 20)):
        sandbox.client("s3", "us-west-2").put_object(Bucket="trainctl-123456789012-us-west-2", Body=b"0" * size,
                                                     Key=f"{block_job}/checkpoints/ckpt-0000000001-{name}.pt")
    cli("down", json.loads(cli("-o", "json", "launch", block_spec, "--yes", "--resume-from", block_job))["job_id"])
    # P5 Spot's quota has no applied value in the account: the plan reads its AWS default
    cli("plan", spec, "--platform", "ec2", "--layout", "p5.48xlarge:1:spot")
    job2 = json.loads(cli("-o", "json", "launch", spec, "--platform", "ec2", "--layout", "g5.xlarge:2:spot",
                          "--yes"))["job_id"]
    cli("watch", job2, "--once", ok=(0, 1, 3, 4))
    cli("logs", job2)
    cli("stop", job2, "--grace-seconds", "1")  # no agent in the sandbox: the nodes are terminated after it
    cli("watch", job2, "--once", ok=(0, 1, 3, 4))  # reads the stop marker the nodes watch for
    # someone attached a managed policy to the job's node role: down detaches it (iam:DetachRolePolicy)
    iam_client = sandbox.client("iam")
    (role,) = iam_client.list_roles(PathPrefix="/trainctl/")["Roles"]
    arn = iam_client.create_policy(PolicyName="extra", PolicyDocument=json.dumps(iam.SAGEMAKER_TRUST | {
        "Statement": [{"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}]}))["Policy"]["Arn"]
    iam_client.attach_role_policy(RoleName=role["RoleName"], PolicyArn=arn)
    cli("down", job2)
    assert iam_client.list_roles(PathPrefix="/trainctl/")["Roles"] == []
    ec2_calls = made_since(sandbox, ec2_before)
    all_before = recorded(sandbox)
    cli("ls", "--all")  # the account's trainctl jobs from AWS itself: both platforms' lists
    listing_calls = made_since(sandbox, all_before)
    assert listing_calls <= {c.operation for c in iam.calls_for("all")}

    # in-process too (the hook sees what this process calls through trainctl.aws.clients)
    from trainctl.usecases.plan import PlanInputs, make_plan

    make_plan(PlanInputs(spec_path=SPEC))
    hooked = {op.replace("servicequotas:", "service-quotas:") for op in recorder}  # endpoint prefix -> client name
    assert hooked and hooked <= {c.operation for c in iam.calls_for("all")}, hooked

    table = {c.operation for c in iam.CALLS}
    made = sagemaker_calls | ec2_calls | listing_calls
    assert not made - table, f"trainctl calls these, the policy does not allow them: {sorted(made - table)}"
    assert not table - made, f"the policy allows these, no command called them: {sorted(table - made)}"
    # each platform's policy covers that platform's commands
    assert sagemaker_calls <= {c.operation for c in iam.calls_for("sagemaker")}
    assert ec2_calls <= {c.operation for c in iam.calls_for("ec2")}


def test_policy_documents_are_least_privilege():
    policy = iam.cli_policy("all")
    assert policy["Version"] == "2012-10-17"
    actions = iam.granted_actions(policy)
    assert not any(a.endswith("*") for a in actions), "no wildcard actions"
    denies = [st for st in policy["Statement"] if st["Effect"] == "Deny"]
    assert {st["Sid"] for st in denies} == {"RolesKeepTheBoundary", "BoundaryStays", "BoundaryIsFixed"}
    for st in policy["Statement"]:
        if st["Effect"] == "Deny":
            continue
        assert st["Effect"] == "Allow"
        resources = [st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"]
        if resources == ["*"]:
            # unscoped only where AWS offers no resource: reads of EC2 metadata, pricing, quotas, IAM listings
            # (and SageMaker's SearchTrainingPlanOfferings: a Read action with no resource type, per the Service
            # Authorization Reference)
            assert all(a.split(":")[1].startswith(("Describe", "Get", "List")) or a == "sagemaker:SearchTrainingPlanOfferings"
                       for a in st["Action"]), st
        acts = st["Action"]
        if any(a.startswith(("ec2:Delete", "ec2:Terminate", "ec2:Authorize", "sagemaker:Stop")) for a in acts):
            assert st["Condition"] == {"Null": {"aws:ResourceTag/trainctl:job": "false"}}, st
        if "iam:PassRole" in acts:
            assert "iam:PassedToService" in json.dumps(st["Condition"])
            assert all(r.endswith((":role/trainctl-sagemaker-execution", ":role/trainctl/*")) for r in resources)
        if any(a.startswith("s3:") and a != "s3:ListAllMyBuckets" for a in acts):  # it takes no resource
            assert all(r.startswith("arn:aws:s3:::trainctl-") for r in resources), st
        if any(a.startswith("iam:") and a != "iam:PassRole" and not a.startswith("iam:List") for a in acts):
            assert all(":role/trainctl" in r or ":instance-profile/trainctl/" in r
                       or r.endswith(":policy/trainctl-boundary") or r == iam.SPOT_ROLE for r in resources), st
        if any(a in ("iam:CreateRole", "iam:PutRolePolicy") for a in acts):
            assert st["Condition"] == iam.WITH_BOUNDARY, st
        if any(a.startswith("s3:") and a != "s3:CreateBucket" for a in acts):
            assert st["Condition"] == iam.SAME_ACCOUNT, st
    sm = iam.granted_actions(iam.cli_policy("sagemaker"))
    assert "sagemaker:CreateTrainingJob" in sm and "ec2:CreateFleet" not in sm
    # each SageMaker job's own execution role is made under the boundary, whose denies hold on both platforms
    assert "iam:CreateRole" in sm and "iam:CreateInstanceProfile" not in sm
    assert {st["Sid"] for st in iam.cli_policy("sagemaker")["Statement"] if st["Effect"] == "Deny"} == {
        "RolesKeepTheBoundary", "BoundaryStays", "BoundaryIsFixed"}
    e2 = iam.granted_actions(iam.cli_policy("ec2"))
    # EC2's policy reads one SageMaker thing: whether the job runs there (`down` refuses a SageMaker job)
    assert "ec2:CreateFleet" in e2 and {a for a in e2 if a.startswith("sagemaker:")} == {"sagemaker:DescribeTrainingJob"}


def test_iam_policy_command(tmp_path):
    proc = run_cli(["iam-policy", "--platform", "sagemaker", "--execution-role", "my-role"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    policy = json.loads(proc.stdout)
    assert policy == iam.cli_policy("sagemaker", "my-role")
    assert "arn:aws:iam::*:role/my-role" in proc.stdout
    doc = json.loads(run_cli(["-o", "json", "iam-policy", "--role", "sagemaker-execution"], tmp_path).stdout)
    assert doc["trust_policy"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    s3 = [st for st in doc["policy"]["Statement"] if any(a.startswith("s3:") for a in json.dumps(st["Action"]).split('"'))]
    assert s3 and all(r.startswith("arn:aws:s3:::trainctl-") for st in s3
                      for r in ([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"]))
    node = json.loads(run_cli(["-o", "json", "iam-policy", "--role", "ec2-node"], tmp_path).stdout)
    assert node["trust_policy"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    for args in (["--role", "admin"], ["--platform", "k8s"]):
        bad = run_cli(["iam-policy", *args], tmp_path)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
