"""What ``hetero serve`` serves: any object with a name, input and output specs, a blocking
thread-safe ``run`` and a little health and stats reporting. :class:`hetero.onnx.Pool` is one;
a test's NumPy model is another."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from hetero.onnx.spec import TensorSpec


class Servable(Protocol):
    """A model the HTTP server can call from its worker threads."""

    # Read-only in the protocol: a plain attribute satisfies it, and so does a property.
    @property
    def name(self) -> str:
        """The model's name in the URLs (``/v2/models/NAME``)."""
        ...

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        ...

    def run(self, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None) -> dict[str, Any]:
        """Compute ``outputs`` (None: every output) from ``feeds``; blocking, safe to call from many threads.
        An output whose spec is not a numeric tensor may be any JSON-able value (a list of dicts).
        Raises :class:`hetero.onnx.errors.InputError` for a feed that does not fit and
        :class:`hetero.onnx.errors.InferenceFailedError` when no device could answer."""
        ...

    def ready(self) -> bool:
        """Whether a request sent now could be answered (some member healthy)."""
        ...

    def health(self) -> list[dict[str, Any]]:
        """One ``{"member": str, "device": str, "healthy": bool}`` per member."""
        ...

    def stats(self) -> dict[str, Any]:
        """``{"requests", "failures", "retries", "members": {member: {"device", "requests", "failures",
        "p50_ms", "p90_ms", "p99_ms"}}}``."""
        ...

    def close(self) -> None:
        """Release sessions and devices; called once, after the last request was answered."""
        ...


__all__ = ["Servable"]
