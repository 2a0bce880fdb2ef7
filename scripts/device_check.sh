#!/usr/bin/env bash
# The device check for a lent GPU machine that has no network: scripts/device_check.py with the machine's own python3
# (torch, transformers, timm, pandas, scipy, scikit-learn already there; no venv is built, nothing is downloaded) on a
# plain checkout: encoders, the prefix-reuse verifier and the reader on tiny random models, bf16 vs fp32, FAISS GPU vs
# CPU where faiss is importable, the curate stage's VLM anchor filter. Results: $OUT/device_check.json.
#
#   scripts/device_check.sh wheels [DIR]   # on a networked machine: download the wheels to carry into DIR (.whl)
#   scripts/device_check.sh [DIR]          # on the GPU machine: install the carried wheels of DIR (if given), run
#
# open_clip is the one package the check uses that a stock GPU machine lacks; its wheels (open_clip_torch, ftfy,
# wcwidth at the versions of constraints.txt, about 2.5 MB together) are installed with
# `pip install --no-index --no-deps --target $SITE` and put on PYTHONPATH. Without them the open_clip check is skipped
# with a note and every other check still runs.
# Environment: PYTHON (python3), OUT (reports/benchmarks), DEVICE (cuda; cpu checks the script on any machine),
# SITE (where the wheels are installed: ${TMPDIR:-/tmp}/polarcatalog-device-site); for `wheels`, BOX_PYTHON (3.12) and
# BOX_PLATFORM (x86_64): the GPU machine's Python and processor, since wcwidth's wheel is a compiled one.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-reports/benchmarks}
DEVICE=${DEVICE:-cuda}
SITE=${SITE:-${TMPDIR:-/tmp}/polarcatalog-device-site}
CARRIED="open_clip_torch|ftfy|wcwidth"  # open_clip and what it needs beyond the machine's stock packages

if [ "${1:-}" = wheels ]; then
  dest=${2:-.whl}
  pins=$(grep -iE "^($CARRIED)==" constraints.txt)
  [ "$(wc -l <<<"$pins")" -eq 3 ] || { echo "constraints.txt lacks a pin of one of: ${CARRIED//|/, }" >&2; exit 2; }
  # For the GPU machine's Python and processor, not this machine's; --no-deps: the rest is already there.
  platforms=()
  for tag in manylinux_2_28 manylinux_2_17 manylinux2014; do platforms+=(--platform "${tag}_${BOX_PLATFORM:-x86_64}"); done
  # shellcheck disable=SC2086
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "${BOX_PYTHON:-3.12}" \
    --implementation cp "${platforms[@]}" -d "$dest" $pins
  ls -l "$dest"
  echo "carry $dest with the checkout; on the GPU machine: scripts/device_check.sh $dest"
  exit 0
fi

wheels=${1:-}
if [ -n "$wheels" ]; then
  compgen -G "$wheels/*.whl" >/dev/null || { echo "no .whl files in $wheels (scripts/device_check.sh wheels $wheels makes them)" >&2; exit 2; }
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --upgrade --find-links "$wheels" \
    --target "$SITE" "$wheels"/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PYTHON" -c 'import torch, transformers' 2>/dev/null || { echo "$PYTHON has no torch or transformers: set PYTHON to the machine's PyTorch python" >&2; exit 2; }
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  echo "nvidia-smi: not found"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # tiny models only: nothing is downloaded
"$PYTHON" scripts/device_check.py --device "$DEVICE" --out "$OUT"
