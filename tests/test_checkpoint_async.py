"""hetero.checkpoint.store.save_async: a snapshot taken at the call, written in the background, in
order, finished before the interpreter exits; errors surface where the caller can see them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import hetero
from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.store import CheckpointError, CheckpointWarning


def test_the_state_is_snapshotted_at_the_call(tmp_path: Path) -> None:
    host = np.ones(100_000)
    on_cpu = hetero.asarray(np.ones(1000, np.float32), device="cpu")  # shares its buffer with numpy() views
    tensor = torch.ones(10)
    future = checkpoint.save_async({"host": host, "dev": on_cpu, "t": tensor, "meta": {"epoch": 1}}, 3, tmp_path)
    host[:] = 7
    on_cpu.numpy()[:] = 7
    tensor.add_(6)
    assert future.result(timeout=60) == tmp_path / "step-00000003.hckpt"
    state, step = checkpoint.load(tmp_path, device="cpu") or ({}, -1)
    assert step == 3 and state["meta"] == {"epoch": 1}
    assert (state["host"] == 1).all() and (state["dev"].numpy() == 1).all() and bool((state["t"] == 1).all())


def test_saves_happen_in_call_order_and_prune(tmp_path: Path) -> None:
    futures = [checkpoint.save_async({"i": i}, i, tmp_path, keep=2) for i in range(6)]
    checkpoint.wait()
    assert all(f.done() for f in futures)
    assert [step for step, _ in checkpoint.checkpoints(tmp_path)] == [5, 4]
    checkpoint.save_async({"i": "async"}, 7, tmp_path, keep=None)
    checkpoint.save({"i": "sync"}, 8, tmp_path, keep=1)  # waits for the pending one first
    assert [step for step, _ in checkpoint.checkpoints(tmp_path)] == [8]


def test_saving_from_a_done_callback_does_not_deadlock(tmp_path: Path) -> None:
    paths: list[Path] = []
    future = checkpoint.save_async({"a": 1}, 1, tmp_path, keep=None)
    future.add_done_callback(lambda _: paths.append(checkpoint.save({"a": 2}, 2, tmp_path, keep=None)))
    checkpoint.wait()
    assert paths == [tmp_path / "step-00000002.hckpt"]


def test_a_value_that_cannot_be_saved_raises_at_the_call(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"state\['lock'\] is a lock"):
        checkpoint.save_async({"lock": threading.Lock()}, 1, tmp_path)
    with pytest.raises(CheckpointError, match="step must be"):
        checkpoint.save_async({"a": 1}, -2, tmp_path)
    checkpoint.wait()
    assert checkpoint.checkpoints(tmp_path) == []


def test_a_write_failure_raises_from_the_future_and_warns(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        future = checkpoint.save_async({"a": 1}, 1, blocker / "ck")
        checkpoint.wait()  # the writer thread runs the failure callback before its next job
    assert any(issubclass(w.category, CheckpointWarning) and "save_async failed" in str(w.message) for w in caught)
    with pytest.raises(CheckpointError, match="cannot write checkpoints to"):
        future.result(timeout=60)
    checkpoint.save_async({"a": 2}, 2, tmp_path / "ok").result(timeout=60)  # the writer thread carries on


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_can_save_after_its_parent_did(tmp_path: Path) -> None:
    from hetero.checkpoint import files as checkpoint_files

    big = np.zeros((checkpoint_files.PART // 8) * 2 + 1)  # hashed in parts: the hashing threads exist now
    checkpoint.save_async({"w": big}, 1, tmp_path / "parent").result(timeout=60)
    pid = os.fork()
    if pid == 0:  # the child: the parent's writer and hashing threads did not come along
        try:
            checkpoint.save_async({"w": big}, 2, tmp_path / "child").result(timeout=20)
            os._exit(0 if checkpoint.latest_step(tmp_path / "child") == 2 else 1)
        except BaseException:  # noqa: BLE001 - a child must never return into pytest
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_pending_saves_finish_before_the_interpreter_exits(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import numpy as np, hetero
        for step in range(3):
            hetero.checkpoint.store.save_async({{"w": np.full(2_000_000, step)}}, step, {str(tmp_path)!r}, keep=None)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env={**os.environ})
    assert [step for step, _ in checkpoint.checkpoints(tmp_path)] == [2, 1, 0]
    state, step = checkpoint.load(tmp_path) or ({}, -1)
    assert step == 2 and (state["w"] == 2).all()
