#!/usr/bin/env bash
# The GPU check, for a machine with a CUDA GPU: under 10 minutes, one results folder to commit.
#
#   bash tools/gpu_check.sh                  # -> results/gpu-<device>/ (e.g. results/gpu-h200/)
#   OUT=results/gpu-a100-run2 bash tools/gpu_check.sh
#
# 1. attention_{fp32,fp16}_100x168.md: attnbench's generalized attention against mmcv's, forward and
#    backward, for 1111, 0010 and 0110 at 100x168 (conv4 of an 800x1333 image), time and added memory
#    (tools/benchmark_attention.py);
# 2. training_step.md: one full-scale Faster R-CNN R-50-FPN training step (800x1333, 2 images, fp32):
#    the baseline, 1111 and 0010+deformable, and mmcv's 1111, time and peak memory
#    (tools/benchmark_training_step.py; without mmcv's CUDA ops the detector rows fall back to the
#    backbone and neck, and the table says so);
# 3. cost-card/: the cost card of every mechanism at the full-scale stage shapes (conv3 to conv5 of an
#    800x1333 image and of a 512x1024 crop) and its growth on square maps, fp32 forward and backward, time
#    and peak memory (tools/cost_card.py; cut short, its card.csv keeps the rows done);
# 4. env.txt: the GPU, driver, torch, mmcv and the commit.
# Each step has a time limit, so the whole stays under 10 minutes; a step cut short leaves what it wrote.
# Without a CUDA GPU it says so, writes nothing and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}

if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    echo "gpu_check: no CUDA GPU on this machine (torch.cuda.is_available() is False): nothing run, nothing written"
    exit 0
fi
DEVICE_NAME=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name().split()[-1].lower())')
OUT=${OUT:-results/gpu-$DEVICE_NAME}
mkdir -p "$OUT"
step() {  # step SECONDS NAME COMMAND...: run with a limit, say how it went
    local limit=$1 name=$2
    shift 2
    local start=$SECONDS
    if timeout "$limit" "$@"; then
        echo "gpu_check: $name done in $((SECONDS - start)) s"
    else
        echo "gpu_check: $name stopped (exit $?) after $((SECONDS - start)) s; what it wrote is kept"
    fi
}

{
    date -u +%FT%TZ
    git rev-parse --short HEAD 2> /dev/null || true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null || true
    "$PYTHON" -c 'import torch, mmcv; print("torch", torch.__version__, "cuda", torch.version.cuda, "mmcv", mmcv.__version__)'
    "$PYTHON" -c 'import mmcv.ops' 2> /dev/null && echo "mmcv ops: compiled" || echo "mmcv ops: none (Python files only)"
} > "$OUT/env.txt"
for precision in fp32 fp16; do
    step 100 "attention $precision" "$PYTHON" tools/benchmark_attention.py --device cuda --size 100 168 \
        --factors 1111,0010,0110 --amp "$precision" --repeats 10 > "$OUT/attention_${precision}_100x168.md"
done
step 240 "training step" "$PYTHON" tools/benchmark_training_step.py --device cuda --models det \
    --variants 1111,0010+deformable --mmcv-variants 1111 --precisions fp32 --out "$OUT/training_step.md"
step 120 "cost card" "$PYTHON" tools/cost_card.py --device cuda --shapes full --repeats 5 --out "$OUT/cost-card"
echo "gpu_check: results in $OUT (commit them with the note of what ran)"
