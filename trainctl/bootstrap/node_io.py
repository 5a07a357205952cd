"""What the node agent needs from the node itself: IMDSv2, its process tree, CloudWatch Logs, and bounded
AWS clients. Standard library plus boto3 only, like the agent (trainctl/bootstrap/agent.py) that imports it.
"""
from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request

DEFAULT_IMDS = "http://169.254.169.254"
# Every AWS call of a node is bounded: a node that cannot reach AWS (no public IP and no NAT, say) must
# fail within minutes and shut itself down, not hang on botocore's defaults (60 s connect x 5 attempts).
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 10, 60, 4


def aws_session(region: str):
    """A boto3 session and a client factory whose calls give up within about a minute."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                    retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS})
    session = boto3.session.Session(region_name=region)
    return lambda service: session.client(service, config=config)


def read_secrets(client, secrets: dict[str, str]) -> dict[str, str]:
    """{env name: value} of the job's secrets, read at start from SSM (SecureString, decrypted) or Secrets
    Manager by ARN; the node role may read exactly these. The values go to the training's environment only,
    never to a log or a file."""
    out = {}
    for name, arn in secrets.items():
        if ":secretsmanager:" in arn:
            out[name] = client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]
        else:  # GetParameter takes the parameter's ARN as its Name
            out[name] = client("ssm").get_parameter(Name=arn, WithDecryption=True)["Parameter"]["Value"]
    return out


def install_requirements(code_dir: str, cache_dir: str, log) -> None:
    """`pip install -r requirements.txt` in the job's code, as SageMaker's training toolkit does before the
    script (sagemaker-training-toolkit `modules.install_requirements`), once per node and requirements: a file
    named by the requirements' sha256 in cache_dir records a success, so a restart on the node skips pip. Quiet:
    one line on success; on failure the toolkit's InstallRequirementsError, in its words
    (`errors._CalledProcessError`), with pip's error lines, and the node stops."""
    import hashlib
    import subprocess
    import sys

    path = os.path.join(code_dir, "requirements.txt")
    if not os.path.isfile(path):
        return
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    done = os.path.join(cache_dir, f"requirements-{digest[:16]}.installed")
    if os.path.exists(done):
        log(f"trainctl-agent: requirements.txt (sha256 {digest[:12]}) already installed on this node")
        return
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt"]
    started = time.time()
    proc = subprocess.run(cmd, cwd=code_dir, capture_output=True, text=True)
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()
        errors = [ln for ln in output if ln.startswith("ERROR")] or output[-5:]
        message = (f'InstallRequirementsError:\nExitCode {proc.returncode}\nErrorMessage "{" ".join(errors)[:2000]}"\n'
                   f'Command "{" ".join(cmd)}"')
        log(message)
        raise SystemExit(message)
    os.makedirs(cache_dir, exist_ok=True)
    open(done, "w").close()
    log(f"trainctl-agent: requirements.txt installed ({time.time() - started:.0f} s, sha256 {digest[:12]})")


def say(message: str) -> None:
    print(f"trainctl-agent: {message}", flush=True)


def children(pid: int) -> list[int]:
    """Direct children of a process (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The command name (field 2) may hold spaces; the parent pid follows its closing paren.
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


class Imds:
    """IMDSv2: a session token from PUT /latest/api/token, sent with every GET."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint.rstrip("/")
        self.token, self.expires = "", 0.0

    def _token(self) -> str:
        if time.time() > self.expires - 60:
            req = urllib.request.Request(f"{self.endpoint}/latest/api/token", method="PUT",
                                         headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
            with urllib.request.urlopen(req, timeout=2) as resp:
                self.token, self.expires = resp.read().decode(), time.time() + 21600
        return self.token

    def get(self, path: str) -> str | None:
        """The value, or None for 404 (e.g. no Spot notice yet)."""
        req = urllib.request.Request(f"{self.endpoint}/latest/meta-data/{path}",
                                     headers={"X-aws-ec2-metadata-token": self._token()})
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            if e.code == 401:  # token expired early (IMDS restarted): fetch a new one next time
                self.expires = 0.0
            raise


class LogShipper(threading.Thread):
    """Every line to CloudWatch Logs, batched every second; the log group is the job's, the stream this host's."""

    def __init__(self, logs, group: str, stream: str):
        super().__init__(daemon=True)
        self.logs, self.group, self.stream = logs, group, stream
        self.pending: list[dict] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        for call, kwargs in ((logs.create_log_group, {"logGroupName": group}),
                             (logs.create_log_stream, {"logGroupName": group, "logStreamName": stream})):
            try:
                call(**kwargs)
            except logs.exceptions.ResourceAlreadyExistsException:
                pass

    def add(self, line: str) -> None:
        print(line, flush=True)
        with self.lock:
            self.pending.append({"timestamp": int(time.time() * 1000), "message": line[:200_000] or " "})

    def flush(self) -> None:
        with self.lock:
            # PutLogEvents takes at most 10,000 events and 1 MiB (message bytes + 26 per event) per call.
            size, n = 0, 0
            for event in self.pending[:5000]:
                size += len(event["message"].encode()) + 26
                if size > 900_000:
                    break
                n += 1
            batch, self.pending = self.pending[:max(n, 1)], self.pending[max(n, 1):]
        if batch:
            try:
                self.logs.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=batch)
            except Exception as e:  # noqa: BLE001 - logs must never stop the training; keep them for next time
                print(f"trainctl-agent: log shipping failed: {e}", flush=True)
                with self.lock:
                    self.pending[:0] = batch

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            self.flush()
        self.flush()
