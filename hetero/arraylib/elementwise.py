"""Elementwise operations on hetero arrays: promotion, broadcasting, one generated kernel.

Every operator of :class:`hetero.Array` and every elementwise function of the ``hetero``
namespace comes here, through the cached fast path of :mod:`hetero.arraylib.eager` (which
answers the operators' hook and runs a repeated operation without this module's work). An operation becomes an expression tree
(:mod:`hetero.compiler.array_kernels.elementwise`: leaves are the array and scalar operands, nodes the
operations), which is built into one kernel as IR per (operation, operand dtypes, rank,
device), compiled through :func:`hetero.compiler.build.pipeline.compile_function` and launched as
a ``@hetero.kernel`` is (:class:`hetero.arraylib.copy.GeneratedSpecialization`: launch counters,
fault injection and quotas see it). The layout (shape, each operand's strides and offset)
travels as i64 arguments, after the axes every operand steps evenly across are merged, so
one compiled kernel serves every shape and view of a rank.

Operands are arrays of any strides and offsets on one device (different devices are an
error naming both), Python scalars (weak, :mod:`hetero.array.promotion`) and NumPy scalars (as
0-d arrays). Shapes broadcast by the standard's rules. The result is a new C-contiguous
array on the operands' device, or, for the in-place operators, the left operand itself
(a view is written through), which must be able to hold the result: its dtype must be
the result's and its shape the broadcast shape. An operand that overlaps the in-place
target other than element for element is read from a copy first.

Which dtypes each operation takes and gives is in :data:`OPS` and :func:`plan_dtypes`;
the special values each gives (division by zero, NaN, signed zeros, shifts, overflow) are
in :mod:`hetero.compiler.array_kernels.elementwise_ops`.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, cast

import numpy as np

from hetero.core import dtypes
from hetero.core import fusion_state as _fusion
from hetero.array.ndarray import Array, empty
from hetero.arraylib.copy import check_writeable, merged_axes
from hetero.kernels.generated import GeneratedSpecialization
from hetero.arraylib.hooks import COMPLEX_ELEMENTWISE, FUSE
from hetero.compiler.array_kernels import elementwise, elementwise_ops
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.kernels.kernel import device_target
from hetero.array.promotion import promote, scalar_dtype
from hetero.core.types import scalar_type

_BINARY_ARITH = ("add", "subtract", "multiply", "floor_divide", "remainder", "pow")
_FLOAT_BINARY = ("divide", "atan2", "copysign", "hypot", "logaddexp", "nextafter")
#: Each operation's number of operands and its category (which dtypes it takes and gives):
#: ``arith`` numbers in, the promoted dtype out; ``minmax`` any dtype; ``float`` a float out
#: (integers give NumPy's float for them); ``rounding`` the identity on integers; ``compare``,
#: ``predicate``, ``logical`` bool out; ``bitwise`` integers and bool; ``shift`` integers;
#: ``select`` (``where``) a bool condition and two operands of any dtype, promoted.
OPS: dict[str, tuple[int, str]] = {
    **{op: (2, "arith") for op in _BINARY_ARITH},
    **{op: (2, "float") for op in _FLOAT_BINARY},
    **{op: (1, "float") for op in elementwise_ops.MATH_UNARY},
    "reciprocal": (1, "float_only"),
    **{op: (1, "rounding") for op in elementwise_ops.ROUNDING},
    **{op: (2, "compare") for op in elementwise_ops.COMPARISONS},
    **{op: (1, "predicate") for op in elementwise_ops.PREDICATES},
    "maximum": (2, "minmax"), "minimum": (2, "minmax"),
    "bitwise_and": (2, "bitwise"), "bitwise_or": (2, "bitwise"), "bitwise_xor": (2, "bitwise"),
    "bitwise_invert": (1, "bitwise"),
    "bitwise_left_shift": (2, "shift"), "bitwise_right_shift": (2, "shift"),
    "logical_and": (2, "logical"), "logical_or": (2, "logical"), "logical_xor": (2, "logical"),
    "logical_not": (1, "logical"),
    **{op: (1, "numeric") for op in ("negative", "positive", "abs", "square", "sign")},
    "where": (3, "select"),
}


@dataclasses.dataclass
class Plan:
    """One operation (or tree) on one operand signature: the dtypes and the tree, and its kernels."""

    name: str
    tree: elementwise.Node
    result: np.dtype[Any]
    scalars: tuple[np.dtype[Any] | None, ...]  # per operand: the dtype a scalar takes (None: an array)
    fp64: bool
    label: str  # the kernel's name, less its rank: stable across processes (the disk cache keys on it)
    kernels: dict[tuple[int, Device, bool], GeneratedSpecialization] = dataclasses.field(default_factory=dict)


_lock = threading.RLock()
_plans: dict[tuple[Any, ...], Plan] = {}
_numpy_floats: dict[tuple[str, tuple[np.dtype[Any], ...]], np.dtype[Any]] = {}


def _float_for(op: str, operands: tuple[np.dtype[Any], ...]) -> np.dtype[Any]:
    """The float dtype NumPy's ufunc for ``op`` gives integer (or bool) operands of these dtypes:
    resolved from the operands themselves, not their promoted dtype (``copysign(int8, uint8)`` is
    float16, as both fit it, though int8 and uint8 promote to int16, whose float is float32)."""
    key = (op, operands)
    found = _numpy_floats.get(key)
    if found is None:
        ufunc = getattr(np, "rint" if op == "round" else op)
        found = _numpy_floats[key] = np.dtype(ufunc.resolve_dtypes(operands + (None,))[-1])
    return found


def plan_dtypes(op: str, operands: list[np.dtype[Any]]) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """``(compute, result)`` dtypes of ``op`` on operands of these dtypes; TypeError (an
    :class:`UnsupportedDtypeError`) for a dtype the operation does not take."""
    arity, category = OPS[op]
    compute = operands[0] if arity == 1 else promote(operands[-2], operands[-1])  # where: x1 and x2
    kind = compute.kind

    def refuse(why: str) -> UnsupportedDtypeError:
        shown = " and ".join(str(d) for d in operands)
        return UnsupportedDtypeError(f"hetero.{op} is not defined for {shown}: {why}")

    if category == "arith" or category == "numeric":
        if kind == "b":
            raise refuse("it takes numbers, not bool; convert first, e.g. hetero.asarray(x, dtype='int8')")
        return compute, compute
    if category in ("float", "float_only"):
        if kind != "f":
            if category == "float_only":
                raise refuse("it takes floating-point arrays; convert first, e.g. hetero.asarray(x, dtype='float32')")
            compute = _float_for(op, tuple(operands[:arity]))
        return compute, compute
    if category == "rounding":
        if kind == "b":
            raise refuse("it takes numbers, not bool")
        return compute, compute
    if category == "compare" or category == "predicate":
        return compute, dtypes.bool_
    if category == "minmax" or category == "select":
        return compute, compute
    if category == "bitwise" and kind in "biu":
        return compute, compute
    if category == "shift" and kind in "iu":
        return compute, compute
    if category == "logical":
        return dtypes.bool_, dtypes.bool_
    raise refuse("it takes integer" + (" or bool" if category == "bitwise" else "") + " arrays")


def _single_tree(op: str, leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
    compute, result = plan_dtypes(op, leaf_dtypes)
    return elementwise.Apply(op, _leaves(leaf_dtypes, is_array), scalar_type(compute), scalar_type(result)), result


def _leaves(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, ...]:
    nodes: list[elementwise.Node] = []
    arrays = scalars = 0
    for dtype, array in zip(leaf_dtypes, is_array, strict=True):
        if array:
            nodes.append(elementwise.Input(arrays, scalar_type(dtype)))
            arrays += 1
        else:
            nodes.append(elementwise.Scalar(scalars, scalar_type(dtype)))
            scalars += 1
    return tuple(nodes)


def _signature(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the plan depends on: each array's (or NumPy scalar's) dtype, each Python scalar's type."""
    signature: list[Any] = []
    for x in operands:
        if type(x) is Array:
            signature.append(x.dtype)
        elif isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
            signature.append(type(x))
        elif isinstance(x, np.generic):
            signature.append(("np", dtypes.as_dtype(x.dtype)))
        elif isinstance(x, Array):
            signature.append(x.dtype)
        else:
            raise ArrayError(f"elementwise operands are hetero arrays and Python or NumPy scalars, not "
                             f"{type(x).__name__}; convert it first: hetero.asarray(value, device=...)")
    return tuple(signature)


def _make_plan(name: str, signature: tuple[Any, ...], builder: Any) -> Plan:
    strong = [s if isinstance(s, np.dtype) else s[1] for s in signature if not isinstance(s, type)]
    if not strong:
        raise ArrayError(f"hetero.{name} needs at least one hetero array operand")
    common = strong[0]
    for other in strong[1:]:
        common = promote(common, other)
    leaf_dtypes: list[np.dtype[Any]] = []
    scalars: list[np.dtype[Any] | None] = []
    for s, x in zip(signature, _sample_values(signature), strict=True):
        if isinstance(s, type):
            kind = scalar_dtype(x, common)
            leaf_dtypes.append(kind)
            scalars.append(kind)
        else:
            leaf_dtypes.append(s if isinstance(s, np.dtype) else s[1])
            scalars.append(s[1] if isinstance(s, tuple) else None)
    is_array = [isinstance(s, np.dtype) for s in signature]
    tree, result = builder(leaf_dtypes, is_array)
    fp64 = dtypes.float64 in (result, *leaf_dtypes) or _uses_f64(tree)
    spelled = [scalar_type(d).name + ("" if array else "s") for d, array in zip(leaf_dtypes, is_array, strict=True)]
    label = f"ew_{name}_{'_'.join(spelled)}_{scalar_type(result).name}"
    return Plan(name, tree, result, tuple(scalars), fp64, label)


def _sample_values(signature: tuple[Any, ...]) -> list[Any]:
    """A value of each Python scalar type (its dtype depends on the type, not the value)."""
    return [{bool: True, int: 0, float: 0.0}.get(s) if isinstance(s, type) else None for s in signature]


def _uses_f64(node: elementwise.Node) -> bool:
    if isinstance(node, elementwise.Apply):
        return node.compute.name == "f64" or node.dtype.name == "f64" or any(_uses_f64(a) for a in node.args)
    return node.dtype.name == "f64"


def _plan(name: str, operands: tuple[Any, ...], builder: Any) -> Plan:
    key = (name, _signature(operands))
    plan = _plans.get(key)
    if plan is None:
        with _lock:
            plan = _plans.get(key)
            if plan is None:
                plan = _plans[key] = _make_plan(name, key[1], builder)
    return plan


def check_fp64(plan: Plan, device: Device) -> None:
    """An :class:`UnsupportedDtypeError` when ``plan`` needs fp64 and ``device`` lacks it."""
    if plan.fp64 and "fp64" not in device_target(plan.name, device).features:
        raise UnsupportedDtypeError(
            f"hetero.{plan.name} on float64 needs fp64, which {device.name} lacks; convert to float32 "
            "first (hetero.asarray(x, dtype='float32')) or use a device with fp64")


def _kernel(plan: Plan, rank: int, device: Device, unit: bool = False, rows: bool = False) -> GeneratedSpecialization:
    key = (rank, device, unit, rows)
    kernel = plan.kernels.get(key)
    if kernel is None:
        with _lock:
            kernel = plan.kernels.get(key)
            if kernel is None:
                check_fp64(plan, device)
                variant = ("g" if rows else "") + ("u" if unit else "")
                function = elementwise.build(plan.tree, scalar_type(plan.result), rank,
                                             f"{plan.label}_r{rank}{variant}", unit, rows)
                kernel = plan.kernels[key] = GeneratedSpecialization(function, device)
    return kernel


#: The shortest last axis launched as rows (:func:`grid`): below it a work-group of one row holds
#: too few work-items, and the flat launch's divisions cost less than its empty lanes.
ROWS_MIN_LAST = 16
#: Work-items a rows launch's work-group aims at (whole rows of it): the runtimes' own choice
#: for a two-dimensional launch can be far worse (PoCL: 3x slower than any whole-row group).
ROWS_GROUP_ITEMS = 256
#: CUDA and HIP grids hold at most this many blocks along y (the rows of a rows launch).
_GRID_Y_BLOCKS = 65535


def grid(shape: tuple[int, ...], device: Device) -> tuple[tuple[int, int], tuple[int, int] | None] | None:
    """The global and local sizes of a *rows* launch over merged ``shape`` (``(last extent, rows)``,
    see :mod:`hetero.compiler.array_kernels.elementwise`; work-groups of whole rows, as many as
    divide the rows and fit :data:`ROWS_GROUP_ITEMS`), or None where the flat launch ``(n,)`` is
    taken: rank 1, a short last axis, or more rows than a CUDA/HIP grid holds."""
    if len(shape) < 2 or shape[-1] < ROWS_MIN_LAST:
        return None
    last = shape[-1]
    rows = 1
    for extent in shape[:-1]:
        rows *= extent
    if rows > _GRID_Y_BLOCKS and device.backend in ("cuda", "rocm"):  # one-row blocks at worst
        return None
    if last > device.max_work_group_size:  # a row is more than a work-group: the runtime chooses
        return (last, rows), None
    group = max(1, min(ROWS_GROUP_ITEMS, device.max_work_group_size) // last)
    while rows % group:
        group -= 1
    return (last, rows), (last, group)


def _broadcast_strides(x: Array, shape: tuple[int, ...]) -> tuple[int, ...]:
    pad = len(shape) - x.ndim
    strides = x.strides
    return (0,) * pad + tuple(0 if size == 1 and want != 1 else stride
                              for size, stride, want in zip(x.shape, strides, shape[pad:], strict=True))


def whole(x: Array) -> Array:
    """The whole buffer under ``x`` as a 1-D array of its dtype (what the kernel indexes; a
    component view of a complex array, :mod:`hetero.array.components`, sees its buffer as floats)."""
    root = x.base if x.base is not None else x
    if root.ndim == 1 and root._layout == 1 and root.dtype == x.dtype:
        return root
    return Array(root.buffer, root.device, (root.nbytes // x.dtype.itemsize,), x.dtype)


def same_device(name: str, arrays: list[Array]) -> Device:
    """The one device of ``arrays`` (the operands of ``hetero.<name>``); an ArrayError naming two
    devices and the remedy when they are on more than one."""
    device = arrays[0].device
    for other in arrays[1:]:
        if other.device is not device:
            raise ArrayError(f"hetero.{name}: operands are on different devices, {device.name} and "
                             f"{other.device.name}; move one first, e.g. y.to('{device.name}')")
    return device


def evaluate(name: str, operands: tuple[Any, ...], builder: Any, out: Array | None = None) -> Array:
    """Run the tree ``builder(leaf_dtypes, is_array)`` makes over ``operands`` (cached per
    operand signature); into ``out`` when given (the in-place operators). With fusion on
    (:mod:`hetero.arraylib.fusion`) the operation is recorded, or, into ``out``, fused with the
    recorded operations its operands are."""
    plan = _plan(name, operands, builder)
    arrays = [x for x in operands if type(x) is Array or isinstance(x, Array)]
    device = same_device(name, arrays if out is None else [out, *arrays])
    try:
        shape = arrays[0].shape
        if len(arrays) > 1 and any(x.shape != shape for x in arrays):
            shape = np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:
        shown = " and ".join(str(x.shape) for x in arrays)
        raise ArrayError(f"hetero.{name}: shapes {shown} do not broadcast together (the standard's rule: "
                         "trailing axes equal or 1)") from None
    if out is not None:
        _check_into(name, out, shape, plan.result)
    if _fusion.ENABLED and (out is None or any(x._pending is not None for x in arrays)):
        return cast(Array, FUSE.call(plan, operands, tuple(shape), device, out))
    scalars = [scalar_value(x, kind) for x, kind in zip(operands, plan.scalars, strict=True) if kind is not None]
    fresh = out is None
    if out is None:
        out = empty(shape, plan.result, device=device)
    launch(plan, arrays, scalars, tuple(shape), out, fresh)
    return out


def launch(plan: Plan, arrays: list[Array], scalars: list[Any], shape: tuple[int, ...], out: Array,
           fresh: bool = False) -> None:
    """``plan``'s kernel over ``arrays`` (its array leaves, in slot order, broadcast to
    ``shape``) and ``scalars`` (its scalar leaves' values, as passed) into ``out``. An array
    overlapping ``out`` other than element for element is read from a copy first (``fresh``:
    ``out`` is a new buffer, which nothing overlaps)."""
    if not fresh:
        arrays = [x.copy() if _overlaps(x, out, shape) else x for x in arrays]
    if out.size == 0:
        return
    kernel, size, local, args = launch_args(plan, arrays, scalars, shape, out)
    kernel.run(size, args, local)


def launch_args(plan: Plan, arrays: list[Array], scalars: list[Any], shape: tuple[int, ...], out: Array
                ) -> tuple[GeneratedSpecialization, tuple[int, ...], tuple[int, ...] | None, list[Any]]:
    """The kernel, global and local sizes and arguments of :func:`launch` (``out`` not empty, nothing
    overlapping it). The arguments are the whole buffers (:func:`_whole`) of ``out`` and
    ``arrays``, ``scalars``, then the layout: the element count, the merged shape, and each
    array's offset and merged strides."""
    merged_shape: tuple[int, ...]
    merged: list[tuple[int, ...]]
    if all(x._strides is None and x.shape == shape for x in (out, *arrays)):  # owners of one shape: rank 1
        merged_shape, merged = (out.size,), [(1,)] * (1 + len(arrays))
    else:
        layouts = [out.strides] + [_broadcast_strides(x, shape) for x in arrays]
        merged_shape, merged = merged_axes(shape, *layouts)
    rows = grid(merged_shape, out.device)
    # the common case: unit-stride along the last axis (rank 1, or a rows launch of a broadcast row)
    unit = (len(merged_shape) == 1 or rows is not None) and all(strides[-1] == 1 for strides in merged)
    kernel = _kernel(plan, len(merged_shape), out.device, unit, rows is not None)
    if rows is not None:
        kernel.check_sizes(*rows)
    args: list[Any] = [whole(out)] + [whole(x) for x in arrays] + scalars + [out.size, *merged_shape]
    for x, strides in zip([out, *arrays], merged, strict=True):
        args.append(x.offset)
        args.extend(strides)
    return (kernel, *(rows or ((out.size,), None)), args)


def scalar_value(x: Any, kind: np.dtype[Any]) -> Any:
    if isinstance(x, np.generic):
        value = x
    elif kind.kind == "f":
        with np.errstate(over="ignore"):
            value = kind.type(x)  # beyond the dtype's range: an infinity, as in NumPy
    else:
        if not isinstance(x, bool):
            scalar_dtype(x, kind)  # an int the dtype cannot hold: ScalarOverflowError
        value = kind.type(x)
    passed = elementwise.scalar_param_type(scalar_type(kind))
    with np.errstate(over="ignore"):
        return passed.dtype.type(value)


def _check_into(name: str, out: Array, shape: tuple[int, ...], result: np.dtype[Any]) -> None:
    if result != out.dtype:
        raise UnsupportedDtypeError(f"in-place hetero.{name} into a {out.dtype} array: the result is {result}, which "
                                    f"a {out.dtype} array cannot hold; write y = x <op> value instead")
    if tuple(shape) != out.shape:
        raise ArrayError(f"in-place hetero.{name} into an array of shape {out.shape}: the result's shape is "
                         f"{tuple(shape)}; broadcasting may not grow the array written into")
    check_writeable(out)


def _overlaps(x: Array, out: Array, shape: tuple[int, ...]) -> bool:
    """Whether ``x`` shares ``out``'s buffer other than element for element."""
    if x.buffer is not out.buffer or x is out:
        return False
    return x.offset != out.offset or _broadcast_strides(x, shape) != out.strides


def apply(op: str, *operands: Any, out: Array | None = None) -> Array:
    """One operation of :data:`OPS` on ``operands`` (see the module docstring); with a complex
    operand, the composition of real operations of :mod:`hetero.arraylib.complex.elementwise`."""
    if out is not None and out.dtype.kind == "c" or _any_complex(operands):
        return cast(Array, COMPLEX_ELEMENTWISE.call(op, *operands, out=out))
    arity = OPS[op][0]
    if len(operands) != arity:
        raise TypeError(f"hetero.{op} takes {arity} operand{'s' if arity > 1 else ''}, got {len(operands)}")
    if OPS[op][1] == "compare":
        operands = _widened_comparands(operands)
    elif op == "pow" and arity == 2:
        _check_integer_power(operands)
    return evaluate(op, operands, _builders[op], out)


def _any_complex(operands: tuple[Any, ...]) -> bool:
    for x in operands:  # a plain loop: this runs before every elementwise operation
        if type(x) is Array:
            if x.dtype.kind == "c":
                return True
        elif _is_complex(x):
            return True
    return False


def _is_complex(x: Any) -> bool:
    return type(x) is complex or isinstance(x, np.complexfloating) or (isinstance(x, Array) and x.dtype.kind == "c")


def _check_integer_power(operands: tuple[Any, ...]) -> None:
    """An integer array to a negative scalar power is a ValueError, as in NumPy. (A negative
    element of an exponent *array* is not checked: that would read the array back; it gives
    the integer part of the true result, 0 unless the base is 1 or -1.)"""
    base, exponent = operands
    if isinstance(base, Array) and base.dtype.kind in "iu" and not isinstance(exponent, (float, np.floating)) \
            and not isinstance(exponent, Array) and exponent < 0:
        raise ValueError(f"hetero.pow: integers to negative integer powers are not allowed ({base.dtype} array "
                         f"** {exponent}); use a float array, e.g. hetero.asarray(x, dtype='float64')")


def _widened_comparands(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """A comparison of an integer array with a Python int its dtype cannot hold (``int8_array
    > 300``) compares in a wider type, as NumPy 2 does: the int becomes an int64 or uint64
    (past those, a float64) NumPy scalar, which promotes as an array."""
    others = [x.dtype for x in operands if isinstance(x, Array)]
    if not others or others[0].kind not in "iu":
        return operands
    info = np.iinfo(others[0])
    widened = []
    for x in operands:
        if type(x) is int and not info.min <= x <= info.max:
            x = np.int64(x) if -2**63 <= x < 2**63 else np.uint64(x) if 0 <= x < 2**64 else np.float64(x)
        widened.append(x)
    return tuple(widened)


def _builder(op: str) -> Any:
    def build(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
        return _single_tree(op, leaf_dtypes, is_array)
    return build


_builders = {op: _builder(op) for op in OPS}


def clip(x: Array, lower: Any = None, upper: Any = None) -> Array:
    """``minimum(maximum(x, lower), upper)`` as one kernel (a two-node tree); a bound of None
    is left out. The result has the promoted dtype of ``x`` and the bounds; NaN propagates."""
    bounds = [b for b in (lower, upper) if b is not None]
    if any(_is_complex(v) for v in (x, *bounds)):
        raise UnsupportedDtypeError("hetero.clip is not defined for complex numbers (the array API standard defines "
                                    "it for real-valued input only); clip hetero.xp.real(x) and hetero.xp.imag(x)")
    if not bounds:
        return apply("positive", x) if x.dtype.kind != "b" else x.copy()
    ops = [op for op, b in (("maximum", lower), ("minimum", upper)) if b is not None]

    def build(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
        leaves = _leaves(leaf_dtypes, is_array)
        node, dtype = leaves[0], leaf_dtypes[0]
        for op, leaf, leaf_dtype in zip(ops, leaves[1:], leaf_dtypes[1:], strict=True):
            compute, dtype = plan_dtypes(op, [dtype, leaf_dtype])
            node = elementwise.Apply(op, (node, leaf), scalar_type(compute), scalar_type(dtype))
        return node, dtype

    return evaluate("clip_" + "_".join(ops), (x, *bounds), build)


__all__ = ["OPS", "Plan", "apply", "check_fp64", "clip", "evaluate", "grid", "launch", "launch_args", "plan_dtypes",
           "same_device", "scalar_value", "whole"]
