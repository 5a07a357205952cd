"""How well a 4-node EC2 Spot job rides out reclaims: a replayed interruption schedule in a private sandbox.

Starts a sandbox whose instances really run (their user data, the node agent, torchrun of the bundled DDP
entrypoint on vit_micro, CPU), launches the job through the CLI as a user does, and replays:
  1. one node reclaimed when the job logs step STEPS/4 (the notice, then the reclaim NOTICE_S later);
  2. capacity of the type switched off in every AZ, then two nodes reclaimed at once at step STEPS/2; capacity
     comes back CAPACITY_OFF_S after that reclaim.
Then the same job runs uninterrupted, for the final model to compare (`final_state_sha256` of the two runs).

What it reports, from AWS's own records (DescribeInstances: LaunchTime and the end EC2 writes in
StateTransitionReason; CloudWatch Logs: the time of every `trainctl step=` line of every node):
- goodput: node-seconds making training progress / billed node-seconds. A node makes progress between two of
  its step lines when that step is never trained again (no `resume` below it afterwards); billed: each instance
  from launch to its end (EC2 bills per second from running);
- seconds from each reclaim to training again (the first step line after the first resume that follows it);
- idle billed node-seconds: nodes billed in the windows from a reclaim to training again;
- whether the final model equals the uninterrupted run's (`final_state_sha256`: model and optimizer state), and
  whether the loss of every logged step does (the samples trained, in order); `--baselines 2` also says whether
  two uninterrupted runs give the same digest (CPU gloo all-reduce need not be bitwise reproducible).

--mode only changes what the job is launched with and which trainctl process runs beside it (MODES):
  watch       today's recovery: `trainctl watch JOB --recover` runs for the whole job;
  unattended  nothing of trainctl runs after `launch` (recovery by AWS / the nodes themselves);
  elastic     the same, with `elastic: {min_nodes: 2}` in the spec;
  uninterrupted  no reclaim: the reference run by itself (use with --baselines 0).
The script itself only reads AWS (DescribeInstances, logs, the job's S3 status marks) and flips the sandbox's
fault switches: no trainctl process of its own follows the job.

    python scripts/bench_recovery.py [--mode watch] [--steps 1600] [--baselines 1] [--json out.json]

A benchmark, not a test: its numbers go to docs/benchmarks.md with the machine and the date.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sandbox"))

REGION, ITYPE, NODES = "us-east-1", "g5.xlarge", 4
NOTICE_S = 5.0         # the sandbox's reclaim follows the notice this long after (AWS: 120 s)
CAPACITY_OFF_S = 60.0  # no capacity of the type for this long after the double reclaim
SPEC = """\
name: bench-recovery
entrypoint: {{bundled: ddp, args: {{model: vit_micro, batch-size: 8, steps: {steps}, device: cpu, bf16: false,
                                   checkpoint-every: 25, log-every: 5, checkpoint-seconds: 0}}}}
model: {{architecture: vit_micro}}
workload: {{samples: {samples}, batch_size_per_accelerator: 8}}
constraints: {{max_spot_wait_hours: 1}}
{extra}"""
# mode -> (spec lines, the trainctl command that runs beside the job: None for none)
MODES = {
    "watch": ("", ["watch", "{job}", "--recover", "--interval", "1"]),
    "unattended": ("", None),
    "elastic": ("elastic: {min_nodes: 2}\n", None),
    "uninterrupted": ("", None),   # no reclaim at all: the reference run alone (its digest, its own goodput)
}
STEP = re.compile(r"trainctl step=(\d+) ")
LOSS = re.compile(r"trainctl step=(\d+) loss=(\S+) ")
START = re.compile(r"trainctl start .*world_size=(\d+) ")
RESUME = re.compile(r"trainctl resume step=(\d+) ")
FINAL = re.compile(r"trainctl final_state_sha256=(\w+)")
ENDED = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


class Bench:
    """One sandbox, the CLI run as a user runs it, and the AWS clients that read what happened."""

    def __init__(self, tmp: Path, endpoint: str, env: dict):
        import boto3

        self.tmp, self.env = tmp, {**os.environ, **env, "TRAINCTL_HOME": str(tmp / "home"),
                                   "AWS_CONFIG_FILE": str(tmp / "none"),
                                   "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none")}
        session = boto3.session.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=REGION)
        self.ec2 = session.client("ec2", endpoint_url=endpoint)
        self.logs = session.client("logs", endpoint_url=endpoint)
        self.s3 = session.client("s3", endpoint_url=endpoint)

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def launch(self, spec_text: str, name: str) -> str:
        spec = self.tmp / f"{name}.yaml"
        spec.write_text(spec_text)
        proc = self.cli("--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2",
                        "--layout", f"{ITYPE}:{NODES}:spot", "--yes")
        if proc.returncode != 0:
            raise SystemExit(f"launch failed: {proc.stderr[-2000:]}")
        return json.loads(proc.stdout)["job_id"]

    def instances(self, job: str) -> list[dict]:
        found = self.ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])
        return sorted((i for r in found["Reservations"] for i in r["Instances"]), key=lambda i: i["LaunchTime"])

    def events(self, job: str) -> list[tuple[float, str, str]]:
        """(time s, stream, message) of every log event of the job, in time order."""
        out, group = [], f"/trainctl/{job}"
        for page in self.logs.get_paginator("describe_log_streams").paginate(logGroupName=group):
            for stream in page["logStreams"]:
                kw = {"logGroupName": group, "logStreamName": stream["logStreamName"], "startFromHead": True}
                while True:
                    got = self.logs.get_log_events(**kw)
                    out += [(e["timestamp"] / 1000, stream["logStreamName"], e["message"]) for e in got["events"]]
                    if not got["events"] or got.get("nextForwardToken") == kw.get("nextToken"):
                        break
                    kw["nextToken"] = got["nextForwardToken"]
        return sorted(out)

    def status(self, job: str) -> str:
        """The job's end as its nodes (or `stop`) mark it in the job bucket (<job>/status/<status>), read
        directly: the bench itself runs no trainctl process beside the job."""
        marks = {"completed": "Completed", "failed": "Failed", "stopped": "Stopped"}
        for bucket in self.s3.list_buckets()["Buckets"]:
            if not bucket["Name"].startswith("trainctl-"):
                continue
            found = self.s3.list_objects_v2(Bucket=bucket["Name"], Prefix=f"{job}/status/").get("Contents", [])
            for key in (o["Key"].rsplit("/", 1)[-1] for o in found):
                if key in marks:
                    return marks[key]
        return "InProgress"


def ended_at(inst: dict, now: float) -> float:
    m = ENDED.search(inst.get("StateTransitionReason") or "")
    if inst["State"]["Name"] not in ("shutting-down", "terminated") or not m:
        return now
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def reclaim(inst: dict) -> bool:
    return (inst.get("StateReason") or {}).get("Code") == "Server.SpotInstanceTermination"


def trained_since_resume(events) -> bool:
    """A step line after the last resume line: the job trains again."""
    resumed = max((t for t, _, text in events if RESUME.search(text)), default=None)
    return resumed is not None and any(t > resumed and STEP.search(text) for t, _, text in events)


def wait_for(what: str, check, timeout: float, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def replay(b: Bench, job: str, steps: int, say) -> None:
    """The schedule: one node at steps/4; capacity off, two nodes at steps/2; capacity back after a while."""
    running = lambda: len([i for i in b.instances(job) if i["State"]["Name"] == "running"])  # noqa: E731
    reclaimed = lambda: len([i for i in b.instances(job) if reclaim(i)])  # noqa: E731
    b.cli("sandbox", "interrupt", job, "--at-step", str(steps // 4), "--after-seconds", str(NOTICE_S))
    say(f"reclaim of 1 node scheduled at step {steps // 4}")
    wait_for("the first reclaim", lambda: reclaimed() == 1, 1800)
    say("first reclaim seen")
    wait_for("training again on all nodes after the first reclaim",
             lambda: running() == NODES and trained_since_resume(b.events(job)), 1800, 2.0)
    b.cli("sandbox", "capacity", ITYPE, "all", "off")
    b.cli("sandbox", "interrupt", job, "--at-step", str(steps // 2), "--nodes", "2", "--after-seconds",
          str(NOTICE_S))
    say(f"capacity off; reclaim of 2 nodes scheduled at step {steps // 2}")
    wait_for("the double reclaim", lambda: reclaimed() == 3, 1800)
    say(f"double reclaim seen; capacity back in {CAPACITY_OFF_S:.0f} s")
    time.sleep(CAPACITY_OFF_S)
    b.cli("sandbox", "capacity", ITYPE, "all", "on")
    say("capacity on")


def follow(b: Bench, job: str, timeout: float) -> str:
    return wait_for(f"{job} to end", lambda: (s := b.status(job)) in ("Completed", "Failed", "Stopped") and s,
                    timeout, 5.0)


def productive_seconds(events) -> float:
    """Node-seconds between consecutive step lines of one training process (rank 0 logs them) whose step is
    never trained again (no later `resume` below it), times the nodes training then (its start line's
    world_size: one rank per g5.xlarge node)."""
    resumes = [(t, int(m.group(1))) for t, _, text in events if (m := RESUME.search(text))]
    last: tuple[float, int] | None = None
    world, total = NODES, 0.0
    for t, _, text in events:
        if (m := START.search(text)) or RESUME.search(text):
            world = int(m.group(1)) if m else world
            last = None   # a new process: its first step line starts nothing counted
            continue
        m = STEP.search(text)
        if not m:
            continue
        step = int(m.group(1))
        if last and step > last[1] and not any(rt > t and rs < step for rt, rs in resumes):
            total += (t - last[0]) * world
        last = (t, step)
    return total


def measure(b: Bench, job: str, dump: Path | None = None) -> dict:
    """The job's numbers; `dump`: also write its instances and log events beside that path (for a second look)."""
    now, found, events = time.time(), b.instances(job), b.events(job)
    spans = [(i["LaunchTime"].timestamp(), ended_at(i, now)) for i in found]
    billed = sum(max(0.0, e - s) for s, e in spans)
    reclaims = sorted({round(ended_at(i, now)) for i in found if reclaim(i)})
    back, idle = [], 0.0
    for r in reclaims:
        resumed = next((t for t, _, text in events if t > r and RESUME.search(text)), None)
        again = next((t for t, _, text in events if resumed and t > resumed and STEP.search(text)), None)
        if again is None:
            continue
        back.append(round(again - r, 1))
        idle += sum(max(0.0, min(e, again) - max(s, r)) for s, e in spans)
    if dump:
        (dump.parent / f"{dump.stem}-{job}.json").write_text(json.dumps({
            "instances": [{"id": i["InstanceId"], "launched": i["LaunchTime"].timestamp(), "ended": ended_at(i, now),
                           "reason": (i.get("StateReason") or {}).get("Code")} for i in found],
            "events": events}, indent=1))
    steps = [t for t, _, text in events if STEP.search(text)]
    first, last = (steps[0], steps[-1]) if steps else (now, now)
    # where the billed seconds that made no progress went: before the first step, after the last one, the reclaim
    # windows (idle); the rest is work trained again after a resume and the gaps around restarts while training
    startup = sum(max(0.0, min(e, first) - s) for s, e in spans)
    tail = sum(max(0.0, e - max(s, last)) for s, e in spans)
    finals = {m.group(1) for _, _, text in events if (m := FINAL.search(text))}
    losses = {int(m.group(1)): m.group(2) for _, _, text in events if (m := LOSS.search(text))}  # the last run of each
    return {"instances": len(found), "reclaims": len(reclaims), "billed_node_s": round(billed, 1),
            "productive_node_s": round(productive_seconds(events), 1),
            "goodput": round(productive_seconds(events) / billed, 4) if billed else None,
            "reclaim_to_training_s": back, "idle_billed_node_s": round(idle, 1),
            "startup_node_s": round(startup, 1), "after_last_step_node_s": round(tail, 1),
            "training_wall_s": round(last - first, 1),
            "final_state_sha256": sorted(finals), "losses": losses}


def run(a, b: Bench) -> dict:
    extra, beside = MODES[a.mode]
    spec = SPEC.format(steps=a.steps, samples=a.steps * 8 * NODES, extra=extra)
    say = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)  # noqa: E731
    job = b.launch(spec, "interrupted")
    say(f"launched {job} ({a.mode})")
    watcher = None
    if beside:
        cmd = [sys.executable, "-m", "trainctl.cli", *[c.format(job=job) for c in beside]]
        watcher = subprocess.Popen(cmd, cwd=ROOT, env=b.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if a.mode != "uninterrupted":
            replay(b, job, a.steps, say)
        status = follow(b, job, a.timeout)
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.terminate()
            watcher.wait(30)
    say(f"{job}: {status}")
    dump = Path(a.json) if a.json else None
    result = {"job": job, "status": status, **measure(b, job, dump)}
    b.cli("down", job)
    bases = []
    for n in range(a.baselines):
        base = b.launch(SPEC.format(steps=a.steps, samples=a.steps * 8 * NODES, extra=extra), f"uninterrupted{n}")
        say(f"uninterrupted run {base}")
        bases.append({"job": base, "status": follow(b, base, a.timeout), **measure(b, base, dump)})
        b.cli("down", base)
    if bases:
        mine, theirs = result["final_state_sha256"], bases[0]["final_state_sha256"]
        result["final_model_identical"] = bool(mine) and mine == theirs
        result["uninterrupted_runs_agree"] = len({tuple(x["final_state_sha256"]) for x in bases}) == 1
        result["loss_trace_identical"] = result["losses"] == bases[0]["losses"]
        result["uninterrupted"] = bases
    for run_ in (result, *bases):
        run_["logged_steps"] = len(run_.pop("losses"))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=sorted(MODES), default="watch")
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a run may take before the bench gives up")
    ap.add_argument("--baselines", type=int, default=1, help="uninterrupted runs to compare the final model with "
                                                                 "(2: also whether they agree among themselves)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    from trainctl_sandbox.admin import SandboxAdmin
    from trainctl_sandbox.server import process

    tmp = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    st = process.start_detached(port=0, seed=0, directory=tmp / "home" / "sandbox", parent_pid=os.getpid(),
                                wait_ec2=True)
    try:
        SandboxAdmin(st["endpoint_url"]).action("configure_instances", run_user_data=True, max_nodes=NODES + 2)
        started = time.time()
        result = run(a, Bench(tmp, st["endpoint_url"], process.sandbox_env(st["endpoint_url"])))
    finally:
        process.stop(tmp / "home" / "sandbox")
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mode": a.mode, "steps": a.steps,
              "nodes": NODES, "notice_s": NOTICE_S, "capacity_off_s": CAPACITY_OFF_S,
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
              "bench_wall_s": round(time.time() - started, 1), **result}
    print(json.dumps(result, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["status"] == "Completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
