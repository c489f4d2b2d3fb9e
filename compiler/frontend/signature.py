"""Kernel signatures as text: ``"f32, f32[:], f32[:, :]"`` or ``"saxpy(f32, f32[:], f32[:])"``.

Used by ``kernel.ir(signature)``, ``kernel.source(device, signature)`` and bundles.
"""

from __future__ import annotations

import re

from hetero.core.errors import CompileError
from hetero.core.types import BY_NAME, ArrayType, ScalarType

_ITEM = re.compile(r"^\s*(\w+)\s*(\[\s*(:\s*(,\s*:\s*)*)?\])?\s*$")


def parse_signature(text: str) -> tuple[str | None, tuple[ScalarType | ArrayType, ...]]:
    """``(name or None, types)``. Raises CompileError naming the bad part and the valid type names."""
    name = None
    body = text.strip()
    match = re.match(r"^(\w+)\s*\((.*)\)\s*$", body, re.S)
    if match:
        name, body = match.group(1), match.group(2)
    types: list[ScalarType | ArrayType] = []
    for part in filter(None, (p.strip() for p in _split(body))):
        item = _ITEM.match(part)
        if not item or item.group(1) not in BY_NAME:
            raise CompileError(f"bad type {part!r} in signature {text!r}; scalar types: {', '.join(BY_NAME)}; "
                               "arrays: f32[:], f32[:, :], …")
        scalar = BY_NAME[item.group(1)]
        if item.group(2):
            types.append(ArrayType(scalar, (item.group(3) or "").count(":") or 1))
        else:
            types.append(scalar)
    return name, tuple(types)


def _split(body: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in body:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def format_signature(name: str, types: tuple[ScalarType | ArrayType, ...]) -> str:
    return f"{name}({', '.join(map(str, types))})"
