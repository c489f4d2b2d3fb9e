"""Which library multiplies matrices on each device, and the calls that do it.

``hetero.matmul`` (:mod:`hetero.arraylib.linalg.matmul`) comes here with its operands laid out as
batches of matrices. Where a vendor BLAS exists it runs:

============ ======================================== =============================================
device       float16 / float32 / float64               integers
============ ======================================== =============================================
``cpu``      NumPy's ``matmul`` (its BLAS, e.g. OpenBLAS) NumPy's ``matmul`` (its own loop: no BLAS)
``oneapi``,  CLBlast ``{h,s,d}gemm[StridedBatched]``     hetero's tiled kernel
``opencl``   (float16 where the device has cl_khr_fp16)
``cuda``,    CuPy's ``matmul``: cuBLAS / rocBLAS         CuPy's ``matmul`` (its own kernel)
``rocm``
============ ======================================== =============================================

On OpenCL devices, which have both CLBlast and hetero's kernel, the configuration's ``blas:
auto`` (the default) runs the fastest of CLBlast in one call, CLBlast over K in chunks (deep
products), hetero's Gram kernel (small outputs past K = 256: split over K, the same bits every
run, :mod:`hetero.arraylib.linalg.gram`) and hetero's tiled kernel per shape class, as ``hetero
calibrate`` measured them on the device, and a built-in rule before any calibration
(:mod:`hetero.arraylib.linalg.routine_choice`);
``blas: on`` always CLBlast in one call.
And hetero's own tiled kernel (:mod:`hetero.compiler.array_kernels.matmul`) everywhere else: on OpenCL
devices without CLBlast (``libclblast`` not installed: :func:`hetero.backends.opencl.clblast.missing`
says how to get it), on other backends that run hetero kernels, and on every device when the
configuration says ``blas: off`` (``HETERO_BLAS=off``). :func:`choose` says which, and why
(:attr:`Choice.basis`: the measured figures or the default rule that chose it);
``hetero.explain_op("matmul", x1, x2)`` prints it.

Every library call goes through the device runtime's ``call_library`` (fault injection's
``launch`` rules count it as a launch, and it is enqueued on the device's queue, in order with
hetero's kernels), advances the device's launch counter, and is counted per device and library
in :func:`calls` (and logged at DEBUG, logger ``hetero.arraylib.linalg.blas``, with the library and
routine). Inputs are used in place where the library can read them: on ``cpu`` and CuPy
any strides (NumPy and CuPy copy where their BLAS needs it); with CLBlast a matrix whose rows
or columns are contiguous is passed with its leading dimension, a transposed one with the
transpose flag, and anything else (negative or zero strides, gaps both ways) is copied to a
contiguous array first, as is an operand whose dtype is not the result's. The tiled kernel
reads any row and batch strides in place, and copies an operand whose rows are not contiguous
(a transposed view) first; the Gram kernel reads a transposed view in place.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import math
import threading
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.arraylib.copy import merged_axes
from hetero.kernels.generated import GeneratedSpecialization
from hetero.arraylib.elementwise import evaluate
from hetero.arraylib.linalg import gram, routine_choice
from hetero.backends.opencl import clblast
from hetero.compiler.array_kernels import elementwise
from hetero.compiler.array_kernels import matmul as tiled
from hetero.core.config import get_config
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.core.launch_counts import counter as launch_counter
from hetero.core.runtime_parts import runs_kernels
from hetero.core.types import f32, scalar_type

log = logging.getLogger("hetero.arraylib.linalg.blas")
_lock = threading.RLock()
_kernels: dict[tuple[tiled.Matmul, Device], GeneratedSpecialization] = {}
_calls: collections.Counter[tuple[str, str]] = collections.Counter()
_OPENCL = ("oneapi", "opencl")
_CUPY = {"cuda": "cuBLAS", "rocm": "rocBLAS"}


@dataclasses.dataclass(frozen=True)
class Choice:
    """What multiplies on one device: ``library`` (``numpy``, ``CLBlast``, ``cuBLAS``, ``rocBLAS``,
    ``hetero``), its version, the routine or kernel, why no vendor BLAS runs ('' when one does),
    and, where the device has routines to choose from, the ``basis`` of the choice: the
    figures ``hetero calibrate`` measured, the default rule, or the configuration."""

    library: str
    version: str
    routine: str
    why: str = ""
    basis: str = ""
    k_chunk: int = 0  # CLBlast: K in calls of at most this many (0: one call)
    split_k: bool = False  # hetero: the Gram kernel (split over K), not the tiled one

    def __str__(self) -> str:
        name = f"{self.library} {self.version}".strip()
        text = f"{name}: {self.routine}" + (f" ({self.why})" if self.why else "")
        return text + (f"; chosen by {self.basis}" if self.basis else "")


def _numpy_blas() -> str:
    """NumPy's BLAS as its build reports it (``scipy-openblas 0.3.29``), '' when it says nothing."""
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]  # type: ignore[attr-defined]
        return f"{blas.get('name', '')} {blas.get('version', '')}".strip()
    except (AttributeError, KeyError, TypeError):
        return ""


def _spec(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any], rank: int) -> tiled.Matmul:
    acc = f32 if out == dtypes.float16 else scalar_type(out)
    return tiled.Matmul(scalar_type(a), scalar_type(b), acc, scalar_type(out), max(1, rank))


def _tiled(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any], rank: int, why: str,
           basis: str = "") -> Choice:
    if not runs_kernels(device.runtime):
        raise ArrayError(f"hetero.matmul: {device.name} has no BLAS hetero knows and runs no hetero kernels; "
                         "move the operands to a device that does with x.to(...)")
    return Choice("hetero", "", f"tiled kernel {_spec(device, a, b, out, rank).name}", why, basis)


def choose(device: Device, x1: Array, x2: Array, out: np.dtype[Any], batch: tuple[int, ...]) -> Choice:
    """The library (or hetero's kernel) that multiplies ``x1`` (``(..., M, K)``) by ``x2``
    (``(..., K, N)``) into ``out`` on ``device``, the batch axes broadcast to ``batch``."""
    strides = tuple(math.prod(batch[k + 1:]) for k in range(len(batch)))
    merged, _ = merged_axes(batch, strides, _batch_strides(x1, batch), _batch_strides(x2, batch))
    outputs = math.prod(batch) * x1.shape[-2] * x2.shape[-1]
    copied = any(x.strides[-1] != 1 and x.shape[-1] != 1 for x in (x1, x2))  # what _rows_contiguous copies
    return _choose(device, x1.dtype, x2.dtype, out, math.prod(merged[-1:]), len(merged), outputs, x1.shape[-1], copied)


def _choose(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any], batch: int, rank: int,
            outputs: int = 1, k: int = 1, copied: bool = False) -> Choice:
    backend = device.backend
    mode = get_config().blas
    if mode == "off":
        return _tiled(device, a, b, out, rank, "vendor BLAS off: blas is off in the configuration (HETERO_BLAS)")
    if backend == "cpu":
        if out.kind == "f" and out != dtypes.float16:
            return Choice("numpy", np.__version__, f"matmul on {_numpy_blas() or 'its BLAS'}")
        return Choice("numpy", np.__version__, f"matmul (NumPy's own loop: BLAS has no {out} GEMM)")
    if backend in _CUPY:
        if out.kind == "f":
            return Choice(_CUPY[backend], "", "CuPy matmul (GEMM, strided-batched for batches)")
        return Choice("cupy", "", f"matmul (CuPy's own kernel: {_CUPY[backend]} has no {out} GEMM)")
    if backend in _OPENCL:
        unusable = _clblast_unusable(device, out)
        if unusable:
            return _tiled(device, a, b, out, rank, unusable)
        vendor = _clblast_choice(out, batch)
        if mode == "on":
            return dataclasses.replace(vendor, basis="the configuration: blas is on (HETERO_BLAS)")
        decision = routine_choice.decide(device, vendor.library, vendor.version, out, outputs, k, copied)
        if decision.routine == "hetero":
            return _tiled(device, a, b, out, rank, f"instead of CLBlast's {vendor.routine}", decision.basis)
        if decision.routine == routine_choice.GRAM:
            return _gram(device, a, b, out, k, f"instead of CLBlast's {vendor.routine}", decision.basis)
        if decision.routine == routine_choice.CHUNKED:
            vendor = _chunked(vendor, k)
        return dataclasses.replace(vendor, basis=decision.basis)
    return _tiled(device, a, b, out, rank, f"hetero knows no BLAS for the {backend} backend")


def _clblast_unusable(device: Device, out: np.dtype[Any]) -> str:
    """Why CLBlast cannot multiply ``out`` products on ``device`` ('' when it can)."""
    if clblast.library() is None:
        return clblast.missing()
    if out not in clblast.DTYPES:
        return f"CLBlast has no {out} GEMM"
    if out == dtypes.float16 and "fp16" not in device.runtime.kernel_target().features:  # type: ignore[union-attr]
        return f"CLBlast's hgemm needs cl_khr_fp16, which {device.name} lacks"
    return ""


def _clblast_choice(out: np.dtype[Any], batch: int) -> Choice:
    name = clblast.library() or "CLBlast"
    return Choice("CLBlast", name.partition(" ")[2], clblast.routine(out, batch))


def _gram(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any], k: int, why: str,
          basis: str = "") -> Choice:
    return Choice("hetero", "", gram.describe(device, a, b, out, k), why, basis, split_k=True)


def _chunked(vendor: Choice, k: int) -> Choice:
    chunk = routine_choice.K_CHUNK
    return dataclasses.replace(vendor, routine=f"{vendor.routine} over K in {-(-k // chunk)} calls of at most {chunk}",
                               k_chunk=chunk)


def routines(device: Device, x1: Array, x2: Array, out: np.dtype[Any], batch: tuple[int, ...]) -> dict[str, Choice]:
    """Every routine that can run this product (as :func:`choose` takes it), by the names of
    :func:`hetero.arraylib.linalg.routine_choice.candidates`, where ``device`` has a choice
    (what ``hetero calibrate`` measures and ``blas: auto`` chooses from); else an empty dict."""
    if device.backend not in _OPENCL or _clblast_unusable(device, out) or not runs_kernels(device.runtime):
        return {}
    strides = tuple(math.prod(batch[k + 1:]) for k in range(len(batch)))
    merged, _ = merged_axes(batch, strides, _batch_strides(x1, batch), _batch_strides(x2, batch))
    vendor = _clblast_choice(out, math.prod(merged[-1:]))
    k, outputs = x1.shape[-1], math.prod(batch) * x1.shape[-2] * x2.shape[-1]
    names = routine_choice.candidates("CLBlast", k, outputs)
    found = {"CLBlast": vendor, "hetero": _tiled(device, x1.dtype, x2.dtype, out, len(merged), "")}
    if routine_choice.CHUNKED in names:
        found[routine_choice.CHUNKED] = _chunked(vendor, k)
    if routine_choice.GRAM in names:
        found[routine_choice.GRAM] = _gram(device, x1.dtype, x2.dtype, out, k, "")
    return {name: found[name] for name in names}


def calls() -> dict[str, dict[str, int]]:
    """Matmul calls per device name and library (``{"oneapi:0": {"CLBlast": 3, "hetero": 1}}``)."""
    found: dict[str, dict[str, int]] = {}
    for (device, library), count in list(_calls.items()):
        found.setdefault(device, {})[library] = count
    return found


def _library_call(device: Device, choice: Choice, call: Any) -> None:
    """Run a library routine as hetero runs a kernel launch (see the module docstring)."""
    device.runtime.call_library(f"{choice.library} {choice.routine}", call)
    next(launch_counter(device.name))
    _calls[(device.name, choice.library)] += 1
    if log.isEnabledFor(logging.DEBUG):
        log.debug("matmul on %s: %s", device.name, choice)


def _converted(x: Array, dtype: np.dtype[Any]) -> Array:
    """``x`` as ``dtype`` (a generated conversion kernel), or ``x`` itself when it is of it."""
    if x.dtype == dtype:
        return x

    def build(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
        return elementwise.Input(0, scalar_type(leaf_dtypes[0])), dtype

    return evaluate(f"astype_{dtype}", (x,), build)


def _batch_strides(x: Array, batch: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of ``x``'s batch axes broadcast to ``batch`` (0 along broadcast axes)."""
    own = x.shape[:-2]
    pad = len(batch) - len(own)
    return (0,) * pad + tuple(0 if size == 1 else stride for size, stride in zip(own, x.strides[:-2], strict=True))


def _whole(x: Array) -> Array:
    root = x.base if x.base is not None else x
    return Array(root.buffer, root.device, (root.nbytes // x.dtype.itemsize,), x.dtype)


def multiply(out: Array, a: Array, b: Array, choice: Choice) -> None:
    """``out[...] = a @ b``: ``out`` a new C-contiguous ``(*batch, M, N)`` array, ``a`` of
    ``(..., M, K)`` and ``b`` of ``(..., K, N)`` views whose batch axes broadcast to ``batch``,
    all on one device; ``K > 0`` and ``out`` is not empty."""
    if choice.library == "numpy":
        _library_call(out.device, choice, functools.partial(_numpy_matmul, out, a, b))
    elif choice.library in ("cuBLAS", "rocBLAS", "cupy"):
        _cupy(out, a, b, choice)
    elif choice.library == "CLBlast":
        _clblast(out, a, b, choice)
    elif choice.split_k:
        gram.multiply(out, a, b, _layout)
        _calls[(out.device.name, "hetero")] += 1
    else:
        _tiled_launch(out, a, b)


def _numpy_matmul(out: Array, a: Array, b: Array) -> None:
    np.matmul(a._host(), b._host(), out=out._host())


def _layout(out: Array, a: Array, b: Array) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    batch = out.shape[:-2]
    return merged_axes(batch, out.strides[:-2], _batch_strides(a, batch), _batch_strides(b, batch))


def _rows_contiguous(x: Array) -> Array:
    """``x`` itself when its rows' elements are contiguous (what the tiled kernel reads), else a copy."""
    return x if x.strides[-1] == 1 or x.shape[-1] == 1 else x.copy()


def _tiled_launch(out: Array, a: Array, b: Array) -> None:
    a, b = _rows_contiguous(a), _rows_contiguous(b)
    shape, (c_bs, a_bs, b_bs) = _layout(out, a, b)
    if not shape:
        shape, c_bs, a_bs, b_bs = (1,), (0,), (0,), (0,)
    spec = _spec(out.device, a.dtype, b.dtype, out.dtype, len(shape))
    key = (spec, out.device)
    kernel = _kernels.get(key)
    if kernel is None:
        with _lock:
            kernel = _kernels.get(key)
            if kernel is None:
                kernel = _kernels[key] = GeneratedSpecialization(tiled.build(spec), out.device)
    M, N, K = out.shape[-2], out.shape[-1], a.shape[-1]
    T = tiled.TILE
    mtiles, ntiles = -(-M // T), -(-N // T)
    args: list[Any] = [_whole(out), _whole(a), _whole(b), M, N, K, mtiles, *shape, out.offset, *c_bs,
                       a.offset, *a_bs, a.strides[-2], b.offset, *b_bs, b.strides[-2]]
    kernel.run((ntiles * T, mtiles * T * math.prod(shape)), args, (T, T))
    _calls[(out.device.name, "hetero")] += 1
    if log.isEnabledFor(logging.DEBUG):
        log.debug("matmul on %s: hetero tiled kernel %s", out.device.name, spec.name)


def _cupy(out: Array, a: Array, b: Array, choice: Choice) -> None:
    _library_call(out.device, choice, functools.partial(_cupy_matmul, out, a, b))


def _cupy_matmul(out: Array, a: Array, b: Array) -> None:
    cupy = out.device.runtime.cupy  # type: ignore[attr-defined]

    def view(x: Array) -> Any:
        memory = x.buffer + x.offset * x.dtype.itemsize
        return cupy.ndarray(x.shape, dtype=x.dtype, memptr=memory, strides=x.byte_strides)

    cupy.matmul(view(a), view(b), out=view(out))


def _blas_matrix(rows: int, cols: int, rs: int, cs: int) -> tuple[bool, int] | None:
    """``(transposed, leading dimension)`` of a row-major matrix with these element strides, or
    None when BLAS cannot read it in place."""
    if cs == 1 or cols == 1:
        ld = rs if rows > 1 else cols
        if ld >= max(1, cols):
            return False, ld
    if rs == 1 or rows == 1:
        ld = cs if cols > 1 else rows
        if ld >= max(1, rows):
            return True, ld
    return None


def _blas_operand(x: Array, dtype: np.dtype[Any]) -> tuple[Array, bool, int]:
    """``x`` as CLBlast reads it: itself or a contiguous copy, its transpose flag and leading dimension."""
    x = _converted(x, dtype)
    rows, cols = x.shape[-2:]
    found = _blas_matrix(rows, cols, x.strides[-2], x.strides[-1])
    if found is None or any(s < 0 for s in x.strides[:-2]):
        x = x.copy()
        found = (False, max(1, cols))
    return x, found[0], found[1]


def _clblast(out: Array, a: Array, b: Array, choice: Choice) -> None:
    device = out.device
    a, a_trans, a_ld = _blas_operand(a, out.dtype)
    b, b_trans, b_ld = _blas_operand(b, out.dtype)
    shape, (c_bs, a_bs, b_bs) = _layout(out, a, b)
    M, N, K = out.shape[-2], out.shape[-1], a.shape[-1]
    inner = shape[-1] if shape else 1
    outer = shape[:-1]
    for index in np.ndindex(*outer):
        at = tuple(x.offset + sum(i * s for i, s in zip(index, strides[:len(index)], strict=True))
                   for x, strides in ((a, a_bs), (b, b_bs), (out, c_bs)))
        layout = (M, N, K, a_trans, a_ld, b_trans, b_ld, inner, a_bs[-1] if shape else 0, b_bs[-1] if shape else 0,
                  c_bs[-1] if shape else 0, choice.k_chunk)
        # a partial of the arrays (not a closure over their buffers): hetero.jit replays it with a call's own
        _library_call(device, choice, functools.partial(_clblast_gemm, out, a, b, at, layout))


def _clblast_gemm(out: Array, a: Array, b: Array, at: tuple[int, int, int], layout: tuple[Any, ...]) -> None:
    """One batch entry's CLBlast GEMM (``layout`` as :func:`_clblast` works it out), on ``out``'s queue."""
    M, N, K, a_trans, a_ld, b_trans, b_ld, inner, a_stride, b_stride, c_stride, k_chunk = layout
    runtime: Any = out.device.runtime  # an OpenCLRuntime: its in-order queue (made with the operands' buffers)
    mems = [int(x.buffer.mem.int_ptr) for x in (a, b, out)]
    # K in chunks (k_chunk): each call adds its part of the sum into c (beta = 1 past the first)
    for k0 in range(0, K, k_chunk or K):
        depth = min(k_chunk or K, K - k0)
        clblast.gemm(int(runtime.queue.int_ptr), out.dtype, M, N, depth, mems[0],
                     at[0] + k0 * (a_ld if a_trans else 1), a_ld, a_trans,
                     mems[1], at[1] + k0 * (1 if b_trans else b_ld), b_ld, b_trans,
                     mems[2], at[2], N, batch=inner, a_stride=a_stride, b_stride=b_stride, c_stride=c_stride,
                     device=out.device.name, accumulate=k0 > 0)


__all__ = ["Choice", "calls", "choose", "multiply", "routines"]
