"""Hostile command-line input (hypothesis): `--layout`, `--option`, job ids and plan files.

In-process for the bulk (the functions the commands call, with random input); a handful of
subprocess runs check the contract users see: one line on stderr, exit code 2, no traceback.
"""
from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.helpers import CONFIGS, fuzz_examples, run_cli
from trainctl.catalog import load_catalog
from trainctl.errors import UsageError
from trainctl.usecases.launch.launch_job import LaunchArgs, choose_options
from trainctl.usecases.plan import parse_layouts
from trainctl.usecases.jobs.watch import check_job_id

CATALOG = load_catalog()
KNOWN = set(CATALOG.instances)
SPEC = str(CONFIGS / "vit-base-g5.yaml")
FUZZ = settings(max_examples=fuzz_examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_line(e: UsageError) -> str:
    msg = str(e)
    assert e.exit_code == 2 and "\n" not in msg and "\r" not in msg, repr(msg)
    assert len(msg) <= 400, len(msg)
    return msg


LAYOUT_PARTS = st.sampled_from(["g5.2xlarge", "ml.g5.xlarge", "p4d.24xlarge", "x9.big", ":", "::", "spot",
                                "on-demand", "0", "-1", "4", "65", "64", "9" * 40, " ", "\n", "\x00", "ml.", "."])


@FUZZ
@given(st.lists(LAYOUT_PARTS | st.text(max_size=6), max_size=8).map("".join))
@example("g5.2xlarge:4:spot")
@example("g5.2xlarge:" + "9" * 5000)
def test_layout_flag(text):
    try:
        (layout,) = parse_layouts([text], KNOWN)
    except UsageError as e:
        assert one_line(e).startswith("--layout")
        return
    assert layout.instance_type in KNOWN and 1 <= layout.count <= 64
    assert layout.market in (None, "spot", "on-demand")


@FUZZ
@given(st.text(max_size=80) | st.text(alphabet=string.ascii_letters + string.digits + "-", max_size=80))
@example("vit-base-g5-20261123-020000-ab12")
@example("a" * 63)
@example("a" * 64)
@example("a" + "-" * 70 + "b")
def test_job_ids(job_id):
    try:
        assert check_job_id(job_id) == job_id
    except UsageError as e:
        assert "is not a job id" in one_line(e)
        return
    assert 1 <= len(job_id) <= 63 and job_id[0].isalnum() and job_id[-1].isalnum()
    assert set(job_id) <= set(string.ascii_letters + string.digits + "-")


GOOD_OPTION = {"rank": 1, "platform": "sagemaker", "instance_type": "g5.xlarge", "count": 2, "market": "spot",
               "region": "us-east-1", "availability_zone": "us-east-1a", "accelerators": 2, "hourly_usd": 1.2,
               "throughput_samples_per_s": 100.0, "throughput_source": "model", "hours": 2.5,
               "expected_cost_usd": 3.0}
HEADER = {"spec": SPEC, "spec_name": "vit-base-g5", "source": "offline", "catalog_date": "2026-11-23"}


def plan_file_doc(options) -> dict:
    """A saved plan around these options: the header is valid, so what is checked is the options."""
    return {**HEADER, "options": options}


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10)


@st.composite
def plan_documents(draw):
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(JSON)
    options = []
    for _ in range(draw(st.integers(0, 3))):
        option = dict(GOOD_OPTION)
        for key in draw(st.lists(st.sampled_from(sorted(GOOD_OPTION) + ["extra"]), max_size=3)):
            if draw(st.booleans()):
                option.pop(key, None)
            else:
                option[key] = draw(JSON | st.sampled_from(["ec2", "p5.48xlarge", "on-demand", "eu-west-1", 64, 65]))
        options.append(option if kind != 3 else draw(JSON))
    return plan_file_doc(options)


@pytest.mark.timeout(180)
@FUZZ
@given(plan_documents())
def test_plan_files(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(doc))
    try:
        _, _, options, idx = choose_options(LaunchArgs(spec_path=SPEC, plan_path=str(path)), None)
    except UsageError as e:
        assert one_line(e).startswith(f"--plan {path}") or "no option of the plan" in str(e)
        return
    except Exception as e:  # the one other outcome: an empty plan (exit 3, one line)
        assert getattr(e, "exit_code", None) == 3 and "no option" in str(e), repr(e)
        return
    options[idx].describe()  # what launch prints next must not fail either


@pytest.mark.parametrize("content", [b"", b"[", b"{\"options\": 5}", b"\xff\xfe", b"[" * 100000 + b"]" * 100000])
def test_broken_plan_files(tmp_path, content):
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    with pytest.raises(UsageError) as e:
        choose_options(LaunchArgs(spec_path=SPEC, plan_path=str(path)), None)
    one_line(e.value)


def test_plan_file_that_is_a_fifo_does_not_hang(tmp_path):
    import os

    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    with pytest.raises(UsageError):
        choose_options(LaunchArgs(spec_path=SPEC, plan_path=str(fifo)), None)


# ------------------------------------------------------------------ the real command, a few times
@pytest.mark.parametrize("args", [
    ["plan", SPEC, "--offline", "--layout", "g5.2xlarge:99999999999999999999"],
    ["plan", SPEC, "--offline", "--layout", "g5.2xlarge:4:spot\nx"],
    ["plan", SPEC, "--offline", "--top", "abc"],
    ["plan", SPEC, "--offline", "--window-hours", "nan"],
    ["launch", SPEC, "--offline", "--dry-run", "--option", "1e9"],
    ["launch", SPEC, "--offline", "--dry-run", "--option", "0"],
    ["launch", SPEC, "--offline", "--dry-run", "--option", "100000"],
    ["launch", SPEC, "--offline", "--dry-run", "--plan", "/dev/null"],
    ["watch", "job\nwith-newline"],
    ["logs", "../../etc/passwd"],
    ["stop", "-" * 80],
    ["down", "a" * 64],
    ["plan", "no-such-file.yaml"],
    ["plan", SPEC, "--bogus"],
    ["--output", "yaml", "plan", SPEC],
])
def test_cli_rejections_are_one_line_exit_2(tmp_path, args):
    proc = run_cli(args, tmp_path, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("trainctl: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_cli_rejects_a_saved_plan_with_a_bad_option(tmp_path):
    bad = dict(GOOD_OPTION, count="2; rm -rf /")
    (tmp_path / "plan.json").write_text(json.dumps(plan_file_doc([bad])))
    proc = run_cli(["launch", SPEC, "--dry-run", "--plan", str(tmp_path / "plan.json")], tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "options.0.count: Input should be a valid integer" in proc.stderr


def test_cli_rejects_a_saved_plan_with_an_instance_type_the_catalog_lacks(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(plan_file_doc([dict(GOOD_OPTION, instance_type="x9.big")])))
    proc = run_cli(["launch", SPEC, "--dry-run", "--plan", str(tmp_path / "plan.json")], tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "options.0.instance_type 'x9.big' is not in the catalog" in proc.stderr
