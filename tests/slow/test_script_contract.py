"""The training contract's conformance suite (docs/your-script.md, issue 37): three scripts, each unchanged, on
SageMaker and on a 2-node EC2 fleet in the sandbox, through a Spot interruption at a chosen step, to completion:
- examples/own-script, as shipped;
- the example script of docs/your-script.md, taken from the doc: plain argparse that rejects unknown flags, its
  own checkpoint names (progress.json overwritten through a rename, and an epochs/ sub-folder), its data from
  SM_CHANNEL_TRAIN, its model to SM_MODEL_DIR;
- a script written for the SageMaker Python SDK's PyTorch estimator in script mode (tests/support/contract_scripts/
  sdk_pytorch): hyperparameters as arguments, SM_* folders and hosts, no SIGTERM handler at all.
For each, on both platforms: the job resumes from its own checkpoint, completes at its last step, `watch` exits 0
with the job Completed after one interruption, `fetch` brings the model and the checkpoints from S3, and both
platforms report the same outcome. The two platforms' jobs of a script run side by side (one test per script).

Cheap on purpose: a few dozen steps whose time is mostly a sleep standing in for a real step, no model beyond a
torch.nn.Linear(1, 1). A step lasts long enough (0.25 s or more, tens of steps after the interruption's step)
that the notice reaches a running script; the outcome does not depend on where exactly it lands.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.your_script import doc_host as _host, doc_script, start_doc_script as _start
from tests.support.ec2_jobs import end_earlier_nodes as _end_earlier_nodes
from tests.support.helpers import ROOT, clean_env, run_cli
from trainctl_sandbox.server import private_mounts
from trainctl_sandbox.testing import admit_data_buckets

REGION = "us-east-1"
BUCKET = f"trainctl-123456789012-{REGION}"
DATA = "contract-data"
LAYOUTS = {"sagemaker": "g5.xlarge:1:spot", "ec2": "g5.xlarge:2:spot"}

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(private_mounts.unavailable() is not None,
                                 reason=f"scripts that hard-code /opt/ml need the sandbox's private /opt/ml: "
                                        f"{private_mounts.unavailable()}")]

SPEC = """\
name: {name}
entrypoint: {{script: train.py, source_dir: ., args: {args}}}
model: {{params: 2, flops_per_sample: 12, precision: fp32}}
workload: {{samples: {samples}, batch_size_per_accelerator: {batch}}}
throughput: {{A10G: 20000}}
candidates: {{layouts: ["{sagemaker}", "{ec2}"], platforms: [sagemaker, ec2], regions: [{region}]}}
constraints: {{checkpoint_interval_minutes: 5}}
{data}"""


def _project(tmp_path: Path, source: Path | None, script: str | None, name: str, args: str, steps: int, batch: int,
             data: str = "") -> str:
    project = tmp_path / name
    if source is not None:
        shutil.copytree(source, project)
    else:
        project.mkdir()
        (project / "train.py").write_text(script)
    (project / "job.yaml").write_text(SPEC.format(name=name, args=args, samples=steps * batch, batch=batch,
                                                  region=REGION, data=data, **LAYOUTS))
    return str(project / "job.yaml")


def _dataset(sb, files: dict[str, str]) -> None:
    s3 = sb.client("s3", REGION)
    if DATA not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=DATA)
        admit_data_buckets(sb, DATA)
    for key, body in files.items():
        s3.put_object(Bucket=DATA, Key=key, Body=body.encode())


def _cli(sb, home, *args, timeout=150):
    return run_cli(list(args), home, env=sb.env, timeout=timeout)


def _launch(sb, home: Path, spec: str, platform: str) -> str:
    proc = _cli(sb, home, "-o", "json", "--region", REGION, "launch", spec, "--platform", platform, "--layout",
                LAYOUTS[platform], "--yes", "--allow-duplicate")  # one spec, launched on both platforms
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["job_id"]


def _run_both(sb, tmp_path: Path, spec: str, at_step: int) -> dict[str, tuple[str, subprocess.CompletedProcess]]:
    """Launch the spec on both platforms, interrupt each once a node has logged `at_step`, and watch both to
    their end side by side (EC2 with --recover, which replaces the reclaimed node)."""
    _end_earlier_nodes(sb)
    # the two nodes and the replacement, which `watch --recover` launches on the notice, before the reclaim
    sb.admin.action("configure_instances", max_nodes=3)
    home = tmp_path / "home"
    jobs = {}
    for platform in LAYOUTS:  # each armed as soon as it is launched: it fires once a node logs `at_step`
        jobs[platform] = _launch(sb, home, spec, platform)
        sb.admin.interrupt(jobs[platform], at_step=at_step,
                           **({"after_seconds": 3} if platform == "ec2" else {}))  # EC2: the reclaim 3 s later
    watching = {platform: subprocess.Popen(
        [sys.executable, "-m", "trainctl.cli", "watch", job, "--interval", "0.5",
         *(["--recover"] if platform == "ec2" else [])], cwd=ROOT, env=clean_env(home, sb.env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for platform, job in jobs.items()}
    done = {}
    for platform, proc in watching.items():
        out, err = proc.communicate(timeout=480)
        done[platform] = (jobs[platform], subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _check(sb, tmp_path: Path, runs: dict, steps: int, at_step: int, resumed: str, model: str,
           checkpoints: list[str]) -> dict[str, str]:
    """What every script must show on every platform; returns each platform's log. `at_step`: the lowest step the
    job may resume from (the notice comes once a node has logged a step; where it checkpoints is the script's)."""
    home, outcomes, logs = tmp_path / "home", {}, {}
    for platform, (job, watched) in runs.items():
        said = f"{platform} {job}:\n{watched.stdout[-3000:]}\n{watched.stderr[-3000:]}"
        assert watched.returncode == 0, said
        doc = json.loads(_cli(sb, home, "-o", "json", "watch", job, "--once").stdout)
        outcomes[platform] = (doc["status"], doc["interruptions"], doc["step"])
        log = logs[platform] = _cli(sb, home, "logs", job).stdout
        # resumed from its own checkpoint, taken at or after the notice's step, and trained to its last step
        points = [int(line.split(resumed, 1)[1].split()[0]) for line in log.splitlines() if resumed in line]
        assert points and min(points) >= at_step, f"{platform}: no '{resumed}N' at step >= {at_step}:\n{log[-4000:]}"
        assert f"trainctl step={steps} " in log, said
        fetched = tmp_path / platform / job
        got = _cli(sb, home, "fetch", job, "--what", "model", str(fetched / "model"))
        assert got.returncode == 0 and (fetched / "model" / model).is_file(), got.stderr
        got = _cli(sb, home, "fetch", job, "--what", "checkpoints", str(fetched / "checkpoints"))
        assert got.returncode == 0, got.stderr
        keys = {str(p.relative_to(fetched / "checkpoints")) for p in (fetched / "checkpoints").rglob("*") if p.is_file()}
        for name in checkpoints:
            assert any(k == name or k.startswith(name) for k in keys), f"{platform}: {name} not in {sorted(keys)}"
        if platform == "ec2":  # the agent never uploads a temporary name; SageMaker uploads what it finds
            assert not any(k.endswith(".tmp") for k in keys), sorted(keys)
    assert outcomes["sagemaker"] == outcomes["ec2"] == ("Completed", 1, steps), outcomes
    return logs


def test_the_example_own_script_runs_unchanged_on_both_platforms_through_an_interruption(sm, ec2_nodes, tmp_path):
    steps, at_step = 40, 10
    spec = _project(tmp_path, ROOT / "examples" / "own-script", None, "own-script",
                    f"{{steps: {steps}, log-every: 1, checkpoint-every: 5, step-seconds: 0.25}}", steps, 32)
    runs = _run_both(sm, tmp_path, spec, at_step)
    _check(sm, tmp_path, runs, steps, at_step, "resumed from step ", "model.json", ["state.json"])
    # the model an uninterrupted run of the same script writes (a step's data depends on the step only)
    local = tmp_path / "local"
    subprocess.run([sys.executable, str(ROOT / "examples" / "own-script" / "train.py"), "--steps", str(steps),
                    "--checkpoint-dir", str(local / "ck"), "--model-dir", str(local / "model")], check=True,
                   capture_output=True)
    whole = json.loads((local / "model" / "model.json").read_text())
    for platform, (job, _) in runs.items():
        assert json.loads((tmp_path / platform / job / "model" / "model.json").read_text()) == whole, platform


def test_the_doc_example_script_runs_unchanged_on_both_platforms_through_an_interruption(sm, ec2_nodes, tmp_path):
    steps, at_step = 40, 10
    # the numbers of tests/sandbox/launch/test_your_script_doc.py, whose uninterrupted run gives the model to expect
    _dataset(sm, {"numbers/part-0.txt": "".join(f"{i}\n" for i in range(6)),
                  "numbers/part-1.txt": "".join(f"{i}\n" for i in range(6, 12))})
    spec = _project(tmp_path, None, doc_script(), "doc-example", f"{{epochs: {steps}, work-seconds: 0.25, "
                    "verbose: true}", steps, 12, f"data: {{train: 's3://{DATA}/numbers/'}}\n")
    runs = _run_both(sm, tmp_path, spec, at_step)
    logs = _check(sm, tmp_path, runs, steps, at_step, "resumed at epoch ", "model.json",
                  ["progress.json", f"epochs/epoch-{steps:04d}.json"])
    whole = _host(tmp_path, "uninterrupted")
    once = _start(whole, "--epochs", str(steps), "--verbose", "True")
    said = once.communicate(timeout=60)[0].splitlines()[-1]
    assert once.returncode == 0 and said.startswith("mean=")
    for platform, (job, _) in runs.items():
        model = json.loads((tmp_path / platform / job / "model" / "model.json").read_text())
        assert model == json.loads((whole / "model" / "model.json").read_text()), platform
        assert said in logs[platform]  # `verbose: true` reached it as `--verbose True`


def test_a_sagemaker_sdk_script_mode_script_runs_unchanged_on_both_platforms_through_an_interruption(
        sm, ec2_nodes, tmp_path):
    steps, at_step = 30, 8
    # No SIGTERM handler: the notice, which comes once epoch 8 is logged, may end it before that epoch's checkpoint
    _dataset(sm, {"training/rows.csv": "".join(f"{x / 4},{2 * x / 4 + 1}\n" for x in range(-8, 8))})
    spec = _project(tmp_path, ROOT / "tests" / "support" / "contract_scripts" / "sdk_pytorch", None, "sdk-script",
                    f"{{epochs: {steps}, batch-size: 4, learning-rate: 0.1, epoch-seconds: 0.3}}", steps, 4,
                    f"data: {{training: 's3://{DATA}/training/'}}\n")
    runs = _run_both(sm, tmp_path, spec, at_step)
    _check(sm, tmp_path, runs, steps, at_step - 1, "resuming from the checkpoint of epoch ", "model.pth",
           ["checkpoint.pth"])
