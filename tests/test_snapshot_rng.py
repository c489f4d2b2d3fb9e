"""The accelerator side of the guard's random-generator snapshots, against a fake torch (this
machine need not have a GPU): a device torch has not initialised is never read, a device the
guard left is never touched, and work moved to another GPU continues the failed one's stream."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import textwrap
import types
from typing import Any

import numpy as np
import pytest

from hetero.recovery import snapshot_rng


class FakeAccelerator:
    """torch.cuda's RNG surface: one integer "state" per device; records every device touched."""

    def __init__(self, count: int, initialized: bool = True, broken: tuple[int, ...] = ()) -> None:
        self.states = {i: 100 + i for i in range(count)}
        self.initialized, self.broken = initialized, broken
        self.touched: list[int] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def device_count(self) -> int:
        return len(self.states)

    def get_rng_state(self, index: int) -> int:
        self.touched.append(index)
        return self.states[index]

    def set_rng_state(self, state: int, index: int) -> None:
        self.touched.append(index)
        if index in self.broken:
            raise RuntimeError(f"CUDA error: an illegal memory access was encountered (device {index})")
        self.states[index] = state


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Any:
    class Generator:
        pass

    cpu = {"state": 1}
    torch = types.SimpleNamespace(
        cuda=FakeAccelerator(2), xpu=FakeAccelerator(1, initialized=False), Generator=Generator,
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False)),
        get_rng_state=lambda: cpu["state"], set_rng_state=lambda state: cpu.update(state=state), cpu=cpu,
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_only_initialised_accelerators_are_read_and_left_devices_never(fake_torch: Any) -> None:
    saved = snapshot_rng.capture("cuda:0", avoid={"cuda:1"})
    assert saved.accelerators == {"cuda:0": 100} and saved.torch_cpu == 1
    assert fake_torch.cuda.touched == [0] and fake_torch.xpu.touched == []  # xpu: not initialised, not read


def test_work_moved_to_another_gpu_continues_the_failed_ones_stream(fake_torch: Any) -> None:
    saved = snapshot_rng.capture("cuda:0")
    fake_torch.cuda.states.update({0: 500, 1: 501})
    fake_torch.cpu["state"] = 9
    fake_torch.cuda.touched.clear()
    snapshot_rng.restore(saved, "cuda:1", avoid={"cuda:0"})  # cuda:0 failed; the work resumes on cuda:1
    assert fake_torch.cuda.states == {0: 500, 1: 100} and 0 not in fake_torch.cuda.touched
    assert fake_torch.cpu["state"] == 1


def test_in_place_restore_puts_every_device_back(fake_torch: Any) -> None:
    saved = snapshot_rng.capture("cuda:1")
    fake_torch.cuda.states.update({0: 7, 1: 8})
    snapshot_rng.restore(saved, "cuda:1")
    assert fake_torch.cuda.states == {0: 100, 1: 101}


def test_a_device_that_refuses_its_state_is_logged_and_the_rest_restored(fake_torch: Any,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    saved = snapshot_rng.capture("cuda:0")
    fake_torch.cuda.broken = (0,)
    fake_torch.cuda.states.update({0: 7, 1: 8})
    with caplog.at_level(logging.WARNING, logger="hetero.recovery.snapshot"):
        snapshot_rng.restore(saved, "cuda:0")
    assert fake_torch.cuda.states[1] == 101
    assert "cuda:0" in caplog.text and "illegal memory access" in caplog.text


def test_a_guarded_loop_without_torch_never_imports_it() -> None:
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import hetero
        state = {"w": np.zeros(3), "gen": np.random.default_rng(0)}
        with hetero.guard(state, device="cpu", standby=False) as g:
            for step in range(3):
                g.run(lambda: np.random.random())
            assert g.last_snapshot.rng is not None and g.last_snapshot.rng.torch_cpu is None
        print("torch" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_entry_capture_reads_what_capture_reads_whatever_was_drawn_between() -> None:
    """The guard reads the generators at each step's entry through EntryCapture, which reuses
    Python's and NumPy's last states when their raw state shows no draw: a cached normal deviate
    (NumPy's second of a pair, Python's gauss_next) moves no raw state, and must still be seen."""
    entry = snapshot_rng.EntryCapture()
    draws = {
        "nothing": lambda: None, "random.random": random.random, "random.gauss": lambda: random.gauss(0, 1),
        "np.random.rand": np.random.rand, "np.random.standard_normal": np.random.standard_normal,
        "np.random.standard_normal again (the cached one)": np.random.standard_normal,
        "np.random.seed": lambda: np.random.seed(3), "random.seed": lambda: random.seed(1),
    }
    for what, draw in [*draws.items(), *draws.items()]:
        draw()
        got, want = entry("cpu"), snapshot_rng.capture("cpu")
        assert got.python == want.python, what
        assert all(np.array_equal(a, b) for a, b in zip(got.numpy, want.numpy, strict=True)), what


def test_entry_capture_sees_draws_that_bring_the_position_back() -> None:
    """EntryCapture compares a signature of each Mersenne Twister (its position and a few words),
    not the whole state: 624 words drawn leave the position where it was, and the regenerated
    words must still show the draw."""
    entry = snapshot_rng.EntryCapture()
    draws = {
        "random.getrandbits x 624": lambda: [random.getrandbits(32) for _ in range(624)],
        "np.random.bytes(624 words)": lambda: np.random.bytes(4 * 624),
    }
    for what, draw in [*draws.items(), *draws.items()]:
        entry("cpu")
        draw()
        got, want = entry("cpu"), snapshot_rng.capture("cpu")
        assert got.python == want.python, what
        assert all(np.array_equal(a, b) for a, b in zip(got.numpy, want.numpy, strict=True)), what
