#!/usr/bin/env bash
# The node's accelerator check and the bundled scripts on a real GPU, with the device the launch gives: one run of
# at most about 6 minutes on a lent GPU machine (a fresh Ubuntu with the NVIDIA driver and a Python), everything in
# $OUT/device_check.log. It degrades instead of failing: no GPU, no torch, a torch without CUDA or no internet to
# install one, each is said in the log and the parts that need it are skipped.
#
#   OUT=/some/folder bash scripts/device_check.sh
#
# What it runs (scripts/device_check.py): the agent's check (trainctl/bootstrap/accelerator_check.py) as a
# one-GPU node's and as an 8-GPU p5en node's (which must fail in one line), then train_ddp.py (ViT-B/16) and
# train_lm.py (the 125M preset) under torchrun, launched as the EC2 agent launches them (sm_env.py's SM_*
# variables, launch_command.py's torchrun line), and once more with CUDA hiding the GPU (it must stop in one line
# instead of training on the CPU). torch is installed only where it is missing or has no CUDA, into a venv that
# keeps the system's packages.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-${1:-/tmp/trainctl-device-check}}
mkdir -p "$OUT"
LOG="$OUT/device_check.log"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
START=$(date +%s)

say "== device check $(date -u +%FT%TZ) on $(hostname)"
say "-- nvidia-smi --list-gpus"
timeout 30 nvidia-smi --list-gpus 2>&1 | tee -a "$LOG" || say "(nvidia-smi failed or is missing)"
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$LOG" || true

PY=${PYTHON:-$(command -v python3 || command -v python || true)}
if [ -z "$PY" ]; then say "no python: stop"; exit 0; fi
say "-- python: $PY ($("$PY" --version 2>&1))"

cuda_torch() {  # prints "torch <version> cuda <version> available <bool>"; fails without torch
    timeout 120 "$1" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'available', torch.cuda.is_available())" 2>>"$LOG"
}
FOUND=$(cuda_torch "$PY") && say "-- $FOUND" || say "-- torch is not importable with $PY"
NEED=""
echo "${FOUND:-}" | grep -q "available True" || NEED="torch"
timeout 120 "$PY" -c "import timm" 2>/dev/null || NEED="$NEED timm>=1.0,<2"
GPUS=$(timeout 30 nvidia-smi --list-gpus 2>/dev/null | grep -c "^GPU ")
if [ -n "$NEED" ] && [ "${GPUS:-0}" -eq 0 ]; then
    say "-- no GPU listed: nothing to install ($NEED missing)"
elif [ -n "$NEED" ]; then
    # a venv that keeps the system's packages: Ubuntu's own Python refuses pip installs (PEP 668)
    VENV=/tmp/trainctl-device-venv
    say "-- installing $NEED into $VENV (at most 200 s; needs a package index)"
    PIP=("$VENV/bin/python" -m pip install)
    # without python3-venv: the user's site-packages of this throwaway machine instead
    timeout 30 "$PY" -m venv --system-site-packages "$VENV" >>"$LOG" 2>&1 \
        || PIP=("$PY" -m pip install --user --break-system-packages)
    timeout 200 "${PIP[@]}" --quiet --retries 0 --timeout 15 $NEED >>"$LOG" 2>&1 \
        || say "   the install failed (no index reachable?): see above"
    for CANDIDATE in "$VENV/bin/python" "$PY"; do
        if [ -x "$CANDIDATE" ] && VFOUND=$(cuda_torch "$CANDIDATE") && echo "$VFOUND" | grep -q "available True"; then
            say "-- now: $CANDIDATE: $VFOUND"
            PY="$CANDIDATE"
            break
        fi
    done
fi
LEFT=$((360 - ($(date +%s) - START)))
say "-- $LEFT s left for the checks"
timeout $((LEFT > 30 ? LEFT : 30)) "$PY" scripts/device_check.py --out "$OUT" --seconds "$LEFT" 2>&1 | tee -a "$LOG"
say "== done in $(( $(date +%s) - START )) s"
exit 0
