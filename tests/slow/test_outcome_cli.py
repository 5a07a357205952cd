"""A job's outcome as a user meets it through the CLI (issue 37), against the sandbox:
- an EC2 job whose own script crashes: `watch` exits non-zero and its summary shows the script's error (the tail
  of its stderr), from one run (no rerun);
- a job that ends early with exit 0 (its metric lines stop at half its total_steps) stores no measurement: later
  plans do not take its throughput."""
from __future__ import annotations

import json

from tests.support.helpers import run_cli

REGION = "us-east-1"
CRASH = '''
import sys
print("trainctl step=1 loss=2.0 samples_per_s=5.0", flush=True)
print("loading shards from the train channel", file=sys.stderr, flush=True)
raise SystemExit("no shard matches part-*.bin in the train channel")
'''
EARLY = '''
import time
for step in range(1, 11):  # half of its 20 steps, then a clean exit
    print(f"trainctl step={step} loss=1.0 samples_per_s=5000.0 total_steps=20", flush=True)
    time.sleep(0.05)
'''


def _spec(tmp_path, script: str, layout: str, platform: str) -> str:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(script)
    spec = project / "job.yaml"
    spec.write_text(f"""\
name: outcome
entrypoint: {{script: train.py, source_dir: .}}
model: {{architecture: vit_micro, precision: fp32}}
workload: {{samples: 160, batch_size_per_accelerator: 8}}
candidates: {{layouts: ['{layout}'], platforms: [{platform}], regions: [{REGION}]}}
""")
    return str(spec)


def _cli(sb, home, *args, timeout=300):
    return run_cli(["--output", "json", "--region", REGION, *args], home, env=sb.env, timeout=timeout)


def test_an_ec2_script_that_crashes_shows_its_error_in_watch(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    spec = _spec(tmp_path, CRASH, "g5.xlarge:1:on-demand", "ec2")
    launch = _cli(sb, home, "launch", spec, "--yes")
    assert launch.returncode == 0, launch.stderr
    job = json.loads(launch.stdout)["job_id"]
    watched = _cli(sb, home, "watch", job, "--no-logs", "--interval", "0.5")
    assert watched.returncode != 0, watched.stdout
    reason = json.loads(watched.stdout)["failure_reason"]
    assert "no shard matches part-*.bin in the train channel" in reason, reason
    assert "loading shards from the train channel" in reason and reason.startswith("AlgorithmError: ")
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert [ln for ln in logs.splitlines() if "retry" in ln] == [] and logs.count("]:loading shards from the train channel") == 1, logs[-2000:]


def test_a_job_that_ends_before_its_total_steps_measures_nothing(sm, tmp_path):
    home = tmp_path / "home"
    spec = _spec(tmp_path, EARLY, "g5.xlarge:1:on-demand", "sagemaker")
    launch = _cli(sm, home, "launch", spec, "--yes")
    assert launch.returncode == 0, launch.stderr
    job = json.loads(launch.stdout)["job_id"]
    watched = _cli(sm, home, "watch", job, "--interval", "0.5")  # with its logs: the metric lines
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["status"] == "Completed"
    plan = _cli(sm, home, "plan", spec)
    assert plan.returncode == 0, plan.stderr
    option = next(o for o in json.loads(plan.stdout)["options"] if o["instance_type"] == "g5.xlarge")
    assert option["throughput_source"] != "measured"  # a rate from half a run is no measurement
