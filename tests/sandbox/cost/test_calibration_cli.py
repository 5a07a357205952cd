"""`trainctl calibration`: the prediction stored with each job at launch against its measured throughput.

Jobs and measurements go into the store through its public API (JobStore.record_job / record_measured /
set_status, as launch and watch write them) and the command runs as a user runs it, in a subprocess; the
end-to-end path through a real sandbox job (launch, watch, calibration) is in test_launch_sagemaker.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.helpers import CONFIGS, run_cli
from trainctl.plans import Option
from trainctl.state.job_store import JobStore

SPEC = str(CONFIGS / "vit-base-g5.yaml")
SANDBOX_URL = "http://127.0.0.1:4599"


@pytest.fixture(scope="module")
def options(tmp_path_factory) -> list[Option]:
    """Real options, from an offline plan of the reference spec."""
    home = tmp_path_factory.mktemp("plan")
    proc = run_cli(["--output", "json", "plan", SPEC, "--offline"], home)
    assert proc.returncode == 0, proc.stderr
    return [Option.model_validate(o) for o in json.loads(proc.stdout)["options"]]


def _launch(store: JobStore, job: str, option: Option, status: str, account: str = "111122223333") -> None:
    store.record_job(job_id=job, account=account, platform=option.platform, region=option.region,
                     spec_path=SPEC, spec_name="vit-base-g5", model="vit_base_patch16_224", batch_size=128,
                     option=option, plan_json=None, status="Submitting")
    store.set_status(job, status)


def _measure(store: JobStore, job: str, option: Option, samples_per_s: float, account: str = "111122223333"):
    store.record_measured(model="vit_base_patch16_224", batch_size=128, instance_type=option.instance_type,
                          count=option.count, samples_per_s=samples_per_s, job_id=job, account=account)


def _json(home: Path, *args: str, env: dict | None = None) -> dict:
    proc = run_cli(["--output", "json", "calibration", *args], home, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_each_completed_job_shows_prediction_measurement_and_error(tmp_path, options):
    distinct = list({(o.instance_type, o.count): o for o in reversed(options)}.values())
    a, b, c = distinct[0], distinct[1], distinct[2]        # three layouts: the measured table keys by layout
    with JobStore(tmp_path / "state.db", endpoint="") as store:
        _launch(store, "job-over", a, "Completed")
        _measure(store, "job-over", a, a.throughput_samples_per_s / 1.25)      # the plan expected 25% more
        _launch(store, "job-under", b, "Completed")
        _measure(store, "job-under", b, b.throughput_samples_per_s / 0.8)      # 20% less than measured
        _launch(store, "job-running", c, "InProgress")                        # not completed: not shown
        _launch(store, "job-no-metrics", c, "Completed")                      # completed, nothing measured
    doc = _json(tmp_path)
    assert doc["endpoint"] == "aws"
    rows = {r["job_id"]: r for r in doc["jobs"]}
    assert set(rows) == {"job-over", "job-under", "job-no-metrics"}
    over = rows["job-over"]
    assert over["predicted_samples_per_s"] == a.throughput_samples_per_s
    assert over["throughput_source"] == "model"
    assert over["layout"] == f"{a.count} x {a.instance_type}"
    assert over["error"] == pytest.approx(0.25, abs=1e-3)
    assert rows["job-under"]["error"] == pytest.approx(-0.20, abs=1e-3)
    assert rows["job-no-metrics"]["measured_samples_per_s"] is None and rows["job-no-metrics"]["error"] is None
    s = doc["summary"]
    # hand-checked: |errors| 0.25 and 0.20 -> median 0.225; signed +0.25 and -0.20 -> median +0.025
    assert (s["completed_jobs"], s["compared"]) == (3, 2)
    assert s["median_abs_error"] == pytest.approx(0.225, abs=1e-3)
    assert s["median_error"] == pytest.approx(0.025, abs=1e-3)
    assert (s["worst_abs_error"], s["worst_job"]) == (pytest.approx(0.25, abs=1e-3), "job-over")


def test_table_is_readable_at_80_and_100_columns(tmp_path, options):
    a = options[0]
    with JobStore(tmp_path / "state.db", endpoint="") as store:
        job = "vit-base-g5-20261124-081500-beef"   # as launch names jobs
        _launch(store, job, a, "Completed")
        _measure(store, job, a, a.throughput_samples_per_s / 1.1)
    for width in (80, 100):
        proc = run_cli(["calibration"], tmp_path, {"COLUMNS": str(width)})
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.rstrip("\n").splitlines()
        assert all(len(ln) <= width for ln in lines), proc.stdout
        text = proc.stdout
        assert f"{a.count} x {a.instance_type}" in text and "+10%" in text
        assert "1 completed job on AWS, 1 compared: median |error| 10%" in " ".join(ln.strip() for ln in lines)


def test_sandbox_jobs_and_other_accounts_stay_apart(tmp_path, options):
    a = options[0]
    with JobStore(tmp_path / "state.db", endpoint="") as aws:
        _launch(aws, "aws-job", a, "Completed")
        _measure(aws, "aws-job", a, a.throughput_samples_per_s)
        _launch(aws, "other-account-job", a, "Completed", account="444455556666")
    with JobStore(tmp_path / "state.db", endpoint=SANDBOX_URL) as sandbox:
        _launch(sandbox, "sandbox-job", a, "Completed", account="123456789012")
        _measure(sandbox, "sandbox-job", a, 3.0, account="123456789012")   # a CPU's figure
    assert [r["job_id"] for r in _json(tmp_path)["jobs"]] == ["aws-job", "other-account-job"]
    only = _json(tmp_path, "--account", "111122223333")
    assert [r["job_id"] for r in only["jobs"]] == ["aws-job"] and only["summary"]["median_abs_error"] == 0
    sandboxed = _json(tmp_path, env={"AWS_ENDPOINT_URL": SANDBOX_URL})
    assert sandboxed["endpoint"] == SANDBOX_URL and [r["job_id"] for r in sandboxed["jobs"]] == ["sandbox-job"]


def test_a_later_job_on_the_same_layout_keeps_the_earlier_comparison(tmp_path, options):
    """The measured table keeps one row per layout; the comparison watch records stays with each job."""
    from trainctl.usecases.calibration import record_comparison

    a = options[0]
    with JobStore(tmp_path / "state.db", endpoint="") as store:
        for job, rate in (("first", a.throughput_samples_per_s / 2), ("second", a.throughput_samples_per_s)):
            _launch(store, job, a, "Completed")
            _measure(store, job, a, rate)
            record_comparison(store, store.job(job), rate)
            record_comparison(store, store.job(job), rate)      # watched twice: recorded once
        assert len(store.events("first", "calibration")) == 1
    rows = {r["job_id"]: r for r in _json(tmp_path)["jobs"]}
    assert rows["first"]["error"] == pytest.approx(1.0, abs=1e-3) and rows["second"]["error"] == 0


def test_no_store_yet_says_how_to_get_figures(tmp_path):
    proc = run_cli(["calibration"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 completed jobs on AWS: none with a measured throughput yet" in proc.stdout
    assert not (tmp_path / "state.db").exists()      # reading creates nothing


def test_a_long_job_id_is_never_folded_at_80_columns(tmp_path, options):
    a = options[0]
    job = "a-spec-name-of-the-longest-kind-allowed-20261124-081500-beef"  # launch's longest job names
    with JobStore(tmp_path / "state.db", endpoint="") as store:
        _launch(store, job, a, "Completed")
        _measure(store, job, a, a.throughput_samples_per_s / 1.1)
    for width in (80, 100):
        proc = run_cli(["calibration"], tmp_path, {"COLUMNS": str(width)})
        lines = proc.stdout.splitlines()
        rows = [ln for ln in lines if ln.startswith("│") and "g5" in ln]  # the table's rows, not the summary
        assert len(rows) == 1 and job in rows[0], proc.stdout
        assert all(len(ln) <= width for ln in lines), proc.stdout
        assert "+10%" in rows[0] or "not shown at this width: error" in " ".join(proc.stdout.split())
