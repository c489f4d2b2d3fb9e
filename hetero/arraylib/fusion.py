"""Fusion: chains of elementwise operations recorded lazily and run as one generated kernel.

With fusion on (the default; ``hetero.fusion(False)`` or ``HETERO_FUSION=0`` turns it off),
an elementwise operation on arrays does not launch: it returns an array whose value is
*recorded* (a :class:`Lazy` node: the operation's plan and its operands, each a computed
array, a scalar value, or the node of a recorded operand). Nothing is allocated. The value
is computed when it is needed: when its buffer is read (a reduction, a kernel launch or
copy that reads it, ``numpy()``, a host read, ``synchronize()``), when something is about to
write an array it reads (:func:`hetero.core.fusion_state.before_write`, called by every launch
for the arrays it writes, by copies and host writes), or when an in-place operator stores
into an array. Then the whole chain is one expression tree (:mod:`hetero.compiler.array_kernels.elementwise`)
over its distinct input arrays and scalars, built into one kernel keyed by the tree's
structure (operations, dtypes, which leaves are the same array; never scalar values or
shapes), so a training loop builds each of its expressions once and reuses it.

Results are identical with fusion on and off: each node rounds to its own dtype as the
operation alone would (:mod:`hetero.compiler.array_kernels.elementwise`), and no vendor compiler may
contract a multiply and an add (:mod:`hetero.compiler.emit.c_opencl`, ``c_cuda``).

Bounds: a chain of more than :data:`MAX_OPS` operations, or with more than
:data:`MAX_ARRAYS` distinct arrays, computes the recorded operands first. An operation
reading an array whose memory is shared outside hetero (a NumPy view of it on ``cpu``,
DLPack, torch; :meth:`hetero.Array._escape`) is computed at once, since that memory may
change without hetero seeing it. A recorded array that is dropped unneeded is never
computed. Errors a device would give at the launch (out of memory, a build error) come when
the value is computed; dtype, shape, device and fp64 errors come at the operation itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Iterator
from typing import Any

from hetero.core import fusion_state
from hetero.array.ndarray import Array, byte_size, give_buffer, empty
from hetero.arraylib.elementwise import Plan, check_fp64, launch, scalar_value
from hetero.arraylib.hooks import FUSE
from hetero.compiler.array_kernels import elementwise
from hetero.core.device import Device
from hetero.core.types import scalar_type

#: Operations in one fused kernel at most.
MAX_OPS = 32
#: Distinct array operands of one fused kernel at most (each is a parameter and a stream of loads).
MAX_ARRAYS = 12


@dataclasses.dataclass(eq=False, slots=True)
class Lazy:
    """One recorded operation: ``plan`` over ``operands`` (per operand of the plan: a computed
    :class:`hetero.Array`, a :class:`Lazy`, or a scalar's value as the kernel takes it)."""

    plan: Plan
    operands: tuple[Any, ...]
    shape: tuple[int, ...]
    device: Device
    ops: int  # operations in this chain
    arrays: int  # array leaves of this chain, counted with repeats (an upper bound of the distinct ones)
    reads: frozenset[int]  # id() of the buffers its array leaves read (they stay alive with the node)
    #: a lone operation on computed arrays recorded by the eager fast path: its ready launch
    #: (:class:`hetero.arraylib.eager.Recipe`), which computes it into a new array
    recipe: Any = None


_lock = threading.RLock()
_fused: dict[tuple[elementwise.Node, Any], Plan] = {}


def fuse(plan: Plan, operands: tuple[Any, ...], shape: tuple[int, ...], device: Device, out: Array | None) -> Array:
    """The operation ``plan`` on ``operands``: recorded (``out`` None) or computed into ``out``."""
    check_fp64(plan, device)
    if out is None:
        byte_size(shape, plan.result)  # too large a result is refused at the operation, not later
        if not all(shape):
            return empty(shape, plan.result, device=device)
    node, escaped = _node(plan, operands, shape, device)
    if out is None:
        result = Array(None, device, shape, plan.result)
        result._pending = node
        if escaped:
            realize(result)  # memory shared outside hetero may change unseen: compute now
        else:
            fusion_state.record(result)
        return result
    _run(node, out, fresh=False)
    return out


def _node(plan: Plan, operands: tuple[Any, ...], shape: tuple[int, ...], device: Device) -> tuple[Lazy, bool]:
    """The node of ``plan`` on ``operands``, and whether an operand's memory is shared outside
    hetero. Only the computed operands need that check: a recorded operand is alive, so had a
    leaf of its chain escaped since it was recorded, the escape would have computed it."""
    parts: list[Any] = []
    ops, arrays, escaped = 1, 0, False
    for x, kind in zip(operands, plan.scalars, strict=True):
        if kind is not None:
            parts.append(scalar_value(x, kind))
        elif (recorded := x._pending) is not None:  # read once: another thread may be computing it
            parts.append(recorded)
            ops += recorded.ops
            arrays += recorded.arrays
        else:
            parts.append(x)
            arrays += 1
            escaped = escaped or (x._base if x._base is not None else x)._escaped
    if ops > MAX_OPS or arrays > MAX_ARRAYS:  # too long a chain: the recorded operands are computed first
        parts = [_computed(x, p) for x, p in zip(operands, parts, strict=True)]
        ops, arrays = 1, sum(1 for kind in plan.scalars if kind is None)
    reads: set[int] = set()
    for p, kind in zip(parts, plan.scalars, strict=True):
        if kind is None:
            if type(p) is Lazy:
                reads |= p.reads
            else:
                reads.add(id(p._buf))
    return Lazy(plan, tuple(parts), shape, device, ops, arrays, frozenset(reads)), escaped


def _computed(operand: Any, part: Any) -> Any:
    """``operand`` computed (its buffer read realizes it), standing for itself as a leaf."""
    if type(part) is Lazy:
        operand._buffer  # noqa: B018  (reading it computes the recorded value)
        return operand
    return part


#: id() of the arrays whose kernel :func:`realize` is queuing now (by the thread holding
#: :data:`hetero.core.fusion_state.LOCK`: that launch reads their buffers as its output).
_computing: set[int] = set()


def realize(x: Array) -> None:
    """Compute recorded array ``x`` into a new buffer of its own (the hook of
    :attr:`hetero.Array._buffer`). ``x`` stays recorded until its kernel is queued: another
    thread reading its buffer meanwhile waits here for the lock, so no launch or copy of its
    can be queued ahead of the kernel that writes the value."""
    with fusion_state.LOCK:
        node = x._pending
        if node is None:  # computed (by another thread, while this one waited for the lock)
            return
        recipe = node.recipe
        if recipe is not None:  # a lone operation on computed arrays: its launch reads no array's value
            if x._buf is None:
                give_buffer(x)
            fusion_state.computed(x)
            try:
                recipe.launch(x, node.operands)
            except BaseException:
                fusion_state.record(x)  # still recorded (its buffer kept): a later read computes it again
                raise
            x._pending = None
            return
        if id(x) in _computing:  # being queued by this thread (the lock's holder)
            return
        if x._buf is None:
            give_buffer(x)
        fusion_state.computed(x)
        _computing.add(id(x))
        try:
            _run(node, x, fresh=True)
        except BaseException:
            fusion_state.record(x)  # still recorded (its buffer kept): a later read computes it again
            raise
        else:
            x._pending = None
        finally:
            _computing.discard(id(x))


def _run(node: Lazy, out: Array, fresh: bool) -> None:
    """The chain ``node`` as one kernel into ``out`` (the plan of a lone operation on computed
    operands is that operation's own kernel, the one fusion off runs); ``fresh``: ``out`` is a
    new buffer nothing else reads."""
    if fresh and node.recipe is not None:
        node.recipe.launch(out, node.operands)
        return
    plan, arrays, scalars = _composed(node)
    launch(plan, arrays, scalars, node.shape, out, fresh)


def _composed(node: Lazy) -> tuple[Plan, list[Array], list[Any]]:
    if not any(type(p) is Lazy for p in node.operands):
        arrays = [p for p, kind in zip(node.operands, node.plan.scalars, strict=True) if kind is None]
        scalars = [p for p, kind in zip(node.operands, node.plan.scalars, strict=True) if kind is not None]
        return node.plan, arrays, scalars
    slots: dict[int, int] = {}
    arrays = []
    scalars = []

    def visit(n: Lazy) -> elementwise.Node:
        inputs: list[elementwise.Node] = []
        values: list[elementwise.Node] = []
        for p, kind in zip(n.operands, n.plan.scalars, strict=True):
            if kind is not None:
                values.append(elementwise.Scalar(len(scalars), scalar_type(kind)))
                scalars.append(p)
            elif type(p) is Lazy:
                inputs.append(visit(p))
            else:
                slot = slots.get(id(p))
                if slot is None:
                    slot = slots[id(p)] = len(arrays)
                    arrays.append(p)
                inputs.append(elementwise.Input(slot, scalar_type(p.dtype)))
        return _substitute(n.plan.tree, inputs, values)

    tree = visit(node)
    return _fused_plan(tree, node.plan), arrays, scalars


def _substitute(tree: elementwise.Node, inputs: list[elementwise.Node], values: list[elementwise.Node]) -> elementwise.Node:
    if isinstance(tree, elementwise.Input):
        return inputs[tree.slot]
    if isinstance(tree, elementwise.Scalar):
        return values[tree.slot]
    return elementwise.Apply(tree.op, tuple(_substitute(a, inputs, values) for a in tree.args), tree.compute, tree.dtype)


def _fused_plan(tree: elementwise.Node, root: Plan) -> Plan:
    key = (tree, root.result)
    plan = _fused.get(key)
    if plan is None:
        with _lock:
            plan = _fused.get(key)
            if plan is None:
                ops = _ops(tree)
                digest = hashlib.sha256(repr(key).encode()).hexdigest()[:12]  # stable across processes
                named = "_".join(ops[:3]) + ("_etc" if len(ops) > 3 else "")
                fp64 = any(t.name == "f64" for t in _types(tree))
                plan = _fused[key] = Plan(f"fused {'/'.join(ops)}", tree, root.result, (), fp64,
                                          f"ewf_{named}_{digest}")
    return plan


def _ops(tree: elementwise.Node) -> list[str]:
    if isinstance(tree, elementwise.Apply):
        return [op for arg in reversed(tree.args) for op in _ops(arg)] + [tree.op]
    return []


def _types(tree: elementwise.Node) -> Iterator[Any]:
    yield tree.dtype
    if isinstance(tree, elementwise.Apply):
        yield tree.compute
        for arg in tree.args:
            yield from _types(arg)


class fusion:  # noqa: N801 (used as a function: hetero.fusion(False))
    """``hetero.fusion(False)`` turns fusion off from now on (``True`` on again); as a context
    manager, ``with hetero.fusion(False): ...`` turns it off for the block and restores the
    setting after. Recorded values are computed first either way. The setting is per process."""

    def __init__(self, enabled: bool) -> None:
        fusion_state.flush()
        self.previous = fusion_state.ENABLED
        fusion_state.ENABLED = bool(enabled)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        fusion_state.flush()
        fusion_state.ENABLED = self.previous


def enabled() -> bool:
    """Whether elementwise operations are fused now."""
    return fusion_state.ENABLED


FUSE.register(fuse)
fusion_state.REALIZE.register(realize)

__all__ = ["MAX_ARRAYS", "MAX_OPS", "Lazy", "enabled", "fusion", "fuse", "realize"]
