"""The dialect -> emitter table: each dialect's emitter module, imported when first needed."""

from __future__ import annotations

import importlib

from hetero.core.errors import CompileError

from hetero.compiler.emit.base import Emitter

_MODULES = {"opencl": "opencl", "cpu": "cpu", "cuda": "cuda", "hip": "hip"}


def emitter_for(dialect: str) -> Emitter:
    module = _MODULES.get(dialect)
    if module is None:
        raise CompileError(f"no emitter for dialect {dialect!r}; known dialects: {', '.join(_MODULES)}")
    loaded = importlib.import_module(f"{__package__}.{module}")  # hetero's own: a failure here is a bug, shown as is
    emitter: Emitter = loaded.EMITTER
    return emitter
