"""benchmarks.numba_cuda_suite: numba-cuda's unit suite as a conformance run. The runner itself, on
one small file of the suite on cpu (skipped where the pinned wheel cannot be fetched), and its rules:
an unlisted failure or a listed test that passes fails the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import numba_cuda_suite as suite

BOOLEAN = "test_boolean.py::TestCudaBoolean::test_boolean"


@pytest.fixture(scope="module")
def wheel() -> Path:
    found = suite.fetch_wheel()
    if found is None:
        pytest.skip(f"numba-cuda=={suite.VERSION} cannot be fetched from the package index here")
    return found


def test_a_small_file_runs_on_cpu_and_a_stale_entry_fails_the_run(wheel: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "none.txt"
    empty.write_text("")
    assert suite.main(["--devices", "cpu", "--files", "test_boolean.py", "--no-write", "--xfails", str(empty)]) == 0
    out = capsys.readouterr().out
    assert "cpu: 1 passed, 0 failed, 0 errored, 0 skipped of 1 tests" in out
    stale = tmp_path / "stale.txt"
    stale.write_text(f"# reason: listed to see the run fail when it passes\n{BOOLEAN}\n")
    assert suite.main(["--devices", "cpu", "--files", "test_boolean.py", "--no-write", "--xfails", str(stale)]) == 1
    assert f"stale entry in stale.txt (it passed): cpu: {BOOLEAN}" in capsys.readouterr().out


def test_entries_need_a_reason_and_may_name_devices(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("# reason: r1\ntest_a.py::T::t @ cpu, opencl:0\ntest_b.py\n\ntest_c.py::T::t\n")
    with pytest.raises(ValueError, match="no '# reason:' line"):
        suite.read_entries(path)
    path.write_text("# reason: r1\ntest_a.py::T::t @ cpu, opencl:0\ntest_b.py\n")
    entries = suite.read_entries(path)
    assert entries == [("test_a.py::T::t", frozenset({"cpu", "opencl:0"}), "r1"), ("test_b.py", None, "r1")]
    assert suite.expected(entries, "test_a.py::T::t", "cpu") == "test_a.py::T::t"
    assert suite.expected(entries, "test_a.py::T::t", "oneapi:0") is None
    assert suite.expected(entries, "test_b.py::T::u", "oneapi:0") == "test_b.py"


def test_unlisted_failures_and_stale_entries_are_reported() -> None:
    results = {"cpu": {"files": {"test_a.py": {
        "tests": 2, "passed": 1, "failed": 1, "errored": 0, "skipped": 0,
        "problems": {"test_a.py::T::bad": "failed: boom"}, "passed_ids": ["test_a.py::T::good"]}}}}
    unexpected, stale = suite.judge(results, [("test_a.py::T::good", None, "r")])
    assert unexpected == ["cpu: test_a.py::T::bad: failed: boom"] and stale == ["cpu: test_a.py::T::good"]
    unexpected, stale = suite.judge(results, [("test_a.py", frozenset({"cpu"}), "r")])
    assert unexpected == [] and stale == []
