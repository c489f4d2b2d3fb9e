"""benchmarks/array_api_conformance.py, the runner of the array API standard's suite: its xfails
file must give a reason for every entry, and a missing suite skips the run with a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import array_api_conformance as runner


def test_the_projects_xfails_file_gives_a_reason_for_every_entry() -> None:
    entries = runner.read_xfails()
    assert all(reason for reason in entries.values())
    assert all(nodeid.startswith("array_api_tests/") for nodeid in entries)


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "xfails.txt"
    path.write_text("# reason: complex sort is not defined\narray_api_tests/test_a.py::test_x\n\n"
                    "array_api_tests/test_b.py::test_y\n")
    with pytest.raises(ValueError, match=r"xfails.txt:4: .*test_y.* no '# reason:'"):
        runner.read_xfails(path)
    path.write_text("# reason: one reason for a group\narray_api_tests/test_a.py::test_x\narray_api_tests/test_a.py::test_z\n")
    assert runner.read_xfails(path) == {"array_api_tests/test_a.py::test_x": "one reason for a group",
                                        "array_api_tests/test_a.py::test_z": "one reason for a group"}


def test_a_missing_suite_skips_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["--suite", str(tmp_path / "absent"), "--devices", "cpu"]) == 0
    assert "skipping the conformance run" in capsys.readouterr().out
