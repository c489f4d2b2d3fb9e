"""The compile cache's bounds: the memory layer and the disk cache each hold at most so many
bytes in so many entries, evicting the least recently used; ``hetero cache info`` shows the
bounds; a bad bound in the configuration is refused with the setting named."""

from __future__ import annotations

import argparse
import json
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_python

from hetero.compiler.build.cache import Cache, CacheKey, DiskStorage, MemoryStorage, default_cache, reset_default_cache
from hetero.core.config import CacheBounds, load_config, reload_config
from hetero.core.errors import ConfigError
from hetero.core.files import remove_tree

BIG = CacheBounds(10**9, 10**6)


def key(n: int) -> CacheKey:
    return CacheKey(f"{n:064x}", "cpu", "x86_64", "llvm")


class CountingStorage(MemoryStorage):
    """A storage that records which digests were asked of it (memory-layer misses)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def load(self, key_digest: str) -> bytes | None:
        self.asked.append(key_digest)
        return super().load(key_digest)


# -- the memory layer ----------------------------------------------------------------------
def test_the_memory_layer_evicts_the_least_recently_used_entry() -> None:
    storage = CountingStorage()
    cache = Cache(storage, memory_bounds=CacheBounds(10**6, 2), disk_bounds=BIG)
    cache.put(key(1), b"one")
    cache.put(key(2), b"two")
    assert cache.get(key(1)) == b"one"  # 1 is now more recent than 2
    cache.put(key(3), b"three")  # past 2 entries: 2 goes
    assert storage.asked == []
    assert cache.get(key(1)) == b"one" and cache.get(key(3)) == b"three" and storage.asked == []
    assert cache.get(key(2)) == b"two"  # still in the storage, which answered
    assert storage.asked == [key(2).digest]
    assert cache.info()["in_memory"] == 2


def test_the_memory_layer_keeps_to_its_byte_bound() -> None:
    storage = CountingStorage()
    cache = Cache(storage, memory_bounds=CacheBounds(250, 100), disk_bounds=BIG)
    for n in range(5):
        cache.put(key(n), bytes([n]) * 100)
    info = cache.info()
    assert info["in_memory"] == 2 and info["in_memory_bytes"] == 200
    cache.put(key(9), b"x" * 251)  # larger than the whole layer: kept in the storage only
    assert cache.get(key(9)) == b"x" * 251 and storage.asked == [key(9).digest]
    assert cache.info()["in_memory_bytes"] <= 250


# -- the disk cache ----------------------------------------------------------------------
def _age(storage: DiskStorage, digest: str, seconds_ago: float) -> None:
    then = time.time() - seconds_ago
    os.utime(storage.path_of(digest), (then, then))


def test_the_disk_cache_evicts_the_least_recently_used_entry(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    cache = Cache(storage, disk_bounds=CacheBounds(10**9, 3))
    for n, age in ((1, 300), (2, 200), (3, 100)):
        cache.put(key(n), b"x" * 10)
        _age(storage, key(n).digest, age)
    # A load in another process marks 1 used: now 2 is the least recently used.
    assert Cache(DiskStorage(tmp_path), disk_bounds=CacheBounds(10**9, 3)).get(key(1)) == b"x" * 10
    cache.evict()  # a rescan: the fresh use time of 1 is seen
    cache.put(key(4), b"x" * 10)
    left = {entry.digest for entry in cache.entries()}
    assert left == {key(1).digest, key(3).digest, key(4).digest}
    assert storage.load(key(2).digest) is None


def test_the_disk_cache_keeps_to_its_byte_and_entry_bounds(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    cache = Cache(storage, disk_bounds=CacheBounds(3500, 100))
    cache.put(key(0), b"y" * 1000)
    entry_size = storage.path_of(key(0).digest).stat().st_size
    for n in range(1, 8):
        cache.put(key(n), b"y" * 1000)
        info = cache.info()
        assert info["bytes"] <= 3500 and info["kernels"] == min(n + 1, 3500 // entry_size)
    by_entries = Cache(DiskStorage(tmp_path / "counted"), disk_bounds=CacheBounds(10**9, 5))
    for n in range(20):
        by_entries.put(key(n), b"z")
        assert by_entries.info()["entries"] <= 5
    assert {e.digest for e in by_entries.entries()} == {key(n).digest for n in range(15, 20)}  # the newest stay


def test_a_fresh_process_on_a_full_cache_evicts_at_its_first_store(tmp_path: Path) -> None:
    Cache(DiskStorage(tmp_path), disk_bounds=BIG).put(key(0), b"old")
    for n in range(1, 10):
        Cache(DiskStorage(tmp_path), disk_bounds=BIG).put(key(n), b"old")
    small = Cache(DiskStorage(tmp_path), disk_bounds=CacheBounds(10**9, 4))
    small.put(key(99), b"new")
    assert small.info()["entries"] == 4 and small.get(key(99)) == b"new"


def test_evicted_entries_go_whole_and_survivors_stay_whole(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    cache = Cache(storage, disk_bounds=CacheBounds(10**9, 3))
    for n in range(10):
        cache.put(key(n), bytes([n]) * 500)
    for entry in cache.entries():
        data = DiskStorage(tmp_path).load(entry.digest)
        assert data is not None and len(data) == 500  # checksum-verified, whole
    assert not list(tmp_path.glob("*/.*.tmp"))


def test_recently_used_module_folders_are_kept_and_old_ones_evicted(tmp_path: Path) -> None:
    cache = Cache(DiskStorage(tmp_path), disk_bounds=CacheBounds(10**9, 2))
    old = cache.path_for(key(1), ".py")
    old.write_text("x = 1\n")
    then = time.time() - 3600
    os.utime(old.parent, (then, then))
    fresh = [cache.path_for(key(n), ".py") for n in (2, 3, 4)]  # each made in the last minute
    for path in fresh:
        path.write_text("x = 2\n")
    cache.evict()
    assert not old.parent.exists()  # an hour unused: evicted, folder and all
    assert all(path.is_file() for path in fresh)  # a process may be about to import these
    assert not [p for p in (tmp_path / "modules").iterdir() if p.name.startswith(".")]  # no half-removed folder


def test_remove_tree_removes_the_whole_folder_or_reports_it_gone(tmp_path: Path) -> None:
    folder = tmp_path / "entry"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f").write_text("data")
    assert remove_tree(folder) is True and list(tmp_path.iterdir()) == []
    assert remove_tree(folder) is False and list(tmp_path.iterdir()) == []


CONCURRENT = """
import json, sys
from pathlib import Path
from hetero.compiler.build.cache import Cache, CacheKey, DiskStorage
from hetero.core.config import CacheBounds
cache = Cache(DiskStorage(Path(sys.argv[1])), disk_bounds=CacheBounds(10**9, 8))
for n in range(60):
    payload = json.dumps({"n": n, "pad": "x" * (100 + 10 * n)}).encode()
    cache.put(CacheKey(f"{int(sys.argv[2]) * 1000 + n:064x}", "cpu", "x86_64", "llvm"), payload)
"""


def test_concurrent_processes_evicting_leave_only_whole_entries(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(CONCURRENT))
    root = tmp_path / "cache"
    writers = [subprocess.Popen([sys.executable, str(script), str(root), str(w)]) for w in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    cache = Cache(DiskStorage(root), disk_bounds=CacheBounds(10**9, 8))
    cache.evict()
    found = list(cache.entries())
    assert 1 <= len(found) <= 8
    for entry in found:
        data = DiskStorage(root).load(entry.digest)
        assert data is not None
        record = json.loads(data)
        assert record["pad"] == "x" * (100 + 10 * record["n"])  # whole, as written


# -- settings and info ---------------------------------------------------------------------
@pytest.fixture
def bounded_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HETERO_CACHE_DIR", str(tmp_path / "hc"))
    monkeypatch.setenv("HETERO_CACHE_MAX_SIZE", "64MiB")
    monkeypatch.setenv("HETERO_CACHE_MAX_ENTRIES", "300")
    monkeypatch.setenv("HETERO_CACHE_MEMORY_MAX_SIZE", "1MiB")
    monkeypatch.setenv("HETERO_CACHE_MEMORY_MAX_ENTRIES", "7")
    reload_config()
    reset_default_cache()
    yield tmp_path / "hc"
    monkeypatch.undo()
    reload_config()
    reset_default_cache()


def _run_cli(argv: list[str]) -> int:
    from hetero.cli.cache import add_cache_commands

    parser = argparse.ArgumentParser(prog="hetero")
    commands = add_cache_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return commands[args.command](args)


def test_the_default_cache_takes_its_bounds_from_the_configuration(bounded_cache_dir: Path) -> None:
    cache = default_cache()
    assert cache.disk_bounds == CacheBounds(64 * 2**20, 300)
    assert cache.memory_bounds == CacheBounds(2**20, 7)


def test_cache_info_shows_the_bounds(bounded_cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bounds"] == {"disk": {"max_bytes": 64 * 2**20, "max_entries": 300},
                              "memory": {"max_bytes": 2**20, "max_entries": 7}}
    assert _run_cli(["cache", "info"]) == 0
    assert "bounds:  disk 64.0 MiB / 300 entries, memory 1.0 MiB / 7 entries per process" in capsys.readouterr().out


def test_the_defaults_are_sane() -> None:
    config = load_config({})
    assert config.cache_disk_bounds == CacheBounds(2 * 2**30, 10_000)
    assert config.cache_memory_bounds.max_entries >= 100


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("HETERO_CACHE_MAX_SIZE", "0", "'cache_max_size' must be at least 1 byte"),
    ("HETERO_CACHE_MAX_SIZE", "-1GiB", "must not be negative"),
    ("HETERO_CACHE_MAX_SIZE", "lots", "is not a size"),
    ("HETERO_CACHE_MEMORY_MAX_SIZE", "1.5", "'cache_memory_max_size'"),
    ("HETERO_CACHE_MAX_ENTRIES", "0", "'cache_max_entries' must be a whole number of entries, at least 1"),
    ("HETERO_CACHE_MAX_ENTRIES", "ten", "'cache_max_entries' must be a whole number"),
    ("HETERO_CACHE_MEMORY_MAX_ENTRIES", "2.5", "'cache_memory_max_entries' must be a whole number"),
])
def test_a_bad_bound_is_refused_naming_the_setting(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match="environment variable " + variable) as info:
        load_config({variable: value})
    assert says in str(info.value)


def test_a_bad_bound_in_the_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hetero.yaml"
    path.write_text("cache_max_entries: true\n")
    with pytest.raises(ConfigError, match=f"{path}: 'cache_max_entries' must be a whole number"):
        load_config({"HETERO_CONFIG": str(path)})
    path.write_text("cache_max_size: 512MiB\ncache_memory_max_entries: 64\n")
    config = load_config({"HETERO_CONFIG": str(path)})
    assert config.cache_max_size == 512 * 2**20 and config.cache_memory_max_entries == 64


def test_bounds_themselves_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_entries must be a whole number of at least 1"):
        CacheBounds(100, 0)
    with pytest.raises(ValueError, match="max_bytes"):
        CacheBounds(True, 5)  # type: ignore[arg-type]


def test_a_bounded_cache_in_a_fresh_process(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from hetero.compiler.build.cache import CacheKey, default_cache
        cache = default_cache()
        for n in range(12):
            cache.put(CacheKey(f"{n:064x}", "cpu", "x86_64", "llvm"), b"compiled")
        print(cache.info()["kernels"])
    """)
    out = run_python(code, {"HETERO_CACHE_DIR": str(tmp_path), "HETERO_CACHE_MAX_ENTRIES": "5"}).stdout
    assert out.strip().splitlines()[-1] == "5"
