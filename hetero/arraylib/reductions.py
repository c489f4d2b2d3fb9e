"""Reductions and scans of hetero arrays (array API 2024.12): ``sum prod min max mean std var
any all argmax argmin cumulative_sum cumulative_prod``, each a generated kernel.

Any view works as input (offset, flipped, transposed, broadcast): the reduced axes are moved
last as a view (no copy), neighbouring axes that step evenly are merged, and the kernels of
:mod:`hetero.compiler.array_kernels.reduction` and :mod:`hetero.compiler.array_kernels.scan` read the buffer through the
strides. One kernel is compiled per (operation, dtypes, ranks, device) and launched like any
``@hetero.kernel`` (:class:`hetero.arraylib.copy.GeneratedSpecialization`), so launch counters,
quotas and fault injection see it.

Order and reproducibility: each output element's segment is cut into parts of
:data:`PART` elements or so (at most :data:`MAX_PARTS`; :func:`parts_of`: the cut follows from
the segment's length alone, so ``x.sum(axis=1)[i]`` gives the bits of ``x[i].sum()``); each
part is a contiguous range folded in :data:`~hetero.compiler.array_kernels.reduction.GROUP`
lanes (lane ``t`` takes elements ``t, t + 128, t + 256 ...`` of the part in order), the lanes
combined by a fixed tree (step 64, 32 ... 1), and the parts' partials folded by a second
launch in the same way (the exact statement: :mod:`hetero.compiler.array_kernels.reduction`).
The CPU target and PoCL run each part as one work-item whose inner loop is the 128 lanes (a
vector loop: :func:`lanes_form`); Intel's OpenCL CPU runtime a work-group of 16 items holding 8
lanes each, GPUs one of 128 items (:func:`items_per_lane_group`); every form keeps the order. Where
neighbouring outputs are neighbours in memory (``sum(axis=0)`` of a C-ordered matrix) a
work-item folds a chunk of one output's segment in order instead (the ``columns`` stage), up
to :data:`COLUMN_PARTS` chunks of about :data:`COLUMN_CHUNK` elements, and the same second
launch folds the chunks' partials. No atomics: the same input on the same device gives the
same bits every time. The order differs from NumPy's pairwise sum, so float results differ
from NumPy's by rounding only.

``var``/``std`` take two passes: the mean of each segment, then the sum of squared
deviations from it, divided by ``max(N - correction, 0)`` (NumPy's rule: 0 gives inf or NaN).

Empty input follows NumPy: ``sum`` 0, ``prod`` 1, ``any`` False, ``all`` True, ``mean``,
``var``, ``std`` NaN; ``min``, ``max``, ``argmin``, ``argmax`` of an empty segment raise
ValueError (:class:`hetero.ArrayError`). Dtype rules: :mod:`hetero.arraylib.accumulate`.
"""

from __future__ import annotations

import builtins
import math
import operator
import threading
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from hetero.arraylib import accumulate as rules
from hetero.core import dtypes
from hetero.array.ndarray import Array, empty, full
from hetero.arraylib.copy import merged_axes
from hetero.kernels.generated import GeneratedSpecialization
from hetero.kernels.kernel import device_target
from hetero.array.hooks import REDUCTION
from hetero.arraylib.cast import astype
from hetero.arraylib.hooks import COMPLEX_REDUCTION
from hetero.array.views import normalize_axes, moveaxis, permute_dims
from hetero.compiler.array_kernels import reduction, scan
from hetero.core.device import Device, Kind
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.core.runtime_parts import runs_kernels
from hetero.core.types import ScalarType, f64, i64, scalar_type

#: Elements a part of a segment aims at (one work-group folds a part), and the most parts one
#: segment is cut into: the parts of a segment follow from its length alone.
PART = 16384
MAX_PARTS = 4096
#: Elements per work-item a chunk of the ``columns`` stage aims at (its parts: at most COLUMN_PARTS).
COLUMN_CHUNK = 256
COLUMN_PARTS = 256

_lock = threading.RLock()
_kernels: dict[tuple[Any, Device], GeneratedSpecialization] = {}


def _kernel(spec: reduction.Reduction | scan.Scan, device: Device, what: str) -> GeneratedSpecialization:
    """The kernel of ``spec`` on ``device``, built the first time; ``what``: the user's operation
    (``"sum"``, ``"var"``), which a refusal names."""
    key = (spec, device)
    entry = _kernels.get(key)
    if entry is None:
        with _lock:
            entry = _kernels.get(key)
            if entry is None:
                _check_fp64(spec, device, what)
                function = reduction.build(spec) if isinstance(spec, reduction.Reduction) else scan.build(spec)
                entry = GeneratedSpecialization(function, device)
                _kernels[key] = entry
    return entry


def _check_fp64(spec: reduction.Reduction | scan.Scan, device: Device, what: str) -> None:
    """Refuse a float64 kernel on a device without fp64 as elementwise operations do, naming the
    user's operation and the device (the compiler would name the kernel and the target)."""
    if f64 in (spec.source, spec.acc, spec.out) and "fp64" not in device_target(what, device).features:
        raise UnsupportedDtypeError(
            f"hetero.{what} on float64 needs fp64, which {device.name} lacks; convert to float32 "
            "first (hetero.asarray(x, dtype='float32')) or use a device with fp64")


def _checked(x: Any, what: str) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"{what}() takes a hetero.Array, got {type(x).__name__}; make one with hetero.asarray(...)")
    if not runs_kernels(x.device.runtime):
        raise ArrayError(f"{what}() runs a generated kernel, and {x.device.name} runs no hetero kernels; "
                         "move the array to a device that does with x.to(...)")
    if x.dtype.kind == "c" and what not in ("sum", "mean"):
        COMPLEX_REDUCTION.call(what, x)  # a TypeError naming what to do instead
    return x


def _reduced_axes(x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    # sorted: axis=(1, 0) folds in the same order as (0, 1), so it gives the same bits
    return tuple(sorted(normalize_axes(tuple(axis) if isinstance(axis, Sequence) else operator.index(axis), x.ndim)))


def _flat(x: Array) -> Array:
    """The whole buffer under ``x`` as a 1-D array of its dtype (kernels index it with the layout)."""
    root = x.base if x.base is not None else x
    return Array(root.buffer, root.device, (root.nbytes // x.dtype.itemsize,), x.dtype)


def _np(t: ScalarType) -> np.dtype[Any]:
    return t.dtype


def _layout(x: Array, axes: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int]:
    """Kept and reduced axes of ``x`` (merged where they step evenly): shapes, strides, outputs, segment."""
    kept = [a for a in range(x.ndim) if a not in axes]
    view = permute_dims(x, kept + list(axes))
    split = len(kept)
    outer_shape, (outer_strides,) = merged_axes(view.shape[:split], view.strides[:split])
    inner_shape, (inner_strides,) = merged_axes(view.shape[split:], view.strides[split:])
    return (outer_shape, outer_strides, inner_shape, inner_strides, math.prod(view.shape[:split]),
            math.prod(view.shape[split:]))


def _result_shape(x: Array, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if a in axes else n for a, n in enumerate(x.shape))
    return tuple(n for a, n in enumerate(x.shape) if a not in axes)


def _zero(t: ScalarType) -> int | float:
    return 0.0 if t.kind == "f" else 0


def parts_of(segment: int) -> tuple[int, int]:
    """``(parts, chunk)``: how many parts one segment of ``segment`` elements is cut into, and
    their length (a multiple of the work-group size; the last part shorter). Every part holds
    at least one element; the numbers follow from the length alone, so the order does too."""
    W = reduction.GROUP
    wanted = builtins.max(1, builtins.min(MAX_PARTS, -(-segment // PART)))
    chunk = -(-segment // wanted)
    chunk = -(-chunk // W) * W
    return -(-segment // chunk), chunk


def lanes_form(device: Device) -> bool:
    """Whether ``device`` runs the segment stage in the one-work-item form: the CPU target and
    OpenCL CPU runtimes other than Intel's (PoCL), whose work-group loops would otherwise run each
    item's lane to its end before the next one starts (a read of every ``W``-th element, no vector
    loads: PoCL's ``sum`` of 64 Mi float32 at 0.2x its read bandwidth, 1.1x in this form)."""
    if device.runtime.kernel_target().dialect == "cpu":  # type: ignore[union-attr]
        return True
    return device.kind is Kind.CPU and device.backend != "oneapi"


def column_lanes_form(device: Device) -> bool:
    """Whether the ``columns`` stage runs in its one-work-item form (512 neighbouring outputs per
    item, a row of them one vector loop): on every CPU device. Intel's CPU runtime too, whose
    vectors across items read only 16 outputs' worth of a row (``sum(axis=0)`` of an 8192 x 8192
    float32 matrix: 45 ms that way, 29 ms in this form)."""
    return lanes_form(device) or device.kind is Kind.CPU


def items_per_lane_group(device: Device) -> int:
    """Lanes each work-item of the ``items`` form folds (``Reduction.per_item``): 8 on Intel's
    OpenCL CPU runtime, which runs 16 neighbouring work-items as one vector, so a row of 128 is 8
    vector loads (one lane per item there: 0.6x its read bandwidth; 8: 1.6x); 1 elsewhere (GPUs:
    neighbouring items read neighbouring elements, coalesced)."""
    return 8 if device.kind is Kind.CPU and device.backend == "oneapi" else 1


def _by_columns(outer_strides: tuple[int, ...], inner_strides: tuple[int, ...], outputs: int) -> bool:
    """Whether neighbouring outputs are neighbours in memory and every reduced axis steps over
    them (``sum(axis=0)`` of a C-ordered matrix): the ``columns`` stage's layout."""
    if outputs < 2 or not outer_strides or not inner_strides:
        return False
    fastest = builtins.abs(outer_strides[-1])
    return fastest <= 1 and builtins.min(builtins.abs(s) for s in inner_strides) > fastest


def _fold(x: Array, what: str, op: str, axes: tuple[int, ...], out: np.dtype[Any], acc: ScalarType, *,
          finish: str = "", divisor: float = 0.0, center: Array | None = None) -> Array:
    """The 1-D array of ``x`` folded over ``axes`` by ``op``, one element per output (C order);
    for arg-reductions the int64 indices. The segments are non-empty."""
    outer_shape, outer_strides, inner_shape, inner_strides, outputs, segment = _layout(x, axes)
    device = x.device
    W = reduction.GROUP
    columns = _by_columns(outer_strides, inner_strides, outputs)
    on_cpu = lanes_form(device)
    per_item = 1 if on_cpu else items_per_lane_group(device)
    if columns:
        parts = builtins.max(1, builtins.min(COLUMN_PARTS, segment // COLUMN_CHUNK))
        chunk = -(-segment // parts)
        contiguous = lanes = column_lanes_form(device) and outer_strides == (1,)
    else:
        parts, chunk = parts_of(segment)
        lanes, contiguous = on_cpu, inner_strides == (1,)
    segment_items = 1 if columns or lanes else per_item
    arg = op in ("argmin", "argmax")
    final = parts == 1
    stored = i64 if arg else scalar_type(out) if final else acc
    spec = reduction.Reduction(op, scalar_type(x.dtype), acc, stored, len(outer_shape), len(inner_shape),
                               finish=finish if final and not arg else "", columns=columns, contiguous=contiguous,
                               lanes=lanes, per_item=segment_items)
    dst = empty((outputs * parts,), dtypes.int64 if arg else _np(spec.out), device=device)
    args: list[Any] = [dst]
    values = empty((outputs * parts,), _np(acc), device=device) if arg else None
    if values is not None:
        args.append(values)
    args.append(_flat(x))
    if center is not None:
        args.append(center)
    scalar_divisor = divisor if final and finish else _zero(acc)
    args += [outputs, parts, segment, chunk, acc(scalar_divisor), *outer_shape, *inner_shape, x.offset,
             *outer_strides, *inner_strides]
    _run(_kernel(spec, device, what), outputs, parts, args, columns=columns, lanes=lanes, per_item=segment_items)
    if final:
        return dst
    merge = reduction.Reduction(op, acc, acc, i64 if arg else scalar_type(out), 1, 1, merge=True,
                                finish="" if arg else finish, contiguous=True, lanes=on_cpu,
                                per_item=1 if on_cpu else per_item)
    merged = empty((outputs,), dtypes.int64 if arg else out, device=device)
    margs: list[Any] = [merged]
    if values is not None:
        margs += [empty((outputs,), _np(acc), device=device), values, dst]
    else:
        margs.append(dst)
    margs += [outputs, 1, parts, -(-parts // W) * W, acc(divisor if finish else _zero(acc)), outputs, parts, 0,
              parts, 1]
    _run(_kernel(merge, device, what), outputs, 1, margs, lanes=on_cpu, per_item=merge.per_item)
    return merged


def _run(kernel: GeneratedSpecialization, outputs: int, parts: int, args: list[Any], *, columns: bool = False,
         lanes: bool = False, per_item: int = 1) -> None:
    """Launch ``kernel`` over ``parts`` parts of each of ``outputs`` outputs: a work-group of
    ``GROUP // per_item`` items per part, or (``lanes``) one work-item per part; ``columns``: a
    work-item per (output, chunk), or (``lanes``) per (COLUMN_LANES outputs, chunk)."""
    W = reduction.GROUP
    if columns and lanes:
        kernel.run((-(-outputs // reduction.COLUMN_LANES) * parts,), args, (1,))
    elif columns:
        kernel.run((-(-outputs * parts // W) * W,), args, (W,))
    elif lanes:
        kernel.run((outputs * parts,), args, (1,))
    else:
        kernel.run((outputs * parts * (W // per_item),), args, (W // per_item,))


def _reduce(x: Array, what: str, op: str, axis: int | Sequence[int] | None, keepdims: bool, out: np.dtype[Any],
            acc: ScalarType, empty_value: Any, **fold: Any) -> Array:
    axes = _reduced_axes(x, axis)
    shape = _result_shape(x, axes, keepdims)
    outputs = math.prod(shape)
    segment = math.prod(x.shape[a] for a in axes)
    if outputs == 0:
        return empty(shape, out, device=x.device)
    if segment == 0:
        if empty_value is None:
            raise ArrayError(f"{what}() of an empty segment (reducing axes {axes} of shape {x.shape}) has no "
                             "identity; give a non-empty array, or reduce over non-empty axes")
        return full(shape, empty_value, dtype=out, device=x.device)
    return _fold(x, what, op, axes, out, acc, **fold).reshape(shape)


# -- the array API functions ------------------------------------------------------------------
def sum(x: Array, /, *, axis: int | Sequence[int] | None = None, dtype: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    """The sum over ``axis`` (all axes by default); dtype rules in :mod:`hetero.arraylib.accumulate`."""
    x = _checked(x, "sum")
    if dtype is not None and x.dtype.kind != "c" and dtypes.as_dtype(dtype).kind == "c":
        x = cast(Array, astype(x, dtype))  # a real array summed as complex: its parts, the imaginary 0
    if x.dtype.kind == "c":  # each part summed: hetero.arraylib.complex.reductions
        return cast(Array, COMPLEX_REDUCTION.call("sum", x, axis=axis, dtype=dtype, keepdims=keepdims))
    out = rules.sum_dtype(x.dtype, dtype)
    return _reduce(x, "sum", "sum", axis, keepdims, out, rules.accumulator(out), 0)


def prod(x: Array, /, *, axis: int | Sequence[int] | None = None, dtype: Any = None, keepdims: bool = False) -> Array:
    """The product over ``axis`` (all axes by default)."""
    x = _checked(x, "prod")
    out = rules.sum_dtype(x.dtype, dtype)
    return _reduce(x, "prod", "prod", axis, keepdims, out, rules.accumulator(out), 1)


def max(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """The largest element over ``axis``; NaN if any is NaN; ValueError for an empty segment."""
    x = _checked(x, "max")
    return _reduce(x, "max", "max", axis, keepdims, x.dtype, rules.extreme_accumulator(x.dtype), None)


def min(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """The smallest element over ``axis``; NaN if any is NaN; ValueError for an empty segment."""
    x = _checked(x, "min")
    return _reduce(x, "min", "min", axis, keepdims, x.dtype, rules.extreme_accumulator(x.dtype), None)


def any(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether any element over ``axis`` is non-zero (NaN counts as non-zero); False when empty."""
    x = _checked(x, "any")
    return _reduce(x, "any", "any", axis, keepdims, dtypes.bool_, reduction.accumulator_of_any(), False)


def all(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether every element over ``axis`` is non-zero; True when empty."""
    x = _checked(x, "all")
    return _reduce(x, "all", "all", axis, keepdims, dtypes.bool_, reduction.accumulator_of_any(), True)


def _arg(x: Array, what: str, axis: int | None, keepdims: bool) -> Array:
    x = _checked(x, what)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        raise ArrayError(f"{what}() takes one axis (an int) or None, got {axis!r}")
    return _reduce(x, what, what, axis, keepdims, dtypes.int64, rules.extreme_accumulator(x.dtype), None)


def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """The index (int64) of the largest element over ``axis`` (of the flattened array for None, C
    order); the first one on ties, the first NaN if there is one (NumPy's rule)."""
    return _arg(x, "argmax", axis, keepdims)


def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """The index (int64) of the smallest element over ``axis``; first on ties, first NaN if any."""
    return _arg(x, "argmin", axis, keepdims)


def mean(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """The arithmetic mean over ``axis`` (floating input only); NaN for an empty segment."""
    x = _checked(x, "mean")
    if x.dtype.kind == "c":
        return cast(Array, COMPLEX_REDUCTION.call("mean", x, axis=axis, keepdims=keepdims))
    out = rules.float_dtype(x.dtype, "mean")
    axes = _reduced_axes(x, axis)
    count = math.prod(x.shape[a] for a in axes)
    return _reduce(x, "mean", "sum", axes, keepdims, out, rules.accumulator(out), np.nan, finish="divide",
                   divisor=float(count))


def _variance(x: Array, what: str, axis: int | Sequence[int] | None, correction: float, keepdims: bool,
              finish: str) -> Array:
    x = _checked(x, what)
    out = rules.float_dtype(x.dtype, what)
    try:
        correction = float(correction)
    except (TypeError, ValueError):
        raise ArrayError(f"{what}(): correction must be a real number, got {correction!r}") from None
    if correction < 0:
        raise ArrayError(f"{what}(): correction must be >= 0, got {correction}")
    axes = _reduced_axes(x, axis)
    count = math.prod(x.shape[a] for a in axes)
    acc = rules.accumulator(out)
    shape = _result_shape(x, axes, keepdims)
    if math.prod(shape) == 0 or count == 0:
        return _reduce(x, what, "sumsq", axes, keepdims, out, acc, np.nan)
    center = _fold(x, what, "sum", axes, _np(acc), acc, finish="divide", divisor=float(count))
    divisor = builtins.max(count - correction, 0.0)
    return _fold(x, what, "sumsq", axes, out, acc, finish=finish, divisor=divisor, center=center).reshape(shape)


def var(x: Array, /, *, axis: int | Sequence[int] | None = None, correction: float = 0.0,
        keepdims: bool = False) -> Array:
    """The variance over ``axis``: the sum of squared deviations from the mean over
    ``max(N - correction, 0)`` (two passes; floating input only)."""
    return _variance(x, "var", axis, correction, keepdims, "divide")


def std(x: Array, /, *, axis: int | Sequence[int] | None = None, correction: float = 0.0,
        keepdims: bool = False) -> Array:
    """The standard deviation over ``axis``: the square root of :func:`var`."""
    return _variance(x, "std", axis, correction, keepdims, "sqrt")


def _cumulative(x: Any, what: str, op: str, axis: int | None, dtype: Any, include_initial: bool) -> Array:
    x = _checked(x, what)
    if x.ndim == 0:
        raise ArrayError(f"{what}() needs an array of at least one dimension, got a 0-d array; "
                         "reshape it first (x.reshape(1))")
    if axis is None:
        if x.ndim > 1:
            raise ArrayError(f"{what}() of a {x.ndim}-d array needs axis=; give the axis to scan along")
        axis = 0
    (axis,) = normalize_axes(axis, x.ndim)
    out = rules.sum_dtype(x.dtype, dtype)
    acc = rules.accumulator(out)
    extra = 1 if include_initial else 0
    moved = moveaxis(x, axis, -1)
    length = moved.shape[-1]
    rows = math.prod(moved.shape[:-1])
    shape = (*moved.shape[:-1], length + extra)
    if rows == 0 or length + extra == 0:
        result = empty(shape, out, device=x.device)
    elif length == 0:
        result = full(shape, 0 if op == "sum" else 1, dtype=out, device=x.device)
    else:
        outer_shape, (outer_strides,) = merged_axes(moved.shape[:-1], moved.strides[:-1])
        spec = scan.Scan(op, scalar_type(x.dtype), acc, scalar_type(out), len(outer_shape))
        result = empty(shape, out, device=x.device)
        args = [_flat(result), _flat(x), rows, length, extra, *outer_shape, length, x.offset, *outer_strides,
                moved.strides[-1]]
        W = reduction.GROUP
        _kernel(spec, x.device, what).run((rows * W,), args, (W,))
    if axis == x.ndim - 1:
        return result
    return moveaxis(result, -1, axis).copy()


def cumulative_sum(x: Array, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Array:
    """The running sum along ``axis`` (required for more than one dimension); with
    ``include_initial`` each row starts with 0 (one element longer)."""
    return _cumulative(x, "cumulative_sum", "sum", axis, dtype, include_initial)


def cumulative_prod(x: Array, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Array:
    """The running product along ``axis``; with ``include_initial`` each row starts with 1."""
    return _cumulative(x, "cumulative_prod", "prod", axis, dtype, include_initial)


FUNCTIONS = {f.__name__: f for f in (sum, prod, min, max, mean, std, var, any, all, argmax, argmin,
                                     cumulative_sum, cumulative_prod)}


def _method(name: str, x: Array, *args: Any, **kwargs: Any) -> Array:
    return FUNCTIONS[name](x, *args, **kwargs)


REDUCTION.register(_method)

__all__ = ["FUNCTIONS", "all", "any", "argmax", "argmin", "cumulative_prod", "cumulative_sum", "max", "mean", "min",
           "prod", "std", "sum", "var"]
