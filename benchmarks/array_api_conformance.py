"""The Python array API standard's own conformance suite (data-apis/array-api-tests) against
``hetero.xp``, on each device (as many devices at once as ``--jobs``, default one per core, each
run a process of its own in a copy of the suite); pass/fail/skip counts per device.

    python -m benchmarks.array_api_conformance [--devices cpu oneapi:0 opencl:0] [--max-examples 5]
        [--jobs N] [--suite ../shared/peers/array-api-tests] [--tests array_api_tests/test_sorting_functions.py ...]

``make conformance`` runs it with the budget CI uses. The suite lives read-only in
``../shared/peers/array-api-tests`` (or ``HETERO_ARRAY_API_TESTS``); it is copied to a temporary
folder and run there, unchanged, with ``ARRAY_API_TESTS_MODULE=hetero.xp`` and ``HETERO_DEVICE``
naming the device the namespace's creation functions default to. Where the folder is absent the
run is skipped with a message (exit status 0). Hypothesis runs derandomized with a fixed
``--max-examples``, so a rerun collects and generates the same cases.

Known deviations are listed in ``tests/array_api_xfails.txt``, each under a ``# reason:`` line
(the runner refuses an entry without one); they count as not passed. The pass rate is
passed / collected. Writes ``benchmarks/results/array_api_conformance.json`` (counts per device,
and the ids that failed) unless ``--tests`` narrows the run. The exit status is 1 when a test
outside the xfails file fails on any device. An xfail that passes (on one device or on all: the
file is shared, and floating-point results of special values may differ by device) is listed as
XPASS, and an entry that passes on every device run is stale: remove it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import command_line, write_results

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITE = ROOT.parent / "shared" / "peers" / "array-api-tests"
XFAILS = ROOT / "tests" / "array_api_xfails.txt"
DEFAULT_MAX_EXAMPLES = 5
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


def read_xfails(path: Path = XFAILS) -> dict[str, str]:
    """The xfails file's test ids, each with the reason above it. An id with no ``# reason:``
    line before it (a blank line ends a reason's group) is a ValueError naming the line."""
    entries: dict[str, str] = {}
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
            entries[line] = reason
    return entries


def _suite(path: str | None) -> Path | None:
    found = Path(path or os.environ.get("HETERO_ARRAY_API_TESTS") or DEFAULT_SUITE)
    return found if (found / "array_api_tests").is_dir() else None


def run_device(suite: Path, device: str, max_examples: int, tests: Sequence[str], workdir: Path) -> dict[str, Any]:
    """One pytest run of the suite (a copy in ``workdir``) with ``device`` as the default device."""
    report = workdir / f"report-{device.replace(':', '_')}.json"
    env = {**os.environ, "ARRAY_API_TESTS_MODULE": "hetero.xp", "ARRAY_API_TESTS_VERSION": "2024.12",
           "HETERO_DEVICE": device, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", *(tests or ["array_api_tests"]), "-q", "-p", "no:cacheprovider",
               "--hypothesis-max-examples", str(max_examples), "--hypothesis-derandomize", "--disable-deadline",
               "--xfails-file", str(XFAILS), "--json-report", f"--json-report-file={report}",
               "--json-report-omit", "collectors", "log", "streams", "traceback", "warnings", "keywords",
               "-W", "ignore::pytest.PytestUnknownMarkWarning", "--tb=no", "-rN"]
    start = time.monotonic()
    tail: list[str] = []
    with subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # pytest's progress (dots and percentages), as it comes
            sys.stdout.write(f"  [{device}] {line}" if line.strip() else line)
            sys.stdout.flush()
            tail = (tail + [line])[-60:]
    seconds = time.monotonic() - start
    if not report.exists():
        raise RuntimeError(f"the suite did not run on {device} (pytest exit {proc.returncode}):\n{''.join(tail)}")
    data = json.loads(report.read_text())
    counts = Counter(test["outcome"] for test in data.get("tests", []))
    collected = int(data.get("summary", {}).get("collected", sum(counts.values())))
    failed = sorted(t["nodeid"] for t in data.get("tests", []) if t["outcome"] in ("failed", "error"))
    xpassed = sorted(t["nodeid"] for t in data.get("tests", []) if t["outcome"] == "xpassed")
    result: dict[str, Any] = {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}
    result.update(collected=collected, pass_rate=round(counts.get("passed", 0) / collected, 4) if collected else 0.0,
                  seconds=round(seconds, 1), failed_ids=failed, xpassed_ids=xpassed)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="devices to run on (default: every device present)")
    parser.add_argument("--max-examples", type=int, default=DEFAULT_MAX_EXAMPLES, help="hypothesis examples per test")
    parser.add_argument("--suite", default=None, help="the array-api-tests folder (default ../shared/peers/array-api-tests)")
    parser.add_argument("--jobs", type=int, default=0, help="devices whose runs go at once (default: one per core)")
    parser.add_argument("--tests", nargs="*", default=[], help="test files or ids (default: the whole suite; "
                        "a narrowed run writes no results file)")
    args = parser.parse_args(argv)
    suite = _suite(args.suite)
    if suite is None:
        print(f"array-api-tests not found at {args.suite or DEFAULT_SUITE}: skipping the conformance run "
              "(set HETERO_ARRAY_API_TESTS to its folder)")
        return 0
    xfails = read_xfails()
    import hetero

    names = args.devices or [d.name for d in hetero.devices()]
    results: dict[str, Any] = {}
    jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(names)))
    with tempfile.TemporaryDirectory(prefix="hetero-array-api-") as temp:

        def run(name: str) -> dict[str, Any]:  # each device's run in a copy of its own
            workdir = Path(temp) / name.replace(":", "_") / "array-api-tests"
            shutil.copytree(suite, workdir, ignore=shutil.ignore_patterns(".git", "__pycache__", ".hypothesis"))
            print(f"array-api-tests on {name} (--max-examples {args.max_examples}) ...", flush=True)
            return run_device(suite, name, args.max_examples, args.tests, workdir)

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            runs = {name: pool.submit(run, name) for name in names}
        for name in names:
            results[name] = found = runs[name].result()
            print(f"  {name}: {found['passed']}/{found['collected']} passed ({100 * found['pass_rate']:.1f} %), "
                  f"{found['failed'] + found['error']} failed, {found['xfailed']} xfailed, {found['skipped']} skipped, "
                  f"{found['xpassed']} xpassed, in {found['seconds']:.0f} s", flush=True)
            for nodeid in found["failed_ids"]:
                print(f"    FAILED {nodeid}")
            for nodeid in found["xpassed_ids"]:
                print(f"    XPASS (listed in {XFAILS.name}, passed here) {nodeid}")
    if not args.tests:
        provenance = (suite / "PROVENANCE.md").read_text().splitlines() if (suite / "PROVENANCE.md").exists() else []
        path = write_results("array_api_conformance", {
            "suite": str(suite), "suite_provenance": [line for line in provenance if " at " in line][:2],
            "api_version": "2024.12", "max_examples": args.max_examples, "xfails_listed": len(xfails),
            "devices": results,
        }, command_line("benchmarks.array_api_conformance", list(argv) if argv is not None else sys.argv[1:]))
        print(f"wrote {path}")
    stale = set.intersection(*(set(r["xpassed_ids"]) for r in results.values())) if results else set()
    for nodeid in sorted(stale):
        print(f"stale entry in {XFAILS.name} (it passed on every device run): {nodeid}")
    bad = any(r["failed"] or r["error"] for r in results.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
