"""The JobStore: a versioned schema that migrates trainctl's first database, reads that create nothing, and
jobs and measured throughput kept apart by endpoint (the sandbox's figures never reach a plan for AWS)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.helpers import CONFIGS, run_cli, run_json
from trainctl.plans import Option
from trainctl.state.job_store import SCHEMA_VERSION, JobStore

# trainctl's first schema, exactly as trainctl's first store created it (it set no user_version).
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    region TEXT,
    spec_path TEXT,
    spec_name TEXT,
    model TEXT,
    batch_size INTEGER,
    option_json TEXT NOT NULL,
    plan_json TEXT,
    expected_cost_usd REAL,
    status TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS measured_throughput (
    model TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    instance_type TEXT NOT NULL,
    count INTEGER NOT NULL,
    samples_per_s REAL NOT NULL,
    job_id TEXT NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (model, batch_size, instance_type, count)
);
"""
# an option as the first trainctl wrote it: Plan.to_json's keys, plus failover_from on a failover attempt
V1_OPTION = {"rank": 2, "platform": "sagemaker", "instance_type": "g5.2xlarge", "count": 4, "market": "spot",
             "region": "us-east-1", "availability_zone": "us-east-1b", "accelerators": 4, "hourly_usd": 1.45,
             "throughput_samples_per_s": 601.5, "throughput_source": "model", "hours": 3.2,
             "expected_cost_usd": 4.64, "spot_placement_score": 7, "interruptions_expected": 0.12,
             "fits_memory": True, "pareto": True, "why": ["cheapest"], "strategy": "ddp", "capacity_odds": 0.8,
             "wall_hours": 3.3, "quota_ok": None, "price_source": "catalog", "failover_from": "vit-1-ab12"}


def make_v1_database(path):
    with sqlite3.connect(path) as db:
        db.executescript(V1_SCHEMA)
        db.execute("INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   ("vit-1-ab12-f1", "sagemaker", "us-east-1", "configs/vit-base-g5.yaml", "vit-base-g5",
                    "vit_base_patch16_224", 128, json.dumps(V1_OPTION), json.dumps({"options": []}), 4.64,
                    "Completed", 1000.0, 1100.0))
        db.execute("INSERT INTO events (job_id, at, kind, detail) VALUES (?,?,?,?)",
                   ("vit-1-ab12-f1", 1000.0, "launch", "option 2"))
        db.execute("INSERT OR REPLACE INTO measured_throughput VALUES (?,?,?,?,?,?,?)",
                   ("vit_base_patch16_224", 128, "g5.2xlarge", 4, 640.0, "vit-1-ab12-f1", 1100.0))
    db.close()


def test_a_v1_database_is_migrated_with_its_jobs_events_and_measurements(tmp_path):
    path = tmp_path / "state.db"
    make_v1_database(path)
    with JobStore(path, endpoint="") as store:
        assert store.schema_version == SCHEMA_VERSION
        job = store.job("vit-1-ab12-f1")
        assert job is not None and job.status == "Completed" and job.model == "vit_base_patch16_224"
        assert job.failover_from == "vit-1-ab12" and job.endpoint is None  # v1 kept no endpoint
        assert isinstance(job.option, Option)
        assert (job.option.layout, job.option.rank, job.option.expected_cost_usd) == ("g5.2xlarge:4:spot", 2, 4.64)
        assert [j.job_id for j in store.jobs(10)] == ["vit-1-ab12-f1"]
        assert store.events("vit-1-ab12-f1") == [("launch", "option 2")]
        (m,) = store.measurements("vit_base_patch16_224", 128, include_unknown_origin=True)
        assert (m.instance_type, m.count, m.samples_per_s, m.endpoint) == ("g5.2xlarge", 4, 640.0, None)
        # a v1 measurement may be the sandbox's: it never ranks a plan by itself
        assert store.measured_rates("vit_base_patch16_224", 128) == {}
        store.add_event("vit-1-ab12-f1", "down", "nothing left")
    with JobStore(path, endpoint="") as again:  # opening a migrated database changes nothing
        assert again.schema_version == SCHEMA_VERSION
        assert [k for k, _ in again.events("vit-1-ab12-f1")] == ["launch", "down"]


def test_a_newer_database_is_refused_in_one_line(tmp_path):
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    from trainctl.errors import TrainctlError

    with pytest.raises(TrainctlError, match="newer than this trainctl knows"):
        JobStore(path).job("x")


def test_jobs_and_measurements_are_kept_apart_by_endpoint(tmp_path):
    path = tmp_path / "state.db"
    option = Option.model_validate({k: v for k, v in V1_OPTION.items() if k != "failover_from"})
    with JobStore(path, endpoint="http://127.0.0.1:5123") as sandbox:
        sandbox.record_job(job_id="sbx-1", account="123456789012", platform="sagemaker", region="us-east-1",
                           spec_path="x.yaml", spec_name="x", model="m", batch_size=8, option=option,
                           plan_json=None, status="Submitting")
        sandbox.record_measured(model="m", batch_size=8, instance_type="g5.2xlarge", count=4, samples_per_s=9.0,
                                job_id="sbx-1", account="123456789012")
        assert sandbox.job("sbx-1").option == option
        assert set(sandbox.measured_rates("m", 8)) == {("m", 8, "g5.2xlarge")}
    with JobStore(path, endpoint="") as aws:
        assert aws.job("sbx-1") is None and aws.jobs(10) == [] and aws.measured_rates("m", 8) == {}
        aws.set_status("sbx-1", "Stopped")  # touches only this endpoint's job of that id
    with JobStore(path, endpoint="http://127.0.0.1:5123") as sandbox:
        assert sandbox.job("sbx-1").status == "Submitting"


def test_reading_creates_no_database(tmp_path):
    with JobStore(tmp_path / "home" / "state.db") as store:
        assert store.job("x") is None and store.jobs(5) == [] and store.measured_rates("m", 1) == {}
        assert store.events("x") == [] and store.schema_version is None
    assert not (tmp_path / "home").exists()


def test_planning_and_listing_create_no_state(tmp_path):
    home = tmp_path / "home"
    run_json(["plan", str(CONFIGS / "vit-base-g5.yaml"), "--offline"], home)
    assert run_json(["ls", "--no-status"], home) == {"jobs": [], "warnings": []}
    assert not (home / "state.db").exists()


def test_a_sandbox_measurement_never_enters_a_plan_for_aws(tmp_path):
    """After a sandbox job, an --offline plan for AWS must not say 'measured'."""
    home = tmp_path / "home"
    home.mkdir()
    with JobStore(home / "state.db", endpoint="http://127.0.0.1:5123") as sandbox:
        sandbox.record_measured(model="vit_base_patch16_224", batch_size=128, instance_type="g5.2xlarge", count=1,
                                samples_per_s=150.0, job_id="sbx-1")
    spec = str(CONFIGS / "vit-base-g5.yaml")
    real = run_json(["plan", spec, "--offline", "--layout", "g5.2xlarge:1"], home)
    assert "measured" not in {o["throughput_source"] for o in real["options"]}
    sandboxed = run_json(["plan", spec, "--offline", "--layout", "g5.2xlarge:1"], home,
                         env={"AWS_ENDPOINT_URL": "http://127.0.0.1:5123/"})
    assert {(o["throughput_source"], o["throughput_samples_per_s"]) for o in sandboxed["options"]} == {("measured", 150.0)}
    proc = run_cli(["ls", "--no-status"], home)
    assert proc.returncode == 0 and "no jobs yet" in proc.stdout


STORE_MODULES = ("state/job_store.py", "state/measurements.py")


def test_only_the_store_speaks_sql():
    """All SQL lives in the store (trainctl/state/job_store.py and its measured-throughput half, state/measurements.py): no
    other module opens the database or writes a query."""
    from pathlib import Path

    import trainctl

    sql = ("sqlite3", "SELECT ", "INSERT ", "UPDATE ", "DELETE FROM", "CREATE TABLE", "state.db")
    root = Path(trainctl.__file__).parent
    offenders = {str(p.relative_to(root)): [w for w in sql if w in p.read_text()]
                 for p in root.rglob("*.py") if str(p.relative_to(root)) not in STORE_MODULES}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_a_v1_option_the_model_no_longer_reads_is_kept_as_a_job_without_option(tmp_path):
    path = tmp_path / "state.db"
    make_v1_database(path)
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   ("hand-edited", "ec2", "us-east-1", "x.yaml", "x", "m", 8, json.dumps({"count": "two"}), None,
                    None, "InProgress", 900.0, 900.0))
    db.close()
    with JobStore(path, endpoint="") as store:
        job = store.job("hand-edited")
        assert job is not None and job.option is None and job.platform == "ec2"
        assert [j.job_id for j in store.jobs(10)] == ["vit-1-ab12-f1", "hand-edited"]
    listed = json.loads(run_cli(["-o", "json", "ls", "--no-status"], tmp_path).stdout)["jobs"]
    assert [(j["job_id"], j["layout"]) for j in listed] == [("vit-1-ab12-f1", "4x g5.2xlarge"),
                                                            ("hand-edited", "-")]


def test_a_v2_database_keeps_its_measurements_and_then_one_per_job(tmp_path):
    """v2 kept one measurement per layout (two jobs of one layout replaced each other); v3 keeps one per job, and a
    plan chooses the newest, the same at every plan (issue 36, item 7)."""
    from trainctl.state.job_store import SCHEMA_V2

    path = tmp_path / "state.db"
    v2 = SCHEMA_V2.replace("UNIQUE (endpoint, account, job_id)",
                           "UNIQUE (endpoint, account, model, batch_size, instance_type, count)")
    with sqlite3.connect(path) as db:
        db.executescript(v2)
        db.execute("INSERT INTO measured_throughput VALUES ('', '1', 'vit', 128, 'g5.xlarge', 1, 100.0, 'a', 10.0)")
        db.execute("PRAGMA user_version = 2")
    db.close()
    with JobStore(path, endpoint="") as store:
        assert store.schema_version == SCHEMA_VERSION == 3
        store.record_measured(model="vit", batch_size=128, instance_type="g5.xlarge", count=1, samples_per_s=130.0,
                              job_id="b", account="1", measured_at=20.0)
        store.record_measured(model="vit", batch_size=128, instance_type="g5.xlarge", count=1, samples_per_s=90.0,
                              job_id="c", account="1", measured_at=1e12)  # from the future: dated now
        assert [m.job_id for m in store.measurements("vit", 128)] == ["a", "b", "c"]
        assert store.measurements("vit", 128)[-1].measured_at < 1e11


def test_a_row_whose_created_at_is_not_a_number_is_skipped_and_counted_by_ls_and_cost(tmp_path):
    """Issue 36 (partly fixed before): one damaged local row broke `ls` and `cost` for every job."""
    home = tmp_path / "home"
    option = Option(rank=1, platform="ec2", instance_type="g5.xlarge", count=1, market="spot", region="us-east-1",
                    accelerators=1, hourly_usd=0.5, throughput_samples_per_s=100.0, throughput_source="model",
                    hours=1.0, expected_cost_usd=0.5)
    with JobStore(home / "state.db", endpoint="") as store:
        for job in ("good-1", "bad-1"):
            store.record_job(job_id=job, account="1", platform="ec2", region="us-east-1", spec_path="x.yaml",
                             spec_name="x", model="vit", batch_size=8, option=option, plan_json=None,
                             status="Completed")
    with sqlite3.connect(home / "state.db") as db:
        db.execute("UPDATE jobs SET created_at='yesterday' WHERE job_id='bad-1'")
    db.close()
    for args in (["ls", "--no-status"], ["cost"]):
        proc = run_cli(args, home)
        assert proc.returncode == 0, proc.stderr
        assert "good-1" in proc.stdout and "bad-1" not in proc.stdout
        assert "1 job row of trainctl's database skipped: created_at is not a number" in proc.stderr
