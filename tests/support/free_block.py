"""A private /16 that no interface, route or other test run on this machine uses, for tests that build a bridge
and network namespaces: a fixed block failed once on a shared machine where it was taken. The block is held by an
advisory lock file for as long as the process keeps the returned handle, so two runs never pick the same one."""
from __future__ import annotations

import fcntl
import ipaddress
import os
import subprocess
from typing import IO

LOCKS = "/tmp/trainctl-test-net-10.{}.lock"


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine has an address in or a route to (the default route aside)."""
    out: list[ipaddress.IPv4Network] = []
    for args in (["-4", "-o", "addr", "show"], ["-4", "route", "show"]):
        try:
            text = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for word in text.split():
            if "/" in word or word.count(".") == 3:
                try:
                    out.append(ipaddress.ip_network(word, strict=False))
                except ValueError:
                    pass
    return out


def free_block(first: int | None = None) -> tuple[int, IO]:
    """(X of a free 10.X.0.0/16, the open lock file that holds it): scanning from a place that depends on the pid,
    so that concurrent runs start apart, and skipping blocks in use here or locked by another run."""
    used = used_networks()
    start = 100 + (os.getpid() % 150) if first is None else first
    for i in range(150):
        x = 100 + (start - 100 + i) % 150
        block = ipaddress.ip_network(f"10.{x}.0.0/16")
        if any(block.overlaps(n) for n in used):
            continue
        handle = open(LOCKS.format(x), "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return x, handle
    raise RuntimeError("no free 10.X.0.0/16 block for the test network")
