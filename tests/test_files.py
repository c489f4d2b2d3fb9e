"""hetero.core.files: the one atomic write, and the check that no module writes its own."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from hetero.core.files import JsonStore, StoreCorrupt, atomic_write

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("hetero", "backends", "compiler", "scheduler", "fault")
# Renames that are not a file write: checkpoint directories installed whole or moved out of sight
# to be pruned, the OpenCL vendors folder made whole, a corrupt quarantine store moved aside.
OTHER_RENAMES = {"hetero/checkpoint/files.py", "hetero/checkpoint/store.py", "backends/opencl/icd.py", "fault/quarantine.py"}


def test_replaces_the_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "entry.bin"
    atomic_write(target, b"old")
    atomic_write(target, "new \u00e9")
    assert target.read_bytes() == "new \u00e9".encode()
    assert [p.name for p in tmp_path.iterdir()] == ["entry.bin"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "store.json"
    atomic_write(target, b"kept")

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        atomic_write(target, b"lost", durable=True)
    assert target.read_bytes() == b"kept"
    assert [p.name for p in tmp_path.iterdir()] == ["store.json"]


def test_durable_writes_fsync_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    atomic_write(tmp_path / "a", b"x")
    assert not synced
    atomic_write(tmp_path / "b", b"x", durable=True, mode=0o644)
    assert len(synced) == 1
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o644


def test_no_module_writes_a_file_atomically_by_itself() -> None:
    # One atomic write in the project: a module that renames a file into place itself
    # (os.replace / os.rename / Path.replace) does the job again, with its own fsync rules.
    offenders = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name == "hetero/core/files.py" or name in OTHER_RENAMES:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("replace", "rename"):
                    owner = node.func.value
                    if isinstance(owner, ast.Name) and owner.id == "os" or len(node.args) == 1 and not node.keywords:
                        offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"rename a file into place with hetero.core.files.atomic_write: {offenders}"


def test_locked_serialises_processes_on_a_sibling_lock_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    from hetero.core.files import locked

    store, done = tmp_path / "new" / "store.json", tmp_path / "done"
    code = ("import sys, time; from pathlib import Path; from hetero.core.files import locked\n"
            "with locked(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(0.5)\n"
            "    Path(sys.argv[2]).write_text('released')\n")
    other = subprocess.Popen([sys.executable, "-c", code, str(store), str(done)], stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdout.readline() == "held\n"
    with locked(store):  # only once the other process's block has ended
        assert done.read_text() == "released"
    assert other.wait(timeout=30) == 0
    lock = tmp_path / "new" / "store.json.lock"
    assert lock.exists() and not store.exists() and stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_no_module_takes_a_file_lock_by_itself() -> None:
    # One lock for hetero's JSON stores (quarantine, cost model): hetero.core.files.locked.
    offenders = [f"{path.relative_to(ROOT).as_posix()}" for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))
                 if path.relative_to(ROOT).as_posix() != "hetero/core/files.py" and "fcntl.flock(" in path.read_text(encoding="utf-8")]
    assert not offenders, f"take store locks with hetero.core.files.locked: {offenders}"


def _counter_store(path: Path) -> JsonStore[dict[str, int]]:
    def load(data: object) -> dict[str, int]:
        if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
            raise StoreCorrupt("not a mapping of counts")
        return dict(data)

    return JsonStore(path, "counter store", load=load, dump=dict, empty=dict)


def test_a_json_store_reads_empty_then_writes_back_only_what_changed(tmp_path: Path) -> None:
    store = _counter_store(tmp_path / "state" / "counts.json")
    assert store.read() == {}
    with store.transaction(on_corrupt=lambda problem: {}) as counts:
        counts["a"] = 1
    assert store.read() == {"a": 1}
    before = store.path.stat().st_ino
    with store.transaction(on_corrupt=lambda problem: {}) as counts:
        assert counts == {"a": 1}  # unchanged: not rewritten
    assert store.path.stat().st_ino == before
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["counts.json", "counts.json.lock"]


@pytest.mark.parametrize(("content", "problem"), [
    (b"\xff\xfe", "not UTF-8"), (b"{nope", "not valid JSON"), (b'{"a": NaN}', "not valid JSON"),
    (b"[" * 100_000, "nested too deep to be a counter store"), (b'{"a": "x"}', "not a mapping of counts")])
def test_a_corrupt_json_store_says_what_is_wrong_and_can_be_set_aside(tmp_path: Path, content: bytes,
                                                                      problem: str) -> None:
    store = _counter_store(tmp_path / "counts.json")
    store.path.write_bytes(content)
    with pytest.raises(StoreCorrupt, match=problem):
        store.read()
    seen: list[str] = []

    def reset(error: StoreCorrupt) -> dict[str, int]:
        seen.append(str(error))
        store.set_aside()
        return {}

    with store.transaction(on_corrupt=reset) as counts:
        counts["b"] = 2
    assert len(seen) == 1 and problem in seen[0]
    assert store.read() == {"b": 2}
    [backup] = tmp_path.glob("counts.json.corrupt-*")
    assert backup.read_bytes() == content  # kept for inspection, never lost
