#!/usr/bin/env bash
# One lent-GPU session (the `device` tool's H100/H200), issue 50: every door of hetero on cuda:0 in
# one call of at most ~8 minutes. Each part runs under its own `timeout`, writes under $OUT/<part>/
# and adds a line to $OUT/summary.txt: part, PASS / FAIL / SKIP (with the reason), seconds.
#
#   a corpus    benchmarks.gpu_check: the kernel corpus vs NumPy, the sm_90 bundle, torch zero-copy,
#               triad, launch overhead, copies, a real 700 (issues 5, 19)
#   b arrayapi  array-api-tests on cuda:0, the project's --max-examples and tests/array_api_xfails.txt
#   c arrays    x + y (1 Ki), a*b + c*d and x.sum() (64 Mi f32), matmul 4096^2, PCA against CuPy
#               (benchmarks.gpu_doors arrays); benchmarks.array_ops --quick; benchmarks.array_jit --quick
#   d numba     numba-cuda's doc examples through hetero.compat.cuda (benchmarks.numba_cuda_examples),
#               the compat unit tests on cuda, the same examples under real numba-cuda, compared
#   e cudac     tests/test_cuda_samples.py on cuda; reduce0-6 through the CUDA C front end vs NVRTC
#               compiling the same file, GB/s side by side (benchmarks.gpu_doors reduce)
#   f onnx      hetero.onnx.Pool on cuda:0 (the CUDA provider needs onnxruntime-gpu, not in the image:
#               SKIP says so) and hetero serve with an injected fault on cuda:0 moving requests to cpu
#   g guard     the MNIST net under hetero.guard on cuda:0: oom (bit-identical), lost, a real illegal
#               address (benchmarks.gpu_doors guard); examples/mnist_digits_guard.py fault-free vs oom
#   h launcher  hetero-run --nproc 2 on cuda:0 with an injected crash in each worker
#
# Carried inputs (the lent machine has no network; 64 MiB travel in all, the repo is ~6):
#   bash benchmarks/gpu_session.sh --prepare-carry   (here, with the network) fills .gpu_carry/:
#     whl/    setuptools, wheel, libclang (the CUDA C front end, ~25 MiB), ndindex, pytest-json-report,
#             pytest-metadata, shtab: wheels for CPython 3.12 manylinux x86_64 the image lacks
#     peers/  ../shared/peers/{array-api-tests,cuda-samples,numba-cuda} (~6 MiB)
#   then run with carry: [".gpu_carry"] and a timeout_s of 540:  bash benchmarks/gpu_session.sh
#   (.gpu_carry/ is git-ignored; a folder .whl/ of wheels, as on 2026-12-04, is installed too.)
#
# Dry run, no GPU (tests/test_gpu_session.py): GPU_SESSION_DEVICE=cpu bash benchmarks/gpu_session.sh
# runs every part it can on cpu (oneapi:0 as the fallback where present) at small sizes and SKIPs,
# with the reason, what needs CUDA. Settings: OUT (default a new temporary folder), PYTHON
# (default python3), GPU_SESSION_PARTS (a subset, in order), GPU_SESSION_BUDGET (seconds for all
# parts, default 470), GPU_SESSION_PACK (1: pack the part folders into $OUT/parts.tar.gz, since
# at most 8 files come back from $OUT; default 1 on cuda, 0 in the dry run).
set -u
{ # the whole script is one command, read before it runs: an edit or a checkout meanwhile cannot change it
export PYTHONUNBUFFERED=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
CARRY=$ROOT/.gpu_carry

if [ "${1:-}" = --prepare-carry ]; then
    mkdir -p "$CARRY/whl" "$CARRY/peers"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        -d "$CARRY/whl" "setuptools>=77" wheel "libclang>=16" ndindex pytest-json-report pytest-metadata shtab \
        || exit 1
    for peer in array-api-tests cuda-samples numba-cuda; do
        rm -rf "$CARRY/peers/$peer"
        cp -r "$ROOT/../shared/peers/$peer" "$CARRY/peers/$peer" || exit 1
    done
    rm -rf "$CARRY"/peers/*/.git
    du -sh "$CARRY"; echo "run with carry: [\".gpu_carry\"]"
    exit 0
fi

DEV=${GPU_SESSION_DEVICE:-cuda:0}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
# arrayapi last: the longest, it takes what time is left rather than starving the others.
PARTS=${GPU_SESSION_PARTS:-corpus arrays numba cudac onnx guard launcher arrayapi}
BUDGET=${GPU_SESSION_BUDGET:-470}
case $DEV in cuda*) DRY=0 ;; *) DRY=1 ;; esac
PACK=${GPU_SESSION_PACK:-$((1 - DRY))}
export HETERO_STATE_DIR=$(mktemp -d)
if [ -d "$CARRY/peers" ]; then export HETERO_PEERS=$CARRY/peers; else export HETERO_PEERS=$ROOT/../shared/peers; fi

# -- setup: hetero and the carried wheels, offline (the dry run uses the environment it is given) --
if [ "$DRY" = 0 ]; then
    wheels=$(ls "$CARRY"/whl/*.whl 2>/dev/null || ls .whl/*.whl 2>/dev/null)  # one set: two setuptools clash
    if [ -n "$wheels" ]; then
        "$PY" -m pip install -q --no-index --no-deps --target /tmp/carried $wheels > "$OUT/install.log" 2>&1
        export PYTHONPATH=/tmp/carried${PYTHONPATH:+:$PYTHONPATH}
    fi
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e . >> "$OUT/install.log" 2>&1 \
        || { echo "setup FAIL: pip install -e . (see install.log)" | tee -a "$SUMMARY"; exit 1; }
    FALLBACK=cpu
else
    FALLBACK=$("$PY" -c "import hetero; n=[d.name for d in hetero.devices()]; print('oneapi:0' if 'oneapi:0' in n else 'cpu')")
fi
{ date -u; nvidia-smi 2>&1 | head -20; "$PY" --version; echo "device $DEV, fallback $FALLBACK, dry $DRY"; } \
    > "$OUT/machine.txt" 2>&1
"$PY" -m hetero.cli.main devices --all > "$OUT/devices.txt" 2>&1
export DEV FALLBACK DRY PY OUT ROOT

# Sizes: the issue's on the GPU, small enough for a shared 2-core machine in the dry run.
if [ "$DRY" = 0 ]; then
    export ARRAYS_ARGS="" EXAMPLES=5 API_TESTS="" API_GROUPS=6 REDUCE_N=$((64 << 20)) REDUCE_WHICH="" GUARD_STEPS=120 SERVE_REQ=100
else
    export ARRAYS_ARGS="--elements 262144 --size 128 --pca-rows 0 --repeats 3" EXAMPLES=2 \
        API_TESTS="array_api_tests/test_sorting_functions.py array_api_tests/test_constants.py" API_GROUPS=2 REDUCE_N=65536 \
        REDUCE_WHICH="--which 0 6" GUARD_STEPS=25 SERVE_REQ=20
fi

skip() { echo "SKIP: $*"; exit 3; }
# Run a step of a part; remember the first failure (a part fails when any of its steps does).
step() { echo "== $*"; "$@"; local rc=$?; [ $rc -ne 0 ] && [ $rc -ne 3 ] && FAILED=${FAILED:-$rc}; return 0; }
export -f skip step

part_corpus() {
    [ "$DRY" = 1 ] && { OUT=$PWD "$PY" -m benchmarks.gpu_check --quick; skip "needs an NVIDIA GPU (gpu_check ran and checked nothing)"; }
    OUT=$PWD "$PY" -m benchmarks.gpu_check --quick
}
part_arrayapi() {
    # The suite's files in API_GROUPS processes at once on the one device (largest files dealt
    # first, round robin): one process took ~300 s on a CPU here, more than the part's share.
    local files groups=$API_GROUPS i=0 g rc=0 pids=()
    files=${API_TESTS:-$(cd "$HETERO_PEERS/array-api-tests" && ls -S array_api_tests/test_*.py)}
    local -a group
    for f in $files; do group[$((i % groups))]+=" $f"; i=$((i + 1)); done
    for g in "${!group[@]}"; do
        "$PY" -m benchmarks.array_api_conformance --devices "$DEV" --max-examples "$EXAMPLES" --jobs 1 \
            --suite "$HETERO_PEERS/array-api-tests" --tests ${group[$g]} > "api_$g.txt" 2>&1 &
        pids+=($!)
    done
    for g in "${!pids[@]}"; do
        wait "${pids[$g]}" || rc=$?
        echo "-- group $g:${group[$g]}"; grep -E "^\s*$DEV: [0-9]+/[0-9]+ passed|FAILED|XPASS|Error" "api_$g.txt" | head -20
    done
    exit $rc
}
part_arrays() {
    step "$PY" -m benchmarks.gpu_doors arrays --device "$DEV" --out "$PWD" $ARRAYS_ARGS
    if [ "$DRY" = 0 ]; then
        step "$PY" -m benchmarks.array_ops --devices "$DEV" --quick
        step "$PY" -m benchmarks.array_jit --devices "$DEV" --quick
    else  # both take --devices as they are; on a shared CPU they cost a minute or more
        echo "NOTE: PCA, benchmarks.array_ops and array_jit not run (a minute or more on a shared CPU)"
    fi
    exit ${FAILED:-0}
}
part_numba() {
    local suite=$HETERO_PEERS/numba-cuda examples=numba_cuda/numba/cuda/tests/doc_examples
    if [ "$DRY" = 1 ]; then  # three of the examples: the plumbing, in seconds (make conformance runs them all)
        suite=$PWD/suite; mkdir -p "$suite/$examples"
        cp "$HETERO_PEERS/numba-cuda/$examples"/{__init__.py,test_vecadd.py,test_reduction.py,test_ufunc.py} "$suite/$examples"
        echo "NOTE: 3 doc examples"
    fi
    step "$PY" -m benchmarks.numba_cuda_examples --devices "$DEV" --suite "$suite"
    rm -rf "$PWD/suite"
    if [ "$DRY" = 0 ]; then
        step "$PY" -m benchmarks.gpu_doors numba --device "$DEV" --out "$PWD" --hetero-results "$PWD/numba_cuda_examples.json"
        step "$PY" -m pytest -q -p no:cacheprovider -x -k cuda "$ROOT"/tests/test_compat_cuda*.py
    else
        echo "NOTE: real numba-cuda and the compat unit tests on cuda not run (no GPU)"
    fi
    exit ${FAILED:-0}
}
part_cudac() {
    if [ "$DRY" = 0 ]; then step "$PY" -m pytest -q -p no:cacheprovider -k cuda "$ROOT/tests/test_cuda_samples.py"
    else echo "NOTE: NVRTC side compiled only, tests/test_cuda_samples.py not run (no GPU)"; fi
    step "$PY" -m benchmarks.gpu_doors reduce --device "$DEV" --out "$PWD" --elements "$REDUCE_N" --repeats 5 $REDUCE_WHICH
    exit ${FAILED:-0}
}
part_onnx() {
    "$PY" -m benchmarks.gpu_doors onnx --device "$DEV" --fallback "$FALLBACK" --out "$PWD" --requests "$SERVE_REQ"
}
part_guard() {
    step "$PY" -m benchmarks.gpu_doors guard --device "$DEV" --fallback "$FALLBACK" --out "$PWD" --steps "$GUARD_STEPS"
    # The example itself: fault-free, then an oom retried in place, bit-identical (on cpu
    # tests/test_resume_launcher.py runs it: the dry run leaves it out).
    [ "$DRY" = 1 ] && { echo "NOTE: examples/mnist_digits_guard.py not run (tests run it on cpu)"; exit ${FAILED:-0}; }
    local ex="$ROOT/examples/mnist_digits_guard.py" opts="--epochs 1 --deterministic"
    export CUBLAS_WORKSPACE_CONFIG=:4096:8  # --deterministic's cuBLAS needs it on CUDA
    step env HETERO_DEVICE="$DEV" "$PY" "$ex" $opts --save-model "$PWD/plain.pt"
    step env HETERO_DEVICE="$DEV" "$PY" "$ex" $opts --save-model "$PWD/oom.pt" --inject "$DEV:torch:nth=3000:oom"
    step "$PY" -c "import sys, torch; a, b = (torch.load(p, map_location='cpu') for p in sys.argv[1:]); \
same = all(torch.equal(a[k], b[k]) for k in a); print('example oom vs fault-free: bit-identical' if same else 'DIFFERENT'); \
sys.exit(0 if same else 1)" "$PWD/plain.pt" "$PWD/oom.pt"
    rm -f "$PWD"/*.pt
    exit ${FAILED:-0}
}
part_launcher() {
    # Each worker crashes once at its 500th launch (~step 35), resumes from the step-30 checkpoint
    # and finishes in fewer launches than that: two restarts, exit 0.
    "$PY" -c "import sys; from hetero.launcher.cli import main; sys.exit(main())" --devices "$DEV" --nproc 2 \
        --inject "$DEV:launch:nth=500:crash" "$ROOT/examples/train_digits.py" --steps 60 --checkpoint-every 10 \
        > launcher.txt 2>&1
    local rc=$?
    cat launcher.txt; cp "$HETERO_STATE_DIR"/runs/*/events.jsonl . 2>/dev/null
    [ $rc -eq 0 ] || exit $rc
    grep -Eq 'faults +crash: [1-9]' launcher.txt || { echo "no crash was injected"; exit 1; }
}
export -f part_corpus part_arrayapi part_arrays part_numba part_cudac part_onnx part_guard part_launcher

# Time limits per part on the GPU (seconds; the dry run's are looser: 2 shared cores).
declare -A LIMIT=([corpus]=75 [arrays]=60 [numba]=50 [cudac]=40 [onnx]=25 [guard]=40 [launcher]=30 [arrayapi]=200)
SESSION_START=$(date +%s)
for name in $PARTS; do
    [ -n "${LIMIT[$name]:-}" ] || { printf '%-9s FAIL %6.1fs  unknown part (parts: %s)\n' "$name" 0 "${!LIMIT[*]}" >> "$SUMMARY"; continue; }
    limit=${LIMIT[$name]}; [ "$DRY" = 1 ] && limit=$((limit * 2))
    left=$((BUDGET - ($(date +%s) - SESSION_START)))
    [ $limit -gt $left ] && limit=$left
    if [ $limit -lt 10 ]; then
        printf '%-9s SKIP %6.1fs  no time left in the %ss budget\n' "$name" 0 "$BUDGET" >> "$SUMMARY"; continue
    fi
    mkdir -p "$OUT/$name"
    start=$(date +%s%N)
    (cd "$OUT/$name" && HETERO_BENCH_RESULTS=$OUT/$name PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} \
        timeout -k 5 "$limit" bash -c "part_$name" > "$OUT/$name/log.txt" 2>&1)
    rc=$?
    ms=$((($(date +%s%N) - start) / 1000000)); seconds=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
    case $rc in
        0) status=PASS; why=$(grep '^NOTE: ' "$OUT/$name/log.txt" | cut -c7- | paste -sd';' -) ;;
        3) status=SKIP; why=$(grep '^SKIP: ' "$OUT/$name/log.txt" | tail -1 | cut -c7-) ;;
        124|137) status=FAIL; why="timed out after ${limit}s" ;;
        *) status=FAIL; why="exit $rc: $(grep -v '^\s*$' "$OUT/$name/log.txt" | tail -1 | cut -c1-160)" ;;
    esac
    printf '%-9s %s %6.1fs  %s\n' "$name" "$status" "$seconds" "$why" | tee -a "$SUMMARY"
done
if [ "$PACK" = 1 ]; then
    (cd "$OUT" && tar czf parts.tar.gz $(ls -d $PARTS install.log 2>/dev/null) && rm -rf $PARTS install.log)
fi
exit 0
}
