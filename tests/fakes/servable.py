"""A TEST TOOL, not a model: :class:`NumpyServable`, a NumPy linear model ``y = x @ W + b`` with the
interface ``hetero serve`` calls (:class:`hetero.serve.servable.Servable`), so the server's tests
need neither ONNX Runtime nor a device. It can fail its first requests as a pool with no healthy
member does, raise a given error, or take its time."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.onnx.errors import Attempt, InferenceFailedError, InputError
from hetero.onnx.spec import TensorSpec

MEMBER = "cpu#0"


class NumpyServable:
    """Input ``x``: float32[?, 4]; output ``y``: float32[?, 3]. ``fail_first``: the first N runs raise
    :class:`InferenceFailedError`; ``error``: every run raises it; ``delay``: seconds each run sleeps."""

    def __init__(self, name: str = "linear", *, fail_first: int = 0, error: BaseException | None = None,
                 delay: float = 0.0, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.name = name
        self.weights = rng.standard_normal((4, 3)).astype(np.float32)
        self.bias = rng.standard_normal(3).astype(np.float32)
        self.inputs: tuple[TensorSpec, ...] = (TensorSpec("x", np.dtype(np.float32), (None, 4)),)
        self.outputs: tuple[TensorSpec, ...] = (TensorSpec("y", np.dtype(np.float32), (None, 3)),)
        self.fail_first = fail_first
        self.error = error
        self.delay = delay
        self.healthy = True
        self.closed = False
        self.started = 0  # runs begun
        self.finished = 0  # runs that returned an answer
        self.failures = 0
        self._lock = threading.Lock()

    def expected(self, x: np.ndarray) -> np.ndarray:
        """What ``run`` answers for ``x``, computed the same way."""
        return x @ self.weights + self.bias

    def run(self, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        if self.closed:
            raise RuntimeError(f"NumpyServable {self.name!r} ran after close()")
        with self._lock:
            self.started += 1
            count = self.started
        if self.delay:
            time.sleep(self.delay)
        if set(feeds) != {"x"}:
            raise InputError(f"NumpyServable takes exactly the input 'x', got {sorted(feeds)}", name="x")
        if self.error is not None or count <= self.fail_first:
            with self._lock:
                self.failures += 1
            if self.error is not None:
                raise self.error
            raise InferenceFailedError(f"request to {self.name!r} failed: fail_first={self.fail_first} (test tool)",
                                       [Attempt(MEMBER, "cpu", 0.001, "RuntimeError: injected by NumpyServable")])
        result = {"y": self.expected(feeds["x"])}
        with self._lock:
            self.finished += 1
        return result

    def ready(self) -> bool:
        return self.healthy

    def health(self) -> list[dict[str, Any]]:
        return [{"member": MEMBER, "device": "cpu", "healthy": self.healthy}]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            member = {"device": "cpu", "requests": self.started, "failures": self.failures,
                      "p50_ms": 0.1, "p90_ms": 0.2, "p99_ms": 0.3}
            return {"requests": self.started, "failures": self.failures, "retries": 0, "members": {MEMBER: member}}

    def close(self) -> None:
        self.closed = True
