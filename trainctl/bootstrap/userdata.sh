#!/bin/bash
# trainctl node bootstrap (EC2 user data) for job __JOB_ID__.
# No credentials here: the instance profile provides them through IMDSv2.
# TRAINCTL_ROOT, TRAINCTL_PYTHON and TRAINCTL_IMDS_ENDPOINT may be set in the environment (tests do).
set -euo pipefail
ROOT="${TRAINCTL_ROOT:-/opt/trainctl}"
mkdir -p "$ROOT"
cat > "$ROOT/config.json" <<'TRAINCTL_CONFIG'
__CONFIG__
TRAINCTL_CONFIG
# The node agent (trainctl/bootstrap/agent.py), gzip + base64 to stay well under EC2's 16 KB user data limit.
base64 -d <<'TRAINCTL_AGENT' | gunzip > "$ROOT/agent.py"
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
exec "$PY" "$ROOT/agent.py" --config "$ROOT/config.json" --root "$ROOT"
