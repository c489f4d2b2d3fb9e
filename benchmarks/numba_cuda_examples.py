"""numba-cuda's own documented examples (``tests/doc_examples``), unchanged, on hetero: each file's
kernels and checks, on each device in turn, with ``numba.cuda`` naming :mod:`hetero.compat.cuda`.

    python -m benchmarks.numba_cuda_examples [--devices cpu oneapi:0 opencl:0] [--suite DIR]

The examples live read-only in ``../shared/peers/numba-cuda`` (or ``HETERO_NUMBA_CUDA_EXAMPLES``);
they are copied to a temporary folder and run there with pytest and the plugin
:mod:`benchmarks.numba_cuda_alias`, which makes ``from numba import cuda`` import hetero's
module at run time (no file is edited). Where the folder is absent the run is skipped with a
message (exit status 0).

A file passes on a device when every test in it passes there. Files that do not pass yet are
listed in ``tests/numba_cuda_examples_expected.txt``, each under a ``# reason:`` line; the exit
status is 1 when a file outside that list fails on any device, or a listed one passes on every
device (a stale entry). Writes ``benchmarks/results/numba_cuda_examples.json``: per device, per
file, the outcome and the first line of each failure.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.array_api_conformance import read_xfails
from benchmarks.harness import command_line, write_results

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITE = ROOT.parent / "shared" / "peers" / "numba-cuda"
EXAMPLES = Path("numba_cuda/numba/cuda/tests/doc_examples")
EXPECTED = ROOT / "tests" / "numba_cuda_examples_expected.txt"


def _suite(path: str | None) -> Path | None:
    found = Path(path or os.environ.get("HETERO_NUMBA_CUDA_EXAMPLES") or DEFAULT_SUITE)
    return found if (found / EXAMPLES).is_dir() else None


def _first_line(test: dict[str, Any]) -> str:
    for stage in ("setup", "call", "teardown"):
        crash = test.get(stage, {}).get("crash") or {}
        if crash.get("message"):
            lines = [line for line in str(crash["message"]).strip().splitlines() if line.strip()]
            return (lines[-1] if lines[0].lstrip().startswith('File "') else lines[0])[:300]  # a CompileError's text
        longrepr = test.get(stage, {}).get("longrepr")
        if longrepr:
            return str(longrepr).strip().splitlines()[-1][:300]
    return ""


def run_device(workdir: Path, device: str) -> dict[str, Any]:
    """One pytest run of the examples in ``workdir`` on ``device``: per file, its outcome."""
    report = workdir.parent / f"report-{device.replace(':', '_')}.json"
    env = {**os.environ, "HETERO_COMPAT_DEVICE": device, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    command = [sys.executable, "-m", "pytest", ".", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.numba_cuda_alias",
               "--json-report", f"--json-report-file={report}", "--json-report-omit", "collectors", "log", "streams",
               "warnings", "keywords", "--tb=short", "-rN"]
    start = time.monotonic()
    proc = subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    if not report.exists():
        raise RuntimeError(f"the examples did not run on {device} (pytest exit {proc.returncode}):\n{proc.stdout[-4000:]}")
    data = json.loads(report.read_text())
    files: dict[str, dict[str, Any]] = {}
    for test in data.get("tests", []):
        name = test["nodeid"].split("::")[0]
        entry = files.setdefault(name, {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "problems": []})
        entry["tests"] += 1
        outcome = "failed" if test["outcome"] == "error" else test["outcome"]
        entry[outcome] = entry.get(outcome, 0) + 1
        if outcome in ("failed", "skipped"):
            entry["problems"].append(f"{test['nodeid'].split('::')[-1]}: {outcome}: {_first_line(test)}")
    for entry in files.values():
        entry["outcome"] = "passed" if entry["passed"] == entry["tests"] else \
            "failed" if entry["failed"] else "skipped"
    return {"seconds": round(seconds, 1), "files": dict(sorted(files.items())),
            "files_passed": sum(e["outcome"] == "passed" for e in files.values()), "files_total": len(files)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="devices to run on (default: every device that runs kernels)")
    parser.add_argument("--suite", default=None, help="the numba-cuda peer folder (default ../shared/peers/numba-cuda)")
    args = parser.parse_args(argv)
    suite = _suite(args.suite)
    if suite is None:
        print(f"numba-cuda's doc examples not found at {args.suite or DEFAULT_SUITE}: skipping them "
              "(set HETERO_NUMBA_CUDA_EXAMPLES to the peer folder)")
        return 0
    expected = read_xfails(EXPECTED)
    import hetero

    names = args.devices or [d.name for d in hetero.devices() if d.runtime.kernel_target() is not None]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hetero-numba-cuda-") as temp:
        workdir = Path(temp) / "doc_examples"
        shutil.copytree(suite / EXAMPLES, workdir, ignore=shutil.ignore_patterns("__pycache__"))
        for name in names:
            print(f"numba-cuda doc examples on {name} ...", flush=True)
            results[name] = found = run_device(workdir, name)
            print(f"  {name}: {found['files_passed']}/{found['files_total']} files pass, in {found['seconds']:.0f} s")
            for file, entry in found["files"].items():
                note = "" if entry["outcome"] == "passed" else f"  ({'; '.join(entry['problems'])[:400]})"
                print(f"    {entry['outcome']:7} {file}{note}", flush=True)
    unexpected = sorted({f"{device}: {file}" for device, found in results.items() for file, entry in found["files"].items()
                         if entry["outcome"] == "failed" and file not in expected})
    stale = sorted(file for file in expected
                   if results and all(r["files"].get(file, {}).get("outcome") == "passed" for r in results.values()))
    path = write_results("numba_cuda_examples", {
        "suite": str(suite / EXAMPLES), "expected_not_passing": expected, "devices": results,
    }, command_line("benchmarks.numba_cuda_examples", list(argv) if argv is not None else sys.argv[1:]))
    print(f"wrote {path}")
    for item in unexpected:
        print(f"FAILED, not listed in {EXPECTED.name}: {item}")
    for file in stale:
        print(f"stale entry in {EXPECTED.name} (it passed on every device run): {file}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
