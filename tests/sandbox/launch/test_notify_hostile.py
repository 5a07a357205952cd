"""`launch --notify` against receivers that misbehave (issue 36, item 9), through the CLI against the sandbox and a
server of the test's own on 127.0.0.1: one that drips a byte at a time, one that answers 3 GiB, one that redirects;
private and link-local address literals, and another account's SNS topic."""
from __future__ import annotations

import json
import socket
import threading

from tests.support.helpers import CONFIGS, run_cli

REGION = "us-east-1"
SECRET = "hooks/T000/B000/secret-token-123"


class _Hostile:
    """A raw HTTP receiver on 127.0.0.1; `mode` decides how it answers each POST."""

    def __init__(self) -> None:
        self.mode, self.requests, self.sent, self.stop = "drip", 0, 0, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            self.requests += 1
            try:
                if self.mode == "drip":  # a header line one byte at a time, never finished (for 60 s)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    for _ in range(120):
                        if self.stop.wait(0.5):
                            return
                        conn.sendall(b"a")
                elif self.mode == "redirect":
                    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://10.255.255.1/elsewhere\r\n"
                                 b"Content-Length: 0\r\n\r\n")
                else:  # "huge": 3 GiB announced; sent until the client stops reading (256 MiB at most)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3221225472\r\n\r\n")
                    chunk = b"\0" * 65536
                    for _ in range(4096):
                        conn.sendall(chunk)
                        self.sent += len(chunk)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def _launch(sb, home, *notify: str, dry_run: bool = False):
    return run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform",
                    "ec2", "--layout", "g5.xlarge:1:on-demand", "--dry-run" if dry_run else "--yes", "--notify",
                    *notify], home, env=sb.env)


def test_a_dripping_a_huge_and_a_redirecting_webhook_hold_watch_for_a_bounded_time(sandbox_env, tmp_path):
    sb, home, server = sandbox_env, tmp_path / "home", _Hostile()
    try:
        launched = _launch(sb, home, f"http://127.0.0.1:{server.port}/{SECRET}")
        assert launched.returncode == 0, launched.stderr
        job = json.loads(launched.stdout)["job_id"]
        masked = f"http://127.0.0.1:{server.port}/..."

        watched = run_cli(["watch", job, "--once"], home, env=sb.env, timeout=40)  # today's: held for 60 s
        assert watched.returncode == 0, watched.stderr
        assert f"could not notify {masked}: no complete answer within 10 s" in watched.stderr, watched.stderr

        server.mode = "redirect"
        watched = run_cli(["watch", job, "--once"], home, env=sb.env, timeout=40)
        assert f"could not notify {masked}: answered HTTP 302, a redirect: trainctl follows none" in watched.stderr
        assert server.requests == 2  # nothing went to 10.255.255.1

        server.mode = "huge"
        watched = run_cli(["watch", job, "--once"], home, env=sb.env, timeout=40)
        assert "could not notify" not in watched.stderr, watched.stderr
        assert server.sent < 32 << 20, server.sent  # a capped read: the rest of the 3 GiB was never taken
        for out in (launched, watched):
            assert SECRET not in out.stdout + out.stderr
    finally:
        server.close()


def test_private_and_link_local_literals_are_refused_unless_meant_and_a_foreign_topic_is_said(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    out = _launch(sb, home, f"https://169.254.169.254/{SECRET}", dry_run=True)  # (the metadata service's)
    assert out.returncode != 0 and "169.254.169.254 is a private or link-local address" in out.stderr, out.stderr
    assert SECRET not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    meant = _launch(sb, home, f"https://10.1.2.3/{SECRET}", "--notify-private-address", dry_run=True)
    assert meant.returncode == 0, meant.stderr

    theirs = "arn:aws:sns:us-east-1:999988887777:their-topic"
    launched = _launch(sb, home, theirs)
    assert launched.returncode == 0, launched.stderr
    said = " ".join(launched.stderr.split())  # the launch's lines wrap at the terminal's width
    assert f"--notify {theirs} is a topic of account 999988887777, not of this one (123456789012)" in said, said
