#!/usr/bin/env bash
# One-shot GPU check of the `hf` backend (prepared without a GPU; never run on one yet). On the lent GPU machine,
# from the repository root:   bash tests/gpu/run_gpu_check.sh      (about 3-6 minutes on an H100/H200)
#  1. `pytest -m gpu tests/test_gpu.py`: tiny random Llama and Gemma 3 models, CPU fp32 against CUDA fp32, bf16 and
#     fp16 weights (scores, decisions after the fp32 re-check, top-k, engine == model.generate, peak memory);
#     JUnit XML in $OUT/gpu_tests.xml.
#  2. tests/gpu/throughput.py: log-likelihood throughput of wordbench's `hf` backend (prefix sharing, batch auto)
#     against lm-eval's HFLM on the same GPU and model; JSON in $OUT/lm_benchmark_cuda.json for a template to turn
#     into figures/lm_benchmark_cuda.*. lm-eval must be importable there (carry it like gpu-check's .whl/site).
# Needs torch with CUDA, transformers, pytest; no network (HF_HUB_OFFLINE). Results land in $OUT (default ./gpu_out).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 300 $PY -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider --junitxml="$OUT/gpu_tests.xml" \
  2>&1 | tee "$OUT/gpu_tests.txt"
timeout 240 $PY tests/gpu/throughput.py "$OUT/lm_benchmark_cuda.json" 2>&1 | tee "$OUT/throughput.txt"
