"""Whether a kernel's launch can be split across devices, read from its IR, and the IR
rewrite that lets one part run a slice of the launch.

A launch is split along one launch axis ``A`` (the *row* axis). A part covering rows
``[lo, hi)`` runs ``hi - lo`` work-items along ``A`` with every index built-in shifted so the
kernel sees the whole launch: ``global_id(A)`` is ``lo`` + the part's own id, ``group_id(A)``
likewise in work-groups, ``global_size(A)`` and ``num_groups(A)`` are the whole launch's.
A *row index* is ``global_id(A)``, or a variable only ever assigned a row index.

Array arguments, by how the kernel uses them:

- written (stores, atomics) and every access's first index a row index: **split** (each part
  gets and returns the rows it owns);
- only read, every access's first index a row index: **split**, copied in only;
- only read otherwise: **broadcast** (each part gets all of it);
- named in ``combine`` (``sum``, ``min``, ``max``): each part starts from the identity (the
  first part from the data) and the results are merged;
- anything else is refused, naming the array, the access and where it is in the source:
  a write whose first index is not a row index (a part would write rows it does not own),
  an atomic on a shared element, a read of other rows of an array the kernel writes, an
  array passed to a device function (its accesses are not checked).

Also refused: a device function reading ``global_id``/``group_id``/``global_size``/
``num_groups`` (only the kernel body is rewritten), and, when the launch gives no local size,
a kernel using work-groups along ``A`` (``group_id``, ``num_groups``, ``barrier``, local
arrays): parts then could not keep whole work-groups. With a local size, parts are whole
multiples of it. Arrays keep their full shapes in every part (``x.shape[0]`` is the whole
length), so bounds checks and index arithmetic mean what they meant in one launch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hetero.compiler.ir import nodes as ir
from hetero.compiler.ir.queries import all_expressions, own_expressions, subexpressions
from hetero.core.errors import KernelLaunchError
from hetero.core.types import i64

OFFSET = "hetero_split_offset"
TOTAL = "hetero_split_total"
COMBINE_OPS = ("sum", "min", "max")
_SHIFTED = ("global_id", "group_id", "global_size", "num_groups")


class NotSplittableError(KernelLaunchError):
    """A kernel launch cannot be split across devices; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a split launch treats each array parameter: ``roles[name]`` is ``split``,
    ``broadcast`` or ``combine``; ``written`` names those the kernel changes."""

    axis: int
    roles: Mapping[str, str]
    written: frozenset[str]
    needs_local_size: bool


@dataclasses.dataclass(frozen=True)
class _Access:
    array: str
    write: bool
    atomic: str | None
    row_axis: int | None  # the launch axis whose global id is the first index, or None
    loc: ir.Loc
    text: str


def _row_vars(function: ir.Function, dims: int) -> dict[str, int]:
    """Scalar locals only ever assigned ``global_id(A)`` (or each other), with their axis ``A``."""
    assigns: dict[str, list[ir.Expr]] = {}
    loop_vars = set()
    for stmt in ir.walk_stmts(function.body):
        if isinstance(stmt, ir.Assign):
            assigns.setdefault(stmt.name, []).append(stmt.value)
        elif isinstance(stmt, ir.For):
            loop_vars.add(stmt.var)
    found: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, values in assigns.items():
            if name in found or name in loop_vars:
                continue
            axes = {_row_axis(v, found) for v in values}
            if len(axes) == 1 and None not in axes:
                found[name] = axes.pop()  # type: ignore[assignment]
                changed = True
    return found


def _row_axis(e: ir.Expr, row_vars: Mapping[str, int]) -> int | None:
    if isinstance(e, ir.Cast) and e.type.name.startswith(("i", "u")) and e.value.type.name.startswith(("i", "u")):
        return _row_axis(e.value, row_vars)
    if isinstance(e, ir.WorkItem) and e.name == "global_id":
        return e.axis
    if isinstance(e, ir.Var):
        return row_vars.get(e.name)
    return None


def _accesses(function: ir.Function, row_vars: Mapping[str, int]) -> list[_Access]:
    params = set(function.array_params())
    found: list[_Access] = []

    def note(array: str, indices: tuple[ir.Expr, ...], write: bool, atomic: str | None, loc: ir.Loc) -> None:
        if array in params:
            first = _row_axis(indices[0], row_vars) if indices else None
            what = f"atomic_{atomic} on {array}" if atomic else f"{'writes' if write else 'reads'} {array}[…]"
            found.append(_Access(array, write, atomic, first, loc, what))

    for stmt in ir.walk_stmts(function.body):
        if isinstance(stmt, ir.Store):
            note(stmt.array, stmt.indices, True, None, stmt.loc)
        for top in own_expressions(stmt):
            for e in subexpressions(top):
                if isinstance(e, ir.Load):
                    note(e.array, e.indices, False, None, stmt.loc)
                elif isinstance(e, ir.Atomic):
                    note(e.array, e.indices, True, e.op, stmt.loc)
                elif isinstance(e, ir.Call):
                    for arg in e.args:
                        if isinstance(arg, ir.Var) and arg.name in params:
                            found.append(_Access(arg.name, True, "call", None, stmt.loc,
                                                 f"passes {arg.name} to device function {e.func}"))
    return found


def analyse(function: ir.Function, kernel: str, dims: int, combine: Mapping[str, str]) -> Layout:
    """The split layout of ``function`` launched over ``dims`` axes, or NotSplittableError."""
    arrays = function.array_params()
    for name, op in combine.items():
        if name not in arrays:
            raise NotSplittableError(f"{kernel}.split: combine names {name!r}, which is not an array parameter of "
                                     f"{kernel} (its arrays: {', '.join(arrays) or 'none'})")
        if op not in COMBINE_OPS:
            raise NotSplittableError(f"{kernel}.split: combine[{name!r}] is {op!r}; use one of {', '.join(COMBINE_OPS)}")
    for callee in function.callees:
        for e in all_expressions(callee.body):
            if isinstance(e, ir.WorkItem) and e.name in _SHIFTED:
                raise NotSplittableError(f"{kernel} cannot be split: device function {callee.name} reads {e.name}"
                                         f"({e.axis}) (at {callee.loc}); read it in the kernel and pass it as an argument")
    row_vars = _row_vars(function, dims)
    accesses = _accesses(function, row_vars)
    written = {a.array for a in accesses if a.write}
    # The split axis: the one whose global id indexes the rows of what the kernel writes.
    write_axes = {a.row_axis for a in accesses if a.write and a.array not in combine and a.row_axis is not None}
    if len(write_axes) > 1:
        raise NotSplittableError(f"{kernel} cannot be split: it writes rows indexed by global_id of several axes "
                                 f"({', '.join(str(x) for x in sorted(write_axes))})")
    read_axes = [a.row_axis for a in accesses if a.row_axis is not None]
    axis = write_axes.pop() if write_axes else (max(set(read_axes), key=read_axes.count) if read_axes else dims - 1)
    if axis >= dims:
        raise NotSplittableError(f"{kernel} cannot be split over a {dims}-D launch: it indexes rows by "
                                 f"global_id({axis})")
    roles: dict[str, str] = {}
    for name in arrays:
        mine = [a for a in accesses if a.array == name]
        if name in combine:
            roles[name] = "combine"
            continue
        off_row = [a for a in mine if a.row_axis != axis]
        if name in written:
            bad = next((a for a in off_row if a.write), None) or (off_row[0] if off_row else None)
            if bad is not None:
                raise NotSplittableError(_refusal(kernel, name, bad, axis))
            roles[name] = "split"
        else:
            roles[name] = "split" if mine and not off_row else "broadcast"
    grouped = any(isinstance(e, ir.WorkItem) and e.axis == axis and e.name in ("group_id", "num_groups")
                  for e in all_expressions(function.body))
    needs_local = grouped or ir.contains_barrier(function.body) or bool(function.local_arrays)
    return Layout(axis, roles, frozenset(written), needs_local)


def _refusal(kernel: str, array: str, access: _Access, axis: int) -> str:
    if access.atomic == "call":
        why = f"{access.text}, whose accesses split cannot check"
    elif access.atomic:
        why = f"it uses {access.text} at an element other parts may update too"
    elif access.write:
        why = f"it {access.text} at a first index that is not global_id({axis}), so a part may write rows it does not own"
    else:
        why = f"it {access.text} at rows other parts may be changing (it writes {array} too)"
    rule = f"only arrays every part writes at its own rows (first index global_id({axis})) are split"
    if access.atomic and access.atomic != "call":
        remedy = (f"if each part adds its share into {array}, declare split(..., combine={{{array!r}: 'sum'}}) "
                  "(or 'min'/'max')")
    else:
        remedy = "launch it on one device instead (kernel[n](...))"
    return f"{kernel} cannot be split: {why} (at {access.loc}); {rule}. Remedy: {remedy}"


def with_offset(function: ir.Function, axis: int) -> ir.Function:
    """``function`` with two more i64 parameters (:data:`OFFSET`, :data:`TOTAL`) and its index
    built-ins along ``axis`` shifted to see the whole launch (see the module docstring)."""
    offset = ir.Var(i64, OFFSET)
    total = ir.Var(i64, TOTAL)

    def expr(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.WorkItem):
            if e.axis != axis or e.name not in _SHIFTED:
                return e
            local = ir.WorkItem(i64, "local_size", axis)
            if e.name == "global_id":
                return ir.BinOp(i64, "+", e, offset)
            if e.name == "group_id":
                return ir.BinOp(i64, "+", e, ir.BinOp(i64, "//", offset, local))
            if e.name == "global_size":
                return total
            return ir.BinOp(i64, "//", total, local)  # num_groups
        return _rebuild(e, expr, stmt)

    def stmt(s: ir.Stmt) -> ir.Stmt:
        return _rebuild(s, expr, stmt)  # type: ignore[no-any-return]

    params = (*function.params, ir.Param(OFFSET, i64), ir.Param(TOTAL, i64))
    return dataclasses.replace(function, params=params, body=tuple(stmt(s) for s in function.body))


def _rebuild(node: Any, expr: Any, stmt: Any) -> Any:
    changes = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        new = _map(value, expr, stmt)
        if new is not value:
            changes[field.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _map(value: Any, expr: Any, stmt: Any) -> Any:
    if isinstance(value, ir.Expr):
        return expr(value)
    if isinstance(value, ir.Stmt):
        return stmt(value)
    if isinstance(value, tuple) and value and isinstance(value[0], (ir.Expr, ir.Stmt)):
        mapped = tuple(_map(v, expr, stmt) for v in value)
        return value if all(a is b for a, b in zip(mapped, value, strict=True)) else mapped
    return value
