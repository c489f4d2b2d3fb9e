"""Outputs that are not numeric tensors (a sequence of maps from skl2onnx's ``ZipMap``, a map, a
sequence, a string tensor) as JSON texts, one per item: how ``hetero serve`` sends them (KServe v2
BYTES) and ``hetero infer --output`` writes them (an .npz of strings, which loads without pickle)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars made Python lists and numbers, map keys strings (JSON's)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k.item() if isinstance(k, np.generic) else k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def json_elements(value: Any) -> tuple[list[bytes], list[int]]:
    """``value`` as UTF-8 elements and their shape: a string array element by element, a sequence one
    JSON text per item (``{"0": 0.93, "1": 0.07}`` per row of a ZipMap), anything else (a map) one."""
    if isinstance(value, np.ndarray):
        flat = [v if isinstance(v, bytes) else (v if isinstance(v, str) else json.dumps(plain(v))).encode()
                for v in value.ravel().tolist()]
        return flat, list(value.shape)
    if isinstance(value, (list, tuple)):
        return [json.dumps(plain(v)).encode() for v in value], [len(value)]
    return [json.dumps(plain(value)).encode()], [1]


def as_strings(value: Any) -> np.ndarray:
    """``value`` as a NumPy array of str (:func:`json_elements`, decoded)."""
    elements, shape = json_elements(value)
    return np.array([e.decode("utf-8", "backslashreplace") for e in elements], dtype=str).reshape(shape)


__all__ = ["as_strings", "json_elements", "plain"]
