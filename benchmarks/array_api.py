"""The array API namespace (``hetero.xp``) against its references, side by side in one run:

- ``sort`` and ``argsort`` of 16 Mi float32 (``--quick``: 1 Mi) against ``numpy.sort`` /
  ``numpy.argsort`` (stable) on ``cpu``, and against ``pyopencl.algorithm.RadixSort`` on OpenCL
  devices (where pyopencl builds it); goal (reported, never enforced) hetero >= the peer;
- scikit-learn's ``PCA(svd_solver="covariance_eigh").fit`` on 200k x 64 float32 (``--quick``:
  20k) with hetero arrays on each device against the same fit on NumPy, and where the time goes
  (the fit's steps, the input's finite test, mean, covariance product and eigh, each timed on its
  own beside NumPy's; on devices with several matmul routines, the covariance product on each of
  them, beside the one ``blas: auto`` chose, which explain_op names);
- ``linalg.solve`` and ``linalg.eigh`` of 1024 x 1024 float32 (``--quick``: 256) on each device
  against NumPy: on the device's LAPACK where one exists, else on the host, with the round trip
  (download + upload of the operands and results) shown beside it;
- ``fft.fft`` of 256 x 1024 complex64 (``--quick``: 64 rows) on the device's FFT library (VkFFT on
  OpenCL where pyvkfft is installed) against NumPy and against the host fallback it replaces.

    python -m benchmarks.array_api [--quick] [--devices cpu oneapi:0 opencl:0] [--repeats N] [--sections sort pca linalg fft]

Every hetero result is checked against NumPy once before timing. Writes
``benchmarks/results/array_api.json`` (a ``--quick`` run writes ``array_api_quick.json``); a run
of some of the sections keeps the file's other sections (and devices), each marked with the
command and time that measured it (``measured_by``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array API dispatch needs it before SciPy loads
os.environ.setdefault("HETERO_HOST_FALLBACK", "allow")  # the linalg section reports the host round trip itself

import numpy as np  # noqa: E402

import hetero  # noqa: E402
import hetero.xp as xp  # noqa: E402
from benchmarks.harness import RESULTS_DIR, Progress, command_line, compare, write_results  # noqa: E402
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, is_opencl, load_average  # noqa: E402
from benchmarks.kernel_bench import opencl, print_footer  # noqa: E402
from hetero.arraylib.linalg.blas import multiply, routines  # noqa: E402

SECTIONS = ("sort", "pca", "linalg", "fft")


def _ready(x: Any) -> Any:
    if isinstance(x, hetero.Array):
        x.device.synchronize()
    elif isinstance(x, tuple):
        for each in x:
            _ready(each)
    return x


def _ratio(timings: dict[str, Any], ours: str, peer: str) -> float:
    return float(timings[peer]["median_s"]) / float(timings[ours]["median_s"])


def sort_section(device: hetero.Device, n: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    host = rng.standard_normal(n).astype(np.float32)
    x = xp.asarray(host, device=device)
    want = np.sort(host, kind="stable")
    if not np.array_equal(xp.sort(x).numpy(), want):
        raise AssertionError(f"hetero.xp.sort on {device.name} differs from numpy.sort")
    if not np.array_equal(xp.argsort(x).numpy(), np.argsort(host, kind="stable")):
        raise AssertionError(f"hetero.xp.argsort on {device.name} differs from numpy.argsort")
    sides: dict[str, Callable[[], object]] = {
        "hetero.sort": lambda: _ready(xp.sort(x)),
        "hetero.argsort": lambda: _ready(xp.argsort(x)),
    }
    peer_note = ""
    if device.name == "cpu":
        sides["numpy.sort"] = lambda: np.sort(host, kind="stable")
        sides["numpy.argsort"] = lambda: np.argsort(host, kind="stable")
        peers = {"hetero.sort": "numpy.sort", "hetero.argsort": "numpy.argsort"}
    elif is_opencl(device):
        peers, peer_note = _radix_sides(device, host, sides)
    else:
        peers = {}
        peer_note = f"no peer on {device.name}"
    timings = compare(sides, repeats=repeats, warmup=1)
    return {
        "elements": n, "dtype": "float32",
        "seconds": {name: t["median_s"] for name, t in timings.items()},
        "ratio_vs_peer": {ours: round(_ratio(timings, ours, peer), 3) for ours, peer in peers.items()},
        "note": peer_note,
    }


def _radix_sides(device: hetero.Device, host: np.ndarray, sides: dict[str, Callable[[], object]]) -> tuple[dict[str, str], str]:
    """pyopencl's RadixSort on the device's own context and queue, keys and (for argsort) an index
    array; it sorts integer keys only, so float32 keys go through the usual order-preserving map
    to uint32 (done once, outside the timing: a cost the peer does not pay here)."""
    try:
        import pyopencl.array as cl_array
        from pyopencl.algorithm import RadixSort
    except ImportError as exc:
        return {}, f"pyopencl.algorithm unavailable: {exc}"
    _, context, queue = opencl(device)
    bits = host.view(np.uint32)
    keys = np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)
    try:
        sorter = RadixSort(context, "unsigned int *ascending, unsigned int *index",
                           key_expr="ascending[i]", sort_arg_names=["ascending", "index"])
    except Exception as exc:  # noqa: BLE001 (a peer that does not build here is reported, not fatal)
        return {}, f"pyopencl RadixSort did not build on {device.name}: {type(exc).__name__}: {exc}"
    d_keys = cl_array.to_device(queue, keys)
    d_index = cl_array.arange(queue, host.size, dtype=np.uint32)

    def radix() -> object:
        (out_keys, out_index), event = sorter(d_keys, d_index, key_bits=32, queue=queue)
        event.wait()
        return out_keys

    got = radix()
    order = np.argsort(keys, kind="stable")
    if not np.array_equal(got.get(), keys[order]):
        return {}, "pyopencl RadixSort gave a wrong order here; not timed"
    sides["pyopencl.RadixSort"] = radix
    return {"hetero.sort": "pyopencl.RadixSort", "hetero.argsort": "pyopencl.RadixSort"}, \
        "pyopencl RadixSort of the uint32 image of the keys, with an index payload (so it is both sort and argsort)"


def _pca_fit(data: Any) -> Any:
    import sklearn
    from sklearn.decomposition import PCA

    with sklearn.config_context(array_api_dispatch=True):
        return PCA(n_components=16, svd_solver="covariance_eigh").fit(data)


def _steps(device: hetero.Device, x: Any, repeats: int) -> list[dict[str, Any]]:
    """Where a ``covariance_eigh`` fit spends its time: its array operations as scikit-learn's
    ``PCA._fit_full`` and its input check run them (``sum(x)`` is ``check_array``'s finite test;
    the covariance is ``x.T @ x`` of the uncentred data, corrected by the means' outer product),
    each timed on its own to completion (on an OpenCL queue a profile would show only the waits),
    with NumPy's time for the same step beside it. ``x - mean`` is not part of the fit; it is
    timed as the centring the issue's broadcasting item measures."""
    host = x.numpy()
    mean, host_mean = xp.mean(x, axis=0), host.mean(axis=0)
    covariance = x.T @ x / (x.shape[0] - 1)
    host_covariance = host.T @ host / (host.shape[0] - 1)
    gemm = "x.T @ x"
    steps = {
        "sum(x) (check_array's finite test)": (lambda: _ready(xp.sum(x)), lambda: np.sum(host)),
        "mean(x, axis=0)": (lambda: _ready(xp.mean(x, axis=0)), lambda: host.mean(axis=0)),
        gemm: (lambda: _ready(x.T @ x), lambda: host.T @ host),
        "linalg.eigh(64 x 64)": (lambda: _ready(xp.linalg.eigh(covariance)), lambda: np.linalg.eigh(host_covariance)),
        "x - mean (not in the fit)": (lambda: _ready(x - mean), lambda: host - host_mean),
    }
    out = []
    for name, (ours, theirs) in steps.items():
        timings = compare({"hetero": ours, "numpy": theirs}, repeats=repeats, warmup=1)
        row = {"step": name, "hetero_s": timings["hetero"]["median_s"], "numpy_s": timings["numpy"]["median_s"]}
        if name == gemm:
            row["routine"] = str(hetero.explain_op("matmul", x.T, x).choice)
        out.append(row)
    numpy_s = next(row["numpy_s"] for row in out if row["step"] == gemm)
    for name, choice in routines(device, x.T, x, x.dtype, ()).items():  # each routine the choice is made from

        def forced(choice: Any = choice) -> object:  # as hetero.matmul runs it: a new result, then the routine
            result = hetero.empty((x.shape[1], x.shape[1]), x.dtype, device=device)
            multiply(result, x.T, x, choice)
            return _ready(result)

        timings = compare({"hetero": forced}, repeats=repeats, warmup=1)
        out.append({"step": f"{gemm} on {name}", "routine": str(choice), "hetero_s": timings["hetero"]["median_s"],
                    "numpy_s": numpy_s})
    return out


def pca_section(device: hetero.Device, rows: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    host = (rng.standard_normal((rows, 64)) @ rng.standard_normal((64, 64))).astype(np.float32)
    x = xp.asarray(host, device=device)
    want, got = _pca_fit(host), _pca_fit(x)
    components = got.components_.numpy()
    signs = np.sign(np.sum(components * want.components_, axis=1, keepdims=True))
    if not np.allclose(components * signs, want.components_, rtol=1e-2, atol=1e-2):
        raise AssertionError(f"PCA on {device.name} found other components than on NumPy")
    timings = compare({"hetero": lambda: _ready(_pca_fit(x).components_), "numpy": lambda: _pca_fit(host)},
                      repeats=repeats, warmup=1)
    return {"shape": [rows, 64], "dtype": "float32", "seconds": {k: t["median_s"] for k, t in timings.items()},
            "ratio_vs_numpy": round(_ratio(timings, "hetero", "numpy"), 3),
            "where_the_time_goes": _steps(device, x, repeats)}


def linalg_section(device: hetero.Device, n: int, repeats: int) -> dict[str, Any]:
    from hetero.arraylib.linalg.namespace import host_functions, lapack_library

    rng = np.random.default_rng(2)
    a = rng.standard_normal((n, n)).astype(np.float32)
    spd = (a @ a.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)
    b = rng.standard_normal((n, 4)).astype(np.float32)
    xa, xb = xp.asarray(spd, device=device), xp.asarray(b, device=device)
    if not np.allclose(spd @ xp.linalg.solve(xa, xb).numpy(), b, rtol=1e-2, atol=1e-2):
        raise AssertionError(f"linalg.solve on {device.name} does not solve the system")
    sides: dict[str, Callable[[], object]] = {
        "hetero.solve": lambda: _ready(xp.linalg.solve(xa, xb)),
        "numpy.solve": lambda: np.linalg.solve(spd, b),
        "hetero.eigh": lambda: _ready(xp.linalg.eigh(xa)),
        "numpy.eigh": lambda: np.linalg.eigh(spd),
        # what a host fallback pays beyond the computation: the operands down, the results up
        "round trip (solve)": lambda: _round_trip(device, (xa, xb), (b,)),
        "round trip (eigh)": lambda: _round_trip(device, (xa,), (spd[0], spd)),
    }
    timings = compare(sides, repeats=repeats, warmup=1)
    on_host = "linalg.solve" in host_functions(device)
    return {"n": n, "dtype": "float32", "library": str(lapack_library(device)), "on_host": on_host,
            "seconds": {k: t["median_s"] for k, t in timings.items()},
            "ratio_vs_numpy": {"solve": round(_ratio(timings, "hetero.solve", "numpy.solve"), 3),
                               "eigh": round(_ratio(timings, "hetero.eigh", "numpy.eigh"), 3)}}


def fft_section(device: hetero.Device, rows: int, repeats: int) -> dict[str, Any]:
    """``fft.fft`` of ``rows`` x 1024 complex64 on the device's FFT library (VkFFT on OpenCL where
    pyvkfft is installed) against NumPy's, and against the host fallback it replaces (download,
    NumPy, upload)."""
    from hetero.arraylib.host_fallback import fft_library

    rng = np.random.default_rng(3)
    host = (rng.standard_normal((rows, 1024)) + 1j * rng.standard_normal((rows, 1024))).astype(np.complex64)
    x = xp.asarray(host, device=device)
    if not np.allclose(xp.fft.fft(x).numpy(), np.fft.fft(host), rtol=1e-3, atol=1e-2):
        raise AssertionError(f"fft.fft on {device.name} differs from numpy.fft.fft")
    sides: dict[str, Callable[[], object]] = {
        "hetero.fft": lambda: _ready(xp.fft.fft(x)),
        "numpy.fft": lambda: np.fft.fft(host),
        "host fallback (down, numpy, up)": lambda: _ready(xp.asarray(np.fft.fft(x.numpy()), device=device, copy=True)),
    }
    timings = compare(sides, repeats=repeats, warmup=1)
    return {"shape": [rows, 1024], "dtype": "complex64", "library": fft_library(device.backend) or "numpy (host fallback)",
            "seconds": {k: t["median_s"] for k, t in timings.items()},
            "ratio_vs_numpy": round(_ratio(timings, "hetero.fft", "numpy.fft"), 3),
            "ratio_vs_host_fallback": round(_ratio(timings, "hetero.fft", "host fallback (down, numpy, up)"), 3)}


def _round_trip(device: hetero.Device, operands: Sequence[hetero.Array], results: Sequence[np.ndarray]) -> object:
    """The transfers a host fallback adds: each operand downloaded, each result uploaded."""
    for each in operands:
        each.numpy()
    return [_ready(xp.asarray(r, device=device, copy=True)) for r in results]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    parser.add_argument("--devices", nargs="+", default=list(DEFAULT_DEVICES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    args = parser.parse_args(argv)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    sizes = {"sort": 1 << 20 if args.quick else 1 << 24, "pca": 20_000 if args.quick else 200_000,
             "linalg": 256 if args.quick else 1024, "fft": 64 if args.quick else 256}
    runners = {"sort": sort_section, "pca": pca_section, "linalg": linalg_section, "fft": fft_section}
    progress = Progress(len(devices) * len(args.sections))
    results: dict[str, Any] = {}
    for device in devices:
        entry: dict[str, Any] = {"device": describe(device)}
        for section in args.sections:
            progress.step(f"{section} on {device.name}")
            start = time.perf_counter()
            entry[section] = runners[section](device, sizes[section], args.repeats)
            entry[section]["section_seconds"] = round(time.perf_counter() - start, 1)
            print(f"  {device.name} {section}: {_summary(entry[section])}", flush=True)
        results[device.name] = entry
    name = "array_api_quick" if args.quick else "array_api"
    _keep_other_sections(name, results)
    path = write_results(name, {"quick": args.quick, "sizes": sizes, "load_average_before": load_before,
                                "load_average_after": load_average(), "devices": results, "missing": missing},
                         command_line("benchmarks.array_api", list(argv) if argv is not None else sys.argv[1:]))
    print_footer(missing, load_before, path)
    return 0


def _keep_other_sections(name: str, results: dict[str, Any]) -> None:
    """Add to ``results`` the sections and devices of the existing ``<name>.json`` this run did
    not measure, each marked with the command and time that did (``measured_by``)."""
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists():
        return
    old = json.loads(path.read_text())
    by = {"command": old.get("command"), "timestamp_utc": old.get("timestamp_utc")}
    for device, entry in old.get("devices", {}).items():
        kept = results.setdefault(device, {"device": entry.get("device")})
        for section in SECTIONS:
            if section in entry and section not in kept:
                kept[section] = {**entry[section], "measured_by": entry[section].get("measured_by", by)}


def _summary(section: dict[str, Any]) -> str:
    ratios = section.get("ratio_vs_peer") or section.get("ratio_vs_numpy")
    seconds = ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in section["seconds"].items())
    steps = "".join(f"\n    {s['step']}: hetero {1e3 * s['hetero_s']:.1f} ms, numpy {1e3 * s['numpy_s']:.1f} ms"
                    + (f" [{s['routine']}]" if "routine" in s else "") for s in section.get("where_the_time_goes", ()))
    return f"{seconds}; ratio (peer time / hetero time) {ratios} {section.get('note', '')}".strip() + steps


if __name__ == "__main__":
    sys.exit(main())
