#!/usr/bin/env bash
# Idempotent set-up of attnbench's virtual environment (.venv at the repository root).
#
#   bash tools/setup.sh              # create or update .venv; a no-op when nothing changed
#   bash tools/setup.sh --cuda-ops   # build mmcv's CUDA ops even without a GPU here (a login node whose
#                                    # compute nodes have GPUs): needs nvcc; TORCH_CUDA_ARCH_LIST picks the
#                                    # GPU generations (default "7.5;8.0;8.6;9.0")
#
# Stack (see pyproject.toml for the pins): torch 2.14.1 + torchvision 0.29.1, mmengine 0.10.7,
# mmcv 2.1.0 with compiled ops, mmdet 3.3.0, mmsegmentation 1.2.2. mmcv 2.1.0 has no wheel for
# this torch, so it is compiled once from its sdist with -std=c++20 (torch 2.14's headers need it)
# and the wheel is cached in $ATTNBENCH_CACHE (default ~/.cache/attnbench): a second set-up on
# the same machine installs it in seconds instead of compiling for ~10 minutes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTNBENCH_VENV:-$ROOT/.venv}"
CACHE="${ATTNBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/attnbench}"
PY="$VENV/bin/python"
MMCV_VERSION=2.1.0
TORCH_PINS=(torch==2.14.1 torchvision==0.29.1)

log() { printf '[setup] %s\n' "$*" >&2; }

stamp_of() { cat "$ROOT/pyproject.toml" "$ROOT/tools/setup.sh" "$ROOT/tools/constraints.txt" | sha256sum | cut -c1-16; }
CUDA_OPS=auto
case "${1:-}" in
    "") ;;
    --cuda-ops) CUDA_OPS=yes ;;
    *) echo "usage: bash tools/setup.sh [--cuda-ops]" >&2; exit 2 ;;
esac
if [[ $CUDA_OPS == yes ]] && ! command -v nvcc > /dev/null; then
    log "--cuda-ops needs the CUDA compiler (nvcc) on PATH, which this machine lacks: install the CUDA toolkit" \
        "matching torch's CUDA, or run the set-up on a GPU node"
    exit 2
fi
STAMP="$(stamp_of)-$CUDA_OPS"
if [[ -f "$VENV/.attnbench-setup" && "$(cat "$VENV/.attnbench-setup")" == "$STAMP" ]]; then
    exit 0
fi

if [[ ! -x "$PY" ]]; then
    log "creating $VENV"
    python3.11 -m venv "$VENV"
fi
PIP=("$PY" -m pip install --disable-pip-version-check -q -c "$ROOT/tools/constraints.txt")

log "installing torch and build tools"
"${PIP[@]}" "setuptools>=77,<82" wheel ninja "${TORCH_PINS[@]}"

# One cached wheel per torch version and device kind (CPU-only or with CUDA ops).
DEVICE="$("$PY" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')"
if [[ $CUDA_OPS == yes ]]; then
    DEVICE=cuda
    export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-7.5;8.0;8.6;9.0}"
fi
TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
WHEEL_DIR="$CACHE/wheels/mmcv-$MMCV_VERSION-torch$TORCH_VERSION-$DEVICE"
WHEEL="$(ls "$WHEEL_DIR"/mmcv-"$MMCV_VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [[ -z "$WHEEL" ]]; then
    log "building mmcv $MMCV_VERSION with ops for torch $TORCH_VERSION ($DEVICE); ~10 min on 2 cores"
    BUILD="$(mktemp -d)"
    trap 'rm -rf "$BUILD"' EXIT
    "$PY" -m pip download -q --no-deps --no-binary :all: -d "$BUILD" "mmcv==$MMCV_VERSION"
    tar -xzf "$BUILD"/mmcv-"$MMCV_VERSION".tar.gz -C "$BUILD"
    SRC="$BUILD/mmcv-$MMCV_VERSION"
    sed -i 's/-std=c++17/-std=c++20/g; s/-std=c++14/-std=c++20/g' "$SRC/setup.py"
    mkdir -p "$WHEEL_DIR"
    MMCV_WITH_OPS=1 FORCE_CUDA="$([[ $DEVICE == cuda ]] && echo 1 || echo 0)" MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
        "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$WHEEL_DIR" "$SRC"
    WHEEL="$(ls "$WHEEL_DIR"/mmcv-"$MMCV_VERSION"-*.whl | head -1)"
fi

log "installing attnbench and its pinned dependencies"
"${PIP[@]}" "$WHEEL" -e "$ROOT[mm,bench,test]"

"$PY" - <<'PY'
import mmcv.ops, mmdet, mmseg  # noqa: F401  the compiled ops must import
from mmcv.ops import nms
import torch
boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.]])
nms(boxes, torch.tensor([0.9, 0.8]), 0.5)
PY
echo "$STAMP" > "$VENV/.attnbench-setup"
if [[ $DEVICE == cuda ]]; then
    log "mmcv's ops built for CPU and CUDA${TORCH_CUDA_ARCH_LIST:+ (architectures $TORCH_CUDA_ARCH_LIST)}"
else
    log "mmcv's ops built for CPU only (no GPU here): GPU nodes using this environment run mmcv's detection" \
        "ops on the CPU; set up there, or with --cuda-ops where nvcc is installed"
fi
log "ready: $VENV"
