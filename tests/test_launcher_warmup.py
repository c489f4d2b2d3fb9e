"""What hetero-run does ahead of a failure, and how it notices one: checkpoint checks remembered by
the files' identity (a changed file is checked again, a fresh one is not remembered), the
background thread verifying new checkpoints, waking on a worker's exit, and stopping workers
(SIGTERM, then SIGKILL for those that ignore it)."""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.store import CheckpointError, CheckpointWarning
from hetero.core.device import DeviceInfo, Kind
from hetero.launcher.warmup import Warmup
from hetero.launcher.worker_handle import Worker, stop_workers, wait_for_exit

CPU = DeviceInfo(name="cpu", backend="cpu", index=0, vendor="x", kind=Kind.CPU, model="x", memory=1, compute_units=1,
                 max_work_group_size=1, fp64=True, driver_version="", stable_id="cpu-test")


def saved(directory: Path, step: int, age: float = 60.0) -> Path:
    """A checkpoint of ``step`` whose files were last modified ``age`` seconds ago (and, for a
    positive age, whose status-change times have settled: those no program can set back)."""
    path = checkpoint.save({"w": np.arange(1000, dtype=np.float32) * step}, step, directory, keep=None)
    then = time.time() - age
    for file in path.iterdir():
        os.utime(file, (then, then))
    if age > 0:
        time.sleep(3 * checkpoint.SETTLED_SECONDS)
    return path


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The checkpoints hetero.checkpoint.store.verify hashes, in order."""
    calls: list[Path] = []
    real = checkpoint.verify

    def counting(path: Any) -> dict[str, Any]:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(checkpoint, "verify", counting)
    return calls


def test_a_checked_checkpoint_is_not_hashed_again_until_a_file_changes(tmp_path: Path, verifications: list[Path]) -> None:
    older, newest = saved(tmp_path, 4), saved(tmp_path, 5)
    cache: checkpoint.VerifiedCache = {}
    assert checkpoint.latest_step(tmp_path, cache) == 5
    assert checkpoint.latest_step(tmp_path, cache) == 5
    assert verifications == [newest]
    with open(newest / "000000.bin", "r+b") as file:  # corrupt in place: same size and inode, new mtime
        file.write(b"garbage!")
    with pytest.warns(CheckpointWarning, match="step-00000005"):
        assert checkpoint.latest_step(tmp_path, cache) == 4
    assert verifications == [newest, newest, older]


def test_a_corrupt_checkpoint_is_remembered_as_corrupt(tmp_path: Path, verifications: list[Path]) -> None:
    path = saved(tmp_path, 3)
    with open(path / "000000.bin", "r+b") as file:
        file.write(b"garbage!")
    then = time.time() - 60
    os.utime(path / "000000.bin", (then, then))
    time.sleep(3 * checkpoint.SETTLED_SECONDS)
    cache: checkpoint.VerifiedCache = {}
    for _ in range(2):
        with pytest.raises(CheckpointError, match="000000.bin"):
            checkpoint.check(path, cache)
    assert verifications == [path]


def test_a_checkpoint_changed_too_recently_is_checked_every_time(tmp_path: Path, verifications: list[Path]) -> None:
    # Its files' times are now: a change within the same clock tick could keep the same mtime.
    path = saved(tmp_path, 1, age=-5.0)
    cache: checkpoint.VerifiedCache = {}
    checkpoint.check(path, cache)
    checkpoint.check(path, cache)
    assert not cache and verifications == [path, path]


def test_the_warmup_thread_verifies_new_checkpoints_ahead_of_a_restart(tmp_path: Path,
                                                                       verifications: list[Path]) -> None:
    warmup = Warmup()
    try:
        warmup.watch(tmp_path)
        path = saved(tmp_path, 7)
        deadline = time.monotonic() + 30
        while not verifications and time.monotonic() < deadline:
            time.sleep(0.01)
        assert verifications == [path]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert warmup.latest_step(tmp_path) == 7
        assert verifications == [path]  # the restart's question was answered without hashing
    finally:
        warmup.close()


def test_waiting_for_workers_wakes_when_one_exits(tmp_path: Path) -> None:
    worker = Worker(0, CPU, tmp_path / "ckpt")
    worker.start([sys.executable, "-c", "pass"], tmp_path, dict(os.environ), {})
    started = time.monotonic()
    wait_for_exit([worker], 60)
    assert time.monotonic() - started < 30  # woken by the exit, not the timeout
    assert worker.exited() == 0 and worker.pidfd is None


def test_stop_workers_terminates_then_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    polite, stubborn = Worker(0, CPU, tmp_path / "a"), Worker(1, CPU, tmp_path / "b")
    ready = tmp_path / "ready"
    polite.start([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, dict(os.environ), {})
    ignores_sigterm = ("import signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                       f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)")
    stubborn.start([sys.executable, "-c", ignores_sigterm], tmp_path, dict(os.environ), {})
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    codes = stop_workers([polite, stubborn], grace=0.5)
    assert codes == {0: -signal.SIGTERM, 1: -signal.SIGKILL}
    assert not polite.alive and not stubborn.alive


def test_a_worker_skips_hashing_only_the_files_the_launcher_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.checkpoint import files as checkpoint_files

    hashed: list[str] = []
    real = checkpoint_files.read_payload

    def counting(path: Path, name: str, *args: Any) -> Any:
        hashed.append(name)
        return real(path, name, *args)

    monkeypatch.setattr(checkpoint_files, "read_payload", counting)
    saved(tmp_path, 4)
    newest = saved(tmp_path, 5)
    cache: checkpoint.VerifiedCache = {}
    checkpoint.check(newest, cache)
    token = checkpoint.verified_token(newest, cache)
    assert token is not None
    hashed.clear()
    monkeypatch.setenv(checkpoint.ENV_VERIFIED, token)
    state, step = checkpoint.load(tmp_path, device="cpu") or ({}, None)
    assert step == 5 and not hashed
    np.testing.assert_array_equal(state["w"], np.arange(1000, dtype=np.float32) * 5)
    with open(newest / "000000.bin", "r+b") as file:  # changed since the launcher's check: hashed, found corrupt
        file.write(b"garbage!")
    with pytest.warns(CheckpointWarning, match="step-00000005"):
        assert checkpoint.load(tmp_path, device="cpu")[1] == 4  # type: ignore[index]
    assert hashed
