#!/usr/bin/env bash
# Opt-in check of train_neuron.py through torch_xla on the CPU (`make test-xla`).
#
# Why a separate environment: torch_xla 2.9.0 only works with torch 2.9.0 exactly, while the
# main .venv carries torch 2.14.1. The first run downloads about 3.6 GB (torch 2.9.0 is a CUDA
# build on PyPI) into .xla-venv/ (git-ignored); later runs reuse it.
#
# Why one process: XLA collectives between processes do not work on the CPU PJRT client
# (pytorch/xla#5005), so the multi-rank part of the Neuron script is only exercisable on
# Trainium; the shared code (checkpoints, data, signals, metrics) is covered by the main suite.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.xla-venv
PY=${PYTHON:-python3}

if [ ! -f "$VENV/.installed" ]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # torchvision 0.24.0 is the release built against torch 2.9.0; timm imports torchvision.
    "$VENV/bin/python" -m pip install -q \
        torch==2.9.0 torchvision==0.24.0 torch-xla==2.9.0 \
        'timm>=1.0' numpy pytest pytest-timeout
    touch "$VENV/.installed"
fi

if [ "${1:-}" = "--install-only" ]; then
    exit 0
fi

export PJRT_DEVICE=CPU
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests_xla "$@"
