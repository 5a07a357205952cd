#!/bin/bash
# trainctl node bootstrap (EC2 user data) for job __JOB_ID__.
# No credentials here: the instance profile provides them through IMDSv2.
# TRAINCTL_ROOT, TRAINCTL_PYTHON and TRAINCTL_IMDS_ENDPOINT may be set in the environment (tests do).
set -euo pipefail
# A node that cannot do its work must not bill silently: if this script fails before the agent runs
# (no Python, no boto3 and no network to install it), or the agent dies without its own shutdown, the
# node shuts down (the launch template makes that a termination). TRAINCTL_NO_SHUTDOWN=1 keeps it (tests).
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
# The node agent (trainctl/bootstrap/agent.py + node_io.py as the package __NODE_PACKAGE__), tar.gz + base64
# to stay well under EC2's 16 KB user data limit.
base64 -d <<'TRAINCTL_AGENT' | tar -xz -C "$ROOT"
__AGENT__
TRAINCTL_AGENT
PY="${TRAINCTL_PYTHON:-}"
if [ -z "$PY" ]; then
  # The Deep Learning AMIs' framework environments first (Neuron or PyTorch), then the system Python.
  for candidate in __PYTHONS__ python3; do
    if [ -x "$candidate" ] || command -v "$candidate" >/dev/null 2>&1; then PY="$candidate"; break; fi
  done
fi
"$PY" -c 'import boto3' 2>/dev/null || "$PY" -m pip install --quiet boto3
cd "$ROOT"
"$PY" -m __NODE_PACKAGE__.agent --config "$ROOT/config.json" --root "$ROOT"
