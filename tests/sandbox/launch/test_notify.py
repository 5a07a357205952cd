"""`launch --notify`: the job's news reach an SNS topic (the sandbox's SNS, read through an SQS subscription) or a
webhook (a receiver on this machine's loopback, the one place plain http is accepted), each message once."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from tests.support.helpers import CONFIGS, run_cli
from trainctl.usecases.jobs.notify import messages

REGION = "us-east-1"


class _Receiver(BaseHTTPRequestHandler):
    got: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        _Receiver.got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _launch(sb, home, notify: str) -> str:
    proc = run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform",
                    "ec2", "--layout", "g5.xlarge:1:on-demand", "--yes", "--notify", notify], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["job_id"]


def test_watch_posts_a_jobs_news_to_a_loopback_webhook_once_each(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Receiver.got = []
    try:
        job = _launch(sb, home, f"http://127.0.0.1:{server.server_port}/hook")
        run_cli(["watch", job, "--once"], home, env=sb.env)
        assert [m["event"] for m in _Receiver.got] == ["state:InProgress:Training"]
        assert run_cli(["stop", job, "--grace-seconds", "1"], home, env=sb.env).returncode == 0
        for _ in range(2):  # watching again sends nothing twice
            run_cli(["watch", job, "--once"], home, env=sb.env)
    finally:
        server.shutdown()
    assert [m["event"] for m in _Receiver.got] == ["state:InProgress:Training", "end:Stopped"]
    end = _Receiver.got[-1]
    assert end["job_id"] == job and end["cost_usd"] is not None and f"${end['cost_usd']:,.4f}" in end["message"]
    run_cli(["down", job], home, env=sb.env)


def test_watch_publishes_a_jobs_news_to_an_sns_topic(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    sns, sqs = sb.client("sns", REGION), sb.client("sqs", REGION)
    topic = sns.create_topic(Name="trainctl-news")["TopicArn"]
    queue = sqs.create_queue(QueueName="news")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    job = _launch(sb, home, topic)
    run_cli(["watch", job, "--once"], home, env=sb.env)
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["event"] for m in got] == ["state:InProgress:Training"]
    run_cli(["down", job], home, env=sb.env)


def test_launch_refuses_a_plain_http_webhook_off_the_loopback(sandbox_env, tmp_path):
    proc = run_cli(["--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout",
                    "g5.xlarge:1:on-demand", "--yes", "--notify", "http://hooks.example.com/x"], tmp_path / "home",
                   env=sandbox_env.env)
    assert proc.returncode == 2 and "must be https" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_budget_marks_are_said_at_50_80_and_100_percent_once_each():
    doc = {"job_id": "j", "status": "InProgress", "secondary_status": "Training", "interruptions": 1,
           "cost_usd": 8.5, "platform": "ec2"}
    keys = [k for k, _ in messages(doc, 10.0)]
    assert keys == ["state:InProgress:Training", "interruption:1", "budget:50", "budget:80"]
    ended = dict(doc, status="Stopped", cost_usd=10.0, failure_reason="stopped: budget $10 reached")
    said = dict(messages(ended, 10.0))
    assert "budget:100" in said and said["end:Stopped"] == "j: Stopped, $10.0000: stopped: budget $10 reached"
