"""Entering ``hetero.fault.inject`` while another thread opens a backend (the guard's standby
does this) must not deadlock: the opening thread holds the registry's lock and then takes the
injection lock; ``inject().__enter__`` must not hold the injection lock while it waits for the
registry's. Found on an H200, where opening the ``cuda`` backend takes long enough to overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from fakes.fake_device import fake_backend

import hetero
from hetero.fault.injection import wrapped_methods

OPENING = threading.Event()


def _slow_discovery() -> None:
    """Discovery that takes a while (as CuPy + NVML do on a GPU machine)."""
    OPENING.set()
    time.sleep(0.5)


@pytest.fixture
def slow_backend() -> Iterator[None]:
    OPENING.clear()
    hetero.register_backend(fake_backend("slow", before_devices=_slow_discovery))
    try:
        yield
    finally:
        hetero.core.registry.reset()


def test_inject_while_another_thread_opens_a_backend(slow_backend: None) -> None:
    block = hetero.fault.inject("slow:0:alloc:nth=1:oom")  # built first, as train_digits.py does
    opener = threading.Thread(target=hetero.core.registry.backend_status, args=("slow",), daemon=True)
    opener.start()
    assert OPENING.wait(10)
    done: list[list[str]] = []

    def enter() -> None:
        with block:
            done.append(wrapped_methods(hetero.device("slow:0").runtime))

    entering = threading.Thread(target=enter, daemon=True)
    entering.start()
    entering.join(30)
    opener.join(30)
    assert not entering.is_alive(), "inject().__enter__ deadlocked with a backend opening in another thread"
    assert done and "allocate" in done[0], "the backend that opened meanwhile must be covered by the rule"
    assert wrapped_methods(hetero.device("slow:0").runtime) == []  # and uncovered after the block
