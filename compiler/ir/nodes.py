"""hetero's kernel IR: typed expressions and structured statements.

Every expression carries its type; the frontend has already inserted every
conversion as an explicit :class:`Cast` (C's usual arithmetic conversions, see
:mod:`hetero.compiler.frontend.typing_rules`), so an emitter never infers types: it prints
what is there. Operands of a :class:`BinOp` have the same type as each other,
except shifts (right operand any integer) and comparisons (result bool).

Control flow is structured (if / for / while / break / continue / return), which
every dialect can print directly. Nodes keep the user's source position
(``loc``) for error messages.
"""

from __future__ import annotations

import dataclasses
from typing import Union

from hetero.core.types import ArrayType, ScalarType

Type = Union[ScalarType, ArrayType]
#: The "type" of a device function that returns nothing, and of calls to it.
VOID = ScalarType("void", "v", 0)


@dataclasses.dataclass(frozen=True)
class Loc:
    """A position in the user's source file (1-based line, 0-based column)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


# -- expressions ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Expr:
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool | complex


def number(c: Const) -> int | float | bool:
    """The value of a real constant: complex ones are lowered to parts
    (:mod:`hetero.compiler.ir.complex_lowering`) before passes and emitters read constants."""
    value = c.value
    if isinstance(value, complex):
        raise TypeError(f"a complex constant {value} reached a pass meant for real ones")
    return value


@dataclasses.dataclass(frozen=True)
class Var(Expr):
    """A scalar local variable or scalar parameter."""

    name: str


@dataclasses.dataclass(frozen=True)
class BinOp(Expr):
    """``op`` is one of ``+ - * / // % ** & | ^ << >>`` or ``min``/``max``.

    ``//`` and ``%`` on integers floor towards negative infinity (Python's rule),
    not C's truncation; on floats ``%`` takes the sign of the divisor.
    """

    op: str
    left: Expr
    right: Expr


@dataclasses.dataclass(frozen=True)
class UnaryOp(Expr):
    """``op`` is ``-`` (negate), ``~`` (bitwise not), ``not`` (on bool) or ``abs``."""

    op: str
    operand: Expr


@dataclasses.dataclass(frozen=True)
class Compare(Expr):
    """``op`` is one of ``< <= > >= == !=``; both operands have the same type; result bool."""

    op: str
    left: Expr
    right: Expr


@dataclasses.dataclass(frozen=True)
class Logical(Expr):
    """Short-circuit ``and``/``or`` on bool operands."""

    op: str
    left: Expr
    right: Expr


@dataclasses.dataclass(frozen=True)
class Select(Expr):
    """``a if cond else b``: only the chosen side is evaluated."""

    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclasses.dataclass(frozen=True)
class Cast(Expr):
    """Convert ``value`` to ``type``: C conversion rules (float->int truncates towards zero)."""

    value: Expr


@dataclasses.dataclass(frozen=True)
class Load(Expr):
    """``array[indices]``; one index per dimension, each i64. ``array`` names a parameter or local array."""

    array: str
    indices: tuple[Expr, ...]


@dataclasses.dataclass(frozen=True)
class Shape(Expr):
    """``array.shape[axis]`` (i64). Local arrays have constant shapes and never appear here."""

    array: str
    axis: int


@dataclasses.dataclass(frozen=True)
class WorkItem(Expr):
    """An index built-in: ``name`` is ``global_id local_id group_id local_size global_size
    num_groups``; ``axis`` 0–2; type i64."""

    name: str
    axis: int


@dataclasses.dataclass(frozen=True)
class Math(Expr):
    """A math function on floats, one of :data:`hetero.language.MATH_FUNCTIONS`; arguments
    already cast to one float type (f32 or f64), which is ``type`` too except for the
    predicates (``isnan isinf isfinite signbit``), whose ``type`` is bool."""

    name: str
    args: tuple[Expr, ...]


@dataclasses.dataclass(frozen=True)
class Atomic(Expr):
    """``op`` is ``add sub min max cas`` on ``array[indices]``; ``args`` is ``(value,)`` or
    ``(compare, value)`` for cas. The result is the old value."""

    op: str
    array: str
    indices: tuple[Expr, ...]
    args: tuple[Expr, ...]


@dataclasses.dataclass(frozen=True)
class Call(Expr):
    """A call of a ``@hetero.func`` device function (``type`` is its return type; a function
    without a return value has type :data:`VOID` and is called only from an :class:`ExprStmt`).
    ``func`` is the callee's :attr:`Function.name`, unique in the program. An argument
    for an array parameter is a :class:`Var` naming the caller's array parameter (its
    ``type`` is the element type): dialects that pass shapes separately pass them too."""

    func: str
    args: tuple[Expr, ...]


#: The lanes of a warp as every device presents it: CUDA's 32, also on 64-wide AMD wavefronts
#: (HIP's intrinsics take a width of 32) and on devices that emulate warps in local memory.
WARP_SIZE = 32
#: :class:`Warp` operations and their arguments.
WARP_OPS = {
    "shfl": ("mask", "value", "src_lane", "width"), "shfl_up": ("mask", "value", "delta", "width"),
    "shfl_down": ("mask", "value", "delta", "width"), "shfl_xor": ("mask", "value", "lane_mask", "width"),
    "all": ("mask", "predicate"), "any": ("mask", "predicate"), "ballot": ("mask", "predicate"),
    "activemask": (), "sync": ("mask",),
}
#: The sub-group operations :mod:`hetero.compiler.ir.warp_emulation` gives a :class:`Warp` on a target
#: with 32-wide sub-groups (``subgroups32``); no frontend makes them. ``sg_linear`` (i64) is
#: ``sub_group_id * 32 + sub_group_local_id``; ``sg_shuffle(value, lane)`` reads ``value`` (32 or
#: 64 bits) in sub-group lane ``lane`` (u32, in range); ``sg_ballot(predicate)`` is the u32 of the
#: lanes whose predicate holds.
SUBGROUP_OPS = {"sg_linear": (), "sg_shuffle": ("value", "lane"), "sg_ballot": ("predicate",)}


@dataclasses.dataclass(frozen=True)
class Warp(Expr):
    """A warp operation (CUDA's ``__shfl_*_sync``, ``__all/any/ballot_sync``, ``__activemask``,
    ``__syncwarp``), one of :data:`WARP_OPS`, over the :data:`WARP_SIZE` lanes that CUDA makes of
    consecutive linear local ids. ``mask`` is u32, ``width`` i32 (a power of two up to 32; lanes
    are grouped by it), lane arguments i32, predicates bool; a shuffle has its value's type,
    ``all``/``any`` bool, ``ballot``/``activemask`` u32, ``sync`` :data:`VOID` (an
    :class:`ExprStmt`). A shuffle from a lane outside the group (or past the work-group's end)
    returns the caller's own value, as CUDA defines. Devices without warps run these through
    :mod:`hetero.compiler.ir.warp_emulation`."""

    op: str
    args: tuple[Expr, ...]


#: :class:`ComplexOp` operations: what each takes and gives. ``part`` is the float type of
#: the complex operand's parts.
COMPLEX_OPS = {
    "make": "(re, im) of one float type -> complex", "real": "z -> part", "imag": "z -> part",
    "abs": "z -> part", "phase": "z -> part", "conj": "z -> complex",
    "exp": "z -> complex", "log": "z -> complex", "log10": "z -> complex", "sqrt": "z -> complex",
    "sin": "z -> complex", "cos": "z -> complex", "tan": "z -> complex", "sinh": "z -> complex",
    "cosh": "z -> complex", "tanh": "z -> complex",
    "isnan": "z -> bool", "isinf": "z -> bool", "isfinite": "z -> bool",
}


@dataclasses.dataclass(frozen=True)
class ComplexOp(Expr):
    """An operation of :data:`COMPLEX_OPS` on complex (c64/c128) values. Complex values also
    appear in :class:`Var`, :class:`Const`, :class:`Load`, :class:`Store`, :class:`Assign`,
    :class:`Cast`, :class:`Select`, ``+ - * / **`` :class:`BinOp`, ``-`` :class:`UnaryOp` and
    ``== !=`` :class:`Compare` as the frontend builds them; emitters never see any of them:
    :mod:`hetero.compiler.ir.complex_lowering` turns each into its two float parts first."""

    op: str
    args: tuple[Expr, ...]


# -- statements ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Stmt:
    loc: Loc


@dataclasses.dataclass(frozen=True)
class Assign(Stmt):
    """``name = value`` for a scalar local (``value`` has the variable's type)."""

    name: str
    value: Expr


@dataclasses.dataclass(frozen=True)
class Store(Stmt):
    """``array[indices] = value`` (``value`` has the element type)."""

    array: str
    indices: tuple[Expr, ...]
    value: Expr


@dataclasses.dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclasses.dataclass(frozen=True)
class For(Stmt):
    """``for var in range(start, stop, step)``: all of ``var``'s type; the loop runs while
    ``var < stop`` for a positive step, ``var > stop`` for a negative one. ``stop`` and
    ``step`` are evaluated once; when ``step`` is not a constant its sign is tested at run
    time. Python's semantics hold: assigning ``var`` in the body does not change the
    iteration, and after the loop ``var`` keeps the last value it took (unchanged when the
    loop ran zero times)."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]


@dataclasses.dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]


@dataclasses.dataclass(frozen=True)
class Break(Stmt):
    pass


@dataclasses.dataclass(frozen=True)
class Continue(Stmt):
    pass


@dataclasses.dataclass(frozen=True)
class Return(Stmt):
    """``return`` (kernels: end this work-item) or ``return value`` (device functions)."""

    value: Expr | None = None


@dataclasses.dataclass(frozen=True)
class ExprStmt(Stmt):
    """An expression evaluated for its effect (atomics, calls)."""

    value: Expr


@dataclasses.dataclass(frozen=True)
class Barrier(Stmt):
    """Work-group barrier with local (and global) memory fence."""


@dataclasses.dataclass(frozen=True)
class Fence(Stmt):
    """A memory fence (CUDA's ``__threadfence_block/__threadfence/__threadfence_system``):
    ``scope`` is ``block``, ``device`` or ``system``. Orders this work-item's memory accesses;
    no work-item waits."""

    scope: str


@dataclasses.dataclass(frozen=True)
class GridSync(Stmt):
    """Every work-item of the whole launch waits here (CUDA's ``this_grid().sync()``); memory
    written before it is visible after it. Emitters never see one: :mod:`hetero.compiler.ir.grid_sync`
    cuts the kernel at each into phases the launch runs one after another."""


# -- definitions ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LocalArray:
    """Work-group shared memory: ``local_array(shape, dtype)``, constant shape. With ``private``,
    one array per work-item instead (CUDA's ``cuda.local.array``), in its private memory."""

    name: str
    dtype: ScalarType
    shape: tuple[int, ...]
    private: bool = False


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    type: Type


@dataclasses.dataclass(frozen=True)
class Function:
    """A kernel (``is_kernel``) or device function, ready for emitters.

    ``locals`` maps every scalar local (loop variables included) to its type;
    ``local_arrays`` are the work-group arrays (kernels only); ``callees`` are the
    device functions called, each before its callers (emit in this order).
    ``features`` names what the target must support: ``fp64``, ``fp16``,
    ``int64_atomics``, ``barrier``.
    """

    name: str
    params: tuple[Param, ...]
    return_type: ScalarType  # VOID for kernels and functions without a return value
    locals: dict[str, ScalarType]
    local_arrays: tuple[LocalArray, ...]
    body: tuple[Stmt, ...]
    is_kernel: bool
    loc: Loc
    callees: tuple[Function, ...] = ()
    features: frozenset[str] = frozenset()

    def array_params(self) -> dict[str, ArrayType]:
        return {p.name: p.type for p in self.params if isinstance(p.type, ArrayType)}

    def element_type(self, array: str) -> ScalarType:
        for param in self.params:
            if param.name == array and isinstance(param.type, ArrayType):
                return param.type.dtype
        for local in self.local_arrays:
            if local.name == array:
                return local.dtype
        raise KeyError(array)


def walk_stmts(body: tuple[Stmt, ...]):  # type: ignore[no-untyped-def]
    """Every statement in ``body``, nested ones included, in source order."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, If):
            yield from walk_stmts(stmt.then)
            yield from walk_stmts(stmt.orelse)
        elif isinstance(stmt, (For, While)):
            yield from walk_stmts(stmt.body)


def contains_barrier(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(stmt, Barrier) for stmt in walk_stmts(body))


FENCE_SCOPES = ("block", "device", "system")
