#!/usr/bin/env bash
# One lent-GPU session (the `device` tool's H200): install hetero without the network, then run
# the GPU checks of issues 5-7 and collect their output under $OUT. Run from the repo root:
#     bash benchmarks/gpu_session.sh            (carry .whl: setuptools/wheel wheels for Python 3.12)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
{ date -u; nvidia-smi; python3 --version; } > "$OUT/machine.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --target /tmp/st .whl/*.whl && export PYTHONPATH=/tmp/st
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . > /tmp/install.log 2>&1 \
    || { cat /tmp/install.log; exit 1; }
export HETERO_STATE_DIR=$(mktemp -d)
python3 -m hetero.cli.main devices --all 2>&1 | tee "$OUT/devices.txt"
# issue 5: the checklist (corpus vs NumPy, sm_90 bundle without NVRTC, torch zero-copy, triad,
# launch overhead, a real 700, NVML fields)
timeout 240 python3 -m benchmarks.gpu_check 2>&1 | tee "$OUT/gpu_check.log"
if [ "${SKIP_EXAMPLES:-0}" != 1 ]; then
# issue 6: torch state cuda:0 -> cpu after a sticky fault; hetero-kernel digits cuda:0 -> another device
timeout 45 python3 examples/train_digits_torch.py --device cuda:0 --inject 'cuda:0:alloc:nth=40:sticky' 2>&1 \
    | tail -25 | tee "$OUT/torch_sticky.log"
timeout 45 python3 examples/train_digits.py --device cuda:0 --inject 'cuda:0:launch:nth=300:lost' --compare 2>&1 \
    | grep -v '^  step' | tail -15 | tee "$OUT/digits_cuda.log"
fi
[ "${SKIP_SPLIT:-0}" = 1 ] && exit 0
# issue 7: split cuda:0 + cpu vs cuda:0 alone, low arithmetic intensity (triad)
timeout 60 python3 -m benchmarks.split --devices cuda:0 cpu --source cuda:0 2>&1 | tee "$OUT/split.log"
cp benchmarks/results/split.json "$OUT/split_gpu.json" 2>/dev/null
exit 0
