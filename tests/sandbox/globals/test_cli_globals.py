"""The command line as users of the AWS CLI and kubectl expect it: global options before or after the
subcommand (the later value wins), and one answer from watch, logs, stop and down for a job trainctl does
not know. Every case runs the real command in a subprocess."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli
from trainctl.plans import Option
from trainctl.state.job_store import JobStore

SPEC = str(CONFIGS / "vit-base-g5.yaml")
PLAN = ["plan", SPEC, "--offline", "--layout", "g5.2xlarge:1:on-demand"]


@pytest.mark.parametrize("flag", ["-o", "--output"])
def test_output_before_and_after_the_subcommand(tmp_path, flag):
    before = run_cli([flag, "json", *PLAN], tmp_path)
    after = run_cli([*PLAN, flag, "json"], tmp_path)
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert json.loads(before.stdout)["options"] == json.loads(after.stdout)["options"]
    # the later value wins: json before, table after
    table = run_cli([flag, "json", *PLAN, flag, "table"], tmp_path)
    assert table.returncode == 0 and table.stdout.lstrip().startswith("vit-base-g5 (")
    bad = run_cli([*PLAN, flag, "yaml"], tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("trainctl: error: --output 'yaml'")


def unknown_job_line(args: list[str], home, env: dict | None = None) -> str:
    proc = run_cli(args, home, env=env)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.stdout == ""
    return line


@pytest.mark.parametrize("position", ["before", "after"])
def test_region_before_and_after_the_subcommand(tmp_path, position):
    args = ["--region", "eu-west-1", "watch", "job-1"] if position == "before" else \
        ["watch", "job-1", "--region", "eu-west-1"]
    assert "(region asked: eu-west-1)" in unknown_job_line(args, tmp_path)
    later = unknown_job_line(["--region", "eu-west-1", "logs", "job-1", "--region", "ap-south-1"], tmp_path)
    assert "(region asked: ap-south-1)" in later


@pytest.mark.parametrize("position", ["before", "after"])
def test_profile_before_and_after_the_subcommand(tmp_path, position):
    config = tmp_path / "aws-config"
    config.write_text("[profile tokyo]\nregion = ap-northeast-1\n")
    env = {"AWS_CONFIG_FILE": str(config)}
    args = ["--profile", "tokyo", "stop", "job-1"] if position == "before" else ["stop", "job-1", "--profile", "tokyo"]
    assert "(region asked: ap-northeast-1)" in unknown_job_line(args, tmp_path, env)
    missing = run_cli(["down", "job-1", "--profile", "nope"], tmp_path, env=env)
    assert missing.returncode == 2 and "AWS profile 'nope' not found" in missing.stderr


@pytest.mark.parametrize("position", ["before", "after"])
def test_debug_before_and_after_the_subcommand_shows_the_traceback(tmp_path, position):
    args = ["plan", "no-such-file.yaml"]
    plain = run_cli(args, tmp_path)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr and len(plain.stderr.splitlines()) == 1
    debug = run_cli(["--debug", *args] if position == "before" else [*args, "--debug"], tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "no-such-file.yaml" in debug.stderr


@pytest.mark.parametrize("position", ["before", "after"])
def test_sandbox_before_and_after_the_subcommand(sandbox, tmp_path, position):
    """--sandbox uses the running sandbox (the session's, found through TRAINCTL_HOME): the plan is live."""
    home = sandbox.state_dir.parent
    args = ["-o", "json", "--sandbox", *PLAN[:2], "--layout", "g5.2xlarge:1:on-demand"] if position == "before" \
        else ["-o", "json", *PLAN[:2], "--layout", "g5.2xlarge:1:on-demand", "--sandbox"]
    proc = run_cli(args, home)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["source"] == "live"


def test_every_command_has_the_global_options(tmp_path):
    for command in ("plan", "launch", "watch", "logs", "ls", "stop", "down", "doctor", "catalog", "schema",
                    "iam-policy", "calibration"):
        text = run_cli([command, "--help"], tmp_path).stdout
        for flag in ("--output", "--profile", "--region", "--debug", "--sandbox"):
            assert flag in text, (command, flag)


def test_a_job_trainctl_does_not_know_gets_one_answer_from_watch_logs_stop_and_down(tmp_path):
    lines = {cmd: unknown_job_line([cmd, "vit-base-g5-20261123-020000-ab12", "--region", "us-west-2"], tmp_path)
             for cmd in ("watch", "logs", "stop", "down")}
    assert len(set(lines.values())) == 1, lines
    line = lines["watch"]
    assert line.startswith("trainctl: error: vit-base-g5-20261123-020000-ab12: no job of that id")
    assert "(region asked: us-west-2)" in line and "`trainctl ls --all`" in line and "--platform" in line
    assert not (tmp_path / "state.db").exists()  # asking created no state


def test_a_sandbox_job_is_unknown_to_aws_and_not_listed_there(tmp_path):
    """Jobs are kept per endpoint; the sandbox's never show up among real ones."""
    option = Option(rank=1, platform="sagemaker", instance_type="g5.xlarge", count=1, market="on-demand",
                    region="us-east-1", accelerators=1, hourly_usd=1.4, throughput_samples_per_s=100,
                    throughput_source="model", hours=1.0, expected_cost_usd=1.4)
    endpoint = "http://127.0.0.1:59999"
    with JobStore(tmp_path / "state.db", endpoint=endpoint) as store:
        store.record_job(job_id="sbx-job-1", account="123456789012", platform="sagemaker", region="us-east-1",
                         spec_path=SPEC, spec_name="vit-base-g5", model="vit_base_patch16_224", batch_size=128,
                         option=option, plan_json=None, status="InProgress")
    aws_jobs = json.loads(run_cli(["-o", "json", "ls", "--no-status"], tmp_path).stdout)["jobs"]
    assert aws_jobs == []
    assert "for AWS" in unknown_job_line(["watch", "sbx-job-1"], tmp_path)
    sandbox_jobs = json.loads(run_cli(["-o", "json", "ls", "--no-status"], tmp_path,
                                      env={"AWS_ENDPOINT_URL": endpoint}).stdout)["jobs"]
    assert [(j["job_id"], j["layout"], j["account"]) for j in sandbox_jobs] == \
        [("sbx-job-1", "1x g5.xlarge", "123456789012")]


def test_ls_does_not_ask_aws_about_a_job_of_another_account(sandbox, tmp_path):
    """After a profile switch, a job launched from another account is named as such, not 'unknown'."""
    option = Option(rank=1, platform="sagemaker", instance_type="g5.xlarge", count=1, market="on-demand",
                    region="us-east-1", accelerators=1, hourly_usd=1.4, throughput_samples_per_s=100,
                    throughput_source="model", hours=1.0, expected_cost_usd=1.4)
    with JobStore(tmp_path / "state.db", endpoint=sandbox.endpoint_url.rstrip("/").lower()) as store:
        store.record_job(job_id="elsewhere-1", account="111111111111", platform="sagemaker", region="us-east-1",
                         spec_path=SPEC, spec_name="vit-base-g5", model="vit_base_patch16_224", batch_size=128,
                         option=option, plan_json=None, status="InProgress")
    proc = run_cli(["-o", "json", "ls"], tmp_path, env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    (job,) = json.loads(proc.stdout)["jobs"]
    assert job["status"] == "in account 111111111111 (these credentials are 123456789012's)"


@pytest.mark.parametrize("args", [["--region", "us-east-9", *PLAN], [*PLAN, "--region", "us-east-9"],
                                  ["--region", "us-east-9", "launch", SPEC, "--offline", "--dry-run"],
                                  ["doctor", "--region", "us-east-9"], ["--region", "us-east-9", "ls"]])
def test_an_unknown_region_is_one_line_at_the_start(tmp_path, args):
    proc = run_cli(args, tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("trainctl: error: --region 'us-east-9' is not a region") and "us-east-1" in line


def test_region_names_the_one_region_plan_and_launch_work_in(sandbox, tmp_path):
    plan = json.loads(run_cli([*PLAN[:3], "--region", "us-west-2", "-o", "json"], tmp_path).stdout)
    assert plan["options"] and {o["region"] for o in plan["options"]} == {"us-west-2"}
    home = sandbox.state_dir.parent
    launch = run_cli(["--sandbox", "launch", SPEC, "--layout", "g5.2xlarge:1:on-demand", "--dry-run", "--region",
                      "us-west-2", "-o", "json"], home)
    assert launch.returncode == 0, launch.stderr
    assert json.loads(launch.stdout)["option"]["region"] == "us-west-2"
