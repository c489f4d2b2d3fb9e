"""Pinned staging of large host<->device copies: chunked through two buffers used in turn, with
each buffer's previous DMA waited for. The fake engine below defers every "DMA" until an event
is waited on (as a real GPU may), so a missing wait shows up as corrupted data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetero.backends.cupy.staging import PinnedStaging


class DeferredEngine:
    """Device memory is NumPy; copies queue up and run only when an event recorded after them is waited on."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.done = 0
        self.pinned_allocations = 0
        self.streams: set[Any] = set()

    def pinned(self, nbytes: int) -> tuple[np.ndarray, Any]:
        self.pinned_allocations += 1
        return np.zeros(nbytes, np.uint8), None

    def _run_until(self, index: int) -> None:
        while self.done < index:
            self.queue[self.done]()
            self.done += 1

    def h2d(self, dst: np.ndarray, offset: int, host: tuple[np.ndarray, Any], nbytes: int, stream: Any) -> None:
        self.streams.add(stream)
        self.queue.append(lambda: dst.__setitem__(slice(offset, offset + nbytes), host[0][:nbytes]))

    def d2h(self, host: tuple[np.ndarray, Any], src: np.ndarray, offset: int, nbytes: int, stream: Any) -> None:
        self.streams.add(stream)
        self.queue.append(lambda: host[0].__setitem__(slice(0, nbytes), src[offset:offset + nbytes]))

    def record(self, stream: Any) -> Any:
        engine, mark = self, len(self.queue)

        class Event:
            def synchronize(self) -> None:
                engine._run_until(mark)

        return Event()

    def flush(self) -> None:
        self._run_until(len(self.queue))


@pytest.mark.parametrize("nbytes", [1, 1000, 4096, 4097, 3 * 4096 + 5, 10 * 4096])
def test_upload_then_download_round_trips_through_deferred_dma(nbytes: int) -> None:
    engine = DeferredEngine()
    staging = PinnedStaging(engine, chunk=4096)
    rng = np.random.default_rng(nbytes)
    src = rng.integers(0, 256, nbytes, dtype=np.uint8)
    original = src.copy()
    device = np.zeros(nbytes + 64, np.uint8)
    staging.upload(device, src, 32, stream="s1")
    src[:] = 0  # the caller may reuse src as soon as upload returns
    engine.flush()
    assert np.array_equal(device[32:32 + nbytes], original)
    out = np.empty(nbytes, np.uint8)
    staging.download(out, device, 32, stream="s1")
    assert np.array_equal(out, original)  # download returns with the data in place
    assert engine.pinned_allocations == 2 and engine.streams == {"s1"}


def test_typed_multidimensional_arrays_are_copied_as_bytes() -> None:
    engine = DeferredEngine()
    staging = PinnedStaging(engine, chunk=1000)
    src = np.arange(3 * 700, dtype=np.float32).reshape(3, 700)
    device = np.zeros(src.nbytes, np.uint8)
    staging.upload(device, src, 0, stream=None)
    engine.flush()
    out = np.empty_like(src)
    staging.download(out, device, 0, stream=None)
    assert np.array_equal(out, src)


def test_buffers_are_allocated_once_and_reused() -> None:
    engine = DeferredEngine()
    staging = PinnedStaging(engine, chunk=256)
    device = np.zeros(4096, np.uint8)
    for value in range(5):
        staging.upload(device, np.full(4096, value, np.uint8), 0, stream=None)
    engine.flush()
    assert engine.pinned_allocations == 2 and (device == 4).all()
