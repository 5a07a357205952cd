"""`trainctl cost`: a job's dollars three ways (docs/cost-model.md).

- predicted: the plan's option stored with the job at launch (expected and p90 dollars);
- running: what trainctl computes from the platform's own figures, the same as `watch` (SageMaker: billable
  seconds x the On-Demand price; EC2: each instance's lifetime x the Spot price history of its type and AZ,
  On-Demand at the catalog's price), and split by market: an EC2 job whose lost Spot nodes were replaced
  On-Demand has instances of both (DescribeInstances says `InstanceLifecycle` "spot" for a Spot instance and
  leaves it out for an On-Demand one; its other values, capacity-block among them, are markets of their own: EC2
  API Reference, Instance, and botocore's InstanceLifecycleType); a SageMaker job is all of its one market;
- billed: what AWS charged, from Cost Explorer `GetCostAndUsage` filtered and grouped by the `trainctl:job`
  cost allocation tag (every resource trainctl makes carries it: instances, volumes, buckets' objects are not
  tagged by object, so S3 storage is billed to the bucket, not the job). Cost Explorer refreshes at least once
  every 24 hours, so the billed figure of a job appears up to a day after it ran; it is None until then.

Cost Explorer answers only for tags activated as cost allocation tags (`trainctl doctor` checks it).
"""
from __future__ import annotations

import math
import statistics
import time
from datetime import datetime, timezone

from trainctl.errors import UsageError
from trainctl.naming.tags import JOB_TAG
from trainctl.text.safe import clean
from trainctl.state.job_store import JobRow, JobStore

GROUPS = ("job", "spec", "user", "day")
# Cost Explorer has one endpoint per partition: us-east-1 in aws (AWS General Reference, "AWS Cost Explorer
# endpoints"), cn-northwest-1 in aws-cn (catalog/regions.ce_region, from botocore's endpoints.json).
CE_REGION = "us-east-1"
METRIC = "UnblendedCost"
# "Cost Explorer refreshes your cost data at least once every 24 hours" (AWS Cost Management User Guide,
# "Analyzing your costs and usage with AWS Cost Explorer").
BILLED_LAG = ("billed = Cost Explorer, by the trainctl:job cost allocation tag; AWS refreshes it at least once "
              "every 24 hours, so a job's billed dollars appear up to a day after it ran")
# "The Cost Explorer API can access up to 13 months of historical data" (AWS Cost Management User Guide,
# "Best practices for the AWS Cost Explorer API"); each paginated request costs $0.01 (same page).
MAX_DAYS_BACK = 390
MAX_JOBS = 100_000
TAGS_PER_CALL = 100  # job ids per Filter: keeps each request small; any number of calls pages the rest
MAX_PAGES = 50  # GetCostAndUsage requests per `trainctl cost` ($0.50 at most); 100 jobs x 390 days take far fewer
# Cost Explorer's throttling answers (Cost Explorer API Reference, GetCostAndUsage errors: LimitExceededException)
THROTTLED = ("LimitExceededException", "ThrottlingException", "Throttling", "TooManyRequestsException")


def parse_since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise UsageError(f"--since {text!r}: give a date as YYYY-MM-DD (UTC)") from None
    return day.timestamp()


def select(store: JobStore, job: str | None, spec: str | None, since: float | None) -> list[JobRow]:
    """The jobs asked for, oldest first: one job, a spec's jobs, or the jobs launched since a day."""
    if job is not None:
        from trainctl.usecases.jobs.watch import check_job_id

        record = store.job(check_job_id(job))
        if record is None:
            raise UsageError(f"{job}: no job of that id in trainctl's records (`trainctl ls` lists them)")
        return [record]
    records = list(reversed(store.jobs(MAX_JOBS)))
    return [r for r in records if (spec is None or r.spec_name == spec) and (since is None or r.created_at >= since)]


def running_usd(record: JobRow, client_for=None) -> tuple[float | None, str | None, str | None, dict | None]:
    """(dollars so far as the platform's figures give them, the job's status, why there is no figure, those dollars
    by market)."""
    from trainctl.backends import get_backend
    from trainctl.usecases.jobs.watch import Progress, summary
    from trainctl.aws import clients as aws

    try:
        view = get_backend(record.platform, client_for).describe(record.job_id, record.region or aws.default_region())
    except Exception as e:  # noqa: BLE001 - one job's platform not answering must not hide the others
        return None, record.status, f"{record.job_id}: the running figure is unknown ({aws.error_summary(e)})", None
    # the running figure needs no log lines: an empty Progress
    running = summary(view, Progress(), record)["cost_usd"]
    return running, view.status, None, by_market(view, running)


def by_market(view, running: float | None) -> dict[str, float] | None:
    """Dollars per market: per instance where the platform names them (EC2: each instance's lifecycle and
    dollars, backends/ec2/status.py), else the job's one market."""
    instances = (view.raw or {}).get("instances") if isinstance(view.raw, dict) else None
    if instances and all("lifecycle" in i and "cost_usd" in i for i in instances):
        out: dict[str, float] = {}
        for inst in instances:
            market = inst["lifecycle"]   # spot, on-demand (no InstanceLifecycle), capacity-block, ...
            out[market] = round(out.get(market, 0.0) + float(inst["cost_usd"]), 6)
        return out
    if running is None or not view.market:
        return None
    return {view.market: running}


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def billed_usd(ce, records: list[JobRow], now: float) -> tuple[dict[str, float], bool, list[str]]:
    """Job id -> dollars Cost Explorer has billed to it so far, whether any figure is still estimated, and notes on
    what was not counted. One GetCostAndUsage per TAGS_PER_CALL jobs (paged), DAILY from the first job's launch day
    to tomorrow. Each page costs $0.01: at most MAX_PAGES in all, and a token seen before ends the paging (an
    endpoint that always answers one would otherwise be asked forever). An amount that is not a finite number of
    dollars, or below zero, is not a charge trainctl can show: refused and named."""
    out: dict[str, float] = {}
    estimated, notes, pages = False, [], 0
    oldest = max(min(r.created_at for r in records), now - MAX_DAYS_BACK * 86400)
    period = {"Start": _day(oldest), "End": _day(now + 86400)}  # End is exclusive: today included
    ids = [r.job_id for r in records]
    for i in range(0, len(ids), TAGS_PER_CALL):
        params = {"TimePeriod": period, "Granularity": "DAILY", "Metrics": [METRIC],
                  "Filter": {"Tags": {"Key": JOB_TAG, "Values": ids[i:i + TAGS_PER_CALL], "MatchOptions": ["EQUALS"]}},
                  "GroupBy": [{"Type": "TAG", "Key": JOB_TAG}]}
        tokens: set[str] = set()
        while True:
            if pages >= MAX_PAGES:
                notes.append(f"Cost Explorer was still paging after {MAX_PAGES} requests (${MAX_PAGES * 0.01:.2f}): "
                             "stopped; the billed figures are partial")
                return _rounded(out), estimated, notes
            page = ce.get_cost_and_usage(**params)
            pages += 1
            for result in page.get("ResultsByTime", []):
                estimated = estimated or bool(result.get("Estimated"))
                for group in result.get("Groups", []):
                    job = group["Keys"][0].split("$", 1)[-1]  # Cost Explorer names a tag group "key$value"
                    amount = _amount(group["Metrics"][METRIC].get("Amount"))
                    if amount is None:
                        notes.append(f"{clean(job, one_line=True)[:80]}: Cost Explorer answered the amount "
                                     f"{clean(group['Metrics'][METRIC].get('Amount'), one_line=True)[:40]!r} for "
                                     f"{result.get('TimePeriod', {}).get('Start', 'a day')}: not a charge; not counted")
                        continue
                    out[job] = out.get(job, 0.0) + amount
            token = page.get("NextPageToken")
            if not token:
                break
            if token in tokens:
                notes.append("Cost Explorer answered a page token it had already given: paging stopped; the billed "
                             "figures may be partial")
                break
            tokens.add(token)
            params["NextPageToken"] = token
    return _rounded(out), estimated, notes


def _amount(text) -> float | None:
    """Dollars from Cost Explorer's Amount (a decimal string), or None when it is no charge (NaN, inf, < 0)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _rounded(out: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in out.items()}


def _billed_or_warning(records: list[JobRow], client_for, now: float) -> tuple[dict, bool, list[str]]:
    from trainctl.aws import clients as aws

    if not records:
        return {}, False, []
    try:
        from trainctl.catalog.regions import ce_region

        where = ce_region(records[0].region or aws.default_region()) or CE_REGION  # the partition's endpoint
        ce = (client_for or aws.client)("ce", where)
        return billed_usd(ce, records, now)
    except Exception as e:  # noqa: BLE001 - no Cost Explorer answer: predicted and running still stand
        if aws.error_code(e) in THROTTLED:
            return {}, False, [f"Cost Explorer is throttling this account's requests ({aws.error_code(e)}): no billed "
                               "figures this time; run `trainctl cost` again in a minute"]
        return {}, False, [f"Cost Explorer did not answer ({aws.error_summary(e)}): no billed figures; the caller "
                           "needs ce:GetCostAndUsage (`trainctl iam-policy`)"]


def job_row(record: JobRow, running: float | None, status: str | None, billed: float | None,
            markets: dict[str, float] | None = None) -> dict:
    opt = record.option
    return {"job_id": record.job_id, "platform": record.platform, "region": record.region,
            "spec": record.spec_name, "user": getattr(record, "launched_by", None) or record.account or None,
            "day": _day(record.created_at), "status": status,
            "layout": f"{opt.count} x {opt.instance_type} {opt.market}" if opt is not None else None,
            "predicted_usd": opt.expected_cost_usd if opt is not None else None,
            "predicted_p90_usd": (opt.cost_p90_usd or None) if opt is not None else None,
            "running_usd": running, "running_by_market_usd": markets, "billed_usd": billed}


def _sum(values) -> float | None:
    found = [v for v in values if v is not None]
    return round(sum(found), 6) if found else None


def group(rows: list[dict], by: str) -> list[dict]:
    """Rows summed by job, spec, user or launch day, in the order first seen."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(str(row["job_id" if by == "job" else by] or "-"), []).append(row)
    return [{"key": key, "jobs": len(members),
             **{f: _sum(m[f] for m in members) for f in ("predicted_usd", "predicted_p90_usd", "running_usd",
                                                         "billed_usd")}} for key, members in out.items()]


def compare(rows: list[dict]) -> dict:
    """Predicted against billed, per job with both: error = predicted / billed - 1 (as `calibration` words it)."""
    pairs = [(r["job_id"], r["predicted_usd"] / r["billed_usd"] - 1.0) for r in rows
             if r["predicted_usd"] is not None and r["billed_usd"]]
    for r in rows:
        r["error"] = next((round(e, 4) for j, e in pairs if j == r["job_id"]), None)
    if not pairs:
        return {"compared": 0, "median_error": None, "median_abs_error": None, "worst_job": None}
    worst = max(pairs, key=lambda p: abs(p[1]))
    return {"compared": len(pairs), "median_error": round(statistics.median(e for _, e in pairs), 4),
            "median_abs_error": round(statistics.median(abs(e) for _, e in pairs), 4), "worst_job": worst[0]}


def report(store: JobStore, *, job: str | None = None, spec: str | None = None, since: str | None = None,
           group_by: str = "job", with_compare: bool = False, client_for=None, now: float | None = None) -> dict:
    """The `trainctl cost --output json` document."""
    if group_by not in GROUPS:
        raise UsageError(f"--group-by {group_by!r}: use one of {', '.join(GROUPS)}")
    now = time.time() if now is None else now
    records = select(store, job, spec, parse_since(since))
    billed, estimated, ce_notes = _billed_or_warning(records, client_for, now)
    rows, warnings = [], list(ce_notes)
    if store.skipped_rows:
        from trainctl.usecases.jobs.listing import skipped_note

        warnings.append(skipped_note(store))
    for record in records:
        running, status, why, markets = running_usd(record, client_for)
        if why:
            warnings.append(why)
        rows.append(job_row(record, running, status, billed.get(record.job_id), markets))
    doc = {"endpoint": store.endpoint or "aws", "group_by": group_by, "jobs": rows, "groups": group(rows, group_by),
           "total": {f: _sum(r[f] for r in rows) for f in ("predicted_usd", "predicted_p90_usd", "running_usd",
                                                         "billed_usd")},
           "billed_estimated": estimated, "billed_note": BILLED_LAG, "warnings": warnings}
    if with_compare:
        doc["compare"] = compare(rows)
    return doc
