"""The compiled-kernel cache: keys, memory and disk round trips, damaged entries,
concurrent writers, an unwritable cache directory, and the ``hetero cache`` commands."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hetero.compiler.build import cache as cache_module
from hetero.compiler.build.cache import (
    FORMAT_VERSION, Cache, CacheKey, CacheWarning, DiskStorage, MemoryStorage, Storage, atomic_write, default_cache,
    reset_default_cache,
)

from hetero.core.config import reload_config

KEY = CacheKey.from_ir("kernel void add(...)", dialect="opencl", target="gpu-0123", toolchain="OpenCL C 3.0 / driver 550.1",
                       options=("-cl-fast-relaxed-math",))


def key(n: int) -> CacheKey:
    return dataclasses.replace(KEY, ir=hashlib.sha256(str(n).encode()).hexdigest())


# --- keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"ir": hashlib.sha256(b"other ir").hexdigest()},
        {"dialect": "cuda"},
        {"target": "gpu-4567"},
        {"toolchain": "OpenCL C 3.0 / driver 555.0"},
        {"options": ()},
        {"options": ("-cl-fast-relaxed-math", "-O3")},
        {"hetero": "99.0.0"},
        {"extra": (("fastmath", "1"),)},
    ],
    ids=lambda change: next(iter(change)),
)
def test_key_digest_changes_when_any_part_changes(change: dict[str, object]) -> None:
    assert dataclasses.replace(KEY, **change).digest != KEY.digest  # type: ignore[arg-type]


def test_key_digest_is_stable_and_is_the_sha256_of_the_canonical_parts() -> None:
    again = CacheKey.from_ir("kernel void add(...)", dialect="opencl", target="gpu-0123",
                             toolchain="OpenCL C 3.0 / driver 550.1", options=["-cl-fast-relaxed-math"])
    assert again == KEY and again.digest == KEY.digest
    canonical = json.dumps(KEY.parts(), sort_keys=True, separators=(",", ":")).encode()
    assert KEY.digest == hashlib.sha256(canonical).hexdigest()
    assert KEY.parts()["ir"] == hashlib.sha256(b"kernel void add(...)").hexdigest()
    assert set(KEY.parts()) == {"ir", "dialect", "target", "toolchain", "options", "hetero"}
    # extra parts: order of declaration does not matter, names may not shadow a named part
    a = dataclasses.replace(KEY, extra=(("a", "1"), ("b", "2")))
    b = dataclasses.replace(KEY, extra=(("b", "2"), ("a", "1")))
    assert a.digest == b.digest
    with pytest.raises(ValueError, match="target"):
        dataclasses.replace(KEY, extra=(("target", "x"),))


def test_key_logs_each_part_hash_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    fresh = dataclasses.replace(KEY, extra=(("fastmath", "1"),))
    with caplog.at_level(logging.DEBUG, logger="hetero.compiler.build.cache"):
        assert len(fresh.digest) == 64
    text = caplog.text
    for name, part in fresh.parts().items():
        part_hash = hashlib.sha256(json.dumps(part, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        assert f"part {name} hash {part_hash}" in text


# --- round trips ------------------------------------------------------------


class CountingStorage(Storage):
    """The smallest storage there is: two methods (and a counter, to see the memory layer work)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.loads = 0

    def load(self, key_digest: str) -> bytes | None:
        self.loads += 1
        return self.data.get(key_digest)

    def store(self, key_digest: str, data: bytes) -> None:
        self.data[key_digest] = data


def test_round_trip_in_memory_and_the_memory_layer_answers_first() -> None:
    storage = CountingStorage()
    cache = Cache(storage)
    assert cache.get(KEY) is None
    cache.put(KEY, b"binary")
    assert cache.get(KEY) == b"binary" and cache.get(KEY.digest) == b"binary"
    assert storage.loads == 1  # only the first miss reached the storage
    other = Cache(storage)  # another "process" sharing the storage
    assert other.get(KEY) == b"binary"

    plain = Cache(MemoryStorage())
    plain.put(KEY, bytearray(b"abc"))
    assert plain.get(KEY) == b"abc" and plain.info()["entries"] == 1


def test_round_trip_on_disk(tmp_path: Path) -> None:
    Cache(DiskStorage(tmp_path)).put(KEY, b"\x00compiled\xff" * 1000)
    fresh = Cache(DiskStorage(tmp_path))  # empty memory: reads the file
    assert fresh.get(KEY) == b"\x00compiled\xff" * 1000
    assert fresh.get(key(1)) is None
    entry = tmp_path / KEY.digest[:2] / f"{KEY.digest}.bin"
    assert entry.is_file()
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temp files left behind
    Cache(DiskStorage(tmp_path)).put(KEY, b"")  # empty payloads are valid too
    assert Cache(DiskStorage(tmp_path)).get(KEY) == b""


def test_threads_share_one_cache() -> None:
    cache = Cache(MemoryStorage())
    errors: list[str] = []

    def work(n: int) -> None:
        for i in range(200):
            cache.put(key(i), f"{i}".encode())
            got = cache.get(key((i * 7 + n) % 200))
            if got is not None and got != f"{(i * 7 + n) % 200}".encode():
                errors.append(f"thread {n}: {got!r}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and cache.info()["entries"] == 200


# --- damaged entries --------------------------------------------------------


def _flip_payload_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


def _set_version(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8:10] = (FORMAT_VERSION + 1).to_bytes(2, "little")
    path.write_bytes(bytes(data))


CORRUPTIONS: dict[str, Callable[[Path], object]] = {
    "flipped payload byte": _flip_payload_byte,
    "truncated payload": lambda p: p.write_bytes(p.read_bytes()[:-10]),
    "truncated header": lambda p: p.write_bytes(p.read_bytes()[:20]),
    "empty file": lambda p: p.write_bytes(b""),
    "garbage header": lambda p: p.write_bytes(b"garbage!" * 20 + p.read_bytes()[160:]),
    "wrong format version": _set_version,
    "another key's entry": lambda p: p.write_bytes((p.parent / "other").read_bytes()),
}


@pytest.mark.parametrize("damage", CORRUPTIONS, ids=str)
def test_damaged_entry_warns_is_removed_and_rebuilt(tmp_path: Path, damage: str) -> None:
    storage = DiskStorage(tmp_path)
    storage.store(KEY.digest, b"payload-" * 50)
    entry = storage.path_of(KEY.digest)
    (entry.parent / "other").write_bytes(storage.path_of(KEY.digest).read_bytes())
    storage.store(key(2).digest, b"x" * 400)
    (entry.parent / "other").write_bytes(storage.path_of(key(2).digest).read_bytes())
    CORRUPTIONS[damage](entry)

    cache = Cache(DiskStorage(tmp_path))
    with pytest.warns(CacheWarning, match=KEY.digest):
        assert cache.get(KEY) is None
    assert not entry.exists()

    cache.put(KEY, b"rebuilt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Cache(DiskStorage(tmp_path)).get(KEY) == b"rebuilt"


# --- concurrent writers -----------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time, warnings
    from pathlib import Path
    from hetero.compiler.build.cache import Cache, CacheKey, DiskStorage

    warnings.simplefilter("error")  # a discarded (corrupt) entry fails the writer
    root, me, writers, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    key = CacheKey("0" * 64, "cpu", "x86_64", "llvm", ())

    def payload(n):
        size = 1 + n * 97_013  # a different size per writer
        return (f"writer {n};".encode() * (size // 10 + 1))[:size]

    valid = {payload(n) for n in range(writers)}
    storage = DiskStorage(root)
    while not (root / "go").exists():
        time.sleep(0.001)
    reads = 0
    for i in range(rounds):
        Cache(storage).put(key, payload(me))
        for reader in (storage.load(key.digest), Cache(DiskStorage(root)).get(key)):
            if reader not in valid:
                sys.exit(f"writer {me} round {i}: read {None if reader is None else len(reader)} bytes, not a writer's payload")
            reads += 1
    print(reads)
    """
)


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path: Path) -> None:
    writers, rounds = 6, 60
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(n), str(writers), str(rounds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(writers)
    ]
    time.sleep(0.5)  # let every interpreter start, then release them together
    (tmp_path / "go").touch()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert int(out) == 2 * rounds
    digest = CacheKey("0" * 64, "cpu", "x86_64", "llvm", ()).digest
    assert [p.name for p in (tmp_path / digest[:2]).iterdir()] == [f"{digest}.bin"]  # no temp files left


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "module.py"
    atomic_write(target, b"x = 1\n")
    atomic_write(target, b"x = 2\n")
    assert target.read_bytes() == b"x = 2\n" and list(tmp_path.iterdir()) == [target]


# --- unwritable cache directory ---------------------------------------------


def test_unwritable_cache_dir_warns_once_and_compilation_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file: nothing can be created under it, even by root")
    cache = Cache(DiskStorage(blocker / "cache"))
    assert cache.get(KEY) is None  # a missing root is just a miss
    with pytest.warns(CacheWarning, match="blocker") as caught:
        cache.put(KEY, b"compiled")
    assert len(caught) == 1
    assert cache.get(KEY) == b"compiled"  # the process still keeps it in memory
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: no more
        cache.put(key(1), b"more")
        assert Cache(DiskStorage(blocker / "cache")).get(KEY) is None

    with pytest.warns(CacheWarning, match="temporary directory"):
        module = cache.path_for(KEY, ".py")
    assert module.parent.is_dir() and not str(module).startswith(str(blocker))
    module.write_text("x = 1\n")
    info = cache.info()
    assert info["modules"] == 1 and info["kernels"] == 0
    assert cache.clear() == 1 and not module.parent.exists()


# --- generated modules, info and clear --------------------------------------


def test_path_for_is_stable_and_its_directory_exists(tmp_path: Path) -> None:
    cache = Cache(DiskStorage(tmp_path))
    path = cache.path_for(KEY, ".py")
    assert path == tmp_path / "modules" / KEY.digest / f"hk_{KEY.digest[:16]}.py"
    assert path.parent.is_dir() and path.stem.isidentifier()
    assert Cache(DiskStorage(tmp_path)).path_for(KEY, ".py") == path
    assert cache.path_for(KEY, ".cl", name="add").name == "add.cl"
    with pytest.raises(ValueError, match="plain file name"):
        cache.path_for(KEY, ".py", name="../escape")
    memory_only = Cache(MemoryStorage())
    assert memory_only.path_for(KEY, ".py").parent.is_dir()


def test_info_and_clear_count_kernels_and_modules(tmp_path: Path) -> None:
    cache = Cache(DiskStorage(tmp_path))
    for n in range(3):
        cache.put(key(n), b"k" * 100)
    module = cache.path_for(key(9), ".py")
    module.write_bytes(b"m" * 50)
    (module.parent / "__pycache__").mkdir()
    (module.parent / "__pycache__" / "numba.nbi").write_bytes(b"n" * 25)

    info = Cache(DiskStorage(tmp_path)).info()
    assert info["root"] == str(tmp_path)
    assert (info["entries"], info["kernels"], info["modules"]) == (4, 3, 1)
    header = cache_module._HEADER.size
    assert info["bytes"] == 3 * (100 + header) + 75
    kinds = sorted((e.kind, e.digest) for e in cache.entries())
    assert kinds == sorted([("kernel", key(n).digest) for n in range(3)] + [("module", key(9).digest)])

    assert cache.clear() == 4
    assert cache.get(key(0)) is None  # memory is cleared too
    assert Cache(DiskStorage(tmp_path)).info()["entries"] == 0
    assert Cache(DiskStorage(tmp_path)).clear() == 0


def test_memory_storage_info_and_clear() -> None:
    cache = Cache(MemoryStorage())
    cache.put(KEY, b"abcd")
    assert cache.info()["root"] is None and cache.info()["bytes"] == 4
    assert cache.clear() == 1 and cache.get(KEY) is None


# --- the default cache and the CLI ------------------------------------------


@pytest.fixture
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HETERO_CACHE_DIR", str(tmp_path / "hc"))
    reload_config()
    reset_default_cache()
    yield tmp_path / "hc"
    monkeypatch.undo()
    reload_config()
    reset_default_cache()


def test_default_cache_lives_under_cache_dir_and_is_built_once(private_cache_dir: Path) -> None:
    cache = default_cache()
    assert cache is default_cache()
    assert cache.root == private_cache_dir / "kernels"
    assert not private_cache_dir.exists()  # nothing is created until something is stored
    cache.put(KEY, b"x")
    assert (private_cache_dir / "kernels" / KEY.digest[:2] / f"{KEY.digest}.bin").is_file()


def _run_cli(argv: list[str]) -> int:
    from hetero.cli.cache import add_cache_commands

    parser = argparse.ArgumentParser(prog="hetero")
    commands = add_cache_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return commands[args.command](args)


def test_cli_cache_info_and_clear(private_cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = default_cache()
    cache.put(KEY, b"k" * 1000)
    cache.path_for(KEY, ".py").write_text("x = 1\n")

    assert _run_cli(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["root"] == str(private_cache_dir / "kernels") and info["entries"] == 2 and info["bytes"] > 1000

    assert _run_cli(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"root:    {private_cache_dir / 'kernels'}" in out and "entries: 2 (kernels: 1, generated modules: 1)" in out
    assert "size:" in out

    assert _run_cli(["cache", "clear"]) == 0
    assert "removed 2 cache entries (kernels: 1, generated modules: 1;" in capsys.readouterr().out
    assert default_cache().info()["entries"] == 0

    assert _run_cli(["cache"]) == 2


def test_cli_cache_in_a_fresh_process(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import argparse, sys
        from hetero.cli.cache import add_cache_commands
        from hetero.compiler.build.cache import CacheKey, default_cache
        default_cache().put(CacheKey("a" * 64, "cpu", "x86_64", "llvm"), b"compiled")
        parser = argparse.ArgumentParser(prog="hetero")
        commands = add_cache_commands(parser.add_subparsers(dest="command"))
        args = parser.parse_args(sys.argv[1:])
        sys.exit(commands[args.command](args))
        """
    )
    env = {**os.environ, "HETERO_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code, "cache", "info", "--json"], check=False, capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["entries"] == 1


# --- layering ---------------------------------------------------------------


def test_cache_module_imports_only_the_vocabulary() -> None:
    tree = ast.parse(Path(cache_module.__file__).read_text(encoding="utf-8"))
    project = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            project.add(node.module)
        elif isinstance(node, ast.Import):
            project.update(alias.name for alias in node.names)
    allowed = {"hetero.core.config", "hetero.core.errors", "hetero.core.files", "hetero.core.notices", "hetero._version",
               "__future__"}  # notices: the HeteroWarning base of CacheWarning
    assert {m for m in project if m.startswith("hetero") or m == "__future__"} <= allowed
    assert all(m in sys.stdlib_module_names or m in allowed for m in {m.split(".")[0] for m in project} - {"hetero"})
