"""Where `launch --notify` sends a job's news: an SNS topic ARN, or a webhook URL (docs/cost-model.md).

A webhook must be https: its messages carry the job's dollars and status. Plain http is accepted only to a
loopback address (127.0.0.0/8, ::1), a receiver on the same machine, which nothing on the network can read;
a host name (even `localhost`) is not taken as loopback, since a name can resolve anywhere. A URL carrying a
user name or password is refused: the URL is stored in trainctl's state database and shown by `ls`.
Pure: standard library only (the CLI checks it while parsing the launch's flags).
"""
from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from trainctl.errors import UsageError

# SNS topic ARN: arn:PARTITION:sns:REGION:ACCOUNT:NAME (topic names: 1-256 of letters, digits, - and _, a FIFO
# topic ending in .fifo; SNS API Reference, CreateTopic)
TOPIC_ARN = re.compile(r"arn:aws(-[a-z]+)*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,251}(\.fifo)?")
HOW = "give an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC) or an https:// webhook URL"


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(text: str) -> str:
    """The target as given, or a UsageError saying what is wrong and what to give."""
    text = str(text).strip()
    if text.startswith("arn:"):
        if not TOPIC_ARN.fullmatch(text):
            raise UsageError(f"--notify {text!r}: not an SNS topic ARN; {HOW}")
        return text
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UsageError(f"--notify {text!r}: {HOW}")
    if parts.username or parts.password:
        raise UsageError(f"--notify: the webhook URL carries a user name or password, which trainctl would store "
                         "and show; give a URL without them")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise UsageError(f"--notify {text!r}: a webhook must be https (plain http only to a loopback address "
                         "such as 127.0.0.1, on this machine)")
    return text


def topic_region(target: str) -> str | None:
    """The region of an SNS topic ARN (None for a webhook)."""
    return target.split(":")[3] if target.startswith("arn:") else None
