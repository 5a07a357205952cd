"""EC2 jobs that really train in the sandbox: every instance the sandbox launches runs the launch's own user
data and the node agent (a local process with its own IMDS, the sandbox as its AWS), through the CLI as a user
runs it: launch, `sandbox interrupt`, `watch --recover`."""
from __future__ import annotations

import json

from tests.support.ec2_jobs import end_earlier_nodes as _end_earlier_nodes
from tests.support.helpers import run_cli

REGION = "us-east-1"
SPEC = """\
name: ec2-nodes
entrypoint: {{bundled: ddp, args: {{model: vit_micro, batch-size: 8, steps: {steps}, device: cpu, bf16: false,
                                   checkpoint-every: 5, log-every: 5, checkpoint-seconds: 0}}}}
model: {{architecture: vit_micro}}
workload: {{samples: {samples}, batch_size_per_accelerator: 8}}
{extra}"""


def _spec(tmp_path, steps: int = 30, extra: str = "") -> str:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC.format(steps=steps, samples=steps * 8, extra=extra))
    return str(path)


def _launch(sb, home, spec: str, layout: str) -> dict:
    proc = run_cli(["--output", "json", "--region", REGION, "launch", spec, "--platform", "ec2", "--layout", layout, "--yes"], home,
                   env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _instances(sb, job: str) -> list[dict]:
    region = next(r for r in ("us-east-1", "us-west-2")
                  if sb.client("ec2", r).describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])[
                      "Reservations"])
    found = sb.client("ec2", region).describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])
    return [i for r in found["Reservations"] for i in r["Instances"]]


def _log_text(sb, home, job: str) -> str:
    return run_cli(["logs", job], home, env=sb.env).stdout


def test_an_ec2_spot_job_checkpoints_on_the_notice_and_resumes_on_a_replacement_in_the_same_az(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    job = _launch(sb, home, _spec(tmp_path, steps=600), "g5.xlarge:1:spot")["job_id"]
    (first,) = _instances(sb, job)
    # EC2's reclaim once the node has logged step 20: the notice then, the termination 3 s later.
    interrupt = run_cli(["sandbox", "interrupt", job, "--at-step", "20", "--after-seconds", "3"], sb.state_dir.parent,
                        env=sb.env)
    assert interrupt.returncode == 0, interrupt.stderr
    watched = run_cli(["--output", "json", "watch", job, "--recover", "--interval", "0.5"], home, env=sb.env,
                      timeout=400)
    assert watched.returncode == 0, watched.stderr[-3000:]
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Completed" and doc["interruptions"] == 1
    logs = _log_text(sb, home, job)
    assert "spot interruption notice" in logs and "trainctl stopped " in logs, logs  # the notice's checkpoint
    stopped_at = int(logs.split("trainctl stopped ")[1].split("step=")[1].split()[0])
    assert stopped_at >= 20
    assert f"trainctl resume step={stopped_at} " in logs and "trainctl step=600 " in logs
    nodes = _instances(sb, job)
    assert len(nodes) == 2
    assert {i["Placement"]["AvailabilityZone"] for i in nodes} == {first["Placement"]["AvailabilityZone"]}
    reclaimed = next(i for i in nodes if i["InstanceId"] == first["InstanceId"])
    assert reclaimed["StateReason"]["Code"] == "Server.SpotInstanceTermination"


def test_the_nodes_of_one_job_rank_each_other_and_train_together(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    job = _launch(sb, home, _spec(tmp_path, steps=10), "g5.xlarge:2:spot")["job_id"]
    watched = run_cli(["--output", "json", "watch", job, "--interval", "0.5"], home, env=sb.env, timeout=400)
    assert watched.returncode == 0, watched.stderr[-3000:]
    assert json.loads(watched.stdout)["status"] == "Completed"
    logs = _log_text(sb, home, job)
    assert "node_rank=0 nnodes=2" in logs and "node_rank=1 nnodes=2" in logs
    assert "world_size=2" in logs


def test_an_instance_the_machine_has_no_room_for_ends_at_once_and_watch_says_why(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    # the room is the machine's: nodes that earlier tests of this session left running would take it
    _end_earlier_nodes(sb)
    room = 1
    sb.admin.action("configure_instances", max_nodes=room)
    job = _launch(sb, home, _spec(tmp_path), "g5.xlarge:2:spot")["job_id"]
    watched = run_cli(["watch", job, "--recover", "--interval", "0.5"], home, env=sb.env, timeout=120)
    assert watched.returncode == 1, watched.stderr[-2000:]
    said = " ".join((watched.stdout + watched.stderr).split())
    assert "insufficient capacity" in said and f"at most {room} instances at once" in said
    refused = [i for i in _instances(sb, job) if i["State"]["Name"] == "terminated"]
    assert len(refused) == 1 and refused[0]["StateReason"]["Code"] == "Server.InsufficientInstanceCapacity"
    assert len(_instances(sb, job)) == 2  # nothing relaunched: not a Spot reclaim


def test_a_node_that_cannot_start_records_why_and_recover_does_not_replace_it(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    missing = f"arn:aws:ssm:{REGION}:123456789012:parameter/trainctl/ec2-nodes/not-there"
    out = _launch(sb, home, _spec(tmp_path, extra=f"secrets: {{API_TOKEN: '{missing}'}}\n"), "g5.xlarge:1:spot")
    job = out["job_id"]
    watched = run_cli(["--output", "json", "watch", job, "--recover", "--interval", "0.5"], home, env=sb.env,
                      timeout=120)
    assert watched.returncode == 1, watched.stderr[-2000:]
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed" and "ParameterNotFound" in doc["failure_reason"]
    (node,) = _instances(sb, job)  # never replaced
    bucket = f"trainctl-123456789012-{out['region']}"
    marker = sb.client("s3", out["region"]).get_object(Bucket=bucket, Key=f"{job}/status/failed")["Body"].read().decode()
    assert node["InstanceId"] in marker
