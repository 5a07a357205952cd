"""An EC2 node agent (trainctl/bootstrap/agent.py) run in this process against the sandbox: a fake IMDSv2 per
node, the job's bucket, code tarball and a tagged instance standing for the node."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import tarfile
import threading
from pathlib import Path

from trainctl.bootstrap.agent import Agent
from trainctl.bootstrap.node_io import Imds

BUCKET, REGION = "trainctl-123456789012-us-east-1", "us-east-1"


class FakeImds:
    """IMDSv2 as one node sees it: a token, its instance id and IP, and (once `notice` is set) a Spot notice."""

    def __init__(self, instance_id: str, ip: str):
        values = {"instance-id": instance_id, "local-ipv4": ip}
        self.notice = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                self._answer(200, b"token")

            def do_GET(self):  # noqa: N802
                key = self.path.removeprefix("/latest/meta-data/")
                if key == "spot/instance-action" and outer.notice.is_set():
                    return self._answer(200, b'{"action": "terminate", "time": "2026-01-01T00:00:00Z"}')
                value = values.get(key)
                self._answer(200, value.encode()) if value else self._answer(404, b"")

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def code_tarball(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def node_config(job: str, **more) -> dict:
    return {"job_id": job, "region": REGION, "bucket": BUCKET, "code_key": f"{job}/code/sourcedir.tar.gz",
            "script": "train.py", "args": [], "nnodes": 1, "nproc_per_node": 1, "accelerator": "gpu", **more}


def make_agent(sb, root: Path, job: str, imds: FakeImds, **cfg) -> Agent:
    s3 = sb.client("s3")
    if not any(b["Name"] == BUCKET for b in s3.list_buckets()["Buckets"]):
        s3.create_bucket(Bucket=BUCKET)
    root.mkdir(parents=True, exist_ok=True)
    return Agent(node_config(job, **cfg), str(root), Imds(imds.endpoint))


def checkpoint_file(directory: Path, step: int, size: int = 1024) -> Path:
    """A file named the way the entrypoints name whole-state checkpoints (ckpt-<step>-<sha256[:16]>.pt)."""
    data = hashlib.sha256(f"step {step}".encode()).digest() * (size // 32)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"ckpt-{step:010d}-{hashlib.sha256(data).hexdigest()[:16]}.pt"
    path.write_bytes(data)
    return path


def disk_bytes(directory: Path) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, files in os.walk(directory) for f in files)


def s3_keys(sb, prefix: str) -> list[str]:
    page = sb.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in page.get("Contents", []))


def upload_agent(s3, bucket: str = BUCKET) -> dict[str, str]:
    """The node agent in `bucket` as a launch puts it there (the user data's loader downloads it): the
    config's {agent_key, agent_sha256}."""
    from trainctl.bootstrap import agent_archive
    from trainctl.naming.bucket import agent_key

    data = agent_archive()
    sha256 = hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=bucket, Key=agent_key(sha256), Body=data)
    return {"agent_key": agent_key(sha256), "agent_sha256": sha256}
