"""`trainctl cost` against Cost Explorer answers no honest endpoint gives (issue 36, item 12): a page token forever,
a token repeated, NaN, infinite and negative amounts, throttling. The CLI runs in this process (trainctl.cli.main,
as the console script does) so that a botocore `before-send` hook on trainctl's own session can answer
GetCostAndUsage in its place; everything else goes to the sandbox."""
from __future__ import annotations

import json
import sys
import time

import pytest

from trainctl.aws import clients as aws

JOB = "cost-job-1"


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


def _answer(request, status: int, doc: dict):
    from botocore.awsrequest import AWSResponse

    return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"},
                       _Raw(json.dumps(doc).encode()))


def _page(amounts: list[str], token: str | None = None) -> dict:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    doc = {"ResultsByTime": [{"TimePeriod": {"Start": day, "End": day}, "Estimated": False, "Total": {},
                              "Groups": [{"Keys": [f"trainctl:job${JOB}"],
                                          "Metrics": {"UnblendedCost": {"Amount": a, "Unit": "USD"}}}]}
                             for a in amounts], "DimensionValueAttributes": []}
    return {**doc, "NextPageToken": token} if token else doc


@pytest.fixture
def cost_cli(sandbox_env, tmp_path, monkeypatch, capsys):
    """(answer GetCostAndUsage with fn(request, n) -> response; run `trainctl ARGS` -> (code, stdout, stderr))."""
    from trainctl.cli import main
    from trainctl.cli.app import OPTS
    from trainctl.plans import Option
    from trainctl.state.job_store import JobStore

    monkeypatch.setenv("TRAINCTL_AWS_MAX_ATTEMPTS", "2")
    aws.SETTINGS.max_attempts = 2
    aws.reset_session()
    option = Option(rank=1, platform="ec2", instance_type="g5.xlarge", count=1, market="on-demand",
                    region="us-east-1", accelerators=1, hourly_usd=1.006, throughput_samples_per_s=100.0,
                    throughput_source="model", hours=1.0, expected_cost_usd=1.01)
    with JobStore() as store:
        store.record_job(job_id=JOB, account="123456789012", platform="ec2", region="us-east-1", spec_path="x.yaml",
                         spec_name="x", model="vit", batch_size=8, option=option, plan_json=None, status="Completed",
                         created_at=time.time() - 3600)
    calls = {"n": 0}

    def answer_with(fn):
        def handler(request, **_):
            calls["n"] += 1
            return fn(request, calls["n"])
        aws.session().events.register("before-send.ce.GetCostAndUsage", handler)

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["trainctl", *args])
        code = 0
        try:
            main()
        except SystemExit as e:
            code = int(e.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    yield answer_with, run, calls
    OPTS.output = "table"
    aws.SETTINGS.max_attempts = 5
    aws.reset_session()


def test_endless_and_repeated_page_tokens_are_capped(cost_cli):
    answer_with, run, calls = cost_cli
    # a new token every time (stopped at 200 here, so today's code ends too, having paid $2.00)
    answer_with(lambda req, n: _answer(req, 200, _page(["0.01"], f"token-{n}" if n < 200 else None)))
    code, out, err = run("-o", "json", "cost", JOB)
    assert code == 0, err
    assert calls["n"] == 50
    doc = json.loads(out)
    assert any("still paging after 50 requests ($0.50)" in w for w in doc["warnings"]), doc["warnings"]
    assert doc["jobs"][0]["billed_usd"] == 0.5

    calls["n"] = 0
    aws.reset_session()
    answer_with(lambda req, n: _answer(req, 200, _page(["1.00"], "same" if n < 200 else None)))
    code, out, err = run("-o", "json", "cost", JOB)
    assert code == 0 and calls["n"] == 2
    doc = json.loads(out)
    assert doc["jobs"][0]["billed_usd"] == 2.0 and any("already given" in w for w in doc["warnings"])


def test_nan_infinite_and_negative_amounts_are_refused_and_json_stays_json(cost_cli):
    answer_with, run, _ = cost_cli
    answer_with(lambda req, n: _answer(req, 200, _page(["NaN", "Infinity", "-5.0", "1.25"])))
    code, out, err = run("-o", "json", "cost", JOB)
    assert code == 0, err

    def strict(name):
        raise ValueError(f"{name} in the JSON document")
    doc = json.loads(out, parse_constant=strict)
    assert doc["jobs"][0]["billed_usd"] == 1.25
    refused = [w for w in doc["warnings"] if "not a charge" in w]
    assert len(refused) == 3 and all(JOB in w for w in refused)
    code, out, err = run("cost", JOB)  # the table: no nan, no inf
    assert code == 0 and "nan" not in out.lower() and "inf" not in out.lower()


def test_throttling_is_said_as_throttling(cost_cli):
    answer_with, run, _ = cost_cli
    answer_with(lambda req, n: _answer(req, 400, {"__type": "LimitExceededException", "message": "Rate exceeded"}))
    code, out, err = run("cost", JOB)
    assert code == 0
    assert "Cost Explorer is throttling this account's requests (LimitExceededException)" in err
    assert "needs ce:GetCostAndUsage" not in err
