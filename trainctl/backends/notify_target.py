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


def _private(host: str) -> bool:
    """An address literal on a private, link-local, shared, reserved or unspecified network (not loopback): a
    webhook there reaches the machine's own network (a metadata service at 169.254.169.254, a router), not a
    service on the internet."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        import socket

        try:  # the legacy IPv4 forms the resolver also takes: 167772161, 0x0a000001, 10.1 (all 10.0.0.x)
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return False
    return not ip.is_loopback and (ip.is_private or ip.is_link_local or ip.is_reserved or ip.is_unspecified
                                   or ip.is_multicast or not ip.is_global)


def check_reach(text: str, forced: bool = False) -> str:
    """A webhook whose host is a private or link-local address literal is refused unless `forced`
    (--notify-private-address): trainctl's watch would POST the job's news inside this machine's network."""
    parts = urlsplit(text)
    if not text.startswith("arn:") and parts.hostname and _private(parts.hostname) and not forced:
        raise UsageError(f"--notify {mask(text)}: {parts.hostname} is a private or link-local address; give a "
                         "public https webhook, or add --notify-private-address if this network is meant")
    return text


def mask(target: str) -> str:
    """The target as messages show it: a webhook's path and query hidden (they are often its secret)."""
    if target.startswith("arn:"):
        return target
    parts = urlsplit(target)
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}/..." if (parts.path.strip("/") or parts.query) else f"{parts.scheme}://{host}"


def topic_account(target: str) -> str | None:
    """The account of an SNS topic ARN (None for a webhook)."""
    return target.split(":")[4] if target.startswith("arn:") else None


def check_target(text: str) -> str:
    """The target as given, or a UsageError saying what is wrong and what to give."""
    text = str(text).strip()
    if text.startswith("arn:"):
        if not TOPIC_ARN.fullmatch(text):
            raise UsageError(f"--notify {text!r}: not an SNS topic ARN; {HOW}")
        return text
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UsageError(f"--notify {mask(text)!r}: {HOW}")
    if parts.username or parts.password:
        raise UsageError(f"--notify: the webhook URL carries a user name or password, which trainctl would store "
                         "and show; give a URL without them")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise UsageError(f"--notify {mask(text)!r}: a webhook must be https (plain http only to a loopback address "
                         "such as 127.0.0.1, on this machine)")
    return text


def topic_region(target: str) -> str | None:
    """The region of an SNS topic ARN (None for a webhook)."""
    return target.split(":")[3] if target.startswith("arn:") else None
