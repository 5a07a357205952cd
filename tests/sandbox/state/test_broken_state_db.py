"""A broken state database blocks nothing it need not block: a file that is not a database is named with the
way out (move it aside), `down JOB --platform P` works from AWS alone, and one damaged row does not hide the
other jobs from `ls`."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.support.helpers import run_cli


def test_a_corrupt_database_is_named_and_down_with_a_platform_works_without_it(sandbox_env):
    home = Path(os.environ["TRAINCTL_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "state.db").write_bytes(b"this is not a database" * 100)
    ls = run_cli(["ls"], home, env=sandbox_env.env)
    assert ls.returncode == 1
    (line,) = ls.stderr.strip().splitlines()
    assert f"{home / 'state.db'} is not a readable trainctl database" in line and f"`mv {home / 'state.db'} " in line
    down = run_cli(["down", "gone-job-1", "--platform", "ec2"], home, env=sandbox_env.env)
    assert down.returncode == 0, down.stderr
    assert "nothing tagged trainctl:job=gone-job-1 is left" in down.stderr


def test_one_damaged_row_does_not_hide_the_other_jobs(sandbox_env):
    home = Path(os.environ["TRAINCTL_HOME"])
    from trainctl.state.job_store import JobStore

    with JobStore(home / "state.db", endpoint=sandbox_env.env["AWS_ENDPOINT_URL"].rstrip("/").lower()) as store:
        store.add_event("probe", "probe", "creates the database")
    db = sqlite3.connect(home / "state.db")
    with db:
        for job, option in (("good-job-1", None), ("damaged-job-1", "{not json")):
            db.execute("INSERT INTO jobs (endpoint, job_id, account, platform, region, option_json, status, "
                       "created_at, updated_at) VALUES (?, ?, '', 'ec2', 'us-east-1', ?, 'Completed', 1, 1)",
                       (sandbox_env.env["AWS_ENDPOINT_URL"].rstrip("/").lower(), job, option))
    db.close()
    ls = run_cli(["--output", "json", "ls", "--no-status"], home, env=sandbox_env.env)
    assert ls.returncode == 0, ls.stderr
    assert {j["job_id"] for j in json.loads(ls.stdout)["jobs"]} == {"good-job-1", "damaged-job-1"}


def test_ls_all_finds_a_running_job_from_aws_alone_when_the_database_is_broken(sandbox_env, tmp_path):
    from tests.support.helpers import CONFIGS

    home = tmp_path / "home"
    launch = ["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout",
              "g5.xlarge:1:spot", "--yes"]
    launched = run_cli(launch, home, env=sandbox_env.env)
    assert launched.returncode == 0, launched.stderr
    job, region = json.loads(launched.stdout)["job_id"], json.loads(launched.stdout)["region"]
    (home / "state.db").write_bytes(b"garbage" * 100)
    found = run_cli(["--output", "json", "--region", region, "ls", "--all"], home, env=sandbox_env.env)
    assert found.returncode == 0, found.stderr
    assert [(j["job_id"], j["platform"], j["status"]) for j in json.loads(found.stdout)["jobs"]] == \
        [(job, "ec2", "InProgress")]
    assert "is not a readable trainctl database" in found.stderr
    assert run_cli(["down", job, "--platform", "ec2", "--region", region], home, env=sandbox_env.env).returncode == 0
