"""Every tensor of an ONNX model that keeps its data in another file, checked before ONNX Runtime
reads it: the file must be a regular file inside the model's folder, long enough for the bytes the
tensor names.

ONNX Runtime checks some of this itself, and only by path, and not in every version; hetero does
not hand a model's file references to it unchecked. The model is untrusted input (``hetero serve``
answers whoever sends a request with what the weights compute), so a reference is refused when it
is an absolute path, climbs out with ``..``, resolves (through symlinks) outside the folder, is
not a regular file (a FIFO would block the load forever, a device never ends), is missing, or is
shorter than ``offset + length``. A model given as bytes has no folder: any reference is refused.
References sit in the initializers, the sparse initializers, tensor attributes (a ``Constant``
node's ``value``), subgraphs (``If``, ``Loop``, ``Scan``), functions and training graphs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from hetero.core.optional import require
from hetero.onnx.errors import ExternalDataError

_EXTERNAL = 1  # TensorProto.EXTERNAL
_MARKER = b"location"  # every external-data reference carries this key; bytes without it have none


def check(data: bytes, source: str, folder: Path | None) -> bool:
    """Whether the model in ``data`` has external data; raises :class:`ExternalDataError` for a
    reference it may not follow (``folder`` None: the model came as bytes). Bytes that are not a
    model pass: ONNX Runtime names them when the session is made."""
    if _MARKER not in data:
        return False
    onnx = require("onnx", extra="onnx", feature="checking an ONNX model's external data")
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001 - not a model: ONNX Runtime's own error names it
        return False
    found = False
    for tensor in _tensors(model):
        if tensor.data_location != _EXTERNAL:
            continue
        found = True
        entries = {entry.key: entry.value for entry in tensor.external_data}
        _check_one(source, folder, tensor.name, entries)
    return found


def _check_one(source: str, folder: Path | None, tensor: str, entries: dict[str, str]) -> None:
    location = entries.get("location", "")

    def refuse(problem: str) -> ExternalDataError:
        return ExternalDataError(source, tensor, location, problem)

    if folder is None:
        raise refuse("but the model came as bytes, which have no folder to read it from: load the model from its path")
    if not location:
        raise refuse("but names no file (its external_data has no 'location')")
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() or PureWindowsPath(location).drive:
        raise refuse(f"an absolute path: external data must be a file inside the model's folder {folder}")
    if ".." in location.replace("\\", "/").split("/"):
        raise refuse(f"outside the model's folder {folder} ('..' climbs out of it)")
    base = folder.resolve()
    target = (base / location).resolve()
    if not target.is_relative_to(base):
        raise refuse(f"outside the model's folder {folder} (it resolves to {target})")
    try:
        mode = os.stat(target)
    except FileNotFoundError:
        raise refuse(f"which does not exist in the model's folder {folder}") from None
    except OSError as exc:
        raise refuse(f"which cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode.st_mode):
        raise refuse(f"which is not a regular file ({_kind(mode.st_mode)})")
    offset, length = _number(entries, "offset", refuse), _number(entries, "length", refuse)
    if length is not None and (offset or 0) + length > mode.st_size:
        raise refuse(f"which holds {mode.st_size} bytes, fewer than the offset + length "
                     f"({offset or 0} + {length}) the model asks for")


def _number(entries: dict[str, str], key: str, refuse: Any) -> int | None:
    if key not in entries:
        return None
    try:
        value = int(entries[key])
    except ValueError:
        value = -1
    if value < 0:
        raise refuse(f"with {key} {entries[key]!r}, which is not a non-negative integer")
    return value


def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other special file")


def _tensors(model: Any) -> Iterator[Any]:
    """Every TensorProto of ``model`` that can carry external data."""
    yield from _graph(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _node(node)
    for info in model.training_info:
        yield from _graph(info.initialization)
        yield from _graph(info.algorithm)


def _graph(graph: Any) -> Iterator[Any]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node(node)


def _node(node: Any) -> Iterator[Any]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
        for tensor in [*sparse, *attribute.sparse_tensors]:
            yield tensor.values
            yield tensor.indices
        if attribute.HasField("g"):
            yield from _graph(attribute.g)
        for graph in attribute.graphs:
            yield from _graph(graph)


__all__ = ["check"]
