"""Job spec validation as a user meets it: the CLI, one clear line, exit code 2, no traceback."""
from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.helpers import CONFIGS, run_cli
from trainctl.catalog import load_catalog
from trainctl.spec import ARCHITECTURES, Layout, load_spec

GOOD = textwrap.dedent("""\
    name: tiny
    entrypoint:
      bundled: ddp
    model:
      architecture: vit_base_patch16_224
    workload:
      samples: 100000
      batch_size_per_accelerator: 64
    candidates:
      families: [g5]
      nodes: {min: 1, max: 2}
""")


@pytest.mark.parametrize("config", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_configs_load(config):
    spec = load_spec(CONFIGS / config, catalog=load_catalog())
    assert spec.workload.total_samples > 0


def test_reference_config_is_the_reference_experiment():
    spec = load_spec(CONFIGS / "vit-base-g5.yaml")
    assert spec.model.architecture == "vit_base_patch16_224"
    assert spec.workload.batch_size_per_accelerator == 128
    assert spec.model.precision == "bf16" and spec.model.optimizer == "adam"
    assert {str(lay) for lay in spec.candidates.layouts} >= {"g5.12xlarge:1:on-demand", "g5.2xlarge:4:spot"}


def test_known_architectures_derive_size():
    for name in ("vit_base_patch16_224", "vit_large_patch16_224", "bert-large", "llama-7b"):
        assert name in ARCHITECTURES
    spec = load_spec(CONFIGS / "vit-base-g5.yaml")
    # timm: 86.6M params, 17.6 GMACs forward; training = 3 x forward FLOPs
    assert spec.model.param_count == pytest.approx(86.6e6)
    assert spec.model.training_flops_per_sample == pytest.approx(3 * 2 * 17.6e9)


BAD = {
    "unknown key": (GOOD + "colour: blue\n", "field 'colour': unknown key", 12),
    "wrong type": (GOOD.replace("samples: 100000", "samples: lots"), "field 'workload.samples'", 7),
    "negative count": (GOOD.replace("{min: 1, max: 2}", "{min: -1, max: 2}"), "field 'candidates.nodes.min'", 11),
    "unknown instance type": (GOOD.replace("families: [g5]", "layouts: ['g9.2xlarge:2']"),
                              "unknown instance type 'g9.2xlarge'", 10),
    "unknown family": (GOOD.replace("families: [g5]", "families: [g5, z9]"), "unknown instance family 'z9'", 10),
    "unknown architecture": (GOOD.replace("vit_base_patch16_224", "resnet9000"), "unknown architecture", 5),
    "yaml syntax": (GOOD.replace("  bundled: ddp", "  bundled: [ddp"), "YAML syntax error", None),
    "bad layout": (GOOD.replace("families: [g5]", "layouts: ['g5.2xlarge']"), "TYPE:COUNT", 10),
    "both amounts": (GOOD.replace("samples: 100000", "samples: 1\n  epochs: 2\n  dataset_size: 3"), "not both", 6),
    # a misspelt section is reported as the misspelling (with the key meant), not as the section now missing
    "misspelt section": (GOOD.replace("workload:", "workloda:"), "field 'workloda': unknown key; did you mean "
                         "'workload'?", 6),
    "misspelt nested key": (GOOD.replace("  architecture:", "  architectur:"), "field 'model.architectur': unknown "
                            "key; did you mean 'architecture'?", 5),
    # a bad name says what a name may hold, not the regular expression
    "bad name": (GOOD.replace("name: tiny", "name: my_job!"), "'my_job!' is not allowed here; use letters, digits "
                 "and hyphens", 1),
    "empty file": ("", "the job spec is empty", None),
    "unknown region": (GOOD + "  regions: [us-east-1, us-east-9]\n", "field 'candidates.regions.1': 'us-east-9' is "
                       "not a region of any AWS partition", 12),
    "only a comment": ("# nothing yet\n", "the job spec is empty", None),
    # a job's role reads only its own spec's secrets (the boundary scopes them by the role's trainctl:spec tag)
    "another spec's secret": (GOOD + "secrets:\n  HF_TOKEN: arn:aws:ssm:us-east-1:123456789012:parameter/trainctl/"
                              "llm/hf-token\n", "field 'secrets': HF_TOKEN: trainctl/llm/hf-token is not this spec's; "
                              "a job reads only secrets named under trainctl/tiny/ (e.g. SSM parameter "
                              "/trainctl/tiny/hf-token)", 12),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_spec_is_one_clear_line(tmp_path, case):
    text, expected, line = BAD[case]
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(spec) in lines[0] and expected in lines[0]
    if line is not None:
        assert f"{spec}:{line}:" in lines[0]
    assert "NoneType" not in lines[0] and "more problem" not in lines[0].split("unknown key")[0]
    assert "^" not in lines[0] and "$" not in lines[0]  # no raw regular expression


def test_missing_file(tmp_path):
    proc = run_cli(["plan", str(tmp_path / "nope.yaml")], tmp_path)
    assert proc.returncode == 2
    assert "no such job spec file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_not_a_mapping(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("- just\n- a list\n")
    proc = run_cli(["plan", str(spec)], tmp_path)
    assert proc.returncode == 2 and "YAML mapping" in proc.stderr


def test_debug_shows_traceback(tmp_path):
    proc = run_cli(["--debug", "plan", str(tmp_path / "nope.yaml")], tmp_path)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_schema_is_json_schema(tmp_path):
    proc = run_cli(["schema"], tmp_path)
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert schema["type"] == "object"
    assert {"name", "entrypoint", "model", "workload"} <= set(schema["required"])
    assert "candidates" in schema["properties"]


@pytest.mark.parametrize("text,ok", [("g5.2xlarge:4:spot", True), ("ml.g5.12xlarge:1", True),
                                     ("g5.2xlarge:0", False), ("g5.2xlarge:-3", False), ("g5.2xlarge:4:cheap", False),
                                     ("g5.2xlarge", False), ("", False)])
def test_layout_parse(text, ok):
    if ok:
        lay = Layout.parse(text)
        assert not lay.instance_type.startswith("ml.")
    else:
        with pytest.raises(ValueError):
            Layout.parse(text)


# ---------------------------------------------------------------- one batch size, bundled entrypoint args
BATCHED = textwrap.dedent("""\
    name: tiny
    entrypoint:
      bundled: ddp
      args:
        model: vit_micro
        batch-size: {batch}
    model:
      architecture: vit_micro
    workload:
      samples: 100000
      batch_size_per_accelerator: 64
""")


def _spec_error(tmp_path, text: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    proc = run_cli(["plan", str(path), "--offline"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_negative_batch_size_arg_is_one_line_with_file_line_field_and_fix(tmp_path):
    line = _spec_error(tmp_path, BATCHED.format(batch=-8))
    assert "job.yaml:6" in line and "entrypoint.args.batch-size" in line and "at least 1" in line


def test_batch_size_arg_that_disagrees_with_the_workload_is_refused(tmp_path):
    line = _spec_error(tmp_path, BATCHED.format(batch=128))
    assert "job.yaml:6" in line and "disagrees with workload.batch_size_per_accelerator (64)" in line
    assert "remove the arg" in line


def test_unknown_bundled_arg_is_refused(tmp_path):
    line = _spec_error(tmp_path, BATCHED.format(batch=64).replace("model: vit_micro", "modle: vit_micro"))
    assert "entrypoint.args.modle" in line and "no --modle" in line


def test_bundled_entrypoint_gets_the_workload_batch_size(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    spec = load_spec(path)
    assert spec.entrypoint.args["batch-size"] == 64  # the launch passes it as --batch-size
    path.write_text(BATCHED.format(batch=64))
    assert load_spec(path).entrypoint.args["batch-size"] == 64  # equal: accepted as is


def test_data_source_defaults_follow_the_entrypoint(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    assert load_spec(path).input_source == "device"
    path.write_text(GOOD.replace("bundled: ddp", "bundled: ddp\n  args: {data-dir: /data}"))
    assert load_spec(path).input_source == "jpeg"
    path.write_text(GOOD.replace("batch_size_per_accelerator: 64", "batch_size_per_accelerator: 64\n  "
                                                                    "data_source: cpu-synthetic"))
    assert load_spec(path).input_source == "cpu-synthetic"


def test_a_key_given_twice_is_refused_in_one_line_with_file_and_line(tmp_path):
    """Issue 36, item 15: PyYAML keeps the last of two equal keys silently (a $5 budget became $500)."""
    spec = tmp_path / "dup.yaml"
    text = (CONFIGS / "vit-base-g5.yaml").read_text()
    spec.write_text(text.replace("workload:", "name: second-name\nworkload:", 1))
    proc = run_cli(["plan", str(spec)], tmp_path / "home")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    dup_line = spec.read_text().splitlines().index("name: second-name") + 1
    assert f"{spec}:{dup_line}: " in line and "duplicate key 'name' (first given at line" in line
