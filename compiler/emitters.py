"""The emitter of each dialect, imported when first needed."""

from __future__ import annotations

import importlib

from hetero.errors import CompileError

from .emitter import Emitter

_MODULES = {"opencl": "emit_opencl", "cpu": "emit_cpu", "cuda": "emit_cuda", "hip": "emit_hip"}


def emitter_for(dialect: str) -> Emitter:
    module = _MODULES.get(dialect)
    if module is None:
        raise CompileError(f"no emitter for dialect {dialect!r}; known dialects: {', '.join(_MODULES)}")
    try:
        loaded = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as exc:
        raise CompileError(f"the {dialect} emitter is not available in this hetero build ({exc})") from exc
    emitter: Emitter = loaded.EMITTER
    return emitter
