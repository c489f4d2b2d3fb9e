"""A pytest plugin for :mod:`benchmarks.numba_cuda_suite`: the suite's own package name, and a
time budget per test file.

Loaded after :mod:`benchmarks.numba_cuda_alias` (which makes ``numba.cuda`` name
:mod:`hetero.compat.cuda`). It makes ``numba.cuda.tests.cudapy`` the folder the suite's files were
extracted to (``HETERO_SUITE_DIR``), so their ``from numba.cuda.tests.cudapy.complex_usecases
import …`` finds the helper modules beside them, and ``numba.cuda.testing.test_data_dir`` the
suite's ``data`` folder beside it. Each file gets ``HETERO_SUITE_FILE_TIMEOUT``
seconds: a test still running when its file's budget is spent is interrupted (SIGALRM, so a hang
inside a C call ends when the call returns) and skipped, as are the file's remaining tests, with a
reason saying so (the runner lists such files) — one slow file cannot eat the device's whole run. The first failure of each
test's ``self.subTest`` blocks, which pytest's JSON report leaves out, is written to
``HETERO_SUITE_REASONS`` (a JSON object: test id -> the failure's last line).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_started: dict[str, float] = {}
_reasons: dict[str, str] = {}


def _budget() -> float:
    return float(os.environ.get("HETERO_SUITE_FILE_TIMEOUT", "0") or 0)


def pytest_configure(config: Any) -> None:
    from benchmarks.numba_cuda_alias import install

    install()  # idempotent: whichever plugin pytest configures first
    folder = os.environ.get("HETERO_SUITE_DIR")
    if folder:
        package = types.ModuleType("numba.cuda.tests.cudapy")
        package.__path__ = [folder]  # type: ignore[attr-defined]
        sys.modules["numba.cuda.tests.cudapy"] = package
        sys.modules["numba.cuda.tests"].cudapy = package  # type: ignore[attr-defined]
        sys.modules["numba.cuda.testing"].test_data_dir = Path(folder).parent / "data"  # type: ignore[attr-defined]


def _on_alarm(signum: int, frame: Any) -> None:
    # a skip, not a failure: a spent budget says how loaded the machine was, not whether hetero conforms
    raise pytest.skip.Exception(f"file timeout: the file's {_budget():.0f} s budget ran out during this test")


def pytest_runtest_setup(item: Any) -> None:
    budget = _budget()
    start = _started.setdefault(item.nodeid.split("::")[0], time.monotonic())
    if budget > 0 and time.monotonic() - start >= budget:
        pytest.skip(f"file timeout: the file's {budget:.0f} s budget was spent")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    # the alarm is armed only around the test's own code: raised inside pytest's reporting it would
    # end the whole session
    budget = _budget()
    left = budget - (time.monotonic() - _started.get(item.nodeid.split("::")[0], time.monotonic()))
    if budget <= 0 or left <= 0:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed and report.nodeid not in _reasons:
        lines = [line for line in str(report.longrepr).strip().splitlines() if line.strip()]
        if lines:
            _reasons[report.nodeid] = lines[-1][:300]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("HETERO_SUITE_REASONS")
    if path:
        Path(path).write_text(json.dumps(_reasons))
