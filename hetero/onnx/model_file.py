"""The model as hetero hands it to ONNX Runtime: its bytes, read once, what names it in errors, and
the folder its external data is read from, every reference to which is checked first.

Why bytes and not the path: a :class:`~hetero.onnx.Pool` makes one session per device and replica;
read once, every member runs the same model even when the file is replaced while they are made,
and a file that is not a model is named once, by its path. But bytes have no folder, and ONNX
Runtime then looks for a tensor's external data (PyTorch's exporter writes ``model.onnx.data``
beside ``model.onnx``) in the *working directory*: the model fails to load anywhere else, or
silently reads a same-named file there, or, for an untrusted model that names another file there
(a key), hands its bytes to whoever reads the outputs. So every external-data reference is checked
here against the model's own folder (:mod:`hetero.onnx.external_data`), and the session tells ONNX
Runtime that folder (:data:`FOLDER_KEY`); a model given as bytes may carry none.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from hetero.core.files import NotARegularFileError, open_regular_file
from hetero.onnx import external_data

#: ONNX Runtime's session option: the folder external data is read from for a model loaded from bytes.
FOLDER_KEY = "session.model_external_initializers_file_folder_path"

ModelSource = str | os.PathLike[str] | bytes | Any  # a path, the serialized bytes, or an onnx.ModelProto


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """A model read and checked: ``data`` its bytes, ``source`` what errors call it, ``folder`` where
    its external data lies (None: it came as bytes or a ModelProto), ``has_external_data``."""

    data: bytes
    source: str
    folder: Path | None
    has_external_data: bool

    def configure(self, options: Any) -> None:
        """Point ONNX Runtime's ``SessionOptions`` at the model's folder for its external data."""
        if self.has_external_data and self.folder is not None:
            options.add_session_config_entry(FOLDER_KEY, str(self.folder))


def describe(model: ModelSource) -> str:
    """How an error names ``model``: its path as given, else what it is."""
    if isinstance(model, ModelFile):
        return model.source
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    return "the model's bytes" if isinstance(model, (bytes, bytearray, memoryview)) else "the ModelProto"


def model_bytes(model: ModelSource) -> bytes:
    """The serialized model: read from a path (a regular file), or a ModelProto serialized (nothing is executed)."""
    if isinstance(model, ModelFile):
        return model.data
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if hasattr(model, "SerializeToString"):
        return bytes(model.SerializeToString())
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX model at {str(path)!r}" + (" (it is a directory)" if path.is_dir() else ""))
        try:
            with open_regular_file(path) as stream:
                return stream.read()
        except NotARegularFileError as exc:
            raise FileNotFoundError(f"no ONNX model at {str(path)!r}: {exc}") from None
    raise TypeError(f"model must be a path, the model's bytes or an onnx.ModelProto, got {type(model).__name__}")


def read_model(model: ModelSource) -> ModelFile:
    """``model`` read once and its external data checked (raises :class:`~hetero.onnx.errors.ExternalDataError`)."""
    if isinstance(model, ModelFile):
        return model
    data = model_bytes(model)
    source = describe(model)
    folder = Path(model).absolute().parent if isinstance(model, (str, os.PathLike)) else None
    found = external_data.check(data, source, folder)
    return ModelFile(data, source, folder, found)


__all__ = ["FOLDER_KEY", "ModelFile", "ModelSource", "describe", "model_bytes", "read_model"]
