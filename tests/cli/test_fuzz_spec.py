"""Hostile and broken job specs (hypothesis): no input makes `load_spec` raise anything but a one-line
UsageError (exit code 2), and no accepted spec makes the planner crash or print a non-finite number.

The bulk runs in-process (load_spec and the offline planner are pure enough); a few subprocess runs in
test_fuzz_cli.py check the exit-code contract of the real command. Examples are bounded so the file
runs in seconds; `deadline=None` because the machines running the suite are shared and loaded.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import CONFIGS, fuzz_examples
from trainctl.catalog import load_catalog
from trainctl.errors import UsageError
from trainctl.spec import load_spec

CATALOG = load_catalog()
REFERENCE = yaml.safe_load((CONFIGS / "vit-base-g5.yaml").read_text())
FUZZ = settings(max_examples=fuzz_examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])


def check_rejection(e: UsageError, path: Path) -> None:
    msg = str(e)
    assert e.exit_code == 2
    assert "\n" not in msg and "\r" not in msg and msg.isprintable(), repr(msg)
    assert str(path) in msg or repr(str(path))[1:-1] in msg, msg  # names the file
    assert len(msg) <= 500


def load(path: Path, text: str | bytes):
    """load_spec on the text: a JobSpec, or None after checking the rejection is one clean line."""
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        return load_spec(path, catalog=CATALOG)
    except UsageError as e:
        check_rejection(e, path)
        return None


def plan_offline(path: Path) -> dict:
    from trainctl.usecases.plan import PlanInputs, make_plan

    _, result = make_plan(PlanInputs(spec_path=str(path), offline=True))
    doc = result.model_dump(mode="json")  # the `plan -o json` document
    json.dumps(doc, allow_nan=False)  # raises on inf / nan anywhere in the document
    return doc


# ------------------------------------------------------------------ random text and bytes
YAML_TOKENS = st.sampled_from([
    ":", ": ", "- ", "-", "[", "]", "{", "}", ",", "? ", "&a ", "*a", "!!int ", "!!float ", "!!bool ", "!!binary ",
    "!!timestamp ", "!!python/object:os.system ", "!!set ", "!!omap ", "|", ">", "'", '"', "#", "\n", "\n  ", "\t",
    "%YAML 1.1\n", "---\n", "...\n", "0x", "0o", "0b", "1e400", ".inf", ".nan", "-.inf", "~", "null", "yes", "no",
    "2001-13-40", "1:20:30", "<<: ", "\\u0000", "\x00", "\x85", "\u2028", "\ufeff", "name", "model", "workload",
    "entrypoint", "candidates", "layouts", "g5.2xlarge:4:spot", "architecture", "vit_micro", "samples", "epochs",
    "batch_size_per_accelerator", "nodes", "max", "min", "9" * 30, "-1", "0", "1.5",
])


@pytest.mark.timeout(180)
@FUZZ
@given(st.lists(YAML_TOKENS | st.text(max_size=8), max_size=40).map("".join))
def test_random_yaml_text_is_a_spec_or_one_line(tmp_path_factory, text):
    load(tmp_path_factory.mktemp("fz") / "spec.yaml", text)


@pytest.mark.timeout(120)
@settings(max_examples=fuzz_examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_random_bytes_are_one_line(tmp_path_factory, data):
    load(tmp_path_factory.mktemp("fz") / "spec.yaml", data)


@pytest.mark.timeout(120)
@settings(max_examples=fuzz_examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_reference_text(tmp_path_factory, data):
    """The reference spec's text with characters deleted, replaced or inserted: near-misses of a real spec."""
    text = (CONFIGS / "vit-base-g5.yaml").read_text()
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 12)))
        text = text[:i] + data.draw(YAML_TOKENS | st.text(max_size=3)) + text[j:]
    spec_path = tmp_path_factory.mktemp("fz") / "spec.yaml"
    if load(spec_path, text) is not None:
        plan_offline(spec_path)


# ------------------------------------------------------------------ random values in a valid structure
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(["g5.2xlarge:4:spot", "g5.xlarge:0", "ml.g5.xlarge:2", "us-east-1", "spot", "ddp",
                              "vit_micro", "p4d", "A10G", "bf16", "fsdp", ""]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10) | st.integers(), inner, max_size=4), max_leaves=12)

PATHS = [("name",), ("entrypoint",), ("entrypoint", "bundled"), ("entrypoint", "args"), ("entrypoint", "script"),
         ("model",), ("model", "architecture"), ("model", "params"), ("model", "flops_per_sample"),
         ("model", "precision"), ("model", "strategy"), ("model", "activation_gib_per_sample"),
         ("workload", "epochs"), ("workload", "dataset_size"), ("workload", "samples"),
         ("workload", "batch_size_per_accelerator"), ("throughput",), ("throughput", "A10G"),
         ("candidates", "families"), ("candidates", "layouts"), ("candidates", "nodes"), ("candidates", "nodes", "max"),
         ("candidates", "nodes", "min"), ("candidates", "markets"), ("candidates", "platforms"),
         ("candidates", "regions"), ("constraints", "deadline_hours"), ("constraints", "budget_usd"),
         ("constraints", "checkpoint_interval_minutes"), ("constraints", "max_spot_wait_hours"),
         ("constraints", "restart_minutes"), ("role",), ("unknown_key",)]

EDGES = st.sampled_from([0, -0.0, 5e-324, 1e-300, 1e-9, 0.5, 1, 64, 65, 10**15, 10**15 + 1, 1e300, 1.7e308])
NUMBERS = EDGES | st.integers(min_value=-(10**20), max_value=10**20) | st.floats(allow_nan=True, allow_infinity=True)
NUMERIC_PATHS = [("model", "params"), ("model", "flops_per_sample"), ("model", "activation_gib_per_sample"),
                 ("workload", "epochs"), ("workload", "dataset_size"), ("workload", "batch_size_per_accelerator"),
                 ("throughput", "A10G"), ("candidates", "nodes", "max"), ("constraints", "deadline_hours"),
                 ("constraints", "budget_usd"), ("constraints", "checkpoint_interval_minutes"),
                 ("constraints", "max_spot_wait_hours"), ("constraints", "restart_minutes")]


def with_value(doc: dict, path: tuple, value) -> dict:
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return doc


def dump(doc) -> str:
    return yaml.safe_dump(doc, allow_unicode=False, sort_keys=False)


@pytest.mark.timeout(180)
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3))
def test_random_values_are_accepted_and_plan_or_rejected_in_one_line(tmp_path_factory, edits):
    doc = REFERENCE
    for path, value in edits:
        doc = with_value(doc, path, value)
    spec_path = tmp_path_factory.mktemp("fz") / "spec.yaml"
    if load(spec_path, dump(doc)) is not None:
        plan_offline(spec_path)


@pytest.mark.timeout(180)
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(NUMERIC_PATHS), NUMBERS), min_size=1, max_size=4))
def test_extreme_numbers_plan_with_finite_results_or_are_rejected(tmp_path_factory, edits):
    """Accepted numbers, however large or small, give a plan whose every number is finite."""
    doc = with_value(REFERENCE, ("model",), {"architecture": "vit_base_patch16_224", "precision": "bf16"})
    for path, value in edits:
        if path[0] == "model" and path[1] in ("params", "flops_per_sample"):
            doc = with_value(doc, ("model", "architecture"), None)
            doc = with_value(doc, ("model", "params"), doc["model"].get("params") or 1e8)
            doc = with_value(doc, ("model", "flops_per_sample"), doc["model"].get("flops_per_sample") or 1e10)
        doc = with_value(doc, path, value)
    spec_path = tmp_path_factory.mktemp("fz") / "spec.yaml"
    spec = load(spec_path, dump(doc))
    if spec is not None:
        for name, value in (("epochs", spec.workload.epochs), ("params", spec.model.params)):
            assert value is None or math.isfinite(value), name
        plan_offline(spec_path)


# ------------------------------------------------------------------ cases the fuzzing found (kept as examples)
@pytest.mark.parametrize("text", [
    "a: 0x_\n", "a: 0b\n", "a: !!bool maybe\n", "a: !!timestamp 2001-13-40\n", "a: !!float .\n",  # ValueError/KeyError
    "a: !!timestamp :\n",                                                                       # AttributeError
    "x: " + "[" * 3000 + "]" * 3000 + "\n",                                                    # RecursionError
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\n"
    "workload: {epochs: .inf, dataset_size: 10, batch_size_per_accelerator: 1}\n",            # OverflowError in plan
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\n"
    "workload: {epochs: 1e300, dataset_size: 100000000000, batch_size_per_accelerator: 1}\n",
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\n"
    "workload: {samples: 10, batch_size_per_accelerator: 1}\ncandidates: {layouts: ['g5.xlarge:99999999999']}\n",
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {params: 1e-300, flops_per_sample: 1e-300}\n"
    "workload: {samples: 10, batch_size_per_accelerator: 1}\n",                               # ZeroDivisionError
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {params: 1.7e308, flops_per_sample: 1e10}\n"
    "workload: {samples: 10, batch_size_per_accelerator: 1}\n",                               # OverflowError
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\nthroughput: {A10G: 5e-324}\n"
    "workload: {samples: 10, batch_size_per_accelerator: 1}\n",                               # ZeroDivisionError
    '"bad\\nkey": 1\nname: x\n',                                                                # newline in a field
    "name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\n"
    "workload: {samples: 10, batch_size_per_accelerator: 9223372036854775808}\n",              # OverflowError in SQLite
])
def test_found_by_fuzzing(tmp_path, text):
    assert load(tmp_path / "spec.yaml", text) is None


def test_paths_that_are_not_spec_files(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    import os

    os.mkfifo(fifo)  # reading would block forever
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (2 * 1024 * 1024))
    for path in (fifo, big, tmp_path, tmp_path / ("a" * 5000), "a\x00b", "/dev/zero"):
        with pytest.raises(UsageError) as e:
            load_spec(path)
        assert e.value.exit_code == 2 and "\n" not in str(e.value)


def test_a_batch_beyond_sqlite_integers_is_one_line_with_a_state_database(tmp_path):
    """The fuzz test's OverflowError: 2**63 reached the store's query (SQLite INTEGER is 64-bit signed)."""
    from tests.support.helpers import run_cli
    from trainctl.state.job_store import JobStore

    home = tmp_path / "home"
    store = JobStore(home / "state.db")
    store._connection()  # a state database exists, as after any launch
    store.close()
    spec = tmp_path / "big.yaml"
    spec.write_text("name: x\nentrypoint: {bundled: ddp}\nmodel: {architecture: vit_micro}\n"
                    f"workload: {{samples: 10, batch_size_per_accelerator: {2**63}}}\n")
    proc = run_cli(["plan", str(spec), "--offline"], home)
    assert proc.returncode == 2 and "OverflowError" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{spec}:4: field 'workload.batch_size_per_accelerator'" in line
