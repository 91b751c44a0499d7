#!/usr/bin/env bash
# The GPU check of the `hf` backend (tests/gpu/check.py: review-scale-5 §5, sections S0-S9) on a machine with one
# CUDA GPU, torch and transformers, and no network. The report lands in $OUT (default ./gpu_check_out):
# gpu_check.json and gpu_check.md, rewritten after every section, and log.txt.
#
# Here, once (pure-Python packages wordbench imports beyond torch and transformers; /.whl/ is git-ignored):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl fastcore==1.14.5 tenacity==9.2.1 platformdirs==4.14.7
# Device tool call (one run, about 9 minutes; timeout_s leaves the start and the transfers room):
#   run(command="bash tests/gpu/run.sh", carry=[".whl"], timeout_s=600)
# A first try that ends in about 2 minutes: run(command="bash tests/gpu/run.sh --quick --budget-s 100", ...).
# Anywhere, without a GPU: PYTHON=.venv/bin/python bash tests/gpu/run.sh --cpu-only --quick
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
if compgen -G '.whl/*.whl' >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/wb_site .whl/*.whl \
    || exit 1
  export PYTHONPATH="/tmp/wb_site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export WORDBENCH_CACHE="${TMPDIR:-/tmp}/wordbench_gpu_check_cache"
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'
# the check stops starting sections at its --budget-s (540 s); timeout only guards against a hung kernel
timeout -k 5 570 $PY tests/gpu/check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"
