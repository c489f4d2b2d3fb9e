"""numba-cuda's own unit suite (``numba/cuda/tests/cudapy`` of the pinned wheel), unchanged, on
hetero: each test file on each device in turn, with ``numba.cuda`` naming :mod:`hetero.compat.cuda`.

    python -m benchmarks.numba_cuda_suite [--devices cpu oneapi:0 opencl:0] [--quick] [--files test_x.py ...]

The wheel ``numba-cuda==0.30.4`` is fetched from the package index (``pip download --no-deps``) into
``build/wheels`` once; its ``cudapy`` folder is extracted under ``build/numba_cuda_suite`` and copied
to a temporary folder for each run (no file of numba-cuda lives in this repository). Where the wheel
cannot be fetched the run is skipped with a message (exit status 0).

The files run are :data:`FILES`: the 40 that test kernels and the host API a program uses; the other
66 test Numba's compiler internals (IR, bytecode, type conversion, extension API, caching, debug
info, the CUDA driver, IPC, ufunc machinery), which hetero does not reimplement. ``--quick`` runs
:data:`QUICK`, a few small files. Each device runs in one pytest subprocess with
:mod:`benchmarks.numba_cuda_alias` and :mod:`benchmarks.numba_cuda_suite_plugin` (a time budget per
file, ``--file-timeout``).

Expected failures are listed in ``tests/numba_cuda_xfails.txt``, each under a ``# reason:`` line:
a test id (``test_x.py::TestCase::test_y``), or a file (``test_x.py``: every test in it, or its
import), optionally followed by `` @ dev1,dev2`` to hold only on those devices. The exit status is
1 when a test fails that no entry covers, or a test an entry names exactly passes on a device the
entry covers (a stale entry). Writes ``benchmarks/results/numba_cuda_suite.json``: per device, per
file, the counts (passed, failed, errored, skipped) and the first line of each failure's reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import command_line, write_results
from benchmarks.numba_cuda_examples import _first_line

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.30.4"
WHEELS = ROOT / "build" / "wheels"
EXTRACTED = ROOT / "build" / "numba_cuda_suite" / VERSION
CUDAPY = "numba_cuda/numba/cuda/tests/cudapy/"
DATA = "numba_cuda/numba/cuda/tests/data/"
XFAILS = ROOT / "tests" / "numba_cuda_xfails.txt"
RESULTS = ROOT / "benchmarks" / "results" / "numba_cuda_suite.json"

#: The files run: kernels (arithmetic, math, atomics, intrinsics, warps, barriers, shared and local
#: memory, device functions) and the host API (arrays, streams, launches) a Numba-CUDA program uses.
FILES = tuple(f"test_{name}.py" for name in (
    "array", "array_args", "array_methods", "atomics", "blackscholes", "boolean", "casting", "complex",
    "complex_kernel", "constmem", "cooperative_groups", "device_func", "forall", "freevar", "frexp_ldexp",
    "globals", "idiv", "intrinsics", "iterators", "lang", "laplace", "localmem", "mandel", "matmul", "minmax",
    "montecarlo", "nondet", "operator", "powi", "py2_div_issue", "random", "reduction", "slicing", "sm",
    "sm_creation", "stream_api", "sync", "transpose", "userexc", "warp_ops",
))
QUICK = ("test_boolean.py", "test_forall.py", "test_freevar.py", "test_globals.py", "test_idiv.py", "test_slicing.py",
         "test_stream_api.py", "test_transpose.py")


def fetch_wheel() -> Path | None:
    """The pinned wheel, downloaded into ``build/wheels`` on first use; None where pip cannot fetch it."""
    found = sorted(WHEELS.glob(f"numba_cuda-{VERSION}-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", f"numba-cuda=={VERSION}", "--no-deps", "--quiet",
                        "-d", str(WHEELS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        found = sorted(WHEELS.glob(f"numba_cuda-{VERSION}-*.whl"))
    return found[0] if found else None


def extract(wheel: Path) -> Path:
    """The wheel's ``cudapy`` folder, extracted once under ``build/numba_cuda_suite``."""
    folder = EXTRACTED / CUDAPY
    if not (folder / "test_atomics.py").exists() or not (EXTRACTED / DATA).is_dir():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(EXTRACTED, [n for n in archive.namelist() if n.startswith((CUDAPY, DATA))])
    return folder


def read_entries(path: Path = XFAILS) -> list[tuple[str, frozenset[str] | None, str]]:
    """The xfails file's entries: (test id or file, the devices it holds on or None for all, reason).
    An entry with no ``# reason:`` line above it (a blank line ends a reason's group) is a ValueError."""
    entries: list[tuple[str, frozenset[str] | None, str]] = []
    reason = ""
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line:
            reason = ""
        elif line.startswith("# reason:"):
            reason = line.removeprefix("# reason:").strip()
        elif line.startswith("#"):
            continue
        elif not reason:
            raise ValueError(f"{path}:{number}: {line!r} has no '# reason:' line above it; say why it fails")
        else:
            test, _, devices = (part.strip() for part in line.partition(" @ "))
            entries.append((test, frozenset(d.strip() for d in devices.split(",")) if devices else None, reason))
    return entries


def expected(entries: list[tuple[str, frozenset[str] | None, str]], test: str, device: str) -> str | None:
    """The entry covering ``test`` (an id, or a file's name for its import) on ``device``, if any."""
    file = test.split("::")[0]
    for name, devices, _ in entries:
        if (name == test or name == file) and (devices is None or device in devices):
            return name
    return None


def run_device(workdir: Path, files: Sequence[str], device: str, file_timeout: float) -> dict[str, Any]:
    """One pytest run of ``files`` in ``workdir`` on ``device``: per file, the counts and problems."""
    report = workdir.parent / f"report-{device.replace(':', '_')}.json"
    reasons = report.with_suffix(".reasons.json")
    report.unlink(missing_ok=True)
    reasons.unlink(missing_ok=True)
    env = {**os.environ, "HETERO_COMPAT_DEVICE": device, "PYTHONDONTWRITEBYTECODE": "1",
           "HETERO_SUITE_DIR": str(workdir), "HETERO_SUITE_FILE_TIMEOUT": str(file_timeout),
           "HETERO_SUITE_REASONS": str(reasons),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    command = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-p", "benchmarks.numba_cuda_alias", "-p", "benchmarks.numba_cuda_suite_plugin",
               "--continue-on-collection-errors", "--json-report", f"--json-report-file={report}", "--json-report-omit", "log", "streams", "warnings",
               "keywords", "--tb=short", "-rN"]
    start = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, check=False, timeout=file_timeout * len(files) + 120)
        output = proc.stdout
    except subprocess.TimeoutExpired as exc:
        output = str(exc.stdout or "")
    seconds = time.monotonic() - start
    if not report.exists():
        raise RuntimeError(f"the suite did not run on {device}:\n{output[-4000:]}")
    extra = json.loads(reasons.read_text()) if reasons.exists() else {}
    return _counts(json.loads(report.read_text()), files, seconds, extra)


def _counts(data: dict[str, Any], files: Sequence[str], seconds: float, reasons: dict[str, str]) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {
        f: {"tests": 0, "passed": 0, "failed": 0, "errored": 0, "skipped": 0, "problems": {}, "passed_ids": []} for f in files}
    for collector in data.get("collectors", []):
        if collector.get("outcome") == "failed" and collector["nodeid"] in found:
            entry = found[collector["nodeid"]]
            lines = [ln for ln in str(collector.get("longrepr", "")).strip().splitlines() if ln.strip()]
            entry["errored"] += 1
            entry["problems"][collector["nodeid"]] = f"import: {lines[-1][:300] if lines else ''}"
    for test in _by_test(data.get("tests", [])):
        entry = found.setdefault(test["nodeid"].split("::")[0], {
            "tests": 0, "passed": 0, "failed": 0, "errored": 0, "skipped": 0, "problems": {}, "passed_ids": []})
        entry["tests"] += 1
        outcome = test["outcome"]
        entry[outcome] += 1
        if outcome == "passed":
            entry["passed_ids"].append(test["nodeid"])
        else:
            entry["problems"][test["nodeid"]] = f"{outcome}: {_first_line(test) or reasons.get(test['nodeid'], '')}"
    totals = {k: sum(e[k] for e in found.values()) for k in ("tests", "passed", "failed", "errored", "skipped")}
    return {"seconds": round(seconds, 1), **totals, "files": dict(sorted(found.items()))}


_RANK = {"errored": 4, "failed": 3, "passed": 2, "skipped": 1}


def _by_test(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One report per test id: pytest reports a test's subtests (``self.subTest``) as entries of their
    own with the same id; the test's outcome is its worst (an error, then a failure)."""
    worst: dict[str, dict[str, Any]] = {}
    for test in reports:
        outcome = test["outcome"].removeprefix("subtests ").removesuffix("subtests ")
        outcome = {"error": "errored", "xfailed": "failed", "xpassed": "passed"}.get(outcome, outcome)
        test = {**test, "outcome": outcome}
        held = worst.get(test["nodeid"])
        if held is None or _RANK.get(outcome, 0) > _RANK.get(held["outcome"], 0):
            worst[test["nodeid"]] = test
    return list(worst.values())


def judge(results: dict[str, Any], entries: list[tuple[str, frozenset[str] | None, str]]) -> tuple[list[str], list[str]]:
    """(unexpected failures, stale entries) over every device's results."""
    unexpected: list[str] = []
    stale: list[str] = []
    for device, found in results.items():
        for entry in found["files"].values():
            for test, problem in entry["problems"].items():
                if not problem.startswith("skipped") and expected(entries, test, device) is None:
                    unexpected.append(f"{device}: {test}: {problem}")
            for test in entry["passed_ids"]:
                if any(name == test and (devices is None or device in devices) for name, devices, _ in entries):
                    stale.append(f"{device}: {test}")
        for name, devices, _ in entries:
            if "::" not in name and name in found["files"] and (devices is None or device in devices):
                entry = found["files"][name]
                if entry["tests"] and entry["passed"] == entry["tests"]:
                    stale.append(f"{device}: {name} (every test in it passed)")
    return unexpected, stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="devices to run on (default: every device that runs kernels)")
    parser.add_argument("--quick", action="store_true", help=f"only {len(QUICK)} small files")
    parser.add_argument("--files", nargs="+", default=None, help="these test files of cudapy (default: the 40 of FILES)")
    parser.add_argument("--file-timeout", type=float, default=300.0, help="seconds per test file (default 300)")
    parser.add_argument("--xfails", default=str(XFAILS), help="the expected failures (default tests/numba_cuda_xfails.txt)")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/numba_cuda_suite.json")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other devices' results already in the results file (runs per device)")
    args = parser.parse_args(argv)
    wheel = fetch_wheel()
    if wheel is None:
        print(f"numba-cuda=={VERSION} could not be fetched from the package index: skipping its unit suite")
        return 0
    folder = extract(wheel)
    entries = read_entries(Path(args.xfails))
    files = tuple(args.files or (QUICK if args.quick else FILES))
    import hetero

    names = args.devices or [d.name for d in hetero.devices() if d.runtime.kernel_target() is not None]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hetero-numba-cuda-suite-") as temp:
        workdir = Path(temp) / "cudapy"
        shutil.copytree(folder, workdir, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
        shutil.copytree(EXTRACTED / DATA, workdir.parent / "data", ignore=shutil.ignore_patterns("__pycache__"))
        (workdir / "__init__.py").write_text("")  # a package (for the files' relative imports), without
        # the wheel's __init__, whose load_tests hook is unittest's
        for name in names:
            print(f"numba-cuda {VERSION} cudapy suite on {name} ({len(files)} files) ...", flush=True)
            results[name] = found = run_device(workdir, files, name, args.file_timeout)
            print(f"  {name}: {found['passed']} passed, {found['failed']} failed, {found['errored']} errored, "
                  f"{found['skipped']} skipped of {found['tests']} tests, in {found['seconds']:.0f} s", flush=True)
            for file, entry in found["files"].items():
                print(f"    {file:40} {entry['passed']:4} passed {entry['failed']:4} failed {entry['errored']:3} errored "
                      f"{entry['skipped']:3} skipped", flush=True)
    unexpected, stale = judge(results, entries)
    if not args.no_write:
        if args.merge and RESULTS.exists():
            earlier = json.loads(RESULTS.read_text())
            if earlier.get("files") == list(files):
                results = {**earlier.get("devices", {}), **results}
        path = write_results("numba_cuda_suite", {
            "suite": f"numba-cuda=={VERSION} {CUDAPY}", "files": list(files),
            "expected_failures": [f"{n} @ {','.join(sorted(d))}" if d else n for n, d, _ in entries],
            "devices": results,
        }, command_line("benchmarks.numba_cuda_suite", list(argv) if argv is not None else sys.argv[1:]))
        print(f"wrote {path}")
    xfails = Path(args.xfails).name
    for device, found in results.items():
        spent = sorted({t.split("::")[0] for e in found["files"].values() for t, p in e["problems"].items()
                        if "file timeout" in p})
        if spent:
            print(f"WARNING: on {device} the time budget ran out in {', '.join(spent)}: their remaining tests were "
                  "skipped (raise --file-timeout)")
    for item in unexpected:
        print(f"FAILED, not listed in {xfails}: {item}")
    for item in stale:
        print(f"stale entry in {xfails} (it passed): {item}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
