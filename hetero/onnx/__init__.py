"""ONNX models on any hetero device, with no silent fallback, and a pool that survives a bad device.

    >>> import hetero.onnx
    >>> s = hetero.onnx.Session("model.onnx", device="oneapi:0")   # OpenVINO on Intel, CUDA on NVIDIA ...
    >>> s.run({"x": x})["y"]
    >>> pool = hetero.onnx.Pool("model.onnx", devices="all", replicas=2)
    >>> pool.run({"x": x})["y"]; pool.stats()

``hetero serve`` puts a pool behind the KServe v2 HTTP protocol (:mod:`hetero.serve`); ``hetero
infer`` runs a model once or benchmarks it. Importing this package loads ONNX Runtime only when a
session is made. See docs/inference.md.

May import: every floor below the public API (core, the scheduler, the fault policy) and its own floor's rooms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero.onnx.errors import (
    Attempt,
    ExternalDataError,
    InferenceFailedError,
    InputError,
    ModelError,
    NoMemberError,
    ProviderFailedError,
    ProviderUnavailableError,
)
from hetero.onnx.spec import TensorSpec

if TYPE_CHECKING:
    from hetero.onnx.pool import Pool
    from hetero.onnx.session import Session


def __getattr__(name: str) -> object:
    if name == "Session":
        from hetero.onnx.session import Session

        return Session
    if name == "Pool":
        from hetero.onnx.pool import Pool

        return Pool
    raise AttributeError(f"module 'hetero.onnx' has no attribute {name!r}")


__all__ = ["Attempt", "ExternalDataError", "InferenceFailedError", "InputError", "ModelError", "NoMemberError", "Pool",
           "ProviderFailedError", "ProviderUnavailableError", "Session", "TensorSpec"]
