"""A Spot job launched and left alone: no `trainctl watch` runs, and its survivors' node agents replace each
reclaimed node themselves (bootstrap/replacement.py) with CreateFleet from the job's own launch template, over
the sandbox's HTTP with the node role's credentials from IMDS. And a stop or `down` while a replacement is
pending (no Spot capacity) ends the job for good: nothing is launched after it, nothing is left running."""
from __future__ import annotations

import json

import pytest

from tests.support.ec2_jobs import EVENT_WAIT_S, end_earlier_nodes, until
from tests.support.helpers import run_cli

REGION = "us-east-1"
SPEC = """\
name: unattended
entrypoint: {{bundled: ddp, args: {{model: vit_micro, batch-size: 4, steps: {steps}, device: cpu, bf16: false,
                                   checkpoint-every: 5, log-every: 5, checkpoint-seconds: 0}}}}
model: {{architecture: vit_micro}}
workload: {{samples: {samples}, batch_size_per_accelerator: 4}}
{extra}"""


def _launch(sb, home, tmp_path, nodes: int, steps: int, extra: str = "", notify: list[str] = ()) -> str:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(steps=steps, samples=steps * 4 * nodes, extra=extra))
    proc = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2", "--layout",
                    f"g5.xlarge:{nodes}:spot", "--yes", *notify], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["job_id"]


def _status_names(sb, job: str) -> set[str]:
    s3 = sb.client("s3", REGION)
    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(REGION))
    found = s3.list_objects_v2(Bucket=bucket, Prefix=f"{job}/status/").get("Contents", [])
    return {o["Key"].rsplit("/", 1)[-1] for o in found}



def _instances(sb, job: str) -> list[dict]:
    found = sb.client("ec2", REGION).describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])
    return [i for r in found["Reservations"] for i in r["Instances"]]


def _live(sb, job: str) -> list[dict]:
    return [i for i in _instances(sb, job) if i["State"]["Name"] in ("pending", "running")]


def _ls_row(sb, home, job: str) -> dict:
    proc = run_cli(["--output", "json", "ls"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return next(j for j in json.loads(proc.stdout)["jobs"] if j["job_id"] == job)


@pytest.mark.timeout(1800)
def test_a_four_node_spot_job_left_alone_survives_two_reclaims_and_completes(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    sb.admin.action("configure_instances", max_nodes=4)  # the job's 4 nodes; a node in its notice takes no room
    job = _launch(sb, home, tmp_path, nodes=4, steps=40)
    for n, step in ((1, 10), (2, 25)):  # EC2 reclaims one node once the job has logged `step`
        armed = run_cli(["sandbox", "interrupt", job, "--at-step", str(step)], sb.state_dir.parent, env=sb.env)
        assert armed.returncode == 0, armed.stderr
        until(f"replacement {n} recorded by the survivors", lambda n=n: f"replaced-{n}" in _status_names(sb, job))
    row = until("the job completed", lambda: (r := _ls_row(sb, home, job))["status"] == "Completed" and r)
    assert row["interruptions"] == 2 and row["replacements"] == 2, row
    shown = run_cli(["ls"], home, env={**sb.env, "COLUMNS": "150"}).stdout
    assert "2/2" in shown, shown  # reclaimed/replaced, in the table a user reads (at 80 columns it is left out)
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "replacement 1: " in logs and "replacement 2: " in logs, logs[-4000:]
    assert "trainctl step=40 " in logs
    reclaimed = [i for i in _instances(sb, job) if (i.get("StateReason") or {}).get("Code") ==
                 "Server.SpotInstanceTermination"]
    assert len(reclaimed) == 2 and len(_instances(sb, job)) == 6  # 4 + one replacement per reclaim, no more
    # every replacement carries the job's tags, its market, and the survivors' AZ and placement group
    first = sorted(_instances(sb, job), key=lambda i: i["LaunchTime"])[0]
    for inst in sorted(_instances(sb, job), key=lambda i: i["LaunchTime"])[4:]:
        assert {"Key": "trainctl:market", "Value": "spot"} in inst["Tags"]
        assert inst["Placement"]["AvailabilityZone"] == first["Placement"]["AvailabilityZone"]
        assert inst["Placement"].get("GroupName") == first["Placement"].get("GroupName")
    assert run_cli(["down", job], home, env=sb.env).returncode == 0


@pytest.mark.timeout(900)
@pytest.mark.parametrize("command", ["stop", "down"])
def test_stop_or_down_while_a_replacement_waits_for_capacity_leaves_nothing_behind(ec2_nodes, tmp_path, command):
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    sb.admin.action("configure_instances", max_nodes=3)
    job = _launch(sb, home, tmp_path, nodes=2, steps=400)
    zones = [z["ZoneName"] for z in sb.client("ec2", REGION).describe_availability_zones()["AvailabilityZones"]]
    for zone in zones:  # no Spot capacity anywhere: the survivor's replacement is refused, and tried again
        sb.admin.set_capacity("g5.xlarge", zone, False)
    try:
        reclaim = run_cli(["sandbox", "interrupt", job, "--at-step", "5"], sb.state_dir.parent, env=sb.env)
        assert reclaim.returncode == 0, reclaim.stderr
        until("a refused replacement try", lambda: any(n.startswith("refused-1-") for n in _status_names(sb, job)))
        ended = run_cli([command, job], home, env=sb.env, timeout=EVENT_WAIT_S)
        assert ended.returncode == 0, ended.stderr
    finally:
        for zone in zones:  # capacity is back: a replacer that missed the stop would get its node now
            sb.admin.set_capacity("g5.xlarge", zone, True)
    until("the job's last node gone", lambda: not _live(sb, job))
    names = _status_names(sb, job) if command == "stop" else set()
    assert not any(n.startswith("replaced-") for n in names), names
    assert len(_instances(sb, job)) == 2  # the two launched; no replacement ever started


@pytest.mark.timeout(1200)
def test_a_deadline_that_cannot_wait_gets_an_on_demand_replacement_and_says_so(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    sb.admin.action("configure_instances", max_nodes=3)
    # a restart of 10 h against a 5 h deadline: no Spot wait fits, so the first try is On-Demand (`on-demand`)
    extra = "constraints: {deadline_hours: 5, restart_minutes: 600, on_spot_shortage: on-demand}\n"
    sns, sqs = sb.client("sns", REGION), sb.client("sqs", REGION)  # the news reach a topic with no laptop open
    topic = sns.create_topic(Name="trainctl-news")["TopicArn"]
    queue = sqs.create_queue(QueueName="news")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    job = _launch(sb, home, tmp_path, nodes=2, steps=20, extra=extra, notify=["--notify", topic])
    armed = run_cli(["sandbox", "interrupt", job, "--at-step", "5"], sb.state_dir.parent, env=sb.env)
    assert armed.returncode == 0, armed.stderr
    until("the On-Demand replacement recorded", lambda: "replaced-1" in _status_names(sb, job))
    newest = max(_instances(sb, job), key=lambda i: i["LaunchTime"])
    assert {"Key": "trainctl:market", "Value": "on-demand"} in newest["Tags"]
    assert newest.get("InstanceLifecycle") != "spot"  # what EC2 bills it as: On-Demand
    watched = run_cli(["--output", "json", "watch", job, "--once"], home, env=sb.env)
    (replaced,) = json.loads(watched.stdout)["replacements"]
    assert replaced["market"] == "on-demand" and replaced["instance_ids"] == [newest["InstanceId"]]
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "the deadline cannot wait for Spot: replacing 1 node On-Demand (+$" in logs, logs[-3000:]
    news = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]]
    from_nodes = {n["event"] for n in news if str(n.get("sender")).startswith("node agent on i-")}  # not `watch`
    assert {"interruption:1", "fallback:1", "replacement:1"} <= from_nodes, news
    assert run_cli(["down", job], home, env=sb.env).returncode == 0


def _budget_for(sb, home, tmp_path, nodes: int, steps: int) -> float:
    """A budget the plan lets this job launch with: a little above its expected cost."""
    spec = tmp_path / "plan.yaml"
    spec.write_text(SPEC.format(steps=steps, samples=steps * 4 * nodes, extra=""))
    proc = run_cli(["--output", "json", "--region", REGION, "plan", str(spec), "--platform", "ec2", "--layout",
                    f"g5.xlarge:{nodes}:spot"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    (option,) = json.loads(proc.stdout)["options"][:1]
    return round(max(option["expected_cost_usd"], option["hourly_usd"] * option["hours"]) * 1.02 + 0.001, 3)


@pytest.mark.timeout(1200)
def test_a_budget_stop_while_a_replacement_waits_for_capacity_leaves_nothing_behind(ec2_nodes, tmp_path):
    """The survivor's agent keeps counting the job's dollars while it waits for a replacement that Spot cannot
    give: once the budget is reached it stops the job itself (no laptop), and no replacement comes after."""
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    sb.admin.action("configure_instances", max_nodes=4)
    # The budget: a little over the plan's expected cost (the least a launch takes). Two of the three nodes bill
    # after the reclaim, so it is reached minutes after the survivors' first replacement try, made as they start.
    budget = _budget_for(sb, home, tmp_path, 3, 1000)
    job = _launch(sb, home, tmp_path, nodes=3, steps=1000, extra=f"constraints: {{budget_usd: {budget}}}\n")
    zones = [z["ZoneName"] for z in sb.client("ec2", REGION).describe_availability_zones()["AvailabilityZones"]]
    for zone in zones:
        sb.admin.set_capacity("g5.xlarge", zone, False)
    try:  # reclaimed once it trains (a notice its agent sees, as AWS gives one, not mid-boot): the survivors try
        reclaim = run_cli(["sandbox", "interrupt", job, "--at-step", "5"], sb.state_dir.parent, env=sb.env)
        assert reclaim.returncode == 0, reclaim.stderr
        until("a refused replacement try", lambda: any(n.startswith("refused-1-") for n in _status_names(sb, job)))
        until("the budget's stop", lambda: "stopped" in _status_names(sb, job))
    finally:
        for zone in zones:  # capacity is back: a replacer that missed the stop would get its node now
            sb.admin.set_capacity("g5.xlarge", zone, True)
    until("the job's last node gone", lambda: not _live(sb, job))
    watched = run_cli(["--output", "json", "watch", job, "--once"], home, env=sb.env)
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Stopped" and doc["failure_reason"].startswith(f"stopped: budget ${budget:g} reached"), doc
    assert not any(n.startswith("replaced-") for n in _status_names(sb, job))
    assert len(_instances(sb, job)) == 3  # the three launched; no replacement ever started
    assert run_cli(["down", job], home, env=sb.env).returncode == 0


@pytest.mark.timeout(900)
def test_ctrl_c_of_watch_recover_between_its_claim_and_its_launch_leaves_nothing_and_holds_up_no_next_try(
        ec2_nodes, tmp_path):
    """A one-node job has no survivor to replace its node: `watch --recover` does, and is interrupted (SIGINT, as
    Ctrl-C) after it claimed the try and before it launched (the sandbox holds its next EC2 read). It launches
    nothing, and the next `watch --recover` replaces the node at once, not after the claim's time-to-live."""
    import signal
    import subprocess
    import sys

    from tests.support.helpers import ROOT, clean_env

    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    sb.admin.action("configure_instances", max_nodes=2)
    job = _launch(sb, home, tmp_path, nodes=1, steps=400)
    # reclaimed once it trains (a notice its agent sees, as AWS gives one), not while it boots
    assert run_cli(["sandbox", "interrupt", job, "--at-step", "5"], sb.state_dir.parent, env=sb.env).returncode == 0
    until("the reclaim", lambda: not _live(sb, job))
    # the relaunch's choice of AZ reads the type's offerings after the claim: held there until the test lets go
    sb.admin.set_latency("DescribeInstanceTypeOfferings", 3_600_000)
    watch = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "watch", job, "--recover", "--no-logs",
                              "--interval", "1"], cwd=ROOT, env=clean_env(home, sb.env), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        until("watch's claim of the try", lambda: "replace-1-1" in _status_names(sb, job) or watch.poll() is not None)
        assert watch.poll() is None, (watch.communicate(), _status_names(sb, job))
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        sb.admin.set_latency("DescribeInstanceTypeOfferings", 0)
    assert watch.returncode != 0, err[-2000:]
    assert not _live(sb, job) and len(_instances(sb, job)) == 1  # nothing launched
    names = _status_names(sb, job)
    assert any(n.startswith("refused-1-1-") for n in names), names  # the try settled: nobody waits out its claim
    again = run_cli(["--output", "json", "watch", job, "--recover", "--once", "--no-logs"], home, env=sb.env)
    assert "replaced-1" in _status_names(sb, job), again.stderr[-2000:]
    assert len(_live(sb, job)) == 1
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
