"""`launch --notify TARGET`: a job's news, sent by `trainctl watch` (docs/cost-model.md, "Notifications").

Who sends: `watch`, on both platforms, for every look it takes at the job (`watch --once` too, so a cron job
or CI step can be the sender): state changes, Spot interruptions, the budget's 50%, 80% and 100% marks (of the
running dollars `watch` shows), and the end with its dollars. Each message is sent once per job: what was sent
is recorded with the job (`notified` events), so watching again, or from `--once` runs, repeats nothing.
Not chosen: an EventBridge rule on SageMaker's "Training Job State Change" events would send state changes with no
laptop, but it carries no dollars, cannot count a budget, needs the topic's own policy to let
events.amazonaws.com publish, and reaches a webhook only through an API destination whose connection holds the
webhook's credentials in AWS. An EC2 job given an SNS topic hears of its budget from its own nodes: the node agent
publishes the 50/80/100% marks and its budget stop (bootstrap/budget.py, with sns:Publish on that one topic in
the node role), so `watch` leaves those out there. What the budget needs does not wait for anyone: the EC2 node
agent stops the job, SageMaker's MaxRuntime bounds it.

SNS: `Publish` to the topic (the CLI's credentials need sns:Publish on it). Webhook: an HTTP POST of the JSON
message (https; http only to a loopback address; no private or link-local address literal unless
--notify-private-address, notify_target.py) from a worker with 10 s for the whole exchange, no redirect followed,
at most 64 KiB of the answer read; a failure is said (the URL's path masked), not fatal.
"""
from __future__ import annotations

import json
from typing import Callable

from trainctl.backends import backend_class
from trainctl.backends.features import NodesPublishBudget
from trainctl.state.job_store import JobRow, JobStore

TARGET_EVENT = "notify"      # recorded at launch: {"target": ..., "budget_usd": ...}
SENT_EVENT = "notified"      # one per message sent: its key
BUDGET_EVENT = "budget"      # recorded at launch: the spec's budget_usd
THRESHOLDS = (0.5, 0.8, 1.0)
TIMEOUT_S = 10  # a webhook's whole exchange, not each read
ANSWER_CAP = 64 * 1024  # bytes of a webhook's answer read at most


def remember(store: JobStore, job_id: str, target: str | None, budget_usd: float | None,
             forced: bool = False) -> None:
    """At launch: where the job's news go, and the budget (its marks; `watch` names it when it stops the job).
    `forced`: --notify-private-address was given."""
    if target:
        store.add_event(job_id, TARGET_EVENT, json.dumps({"target": target, "budget_usd": budget_usd,
                                                          **({"forced": True} if forced else {})}))
    if budget_usd:
        store.add_event(job_id, BUDGET_EVENT, json.dumps(budget_usd))


def budget_of(store: JobStore, job_id: str) -> float | None:
    found = store.events(job_id, BUDGET_EVENT)
    return float(json.loads(found[-1][1])) if found else None


def name_the_budget(store: JobStore, view, doc: dict) -> None:
    """A SageMaker job its budget's MaxRuntime stopped: its status says so (EC2's node agent says it itself)."""
    from trainctl.backends.budget import stopped_by_budget

    why = stopped_by_budget(view, budget_of(store, view.job_id))
    if why:
        doc["failure_reason"] = why


def messages(doc: dict, budget: float | None) -> list[tuple[str, str]]:
    """(key, text) of everything worth saying about the job as `watch` sees it now (the summary document)."""
    job, cost = doc["job_id"], doc.get("cost_usd")
    dollars = "" if cost is None else f", ${cost:,.4f} so far"
    ended = doc["status"] in ("Completed", "Failed", "Stopped")
    out = [] if ended else [(f"state:{doc['status']}:{doc.get('secondary_status')}",
                             f"{job}: {doc['status']} ({doc.get('secondary_status') or '-'}){dollars}")]
    out += [(f"interruption:{n}", f"{job}: Spot interruption {n}{dollars}") for n in range(1, doc["interruptions"] + 1)]
    if budget and cost is not None:
        out += [(f"budget:{round(t * 100)}", f"{job}: {round(t * 100)}% of its ${budget:g} budget spent "
                                             f"(${cost:,.4f})") for t in THRESHOLDS if cost >= t * budget]
    if ended:
        why = f": {doc['failure_reason']}" if doc.get("failure_reason") else ""
        total = "" if cost is None else f", ${cost:,.4f}"
        out.append((f"end:{doc['status']}", f"{job}: {doc['status']}{total}{why}"))
    return out


def send(target: str, subject: str, body: dict, forced: bool = False) -> None:
    """One message to an SNS topic or a webhook; raises what went wrong."""
    from trainctl.backends.notify_target import check_reach, topic_region

    region = topic_region(target)
    if region is not None:
        from trainctl.aws import clients as aws

        aws.client("sns", region).publish(TopicArn=target, Subject=subject[:100], Message=json.dumps(body))
        return
    check_reach(target, forced)  # a target stored by an older trainctl is checked again
    post(target, json.dumps(body).encode())


class NotifyError(Exception):
    pass


def post(target: str, data: bytes, deadline_s: float = TIMEOUT_S) -> None:
    """POST to the webhook from a worker thread that gets `deadline_s` in all (connecting, sending, the status
    line, the headers and a capped read of the answer): a receiver that drips a byte every few seconds would
    otherwise hold `watch` for as long as it likes, since a socket timeout counts per read. Past the deadline
    the socket is shut, which ends the worker's read at once. No redirect is followed (http.client follows
    none): a 3xx could lead anywhere check_target refuses."""
    import http.client
    import socket
    import threading
    from urllib.parse import urlsplit

    parts = urlsplit(target)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=deadline_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    box: dict = {}

    def work() -> None:
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json",
                                                           "User-Agent": "trainctl"})
            answer = conn.getresponse()
            answer.read(ANSWER_CAP)  # what the receiver says is not used: a little of it, never 3 GiB
            box["status"] = answer.status
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    worker = threading.Thread(target=work, name="trainctl-notify", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        try:
            if conn.sock is not None:
                conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        worker.join(1.0)
        conn.close()
        raise NotifyError(f"no complete answer within {deadline_s:g} s")
    conn.close()
    if "error" in box:
        raise NotifyError(f"{type(box['error']).__name__}: {box['error']}") from None
    if 300 <= box["status"] < 400:
        raise NotifyError(f"answered HTTP {box['status']}, a redirect: trainctl follows none; give the final URL")
    if box["status"] >= 400:
        raise NotifyError(f"answered HTTP {box['status']}")


class Notifier:
    """Sends a job's new messages once each; built from what launch recorded (None when nothing was asked)."""

    def __init__(self, store: JobStore, record: JobRow, target: str, budget: float | None,
                 say: Callable[[str], None], forced: bool = False):
        self.store, self.record, self.target, self.budget, self.say = store, record, target, budget, say
        self.forced = forced
        self.sent = {detail for _, detail in store.events(record.job_id, SENT_EVENT)}

    @classmethod
    def for_job(cls, store: JobStore, record: JobRow | None, say: Callable[[str], None]) -> "Notifier | None":
        if record is None:
            return None
        asked = store.events(record.job_id, TARGET_EVENT)
        if not asked:
            return None
        setting = json.loads(asked[-1][1])
        return cls(store, record, setting["target"], setting.get("budget_usd"), say, bool(setting.get("forced")))

    def look(self, doc: dict) -> None:
        """`doc`: watch's summary document of the job now."""
        for key, text in messages(doc, self.budget):
            if key in self.sent or (key.startswith("budget:") and self.target.startswith("arn:")
                                    and issubclass(backend_class(doc["platform"]), NodesPublishBudget)):
                continue  # the job's nodes publish its budget marks to its topic themselves
            body = {"job_id": doc["job_id"], "event": key, "message": text, "status": doc["status"],
                    "cost_usd": doc.get("cost_usd"), "budget_usd": self.budget, "platform": doc["platform"]}
            try:
                send(self.target, f"trainctl {text}", body, self.forced)
            except Exception as e:  # noqa: BLE001 - news that cannot be sent must not end the watch
                from trainctl.backends.notify_target import mask

                # the webhook's path is often its secret: shown masked, here and in what the error quotes
                self.say(f"warning: could not notify {mask(self.target)}: {str(e).replace(self.target, '...')}")
                return  # the next look tries again, in order
            self.sent.add(key)
            self.store.add_event(self.record.job_id, SENT_EVENT, key)
