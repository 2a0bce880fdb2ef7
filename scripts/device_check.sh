#!/usr/bin/env bash
# The device check for a GPU machine, in one go (a few minutes): a fresh venv with the `gpu` extra (faiss-gpu), then
# scripts/device_check.py on CUDA: encoders, the prefix-reuse verifier and the reader on tiny random models, FAISS GPU
# vs CPU, bf16 vs fp32, the verifier's time per episode. Results: $OUT/device_check.json (default reports/benchmarks).
#   scripts/device_check.sh                  # builds .venv-gpu once, reuses it after
#   VENV=.venv scripts/device_check.sh       # an existing env that already has the gpu extra
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-gpu}
OUT=${OUT:-reports/benchmarks}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
"$VENV/bin/python" -m pip install --quiet -e ".[gpu,dev]"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # tiny models only: nothing is downloaded
"$VENV/bin/python" scripts/device_check.py --device cuda --out "$OUT"
