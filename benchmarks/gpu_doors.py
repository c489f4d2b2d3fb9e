"""The parts of issue 50's GPU session that no other benchmark runs on ``cuda:0`` against a CUDA
peer: one door per subcommand, each on ``--device`` (``cuda:0`` on the lent GPU, ``cpu`` or
``oneapi:0`` in the dry run), each writing ``--out/<door>.json`` and exiting 0 when its checks
pass, 1 when one fails, 3 when it cannot run here (the reason on its last line).

    python -m benchmarks.gpu_doors arrays   --device cuda:0 [--elements N] [--small N] [--size N] [--pca-rows N]
    python -m benchmarks.gpu_doors reduce   --device cuda:0 [--elements N]
    python -m benchmarks.gpu_doors onnx     --device cuda:0 --fallback cpu [--requests N]
    python -m benchmarks.gpu_doors guard    --device cuda:0 --fallback cpu [--steps N]
    python -m benchmarks.gpu_doors numba    --device cuda:0 --hetero-results FILE

``arrays``: ``x + y`` on 1 Ki, the fused ``a*b + c*d`` and ``x.sum()`` on 64 Mi float32,
``matmul`` of n x n float32 and scikit-learn's PCA through ``hetero.xp``, against CuPy on a
``cuda`` device (cuBLAS for matmul) and NumPy elsewhere, answers compared.
``reduce``: cuda-samples' reduce0-6<int> through hetero's CUDA C front end (GB/s) against NVRTC
compiling the same file's kernels (their device part: the host launcher after them is C++ that
NVRTC refuses), loaded by CuPy; without a GPU the NVRTC side is only compiled (sm_90 PTX).
``onnx``: ``hetero.onnx.Pool`` on ``--device`` (its provider named), then ``hetero serve`` over
``--device`` + ``--fallback`` with an injected sticky fault on ``--device``: every answer right,
the requests moved to the fallback.
``guard``: PyTorch's MNIST net on the digits under ``hetero.guard`` on ``--device``: fault-free,
an injected ``oom`` (retried in place: bit-identical), an injected ``lost`` and, on ``cuda``, a
real illegal-address fault (a hetero kernel writing 4 TiB past its array mid-step), each moving to
``--fallback``: bit-identical where both devices run torch alike, else the same accuracy.
``numba``: numba-cuda's doc examples under the real ``numba.cuda`` (where it imports and sees a
GPU), outcomes per file beside hetero's (``benchmarks.numba_cuda_examples``' results file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array API dispatch needs it before scipy loads

import hetero
from benchmarks.harness import measure

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("HETERO_PEERS", ROOT.parent / "shared" / "peers"))
REDUCTION = "2_Concepts_and_Techniques/reduction/reduction_kernel.cu"
CANNOT_RUN = 3


class CannotRun(Exception):
    """The door needs something this machine lacks (the message says what)."""


def _sync(device: str) -> Callable[[], object]:
    if device.startswith("cuda"):
        import cupy

        return cupy.cuda.Device().synchronize
    return lambda: None


def _timed(fn: Callable[[], object], sync: Callable[[], object], repeats: int) -> float:
    def call() -> object:
        fn()
        return sync()

    return measure(call, repeats=repeats, warmup=2)["median_s"]


def _host(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


# -- arrays ------------------------------------------------------------------------------------
def arrays(args: argparse.Namespace) -> dict[str, Any]:
    """hetero's array ops on ``args.device`` against CuPy (cuda) or NumPy, answers compared."""
    device = args.device
    if device.startswith("cuda"):
        import cupy as peer

        peer_name, to_peer, from_peer = "cupy", peer.asarray, peer.asnumpy
    else:
        peer, peer_name, to_peer, from_peer = np, "numpy", np.asarray, np.asarray
    hsync, psync = (lambda: hetero.synchronize()), _sync(device)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []

    def side_by_side(name: str, make: Callable[[Any, Any], Callable[[], Any]], inputs: list[np.ndarray],
                     nbytes: int, rtol: float) -> None:
        h_in = [hetero.asarray(x, device=device) for x in inputs]
        p_in = [to_peer(x) for x in inputs]
        h_fn, p_fn = make(hetero, h_in), make(peer, p_in)
        got, want = _host(h_fn()), np.asarray(from_peer(p_fn()))
        h_s, p_s = _timed(h_fn, hsync, args.repeats), _timed(p_fn, psync, args.repeats)
        rows.append({"op": name, "hetero_s": h_s, f"{peer_name}_s": p_s, "hetero_vs_peer": p_s / h_s,
                     "hetero_gb_per_s": nbytes / h_s / 1e9, "peer_gb_per_s": nbytes / p_s / 1e9,
                     "correct": bool(np.allclose(got, want, rtol=rtol, atol=rtol))})

    small = [rng.random(args.small, dtype=np.float32) for _ in range(2)]
    side_by_side(f"x + y ({args.small})", lambda m, a: lambda: a[0] + a[1], small, 12 * args.small, 1e-6)
    big = [rng.random(args.elements, dtype=np.float32) for _ in range(4)]
    side_by_side(f"a*b + c*d ({args.elements})", lambda m, a: lambda: a[0] * a[1] + a[2] * a[3], big,
                 20 * args.elements, 1e-5)
    side_by_side(f"x.sum() ({args.elements})", lambda m, a: lambda: a[0].sum(), big[:1], 4 * args.elements, 1e-3)
    del big
    n = args.size
    mats = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(2)]
    side_by_side(f"matmul {n}x{n}", lambda m, a: lambda: a[0] @ a[1], mats, 12 * n * n, 1e-2)
    rows[-1]["hetero_tflops"], rows[-1]["peer_tflops"] = (2 * n ** 3 / rows[-1]["hetero_s"] / 1e12,
                                                          2 * n ** 3 / rows[-1][f"{peer_name}_s"] / 1e12)
    if args.pca_rows:  # 0: left out (the dry run's: on a CPU with a cold cache it compiles for ~40 s)
        rows.append(_pca(device, peer, peer_name, args.pca_rows, args.repeats))
    return {"device": device, "peer": peer_name, "rows": rows, "ok": all(r["correct"] for r in rows)}


def _pca(device: str, peer: Any, peer_name: str, n_rows: int, repeats: int) -> dict[str, Any]:
    """PCA(covariance_eigh, 8 components) fit_transform through scikit-learn's array API dispatch."""
    import sklearn
    from sklearn.decomposition import PCA

    from hetero import xp

    data = np.random.default_rng(1).standard_normal((n_rows, 64)).astype(np.float32)

    def fit(x: Any) -> Callable[[], Any]:
        def run() -> Any:
            with sklearn.config_context(array_api_dispatch=True):
                return PCA(n_components=8, svd_solver="covariance_eigh").fit_transform(x)
        return run

    h_fn, p_fn = fit(xp.asarray(data, device=device)), fit(peer.asarray(data))
    got = _host(h_fn())
    want = np.asarray(peer.asnumpy(p_fn()) if peer_name == "cupy" else p_fn())
    h_s, p_s = _timed(h_fn, lambda: hetero.synchronize(), repeats), _timed(p_fn, _sync(device), repeats)
    same = bool(np.allclose(np.abs(got), np.abs(want), rtol=1e-2, atol=1e-2))  # components up to sign
    return {"op": f"PCA fit_transform {n_rows}x64", "hetero_s": h_s, f"{peer_name}_s": p_s,
            "hetero_vs_peer": p_s / h_s, "correct": same}


# -- reduce ------------------------------------------------------------------------------------
REDUCE_NAMES = ["reduce0<int>", "reduce1<int>", "reduce2<int>", "reduce3<int>", "reduce4<int, 256>",
                "reduce5<int, 256>", "reduce6<int, 256, true>"]


def _include_dirs() -> list[str]:
    """CUDA's headers, and libcu++ (``cuda/std``, which cooperative_groups includes): CUDA 13
    keeps it under include/cccl, CuPy ships a copy."""
    from hetero.backends.cupy import nvrtc_compile

    dirs = list(nvrtc_compile.header_dirs())
    candidates = [Path(d) / "cccl" for d in dirs]
    try:
        import cupy

        candidates.append(Path(cupy.__file__).parent / "_core/include/cupy/_cccl/libcudacxx")
    except ImportError:
        pass
    dirs += [str(c) for c in candidates if (c / "cuda/std/type_traits").exists()][:1]
    return dirs


def nvrtc_reduction(arch: str) -> tuple[str, bytes, dict[str, str]]:
    """The reduction file's kernels compiled by NVRTC alone: (kind, image, name -> lowered name)."""
    from cuda.bindings import nvrtc

    path = PEERS / "cuda-samples" / "Samples" / REDUCTION
    text = path.read_text().replace("#include <stdio.h>", "")
    text = text.split('extern "C" bool isPow2')[0] + "\n#endif\n"  # the device part; the host launcher follows
    kind = "cubin" if arch.startswith("sm_") else "ptx"
    flags = [f"--gpu-architecture={arch}", "--std=c++17", *(f"--include-path={d}" for d in _include_dirs())]
    status, program = nvrtc.nvrtcCreateProgram(text.encode(), b"reduction_kernel.cu", 0, [], [])
    for name in REDUCE_NAMES:
        nvrtc.nvrtcAddNameExpression(program, name.encode())
    encoded = [f.encode() for f in flags]
    (status,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise RuntimeError(f"NVRTC rejected {path} with {flags}:\n{log.decode(errors='replace')}")
    lowered = {name: nvrtc.nvrtcGetLoweredName(program, name.encode())[1].decode() for name in REDUCE_NAMES}
    size_call, get_call = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if kind == "cubin"
                           else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    _, size = size_call(program)
    image = b" " * size
    get_call(program, image)
    nvrtc.nvrtcDestroyProgram(program)
    return kind, image, lowered


def _launch_shape(which: int, n: int, threads: int = 256) -> int:
    blocks = (n + threads - 1) // threads if which < 3 else (n + threads * 2 - 1) // (threads * 2)
    return min(64, blocks) if which == 6 else blocks


def _front_end_bandwidth(device: str, n: int, which: list[int], repeats: int) -> dict[str, Any]:
    """reduce<which><int> through hetero's CUDA C front end on ``device`` (the sample's launch
    sizes and template instances, as benchmarks.compat_cuda times them), each answer checked."""
    from hetero.compat.cuda import RawKernel

    path = PEERS / "cuda-samples" / "Samples" / REDUCTION
    code = path.read_text()
    data_host = np.random.default_rng(0).integers(0, 256, n).astype(np.int32)
    out: dict[str, Any] = {}
    with hetero.use_device(device):
        data = hetero.asarray(data_host)
        for k in which:
            kernel, blocks = RawKernel(code, REDUCE_NAMES[k], path=str(path)), _launch_shape(k, n)
            partial = hetero.zeros(blocks, hetero.i32)

            def run(kernel: Any = kernel, blocks: int = blocks, partial: Any = partial) -> object:
                kernel((blocks,), (256,), (data, partial, np.uint32(n)), shared_mem=256 * 4)
                return hetero.synchronize()

            seconds = measure(run, repeats=repeats, warmup=2)["median_s"]
            out[f"reduce{k}"] = {"seconds": seconds, "gb_per_s": n * 4 / seconds / 1e9,
                                 "correct": int(partial.numpy().astype(np.int64).sum()) == int(data_host.sum())}
    return out


def reduce(args: argparse.Namespace) -> dict[str, Any]:
    if not (PEERS / "cuda-samples").is_dir():
        raise CannotRun(f"cuda-samples are not at {PEERS / 'cuda-samples'} (carry them: see gpu_session.sh)")
    front_end = _front_end_bandwidth(args.device, args.elements, args.which, args.repeats)
    out: dict[str, Any] = {"device": args.device, "n": args.elements, "front_end": front_end}
    ok = all(v["correct"] for v in front_end.values())
    if not args.device.startswith("cuda"):
        start = time.perf_counter()
        kind, image, lowered = nvrtc_reduction("compute_90")
        out["nvrtc"] = {"compiled_only": f"{kind} for compute_90, {len(image)} bytes, "
                                         f"{time.perf_counter() - start:.2f} s (no GPU to run it)", "lowered": lowered}
        out["ok"] = ok
        return out
    out["nvrtc"] = _nvrtc_bandwidth(args.elements, args.repeats)
    out["side_by_side"] = {k: {"hetero_gb_per_s": front_end[k]["gb_per_s"],
                               "nvrtc_gb_per_s": out["nvrtc"][k]["gb_per_s"],
                               "hetero_vs_nvrtc": front_end[k]["gb_per_s"] / out["nvrtc"][k]["gb_per_s"]}
                           for k in front_end}
    out["ok"] = ok and all(v["correct"] for v in out["nvrtc"].values())
    return out


def _nvrtc_bandwidth(n: int, repeats: int) -> dict[str, Any]:
    import cupy

    major, minor = cupy.cuda.Device().compute_capability[:1], cupy.cuda.Device().compute_capability[1:]
    _, image, lowered = nvrtc_reduction(f"sm_{major}{minor}")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as handle:
        handle.write(image)
    module = cupy.RawModule(path=handle.name)
    data_host = np.random.default_rng(0).integers(0, 256, n).astype(np.int32)
    data, out = cupy.asarray(data_host), {}
    for which, name in enumerate(REDUCE_NAMES):
        kernel, blocks = module.get_function(lowered[name]), _launch_shape(which, n)
        partial = cupy.zeros(blocks, cupy.int32)

        def run(kernel: Any = kernel, blocks: int = blocks, partial: Any = partial) -> object:
            kernel((blocks,), (256,), (data, partial, np.uint32(n)), shared_mem=256 * 4)
            return cupy.cuda.Device().synchronize()

        seconds = measure(run, repeats=repeats, warmup=2)["median_s"]
        run()
        out[f"reduce{which}"] = {"seconds": seconds, "gb_per_s": n * 4 / seconds / 1e9,
                                 "correct": int(partial.get().astype(np.int64).sum()) == int(data_host.sum())}
    return out


# -- onnx --------------------------------------------------------------------------------------
def onnx(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import inference
    from benchmarks.onnx_mlp import mlp
    from hetero.fault import quarantine
    from hetero.onnx import Pool
    from hetero.serve import ServerThread

    have = inference.serving_devices()
    if args.device not in have:
        raise CannotRun(f"no ONNX Runtime provider for {args.device} here (devices with one: {have}); on cuda: "
                        "onnxruntime-gpu")
    model = mlp(hidden=32)
    x = model.sample(64)
    alone = Pool(model.data, [args.device], replicas=1, threads=1, name="gpu-session-alone")
    try:
        y = alone.run({"x": x})["y"]
        member = alone.members[0]
        provider = str(getattr(member.session, "provider", None) or getattr(member.session, "providers", "?"))
    finally:
        alone.close()
    out: dict[str, Any] = {"device": args.device, "fallback": args.fallback, "pool_alone": {
        "provider": provider, "correct": inference.right(y, model.reference(x))}}
    # Without a second device that has a provider, the load runs fault-free on --device alone
    # (the serving plumbing, tested) and the door says what it left out.
    pair = args.fallback in have and args.fallback != args.device
    devices = [args.device, args.fallback] if pair else [args.device]
    rule = f"{args.device}:infer:p=0.05,seed=1:sticky" if pair else None
    pool = Pool(model.data, devices, replicas=1, threads=1, quarantine_ttl=60, name="mlp")
    try:
        with hetero.fault.inject(rule) if rule else contextlib.nullcontext() as injection, \
                ServerThread(pool, workers=4) as server:
            load = inference.drive(lambda: json_caller(server.address), model, args.clients,
                                   args.requests, 1, 60.0)
            stats = pool.stats()
    finally:
        quarantine.forget_drill()
    members = stats["members"]
    moved = sum(v["requests"] for k, v in members.items() if pair and args.fallback in k)
    fired = len(injection.fired) if injection is not None else 0
    out["serve"] = {"rule": rule, "faults_fired": fired, "members": members, "requests_on_fallback": moved,
                    **{k: v for k, v in load.items() if k not in ("latencies", "latencies_s", "answers")}}
    wrong = load.get("wrong", 0) or 0
    out["ok"] = bool(out["pool_alone"]["correct"] and not wrong and load.get("sent") and not load.get("lost") and (not pair or (fired > 0 and moved > 0)))
    if not pair:
        out["skipped"] = (f"the fault's move: no ONNX Runtime provider for {args.fallback} here (devices with one: "
                          f"{have}); the load ran fault-free on {args.device} alone")
    return out


@contextlib.contextmanager
def json_caller(address: str) -> Any:
    """KServe v2 JSON requests through urllib: what a client without tritonclient sends (the lent
    machine has none, and its wheels with gevent's would take a quarter of what a call carries)."""
    import urllib.request

    def call(x: np.ndarray) -> np.ndarray:
        body = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                       "data": x.ravel().tolist()}]}).encode()
        request = urllib.request.Request(f"http://{address}/v2/models/mlp/infer", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            output = json.loads(response.read())["outputs"][0]
        return np.asarray(output["data"], np.float32).reshape(output["shape"])

    yield call


# -- guard -------------------------------------------------------------------------------------
def guard(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from benchmarks import torch_guard

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)  # cuDNN's convolution gradients differ run to run otherwise
    data = torch_guard.load_data(torch)
    runs: dict[str, Any] = {"fault-free": _guarded(torch, data, args, None)}
    ops = torch_guard.torch_ops_per_step(torch, data)
    nth = ops * args.fault_step + ops // 2
    for kind in ("oom", "lost"):
        runs[kind] = _guarded(torch, data, args, f"{args.device}:torch:nth={nth}:{kind}")
    if args.device.startswith("cuda"):
        runs["illegal-address"] = _guarded(torch, data, args, None, real_fault_at=args.fault_step)
    reference = runs["fault-free"]
    same_kind = torch.device(hetero.torch_device(args.device)).type == torch.device(hetero.torch_device(args.fallback)).type
    for name, run in runs.items():
        if name == "fault-free":
            continue
        run["bit_identical"] = run.pop("params_digest") == reference["params_digest"]
        moved = run["device_after"] != args.device
        close = abs(run["accuracy"] - reference["accuracy"]) <= 0.05
        run["ok"] = run["recoveries"] >= 1 and (run["bit_identical"] or (moved and not same_kind and close))
    reference.pop("params_digest")
    return {"device": args.device, "fallback": args.fallback, "fault_step": args.fault_step, "runs": runs,
            "ok": all(r.get("ok", True) for r in runs.values())}


def _guarded(torch: Any, data: Any, args: argparse.Namespace, rule: str | None,
             real_fault_at: int | None = None) -> dict[str, Any]:
    import hashlib

    from benchmarks import torch_guard
    from hetero.fault import quarantine

    x, y = data  # on the host: a device left after a fault may not be readable
    start_on = hetero.torch_device(args.device)
    loop = torch_guard.Loop(torch, x.to(start_on), y.to(start_on))
    loop.model.to(start_on)
    fired, placed, guard_holder = [False], {}, []

    def step(k: int) -> float:
        where = hetero.torch_device(guard_holder[0].device)  # a replay after a move runs on the new device
        if where not in placed:
            placed[where] = (x.to(where), y.to(where))
        loop.x, loop.y = placed[where]
        if real_fault_at is not None and k == real_fault_at and not fired[0]:
            fired[0] = True
            _illegal_address(args.device)
        return loop.step(k)

    start = time.perf_counter()
    with hetero.guard(loop.state, snapshot_every=10, device=args.device, devices=[args.device, args.fallback],
                      max_recoveries=3) as g:
        guard_holder.append(g)
        with hetero.fault.inject(rule) if rule else contextlib.nullcontext():
            for k in range(args.steps):
                g.run(step, k)
    seconds = time.perf_counter() - start
    quarantine.forget_drill()
    model = loop.model.cpu().eval()
    with torch.no_grad():
        accuracy = float((model(x).argmax(dim=1) == y).float().mean())
    digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()
    events = [{k: v for k, v in dict(e).items() if isinstance(v, (str, int, float, bool, type(None)))}
              for e in g.recoveries]
    return {"rule": rule or ("real out-of-bounds write" if real_fault_at is not None else None),
            "recoveries": len(g.recoveries), "events": events, "device_after": g.device.name,
            "accuracy": accuracy, "seconds": seconds, "params_digest": digest}


def _illegal_address(device: str) -> None:
    """A hetero kernel writing 4 TiB past its array on ``device``: CUDA's error 700, for real."""
    from benchmarks.gpu_check import scribble

    x = hetero.zeros(16, device=device)
    scribble[16](x, 1 << 40)
    hetero.synchronize()


# -- numba -------------------------------------------------------------------------------------
def numba(args: argparse.Namespace) -> dict[str, Any]:
    probe = subprocess.run([sys.executable, "-c", "from numba import cuda; print(cuda.is_available())"],
                           capture_output=True, text=True, timeout=120, check=False)
    if probe.stdout.strip() != "True":
        raise CannotRun(f"real numba.cuda sees no GPU here ({(probe.stdout + probe.stderr).strip()[-300:]})")
    examples = PEERS / "numba-cuda" / "numba_cuda" / "numba" / "cuda" / "tests" / "doc_examples"
    if not examples.is_dir():
        raise CannotRun(f"numba-cuda's doc examples are not at {examples}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "doc_examples"
        shutil.copytree(examples, copy)
        junit = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", str(copy)],
                       check=False, cwd=tmp, timeout=args.timeout, capture_output=True)
        real = _junit_files(junit)
    hetero_files: dict[str, str] = {}
    if args.hetero_results and Path(args.hetero_results).exists():
        found = json.loads(Path(args.hetero_results).read_text())
        per_device = found.get("devices", {}).get(args.device, {})
        hetero_files = {f: e.get("outcome", "?") for f, e in per_device.get("files", {}).items()}
    files = sorted(set(real) | set(hetero_files))
    table = {f: {"numba_cuda": real.get(f, "absent"), "hetero": hetero_files.get(f, "absent")} for f in files}
    differ = [f for f, row in table.items() if row["numba_cuda"] == "passed" and row["hetero"] != "passed"]
    return {"device": args.device, "files": table, "passed_by_numba_cuda_not_hetero": differ, "ok": True}


def _junit_files(path: Path) -> dict[str, str]:
    """junit XML -> file name -> 'passed' | 'failed' (any test in it failed or errored)."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for case in ElementTree.parse(path).iter("testcase"):
        # a test: classname "doc_examples.test_x.TestX"; a module that failed to import: name "doc_examples.test_x"
        parts = case.get("classname", "").split(".") + case.get("name", "").split(".")
        name = next((p for p in parts if p.startswith("test_")), "?") + ".py"
        bad = any(child.tag in ("failure", "error") for child in case)
        out[name] = "failed" if bad or out.get(name) == "failed" else "passed"
    return out


# -- main --------------------------------------------------------------------------------------
DOORS = {"arrays": arrays, "reduce": reduce, "onnx": onnx, "guard": guard, "numba": numba}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("door", choices=sorted(DOORS))
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--fallback", default="cpu")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_doors"))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--small", type=int, default=1024, help="x + y length (default 1 Ki)")
    parser.add_argument("--elements", type=int, default=64 << 20, help="fused/sum/reduce length (default 64 Mi)")
    parser.add_argument("--size", type=int, default=4096, help="matmul n (default 4096)")
    parser.add_argument("--pca-rows", type=int, default=200_000, help="PCA's rows (0: no PCA)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=100, help="served requests per client")
    parser.add_argument("--steps", type=int, default=40, help="guarded training steps")
    parser.add_argument("--fault-step", type=int, default=15)
    parser.add_argument("--which", type=int, nargs="+", default=list(range(7)), help="reduce kernels (default 0-6)")
    parser.add_argument("--hetero-results", help="benchmarks.numba_cuda_examples' results JSON")
    parser.add_argument("--timeout", type=int, default=240)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    try:
        result = DOORS[args.door](args)
    except CannotRun as exc:
        print(f"SKIP: {exc}")
        return CANNOT_RUN
    result["seconds"] = time.perf_counter() - start
    with open(os.path.join(args.out, f"{args.door}.json"), "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    print(json.dumps(result, indent=1, default=str)[:6000])
    print(f"{args.door}: {'pass' if result['ok'] else 'FAIL'}")
    if result["ok"] and result.get("skipped"):
        print(f"SKIP: {result['skipped']}")
        return CANNOT_RUN
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
