"""A bench whose follow gave up does not report "spent: $0.0000" (issue 36, item 15): its job ran, so its dollars
are not known. The CLI runs in this process (trainctl.cli.main, as the console script does) so that a botocore
`before-send` hook on trainctl's own session can refuse DescribeTrainingJob once the job is submitted (a refusal
that does not pass: the follow stops at once); the rest goes to the sandbox."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from trainctl.aws import clients as aws

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "bench-vit.yaml")


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


def test_a_bench_whose_follow_gave_up_says_its_dollars_are_not_known(sm, sandbox_env, monkeypatch, capsys):
    from botocore.awsrequest import AWSResponse

    from trainctl.cli import main
    from trainctl.cli.app import OPTS

    aws.reset_session()

    def refuse(request, **_):
        body = json.dumps({"__type": "AccessDeniedException", "message": "not allowed to describe it"}).encode()
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body))

    aws.session().events.register("before-send.sagemaker.DescribeTrainingJob", refuse)
    monkeypatch.setattr(sys, "argv", ["trainctl", *"bench --yes --max-usd 5 --max-minutes 10 --steps 20 --warmup-steps "
                                      "10 --interval 0.5 --layout g5.xlarge:1:spot".split(), SPEC])
    try:
        main()
    except SystemExit:
        pass
    finally:
        aws.session().events.unregister("before-send.sagemaker.DescribeTrainingJob", refuse)
        OPTS.output = "table"
        aws.reset_session()
    out = capsys.readouterr()
    jobs = [j["TrainingJobName"] for j in sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    assert len(jobs) == 1, out
    (job,) = jobs
    assert "spent: $0.0000" not in out.out
    assert f"spent: at least $0.0000; not known for {job}" in " ".join(out.out.split()), out.out + out.err
