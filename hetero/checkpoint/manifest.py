"""The shape a :mod:`hetero.checkpoint.store` manifest must have before anything in it is believed.

The manifest's own sha256 catches corruption, not a manifest written wrong on purpose (or
by a buggy writer) with a fresh digest: ``state=[]``, a payload of ``2**50`` bytes, nesting
a million levels deep, a node naming a file that is not listed. :func:`check_structure`
walks the whole tree iteratively (no recursion to exhaust) and checks every node's fields,
that every payload it names is listed with a size that fits its dtype and shape, and that the
tree is no deeper than :data:`MAX_DEPTH`. Both :func:`hetero.checkpoint.store.verify` (so
``latest_step``) and :func:`hetero.checkpoint.store.load` call it, so the two agree on which
checkpoint is valid: a bad one is skipped like any corrupt checkpoint.

Before that, :func:`read` reads the file only if it is a regular file of at most
:data:`MAX_BYTES` (a FIFO in its place would block the read, ``/dev/zero`` never ends, a sparse
file can claim a terabyte).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hetero.checkpoint.codec import MAX_DEPTH, CheckpointError, numpy_dtype
from hetero.core.files import NotARegularFileError, open_regular_file
from hetero.core.sizes import format_size

#: The largest manifest ``save`` writes and ``load`` reads: room for about a million arrays or
#: several million plain values, far more than the state dicts of the largest models hold (keep
#: long lists as NumPy arrays: one payload each, not one manifest entry per item).
MAX_BYTES = 256 << 20
KINDS = frozenset({"json", "dict", "list", "tuple", "numpy", "array", "torch", "bytes", "pickle"})
_JSON_SCALARS = (type(None), bool, int, float, str)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TORCH_DTYPE = re.compile(r"^[a-z][a-z0-9_]*$")
#: Bytes per element of the torch dtypes (by the name the encoder writes), to check payload
#: sizes without importing torch; a dtype missing here is size-checked when decoded.
TORCH_ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
    "float32": 4, "complex32": 4, "int64": 8, "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16,
}


def read(file: Path) -> bytes:
    """The bytes of the manifest ``file``; :class:`CheckpointError` unless it is a regular file of
    at most :data:`MAX_BYTES` (OSError when it cannot be opened)."""
    try:
        src = open_regular_file(file)
    except NotARegularFileError as exc:
        raise CheckpointError(f"{exc}: a checkpoint's manifest is a regular file (damaged, or not written by "
                              f"hetero)") from None
    with src:
        size = os.fstat(src.fileno()).st_size
        if size > MAX_BYTES:
            raise CheckpointError(f"{file} has {format_size(size)}, more than a hetero checkpoint manifest may "
                                  f"({format_size(MAX_BYTES)}): corrupt")
        data = src.read(MAX_BYTES + 1)  # at most: the file may have grown since
    if len(data) > MAX_BYTES:
        raise CheckpointError(f"{file} grew past {format_size(MAX_BYTES)} while being read (corrupt)")
    return data


def check_structure(body: Mapping[str, Any], file: Path) -> None:
    """Raise :class:`CheckpointError` naming ``file`` (the manifest) unless ``body`` is well formed."""
    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{file} is malformed: {what} (the manifest is corrupt or was not written by hetero)")

    if not isinstance(body.get("step"), int) or isinstance(body.get("step"), bool):
        raise bad("'step' is not an int")
    files = body.get("files")
    if not isinstance(files, dict):
        raise bad("'files' is not an object")
    for name, meta in files.items():
        _check_file_entry(name, meta, bad)
    stack: list[tuple[Any, str, int]] = [(body.get("state"), "state", 1)]
    if not isinstance(body.get("state"), dict) or body["state"].get("type") != "dict":
        raise bad("'state' is not a dict node")
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise bad(f"{where} is nested deeper than {MAX_DEPTH} levels")
        if not isinstance(node, dict):
            raise bad(f"{where} is a {type(node).__name__}, not a node")
        kind = node.get("type")
        if kind not in KINDS:
            raise bad(f"{where} has unknown value type {kind!r} (written by a newer hetero? upgrade hetero)")
        if kind == "json":
            if not isinstance(node.get("value"), _JSON_SCALARS):
                raise bad(f"{where} is a json node without a plain value")
        elif kind == "dict":
            keys, values = node.get("keys"), node.get("values")
            if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
                raise bad(f"{where} is a dict node whose keys and values are not two lists of one length")
            if not all(isinstance(key, _JSON_SCALARS) for key in keys):
                raise bad(f"{where} has a key that is not a plain value")
            stack.extend((value, f"{where}[{key!r}]", depth + 1) for key, value in zip(keys, values))
        elif kind in ("list", "tuple"):
            items = node.get("items")
            if not isinstance(items, list):
                raise bad(f"{where} is a {kind} node without a list of items")
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(items))
        else:
            _check_payload_node(node, kind, where, files, bad)


def _check_file_entry(name: Any, meta: Any, bad: Any) -> None:
    if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith(".") or not name:
        raise bad(f"payload name {name!r} is not a file name")
    if not isinstance(meta, dict):
        raise bad(f"the entry of payload {name} is not an object")
    size = meta.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise bad(f"payload {name} has size {size!r}, not a non-negative int")
    digest = meta.get("sha256")
    if isinstance(digest, list):
        part = meta.get("part_bytes")
        if not isinstance(part, int) or isinstance(part, bool) or part <= 0:
            raise bad(f"payload {name} is hashed in parts of {part!r} bytes")
        if len(digest) != -(-size // part) or not all(isinstance(d, str) and _SHA256.match(d) for d in digest):
            raise bad(f"payload {name} lists {len(digest)} part digests for {size} bytes in parts of {part}")
    elif not (isinstance(digest, str) and _SHA256.match(digest)):
        raise bad(f"payload {name} has no sha256")


def _check_payload_node(node: Mapping[str, Any], kind: str, where: str, files: Mapping[str, Any], bad: Any) -> None:
    name = node.get("file")
    if not isinstance(name, str) or name not in files:
        raise bad(f"{where} names payload {name!r}, which the manifest does not list")
    if kind not in ("numpy", "array", "torch"):
        return
    shape = node.get("shape")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise bad(f"{where} has shape {shape!r}, not a list of non-negative ints")
    if kind == "torch":
        dtype = node.get("dtype")
        if not isinstance(dtype, str) or not _TORCH_DTYPE.match(dtype):
            raise bad(f"{where} has torch dtype {dtype!r}")
        itemsize = TORCH_ITEMSIZE.get(dtype)
    else:
        try:
            itemsize = numpy_dtype(node).itemsize
        except CheckpointError as exc:
            raise bad(f"{where}: {exc}") from None
    if itemsize is not None and int(np.prod(shape, dtype=object)) * itemsize != files[name]["bytes"]:
        raise bad(f"{where} is {shape} of {itemsize}-byte elements, but payload {name} has {files[name]['bytes']} bytes")
