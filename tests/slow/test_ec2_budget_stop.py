"""An EC2 job's budget, enforced by its own node agent in the sandbox (real agent, real torchrun), with no `watch`
running: once the spend plus the projected remainder would pass the budget, the node writes the stop mark with
the reason, the training checkpoints and stops, and the job's status names the budget."""
from __future__ import annotations

import json

from tests.support.helpers import run_cli

REGION = "us-east-1"
# The plan prices 80 samples (cents); the script is told to run 100 million steps: at any CPU rate a sandbox node
# reaches (even 1,000 steps/s) that projects far past the $2 budget as soon as two metric lines show the rate.
SPEC = """\
name: ec2-budget
entrypoint: {bundled: ddp, args: {model: vit_micro, batch-size: 8, steps: 100000000, device: cpu, bf16: false,
                                 checkpoint-every: 5, log-every: 5, checkpoint-seconds: 0}}
model: {architecture: vit_micro}
workload: {samples: 80, batch_size_per_accelerator: 8}
constraints: {budget_usd: 2}
"""


def test_an_ec2_job_is_stopped_by_its_budget_with_a_checkpoint_and_its_status_names_the_budget(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    sns, sqs = sb.client("sns", REGION), sb.client("sqs", REGION)  # the job's news, read through a queue
    topic = sns.create_topic(Name="budget-news")["TopicArn"]
    queue = sqs.create_queue(QueueName="budget-news")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    launch = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2", "--layout",
                      "g5.xlarge:1:spot", "--yes", "--notify", topic], home, env=sb.env)
    assert launch.returncode == 0, launch.stderr
    job = json.loads(launch.stdout)["job_id"]
    # the node stops itself; `watch` only follows the job to its end (no --recover: it starts nothing)
    watched = run_cli(["--output", "json", "watch", job, "--no-logs", "--interval", "0.5"], home, env=sb.env,
                      timeout=400)
    assert watched.returncode == 3, watched.stderr[-2000:]  # 3: Stopped
    doc = json.loads(watched.stdout)
    assert doc["failure_reason"].startswith("stopped: budget $2 reached"), doc["failure_reason"]
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "budget $2 reached" in logs and "trainctl stopped " in logs, logs[-3000:]  # the entrypoint's checkpoint
    # the node agent names the budget as the reason, not a maximum runtime that has not passed
    assert "the job is stopped: budget $2 reached" in logs and "past its maximum runtime" not in logs, logs[-3000:]
    stopped_at = int(logs.split("trainctl stopped ")[1].split("step=")[1].split()[0])
    listed = sb.client("s3", REGION).list_objects_v2(Bucket=next(
        b["Name"] for b in sb.client("s3", REGION).list_buckets()["Buckets"] if b["Name"].startswith("trainctl-")),
        Prefix=f"{job}/checkpoints/")
    assert stopped_at > 0 and listed.get("KeyCount", 0) > 0
    # the node itself said so on the topic (no laptop needed), and `watch` the end with its dollars
    news = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]]
    by_event = {n["event"]: n for n in news}
    assert by_event["budget:stop"]["sender"].startswith("node agent on i-"), news
    assert "budget $2 reached" in by_event["budget:stop"]["message"] and "end:Stopped" in by_event
