#!/bin/bash
# trainctl node bootstrap (EC2 user data) for job __JOB_ID__.
# No credentials here: the instance profile provides them through IMDSv2.
# TRAINCTL_ROOT, TRAINCTL_PYTHON and TRAINCTL_IMDS_ENDPOINT may be set in the environment (tests do).
set -euo pipefail
# A node that cannot do its work must not bill silently: if this script fails before the agent runs
# (no Python, no boto3 and no network to install it, no agent from S3), or the agent dies without its own
# shutdown, the node shuts down (the launch template makes that a termination). TRAINCTL_NO_SHUTDOWN=1 keeps
# it (tests).
finish() {
  rc=$?
  if [ "$rc" != 0 ] && [ -z "${TRAINCTL_NO_SHUTDOWN:-}" ]; then
    echo "trainctl-bootstrap: failed with exit code $rc; shutting this node down" >&2
    shutdown -h now || true
  fi
}
trap finish EXIT
ROOT="${TRAINCTL_ROOT:-/opt/trainctl}"
mkdir -p "$ROOT"
cat > "$ROOT/config.json" <<'TRAINCTL_CONFIG'
__CONFIG__
TRAINCTL_CONFIG
PY="${TRAINCTL_PYTHON:-}"
if [ -z "$PY" ]; then
  # The Deep Learning AMIs' framework environments first (Neuron or PyTorch), then the system Python.
  for candidate in __PYTHONS__ python3; do
    if [ -x "$candidate" ] || command -v "$candidate" >/dev/null 2>&1; then PY="$candidate"; break; fi
  done
fi
"$PY" -c 'import boto3' 2>/dev/null || "$PY" -m pip install --quiet boto3
# The node agent (the package __NODE_PACKAGE__, tar.gz) is in the job bucket, not here: EC2's user data holds
# 16 KB. Fetched with the instance profile, bounded like every call of the agent (node_io.aws_session), and
# run only when its sha256 is the one the launch wrote. A failure exits non-zero: the trap shuts the node down.
"$PY" - "$ROOT/config.json" "$ROOT" <<'TRAINCTL_LOADER'
import hashlib, io, json, sys, tarfile
import boto3
from botocore.config import Config
cfg = json.load(open(sys.argv[1]))
config = Config(connect_timeout=10, read_timeout=60, retries={"mode": "standard", "max_attempts": 4})
s3 = boto3.session.Session(region_name=cfg["region"]).client("s3", config=config)
owner = {"ExpectedBucketOwner": cfg["bucket_owner"]} if cfg.get("bucket_owner") else {}
where = f"s3://{cfg['bucket']}/{cfg['agent_key']}"
try:
    body = s3.get_object(Bucket=cfg["bucket"], Key=cfg["agent_key"], **owner)["Body"].read()
except Exception as e:
    sys.exit(f"trainctl-bootstrap: cannot download the node agent {where}: {e}")
got = hashlib.sha256(body).hexdigest()
if got != cfg["agent_sha256"]:
    sys.exit(f"trainctl-bootstrap: {where} has sha256 {got[:12]}, not the launch's {cfg['agent_sha256'][:12]}")
with tarfile.open(fileobj=io.BytesIO(body)) as tar:
    try:
        tar.extractall(sys.argv[2], filter="data")  # no absolute paths, no links out of the folder
    except TypeError:  # a Python from before extraction filters (< 3.10.12): check the names ourselves
        if any(m.name.startswith("/") or ".." in m.name.split("/") or m.islnk() or m.issym() for m in tar):
            sys.exit(f"trainctl-bootstrap: {where} has unsafe paths")
        tar.extractall(sys.argv[2])
print(f"trainctl-bootstrap: node agent {where} -> {sys.argv[2]}", file=sys.stderr)
TRAINCTL_LOADER
cd "$ROOT"
"$PY" -m __NODE_PACKAGE__.agent --config "$ROOT/config.json" --root "$ROOT"
