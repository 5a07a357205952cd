"""watch polls politely: a bounded number of AWS calls per cycle however many hosts (one
FilterLogEvents names every host's stream), counted with a botocore before-call hook on the very
clients watch uses, while following a real 4-host job in the sandbox to its end."""
from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_nat

SPEC = str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


@pytest.mark.timeout(240)
def test_following_a_four_host_job_costs_a_bounded_number_of_calls_per_cycle(sandbox_env, tmp_path):
    sb = sandbox_env
    add_nat(sb)  # four hosts run in the default VPC: the code download and pip need a NAT
    before = sb.admin.action("configure_training_jobs")
    sb.admin.action("configure_training_jobs", time_scale=0.3)
    try:
        home = Path(os.environ["TRAINCTL_HOME"])
        proc = run_cli(["--output", "json", "launch", SPEC, "--yes", "--layout", "g5.xlarge:4:on-demand"], home,
                       env=sb.env)
        assert proc.returncode == 0, proc.stderr
        job = json.loads(proc.stdout)["job_id"]

        from trainctl.aws import clients as aws
        from trainctl.usecases.jobs import watch
        from trainctl.backends import get_backend

        aws.reset_session()  # this process's clients must point at the sandbox of this test
        calls: collections.Counter = collections.Counter()
        for service in ("sagemaker", "logs"):
            aws.client(service, "us-east-1").meta.events.register(
                "before-call", lambda model, **_: calls.update([model.name]))
        hosts: set[str] = set()
        lines: list = []
        view, progress = watch.follow(get_backend("sagemaker"), job, "us-east-1", interval=0.2,
                                      on_line=lambda ln: (hosts.add(ln.host), lines.append(ln)))
    finally:
        sb.admin.action("configure_training_jobs", time_scale=before["time_scale"])
        from trainctl.aws import clients as aws

        aws.reset_session()

    assert view.status == "Completed" and view.hosts == ("algo-1", "algo-2", "algo-3", "algo-4")
    cycles = calls["DescribeTrainingJob"]
    assert cycles >= 2
    assert set(calls) <= {"DescribeTrainingJob", "DescribeLogStreams", "FilterLogEvents"}
    # one listing and one filter per cycle at most (plus the final drain), never one call per host
    assert calls["DescribeLogStreams"] <= cycles
    assert calls["FilterLogEvents"] <= cycles + 2
    assert sum(calls.values()) <= 3 * cycles + 2
    # each host's lines in order, each line once, and the metric lines parsed (192 / (8 x 4) = 6 steps)
    for host in hosts:
        stamps = [ln.timestamp_ms for ln in lines if ln.host == host]
        assert stamps == sorted(stamps)
    assert len({(ln.host, ln.timestamp_ms, ln.message) for ln in lines}) == len(lines)
    assert progress.samples_per_s > 0 and progress.last_step == 6
