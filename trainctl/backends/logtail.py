"""One CloudWatch Logs tailer for both platforms: every host's new lines of a job, in time order.

A poll is one FilterLogEvents over the job's streams (not a call per stream). A *run* of polls reads from
`start` to the end through CloudWatch's `nextToken`: a poll makes at most MAX_LOG_PAGES calls, and when it
stops with a token left, the cursor keeps that token (`cursor["pending"]`) and the next poll goes on from it.
So a burst of any size is read whole, at a bounded rate, and never re-read from its beginning. A new run
starts LOG_LOOKBACK_MS behind the newest line already seen: CloudWatch may ingest a line from one host a
little after a later line from another, and a run that started exactly at the newest line would lose it.
The event ids seen inside that window (with their timestamps) make the overlap harmless.

Streams appear only when a host starts; they are listed again only when one may be missing (none yet,
fewer streams than hosts, the caller saw a status change: `cursor["relist"]`) and otherwise once every
RELIST_EVERY polls, so a steady poll is one call. A run keeps the streams it started with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from trainctl.backends.base import LogLine

LOG_LOOKBACK_MS = 5000
MAX_LOG_PAGES = 5     # per poll: bounded calls however much was written; the run goes on at the next poll
RELIST_EVERY = 15     # polls between DescribeLogStreams calls while every host's stream is known
STREAMS_PER_FILTER = 100  # FilterLogEvents takes at most 100 stream names


@dataclass(frozen=True)
class LogSource:
    group: str
    prefix: str                                  # the job's streams start with it ("" = every stream)
    host_of: Callable[[str], str]                # stream name -> host shown to people
    live_streams: Callable[[list[str]], int]     # how many of the streams belong to the current attempt


def _list_streams(logs, source: LogSource) -> list[str] | None:
    """The job's stream names, or None when the log group does not exist yet (no host has logged)."""
    streams, token = [], None
    try:
        while True:
            kw = {"nextToken": token} if token else {}
            if source.prefix:
                kw["logStreamNamePrefix"] = source.prefix
            page = logs.describe_log_streams(logGroupName=source.group, **kw)
            streams += [s["logStreamName"] for s in page.get("logStreams", [])]
            token = page.get("nextToken")
            if not token:
                return sorted(s for s in streams if s.startswith(source.prefix))
    except Exception as e:  # noqa: BLE001
        from trainctl.aws import clients as aws

        if aws.error_code(e) == "ResourceNotFoundException":
            return None
        raise


def _events(logs, source: LogSource, streams: list[str], run: dict) -> tuple[list[dict], dict | None]:
    """The events of one poll of a run ({"start", "batch", "token"}), and the run left for the next poll (None
    when it reached the end)."""
    events: list[dict] = []
    pages, token = 0, run.get("token")
    for first in range(int(run.get("batch", 0)), len(streams), STREAMS_PER_FILTER):
        while True:
            if pages == MAX_LOG_PAGES:
                return events, {**run, "batch": first, "token": token}
            kw = {"nextToken": token} if token else {}
            page = logs.filter_log_events(logGroupName=source.group, logStreamNames=streams[first:first + STREAMS_PER_FILTER],
                                          startTime=run["start"], **kw)
            events += page.get("events", [])
            pages += 1
            token = page.get("nextToken")
            if not token:
                break
    return events, None


def _event_id(ev: dict) -> str:
    return ev.get("eventId") or f"{ev['logStreamName']}/{ev['timestamp']}/{ev['message']}"


def _streams(logs, source: LogSource, cursor: dict) -> list[str] | None:
    """The streams this poll reads (None: no log group yet). A run in progress keeps its own."""
    polls, streams = cursor.get("polls", 0), cursor.get("streams") or []
    if cursor.get("pending"):
        return streams
    if (not streams or cursor.get("relist") or polls % RELIST_EVERY == 0
            or source.live_streams(streams) < int(cursor.get("hosts") or 1)):
        return _list_streams(logs, source)
    return streams


def tail(logs, source: LogSource, cursor: dict | None) -> tuple[list[LogLine], dict]:
    """New lines since `cursor` and the next cursor. The caller may set cursor["hosts"] (hosts expected)
    and cursor["relist"] (a status change: list the streams again). `cursor["pending"]` is set while a run
    has more to read: ask again before concluding that nothing is left."""
    cursor = dict(cursor or {"start": 0, "seen": {}})
    polls = cursor.get("polls", 0)
    streams = _streams(logs, source, cursor)
    if streams is None:
        return [], {**cursor, "polls": polls + 1}
    cursor.update(polls=polls + 1, streams=streams, relist=False)
    if not streams:
        return [], cursor
    seen: dict[str, int] = dict(cursor.get("seen") or {})
    run = cursor.get("pending") or {"start": max(0, int(cursor.get("start", 0)) - LOG_LOOKBACK_MS)}
    events, pending = _events(logs, source, streams, run)
    lines: list[LogLine] = []
    newest = int(cursor.get("start", 0))
    for ev in sorted(events, key=lambda e: (e["timestamp"], e.get("ingestionTime", 0), e["logStreamName"])):
        eid = _event_id(ev)
        if eid in seen:
            continue
        seen[eid] = ev["timestamp"]
        lines.append(LogLine(ev["timestamp"], source.host_of(ev["logStreamName"]), ev["message"].rstrip("\n")))
        newest = max(newest, ev["timestamp"])
    # keep only the ids inside the look-back window of the newest line: the cursor stays small on long jobs
    kept = {eid: ts for eid, ts in seen.items() if ts >= newest - LOG_LOOKBACK_MS}
    return lines, {**cursor, "start": newest, "seen": kept, "pending": pending}
