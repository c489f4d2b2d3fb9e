"""hetero.checkpoint.store against files that are not what a checkpoint's files should be: a FIFO
(which blocks an open), a device (which never ends), a sparse file claiming a terabyte, a payload
whose checksum is wrong from its first byte. Each is damage: ``load()`` and ``latest_step()`` skip
the checkpoint with a warning and fall back to the intact older one, without blocking, without
running out of memory and without reading the whole of a bad payload.

Every case runs in a child process with a timeout (a regression blocks or exhausts memory there,
not in the test run) and an address-space limit; the child reports its own peak RSS
(``getrusage``) and the bytes it read (``/proc/self/io``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.files import PART, host_memory
from hetero.checkpoint.store import CheckpointError, CheckpointWarning

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
#: The child's address space: far more than a correct load needs, far less than this machine has,
#: so that a regression that reads /dev/zero into memory fails in seconds instead of swapping.
ADDRESS_SPACE = 4 << 30
TIMEOUT = 60

CHILD = r"""
import json, resource, sys, warnings
import os
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:4])  # at most 4 parts hashed at once
from hetero.checkpoint import store

def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

store.load(sys.argv[1], step=1)  # the intact step: what any load costs (imports, the device)
baseline = peak_rss()

def read_bytes():
    with open("/proc/self/io") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])

out = {}
for call in ("load", "latest_step"):
    before = read_bytes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if call == "load":
                found = store.load(sys.argv[1])
                result = None if found is None else [found[1], found[0]["w"].tolist()]
            else:
                result = store.latest_step(sys.argv[1])
        except BaseException as exc:
            result = "raised " + type(exc).__name__ + ": " + str(exc)[:300]
    out[call] = {"result": result, "read": read_bytes() - before,
                 "warnings": [str(w.message) for w in caught if issubclass(w.category, store.CheckpointWarning)]}
out["extra_rss"] = peak_rss() - baseline
print(json.dumps(out))
"""


def _run_child(directory: Path) -> dict[str, Any]:
    """What ``load`` and ``latest_step`` give in a fresh process; fails (instead of hanging) past TIMEOUT."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(directory), str(ADDRESS_SPACE)], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"load()/latest_step() still blocked after {TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _two_steps(directory: Path) -> Path:
    """An intact step 1 and a step 2 (returned) whose only payload is a uint8 vector."""
    checkpoint.save({"w": np.arange(4, dtype=np.uint8)}, 1, directory, keep=None)
    return checkpoint.save({"w": np.arange(8, dtype=np.uint8)}, 2, directory, keep=None)


def _claim(path: Path, size: int, sha256: str | list[str]) -> Path:
    """Make step ``path``'s manifest claim a uint8 payload of ``size`` bytes with these digests (the
    manifest's own digest recomputed, so the manifest is consistent); return the payload's path."""
    manifest = path / "manifest.json"
    body = json.loads(manifest.read_text())
    node = body["state"]["values"][0]
    node["shape"] = [size]
    entry = body["files"][node["file"]]
    entry.update(bytes=size, sha256=sha256)
    if isinstance(sha256, list):
        entry["part_bytes"] = PART
    else:
        entry.pop("part_bytes", None)
    body["manifest_sha256"] = checkpoint._digest(body)
    manifest.write_text(json.dumps(body))
    return path / node["file"]


def _sparse(file: Path, size: int) -> None:
    file.unlink()
    with open(file, "wb") as out:
        out.truncate(size)  # a hole: no disk used, reads as zeros


def _fell_back(out: dict[str, Any], damaged: str) -> None:
    assert out["load"]["result"] == [1, [0, 1, 2, 3]], out["load"]
    assert out["latest_step"]["result"] == 1, out["latest_step"]
    for call in ("load", "latest_step"):
        assert any(damaged in message for message in out[call]["warnings"]), out[call]["warnings"]


# -- FIFOs: an open that would wait forever for a writer ----------------------------------------
def test_a_fifo_payload_is_skipped_without_blocking(tmp_path: Path) -> None:
    newest = _two_steps(tmp_path)
    payload = newest / "000000.bin"
    payload.unlink()
    os.mkfifo(payload)
    out = _run_child(tmp_path)
    _fell_back(out, str(payload))
    assert "FIFO" in out["load"]["warnings"][0]


def test_a_fifo_manifest_is_skipped_without_blocking(tmp_path: Path) -> None:
    newest = _two_steps(tmp_path)
    manifest = newest / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)
    out = _run_child(tmp_path)
    _fell_back(out, str(manifest))
    assert "FIFO" in out["load"]["warnings"][0]


# -- files that never end, or claim more than memory holds ----------------------------------
def test_a_manifest_linked_to_dev_zero_is_skipped(tmp_path: Path) -> None:
    newest = _two_steps(tmp_path)
    manifest = newest / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    out = _run_child(tmp_path)
    _fell_back(out, str(manifest))
    assert out["extra_rss"] < 64 * MIB


def test_a_huge_sparse_manifest_is_skipped_unread(tmp_path: Path) -> None:
    newest = _two_steps(tmp_path)
    manifest = newest / "manifest.json"
    with open(manifest, "r+b") as file:
        file.truncate(1 << 40)
    out = _run_child(tmp_path)
    _fell_back(out, str(manifest))
    assert out["load"]["read"] < 64 * MIB and out["latest_step"]["read"] < 64 * MIB


def test_a_terabyte_sparse_payload_the_manifest_vouches_for_falls_back_at_once(tmp_path: Path) -> None:
    # the digests are right (a hole reads as zeros): only its size can tell that it cannot be loaded
    size = 1 << 40
    if (host_memory() or 0) >= size:
        pytest.skip("this machine's memory holds a terabyte: a 1 TiB checkpoint is loadable here")
    zeros = hashlib.sha256(bytes(PART)).hexdigest()
    payload = _claim(_two_steps(tmp_path), size, [zeros] * (size // PART))
    _sparse(payload, size)
    out = _run_child(tmp_path)
    _fell_back(out, str(payload.parent))
    assert out["load"]["read"] < 64 * MIB and out["latest_step"]["read"] < 64 * MIB
    assert out["extra_rss"] < 64 * MIB
    assert "memory" in out["load"]["warnings"][0]


# -- a payload whose checksum is wrong: rejected before it is all read into memory ---------------
def test_a_sparse_payload_with_wrong_part_digests_is_rejected_early(tmp_path: Path) -> None:
    size = 2 << 30
    payload = _claim(_two_steps(tmp_path), size, ["0" * 64] * (size // PART))
    _sparse(payload, size)
    out = _run_child(tmp_path)
    _fell_back(out, str(payload))
    assert out["extra_rss"] < 256 * MIB  # not the 2 GiB the payload claims: a few 16 MiB parts
    # the first parts read tell: the rest of the 2 GiB is never read
    assert out["load"]["read"] < 256 * MIB and out["latest_step"]["read"] < 256 * MIB


def test_a_sparse_payload_with_one_wrong_digest_is_hashed_before_it_is_kept(tmp_path: Path) -> None:
    # one digest for the whole payload (checkpoints written before payloads were hashed in parts):
    # it must all be hashed to tell, but through one reused buffer, not into memory first
    size = 512 * MIB
    payload = _claim(_two_steps(tmp_path), size, "0" * 64)
    _sparse(payload, size)
    out = _run_child(tmp_path)
    _fell_back(out, str(payload))
    assert out["extra_rss"] < 64 * MIB  # not the 512 MiB the payload claims


# -- the limits, from the writing side --------------------------------------------------------
def test_save_refuses_a_manifest_load_would_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save({"w": np.arange(4, dtype=np.uint8)}, 1, tmp_path)
    monkeypatch.setattr(checkpoint, "MAX_MANIFEST_BYTES", 4096)
    with pytest.raises(CheckpointError, match="NumPy arrays"):
        checkpoint.save({"order": list(range(5000))}, 2, tmp_path)  # a long list of plain values
    assert [step for step, _ in checkpoint.checkpoints(tmp_path)] == [1]


def test_running_out_of_memory_while_loading_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.checkpoint import files as checkpoint_files

    checkpoint.save({"w": np.arange(4, dtype=np.uint8)}, 1, tmp_path, keep=None)
    checkpoint.save({"w": np.arange(1000, dtype=np.uint8)}, 2, tmp_path, keep=None)
    real = checkpoint_files._buffer

    def scarce(size: int) -> memoryview:  # the newest payload fits the machine, not what is free of it now
        if size > 100:
            raise MemoryError
        return real(size)

    monkeypatch.setattr(checkpoint_files, "_buffer", scarce)
    with pytest.warns(CheckpointWarning, match="step-00000002.hckpt: not enough free host memory"):
        state, step = checkpoint.load(tmp_path) or ({}, None)
    assert step == 1 and state["w"].tolist() == [0, 1, 2, 3]
