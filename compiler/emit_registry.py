"""The dialect -> emitter table: each dialect's emitter module, imported when first needed."""

from __future__ import annotations

import importlib

from hetero.errors import CompileError

from .emit_base import Emitter

_MODULES = {"opencl": "emit_opencl", "cpu": "emit_cpu", "cuda": "emit_cuda", "hip": "emit_hip"}


def emitter_for(dialect: str) -> Emitter:
    module = _MODULES.get(dialect)
    if module is None:
        raise CompileError(f"no emitter for dialect {dialect!r}; known dialects: {', '.join(_MODULES)}")
    loaded = importlib.import_module(f"{__package__}.{module}")  # hetero's own: a failure here is a bug, shown as is
    emitter: Emitter = loaded.EMITTER
    return emitter
