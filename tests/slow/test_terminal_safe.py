"""Text from AWS or a job never drives the terminal: escape sequences and control characters
are stripped before printing, and such text is printed as plain text, never as rich markup."""
from __future__ import annotations

import time

from tests.support.helpers import run_cli
from trainctl.naming.bucket import status_key
from trainctl.backends.ec2 import log_group
from trainctl.text.safe import clean

HOSTILE = ("step 1 \x1b[2J\x1b[H cleared \x1b]52;c;ZWNobyBwd25lZA==\x07 clipboard \x1b]0;title\x1b\\ title "
           "\x9b31m c1-csi \x1bP dcs \x1b\\ \r overwrite \u202e reversed [/] [bold]not markup[/bold] \x00\x07\x08end")


def test_clean_strips_every_kind_of_sequence_and_control_but_keeps_text():
    out = clean(HOSTILE)
    assert not any(ord(c) < 32 and c not in "\t\n" or 0x7f <= ord(c) <= 0x9f for c in out)
    assert "\u202e" not in out and "ZWNobyBwd25lZA" not in out and "title" in out  # OSC payload gone, text kept
    assert "[/] [bold]not markup[/bold]" in out and out.endswith("end")
    assert clean("a\tb\nc") == "a\tb\nc" and clean("a\nb", one_line=True) == "a b"
    assert clean(None) == ""


def test_logs_and_watch_print_hostile_job_text_safely(launched):
    sb, backend, out = launched
    cw = sb.client("logs")
    host = out["instance_ids"][0]
    # the node's agent made its group and stream when it checked in (the sandbox does it for a reachable node)
    streams = cw.describe_log_streams(logGroupName=log_group("job-1"))["logStreams"]
    assert host in {s["logStreamName"] for s in streams}
    cw.put_log_events(logGroupName=log_group("job-1"), logStreamName=host,
                      logEvents=[{"timestamp": int(time.time() * 1000), "message": HOSTILE}])
    # a failure reason a job controls (the EC2 nodes write it), with markup that does not close
    sb.client("s3").put_object(Bucket="trainctl-123456789012-us-east-1", Key=status_key("job-1", "failed"),
                               Body=f"torchrun exited 1: {HOSTILE}".encode())
    for args in (["logs", "job-1", "--platform", "ec2"], ["watch", "job-1", "--once", "--platform", "ec2"]):
        proc = run_cli(args, sb.state_dir / "home", env=sb.env)
        text = proc.stdout + proc.stderr
        assert "MarkupError" not in text and "Traceback" not in text, text
        assert "\x1b" not in text and "\x9b" not in text and "\r" not in text and "\x07" not in text, args
        words = " ".join(text.split())  # the table wraps long cells
        assert "[/] [bold]not markup[/bold]" in words, (args, text)
