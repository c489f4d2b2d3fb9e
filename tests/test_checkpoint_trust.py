"""hetero.checkpoint.store against files it should not trust: a rewrite that restores the mtime, crafted
manifests, pickled payloads, concurrent saves of one step, and file permissions."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.store import CheckpointError, CheckpointWarning


def _recraft(path: Path, edit: Any) -> None:
    """Rewrite the manifest of ``path`` through ``edit(body)`` with a valid checksum (as an attacker
    or a buggy writer would), so that only the structure is wrong."""
    manifest = path / "manifest.json"
    body = json.loads(manifest.read_text())
    edit(body)
    body["manifest_sha256"] = checkpoint._digest(body)
    manifest.write_text(json.dumps(body))


# -- the launcher's "verified ahead" token -------------------------------------------------
def test_a_rewrite_that_restores_the_mtime_is_still_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save({"w": np.arange(100.0)}, 1, tmp_path, keep=None)
    newest = checkpoint.save({"w": np.arange(100.0) * 2}, 2, tmp_path, keep=None)
    time.sleep(3 * checkpoint.SETTLED_SECONDS)  # so that the check is remembered
    cache: checkpoint.VerifiedCache = {}
    checkpoint.check(newest, cache)
    token = checkpoint.verified_token(newest, cache)
    assert token is not None
    payload = newest / "000000.bin"
    before = payload.stat()
    with open(payload, "r+b") as file:  # same size, same inode
        file.write(b"garbage!")
    os.utime(payload, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old mtime back
    monkeypatch.setenv(checkpoint.ENV_VERIFIED, token)
    with pytest.warns(CheckpointWarning, match="sha256"):
        state, step = checkpoint.load(tmp_path) or ({}, None)
    assert step == 1 and state["w"][-1] == 99.0
    with pytest.warns(CheckpointWarning, match="sha256"):
        assert checkpoint.latest_step(tmp_path, cache) == 1


# -- crafted manifests ---------------------------------------------------------------------
def _deep(body: dict[str, Any]) -> None:
    node: dict[str, Any] = {"type": "json", "value": 1}
    for _ in range(300):  # deeper than MAX_DEPTH, within json's reach (deeper: the next test)
        node = {"type": "list", "items": [node]}
    body["state"]["values"][0] = node


CRAFTED = {
    "state-list": lambda body: body.update(state=[]),
    "state-missing": lambda body: body.pop("state"),
    "files-list": lambda body: body.update(files=[]),
    "huge-bytes": lambda body: body["files"]["000000.bin"].update(bytes=2**50),
    "negative-bytes": lambda body: body["files"]["000000.bin"].update(bytes=-1),
    "bytes-string": lambda body: body["files"]["000000.bin"].update(bytes="lots"),
    "deep-nesting": _deep,
    "node-not-a-dict": lambda body: body["state"]["values"].__setitem__(0, 7),
    "unknown-type": lambda body: body["state"]["values"][0].update(type="mystery"),
    "bad-dtype": lambda body: body["state"]["values"][0].update(dtype="no-such-dtype"),
    "wrong-shape": lambda body: body["state"]["values"][0].update(shape=[7, 7]),
    "missing-file": lambda body: body["state"]["values"][0].update(file="999999.bin"),
    "keys-values-mismatch": lambda body: body["state"]["keys"].append("extra"),
    "payload-path": lambda body: body["state"]["values"][0].update(file="../../etc/passwd"),
    "version-string": lambda body: body.update(version="1"),
    "torch-size": lambda body: body["state"]["values"][0].update(type="torch", dtype="float32", shape=[3]),
}


@pytest.mark.parametrize("craft", list(CRAFTED))
def test_a_crafted_manifest_falls_back_and_latest_step_agrees(tmp_path: Path, craft: str) -> None:
    checkpoint.save({"w": np.arange(50.0)}, 1, tmp_path)
    newest = checkpoint.save({"w": np.arange(50.0) * 2}, 2, tmp_path)
    _recraft(newest, CRAFTED[craft])
    with pytest.warns(CheckpointWarning, match="step-00000002"):
        assert checkpoint.latest_step(tmp_path) == 1
    with pytest.warns(CheckpointWarning, match="step-00000002"):
        state, step = checkpoint.load(tmp_path) or ({}, None)
    assert step == 1 and state["w"][-1] == 49.0
    with pytest.raises(CheckpointError, match="step-00000002"):
        checkpoint.load(tmp_path, step=2)


def test_a_manifest_nested_too_deep_for_json_falls_back(tmp_path: Path) -> None:
    checkpoint.save({"w": 1}, 1, tmp_path)
    newest = checkpoint.save({"w": 2}, 2, tmp_path)
    (newest / "manifest.json").write_text('{"format": "hetero.checkpoint.store", "state": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.warns(CheckpointWarning, match="step-00000002"):
        assert checkpoint.latest_step(tmp_path) == 1
    with pytest.warns(CheckpointWarning, match="step-00000002"):
        assert (checkpoint.load(tmp_path) or ({}, None))[1] == 1


# -- pickle ----------------------------------------------------------------------------------
class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch pwned",))


def test_pickled_values_are_refused_unless_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    checkpoint.save({"evil": _Boom()}, 1, tmp_path / "ck")
    with pytest.raises(CheckpointError, match=r"allow_pickle=True") as info:
        checkpoint.load(tmp_path / "ck")
    assert "state['evil']" in str(info.value)
    assert not (tmp_path / "pwned").exists()
    assert checkpoint.latest_step(tmp_path / "ck") == 1  # valid, only refused: not skipped as corrupt
    checkpoint.save({"tags": {"a", "b"}}, 2, tmp_path / "ck")
    state, step = checkpoint.load(tmp_path / "ck", allow_pickle=True) or ({}, None)
    assert step == 2 and state == {"tags": {"a", "b"}}


def test_structured_numpy_arrays_need_no_pickle(tmp_path: Path) -> None:
    value = np.array([(1, 2.5, (3, 4)), (5, -1.0, (6, 7))], dtype=[("id", "<i4"), ("w", "<f8"), ("p", "<i2", (2,))])
    checkpoint.save({"a": value, "s": value[0]}, 1, tmp_path)
    state, _ = checkpoint.load(tmp_path) or ({}, None)
    assert state["a"].dtype == value.dtype and (state["a"] == value).all()
    assert state["s"] == value[0]


# -- permissions and concurrency -------------------------------------------------------------
def test_checkpoint_files_are_private(tmp_path: Path) -> None:
    path = checkpoint.save({"w": np.arange(3.0), "b": b"x"}, 1, tmp_path)
    for file in path.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def _save_same_step(directory: str, tag: int, rounds: int, errors: Any) -> None:
    for i in range(rounds):
        try:
            checkpoint.save({"w": np.full(1000, float(tag)), "i": i}, 7, directory)
        except CheckpointError as exc:
            errors.put(str(exc))


@pytest.mark.skipif(sys.platform != "linux", reason="forks")
def test_concurrent_saves_of_one_step_say_what_happened(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    procs = [context.Process(target=_save_same_step, args=(str(tmp_path), tag, 15, errors)) for tag in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    messages = []
    while not errors.empty():
        messages.append(errors.get())
    for message in messages:
        assert "another process" in message and "free space" not in message, message
    assert checkpoint.latest_step(tmp_path) == 7
    state, _ = checkpoint.load(tmp_path) or ({}, None)
    assert len(set(state["w"].tolist())) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000007.hckpt"]


# -- outside hetero-run ------------------------------------------------------------------------
def test_outside_hetero_run_load_resumes_only_from_a_named_directory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETERO_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("HETERO_RESUME_STEP", raising=False)
    monkeypatch.chdir(tmp_path)
    assert checkpoint.save({"a": 1}, 5).parent == Path("checkpoints")  # a first `python train.py` saves
    with pytest.warns(CheckpointWarning, match=r"directory='checkpoints'"):
        assert checkpoint.load() is None  # a second one starts afresh, and is told why
    with pytest.warns(CheckpointWarning, match=r"directory='checkpoints'"):
        assert checkpoint.latest_step() is None
    with pytest.raises(CheckpointError, match="directory="):
        checkpoint.load(step=5)
    assert checkpoint.load("checkpoints") == ({"a": 1}, 5)
    assert checkpoint.latest_step("checkpoints") == 5
    monkeypatch.setenv("HETERO_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))  # as hetero-run sets it
    assert checkpoint.load() == ({"a": 1}, 5) and checkpoint.latest_step() == 5


def test_outside_hetero_run_an_empty_default_directory_says_nothing(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETERO_CHECKPOINT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert checkpoint.load() is None and checkpoint.latest_step() is None
