"""The interface every dialect's emitter implements, and the argument layout (ABI) a
launch follows.

An emitter turns one :class:`~hetero.compiler.ir.nodes.Function` (a kernel, with its
device functions in ``callees``) into source text for one dialect. The ABI says how
the kernel's parameters are passed: the launcher builds the argument list from it
without knowing the dialect.
"""

from __future__ import annotations

import abc
import dataclasses

from hetero.core.types import ScalarType

from hetero.compiler.ir import nodes as ir
from hetero.core.target import Target


@dataclasses.dataclass(frozen=True)
class AbiArg:
    """One argument as passed to the compiled kernel.

    ``kind`` is ``scalar`` (a value of ``dtype``), ``array`` (the array's buffer; on the
    CPU a NumPy view with the array's shape) or ``shape`` (``param.shape[axis]`` as i64).
    """

    kind: str
    param: str
    dtype: ScalarType
    axis: int = -1


@dataclasses.dataclass(frozen=True)
class EmittedSource:
    """Generated source and how to compile and call it.

    ``entry`` is the kernel's symbol (a C function name or a Python function name),
    ``options`` the compiler options the source needs, ``abi`` the argument layout;
    ``max_group`` the most work-items a work-group may hold (0: the device's own limit);
    ``local_arrays`` the name and bytes of each work-group (shared) memory array one work-group
    holds, hetero's own (warp exchanges) included (:func:`work_group_arrays`), which a device's
    limit is checked against before the source is built.
    """

    dialect: str
    entry: str
    text: str
    abi: tuple[AbiArg, ...]
    options: tuple[str, ...] = ()
    max_group: int = 0
    local_arrays: tuple[tuple[str, int], ...] = ()

    @property
    def local_bytes(self) -> int:
        """The work-group (shared) memory one work-group of this kernel holds, in bytes."""
        return sum(size for _, size in self.local_arrays)


class Emitter(abc.ABC):
    dialect: str
    #: Whether this dialect's kernels declare array parameters ``restrict`` (no two overlap);
    #: the launcher then checks each launch's arrays and takes a ``restrict=False`` variant
    #: for one whose arrays share memory.
    declares_restrict: bool = False
    #: Whether the dialect runs CUDA's warp operations natively (else through work-group memory).
    native_warps: bool = False
    #: Whether it runs them on 32-wide sub-groups where the target has ``subgroups32``.
    subgroup_warps: bool = False

    @abc.abstractmethod
    def emit(self, fn: ir.Function, target: Target, *, restrict: bool = True) -> EmittedSource:
        """Source for kernel ``fn`` on ``target``. Raises CompileError for what the target lacks.
        With ``restrict=False`` no parameter promises the compiler that it does not alias another."""


def default_abi(fn: ir.Function, with_shapes: bool) -> tuple[AbiArg, ...]:
    """Parameters in order; each array followed by its shape (when ``with_shapes``)."""
    from hetero.core.types import ArrayType, i64

    layout: list[AbiArg] = []
    for param in fn.params:
        if isinstance(param.type, ArrayType):
            layout.append(AbiArg("array", param.name, param.type.dtype))
            if with_shapes:
                layout.extend(AbiArg("shape", param.name, i64, axis) for axis in range(param.type.ndim or 0))
        else:
            layout.append(AbiArg("scalar", param.name, param.type))
    return tuple(layout)


def work_group_arrays(fn: ir.Function) -> tuple[tuple[str, int], ...]:
    """``(name, bytes)`` of each work-group memory array of kernel ``fn`` and its device functions
    (per-work-item arrays, ``cuda.local.array``, are not work-group memory)."""
    found: dict[str, int] = {}
    todo = [fn]
    while todo:
        f = todo.pop()
        for array in f.local_arrays:
            if not array.private:
                size = array.dtype.dtype.itemsize
                for extent in array.shape:
                    size *= extent
                found.setdefault(array.name, size)
        todo.extend(f.callees)
    return tuple(found.items())


def entry_name(fn: ir.Function) -> str:
    return f"hetero_{fn.name}"


def source_to_json(source: EmittedSource) -> dict[str, object]:
    """``source`` as plain JSON data (for the compile cache's record of a specialization)."""
    return {
        "dialect": source.dialect, "entry": source.entry, "text": source.text, "options": list(source.options),
        "abi": [[arg.kind, arg.param, arg.dtype.name, arg.axis] for arg in source.abi], "max_group": source.max_group,
        "local_arrays": [[name, size] for name, size in source.local_arrays],
    }


def source_from_json(data: dict[str, object]) -> EmittedSource:
    """The inverse of :func:`source_to_json`; raises ValueError/KeyError/TypeError on malformed data."""
    from hetero.core.types import BY_NAME

    abi = tuple(AbiArg(str(kind), str(param), BY_NAME[str(dtype)], int(axis))  # type: ignore[call-overload]
                for kind, param, dtype, axis in data["abi"])  # type: ignore[attr-defined]
    if any(arg.kind not in ("scalar", "array", "shape") for arg in abi):
        raise ValueError("unknown argument kind in a cached kernel record")
    arrays = tuple((str(name), int(size)) for name, size in data.get("local_arrays", []))  # type: ignore[attr-defined]
    return EmittedSource(str(data["dialect"]), str(data["entry"]), str(data["text"]), abi,
                         tuple(str(o) for o in data["options"]),  # type: ignore[attr-defined]
                         int(data.get("max_group", 0)), arrays)  # type: ignore[call-overload]
