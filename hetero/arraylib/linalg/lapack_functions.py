"""The array API's LAPACK-backed ``linalg`` functions (2024.12): ``cholesky det eigh eigvalsh inv
pinv matrix_rank qr slogdet solve svd svdvals``, batched over the axes before the last two.

Each runs on the device's vendor library where it has one, else on the host with a counted,
announced fallback: :mod:`hetero.arraylib.linalg.lapack` has the table, :mod:`hetero.arraylib.host_fallback`
the rules. The operands must be floating point or complex (an integer or bool one is an
:class:`hetero.UnsupportedDtypeError` naming the conversion), float16 is computed in float32 and
rounded back, float64 and complex128 need a device with fp64. For complex input the values the
standard defines as real come back real (eigenvalues of ``eigh``/``eigvalsh``, ``S`` of ``svd``,
``svdvals``, ``logabsdet``, the singular-value norms); the rest keep the complex dtype. Results match NumPy's to rounding: eigenvalues
ascending as LAPACK returns them; eigenvectors and singular vectors are unique only up to sign
(compare through reconstruction, ``U * S @ Vh``).

``pinv`` and ``matrix_rank`` are NumPy 2's definitions on the singular values: those at most
``rtol`` times the largest are treated as zero, ``rtol`` (a float, or an array broadcast against
the batch axes) defaulting to ``max(M, N) * eps`` of the dtype. A matrix with no elements has
rank 0 and an all-zero pseudo-inverse.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty
from hetero.arraylib.elementwise import same_device
from hetero.arraylib.linalg.lapack import call, float_dtype, real_dtype
from hetero.core.errors import ArrayError


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def matrices(function: str, x: Any, *, square: bool = False) -> Array:
    """``x`` when it is a hetero array of matrices on its last two axes (square ones when asked)."""
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.{function} takes a hetero.Array, got {type(x).__name__}; make one with "
                         "hetero.asarray(value, device=...)")
    if x.ndim < 2:
        raise ArrayError(f"hetero.{function} takes an array of matrices (shape (..., M, N)), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ArrayError(f"hetero.{function} takes square matrices (shape (..., M, M)), got shape {x.shape}")
    return x


def _one(function: str, x: Array, compute: Any, square: bool = True, count: int = 1,
         real: tuple[int, ...] = ()) -> tuple[Array, ...]:
    """``compute`` of the matrices ``x``: ``count`` results of ``x``'s dtype, those at ``real`` of its real dtype."""
    x = matrices(function, x, square=square)
    dtype = float_dtype(function, [x], complex_ok=True)
    return call(function, [x], compute, dtype, [real_dtype(dtype) if k in real else dtype for k in range(count)])


def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """The Cholesky factor of each symmetric positive-definite matrix: lower ``L`` with ``x = L @ L.mT``,
    or upper ``U = L.mT`` with ``upper=True``; a matrix that is not positive definite is an ArrayError."""

    def compute(xp: Any, a: Any) -> Any:
        factor = xp.linalg.cholesky(a)
        return xp.ascontiguousarray(xp.swapaxes(factor, -1, -2)) if upper else factor

    return _one("linalg.cholesky", x, compute)[0]


def det(x: Array, /) -> Array:
    """The determinant of each square matrix (shape ``x.shape[:-2]``)."""
    return _one("linalg.det", x, lambda xp, a: xp.linalg.det(a))[0]


def eigh(x: Array, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix (its lower triangle is read)."""
    values, vectors = _one("linalg.eigh", x, lambda xp, a: tuple(xp.linalg.eigh(a)), count=2, real=(0,))
    return EighResult(values, vectors)


def eigvalsh(x: Array, /) -> Array:
    """The eigenvalues (ascending) of each symmetric matrix."""
    return _one("linalg.eigvalsh", x, lambda xp, a: xp.linalg.eigvalsh(a), real=(0,))[0]


def inv(x: Array, /) -> Array:
    """The inverse of each square matrix; a singular one is an ArrayError (NaN or inf on CuPy, which does not check)."""
    return _one("linalg.inv", x, lambda xp, a: xp.linalg.inv(a))[0]


def qr(x: Array, /, *, mode: str = "reduced") -> QRResult:
    """``Q`` (orthonormal columns) and ``R`` (upper triangular) with ``x = Q @ R`` for each M x N matrix:
    ``Q`` M x K and ``R`` K x N (K = min(M, N)) for ``mode="reduced"``, M x M and M x N for ``"complete"``."""
    if mode not in ("reduced", "complete"):
        raise ArrayError(f"hetero.linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    q, r = _one("linalg.qr", x, lambda xp, a: tuple(xp.linalg.qr(a, mode=mode)), square=False, count=2)
    return QRResult(q, r)


def slogdet(x: Array, /) -> SlogdetResult:
    """The sign (1, -1, or 0 for a singular matrix) and the natural log of the absolute value of each
    square matrix's determinant (``-inf`` for a singular one)."""
    sign, logabsdet = _one("linalg.slogdet", x, lambda xp, a: tuple(xp.linalg.slogdet(a)), count=2, real=(1,))
    return SlogdetResult(sign, logabsdet)


def solve(x1: Array, x2: Array, /) -> Array:
    """``x`` with ``x1 @ x == x2`` for each square ``x1``: ``x2`` of shape ``(M,)`` is one right-hand side
    for every matrix (result ``x1.shape[:-1]``), else ``(..., M, K)`` with batch axes that broadcast
    against ``x1``'s; a singular ``x1`` is an ArrayError."""
    a = matrices("linalg.solve", x1, square=True)
    if not isinstance(x2, Array) or x2.ndim == 0:
        shown = "a 0-d array" if isinstance(x2, Array) else type(x2).__name__
        raise ArrayError(f"hetero.linalg.solve: x2 must be a hetero.Array of shape (M,) or (..., M, K), got {shown}")
    M = a.shape[-1]
    vector = x2.ndim == 1
    if x2.shape[0 if vector else -2] != M:
        raise ArrayError(f"hetero.linalg.solve: x1 of shape {a.shape} takes x2 of shape ({M},) or (..., {M}, K), "
                         f"got {x2.shape}")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], () if vector else x2.shape[:-2]))
    except ValueError:
        raise ArrayError(f"hetero.linalg.solve: the batch axes of x1 {a.shape} and x2 {x2.shape} do not broadcast") from None
    dtype = float_dtype("linalg.solve", [a, x2], complex_ok=True)
    shape = (*batch, M) if vector else (*batch, M, x2.shape[-1])
    if 0 in shape:
        return empty(shape, dtype, device=same_device("linalg.solve", [a, x2]))

    def compute(xp: Any, m: Any, b: Any) -> Any:
        rhs = b[:, None] if vector else b
        m = xp.broadcast_to(m, (*batch, M, M))
        rhs = xp.broadcast_to(rhs, (*batch, M, rhs.shape[-1]))
        found = xp.linalg.solve(m, rhs)
        return found[..., 0] if vector else found

    return call("linalg.solve", [a, x2], compute, dtype, [dtype])[0]


def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """``U``, ``S`` (descending) and ``Vh`` with ``x = U * S[..., None, :] @ Vh`` for each M x N matrix;
    ``U`` M x M and ``Vh`` N x N with ``full_matrices``, else M x K and K x N (K = min(M, N))."""
    full = bool(full_matrices)
    u, s, vh = _one("linalg.svd", x, lambda xp, a: tuple(xp.linalg.svd(a, full_matrices=full)), square=False, count=3,
                     real=(1,))
    return SVDResult(u, s, vh)


def svdvals(x: Array, /) -> Array:
    """The singular values (descending) of each matrix, shape ``(..., min(M, N))``."""
    return _one("linalg.svdvals", x, lambda xp, a: xp.linalg.svd(a, compute_uv=False), square=False, real=(0,))[0]


def singular_value_norm(x: Array, order: Any) -> Array:
    """:func:`hetero.linalg.matrix_norm` for ``ord`` 2 (largest singular value), -2 (smallest) or ``"nuc"`` (their sum)."""

    def compute(xp: Any, a: Any) -> Any:
        s = xp.linalg.svd(a, compute_uv=False)
        return s.sum(axis=-1) if order == "nuc" else s.max(axis=-1) if order == 2 else s.min(axis=-1)

    x = matrices("linalg.matrix_norm", x)
    if order != "nuc" and 0 in x.shape[-2:]:
        raise ArrayError(f"hetero.linalg.matrix_norm: ord={order} of matrices with no elements (shape {x.shape}) is "
                         "undefined (no singular values)")
    dtype = float_dtype("linalg.matrix_norm", [x], complex_ok=True)
    return call("linalg.matrix_norm", [x], compute, dtype, [real_dtype(dtype)])[0]


def _rtol(function: str, rtol: Any, x: Array) -> tuple[list[Array], float | None]:
    """``rtol`` as an operand (an array, broadcast against the batch axes) or a float (None: the default)."""
    if rtol is None or isinstance(rtol, numbers.Real) and not isinstance(rtol, bool):
        return [], None if rtol is None else float(rtol)
    if not isinstance(rtol, Array):
        raise ArrayError(f"hetero.{function}: rtol must be None, a real number or a hetero.Array, got {type(rtol).__name__}")
    if rtol.dtype.kind != "f":
        raise ArrayError(f"hetero.{function}: rtol must have a real floating dtype, got {rtol.dtype}")
    try:
        np.broadcast_shapes(rtol.shape, x.shape[:-2])
    except ValueError:
        raise ArrayError(f"hetero.{function}: rtol of shape {rtol.shape} does not broadcast against the batch axes "
                         f"{x.shape[:-2]} of x") from None
    return [rtol], None


def _cutoff(xp: Any, s: Any, shape: tuple[int, ...], value: float | None, tol: Any) -> Any:
    """The singular values at most this are treated as zero: ``rtol * max(s)`` per matrix, ``(..., 1)``."""
    rtol = (tol[..., None] if tol is not None else
            max(shape[-2:]) * np.finfo(s.dtype).eps if value is None else value)
    return s.max(axis=-1, keepdims=True) * rtol


def matrix_rank(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """The rank of each matrix (int64): how many singular values exceed ``rtol`` times the largest."""
    x = matrices("linalg.matrix_rank", x)
    extra, value = _rtol("linalg.matrix_rank", rtol, x)
    dtype = float_dtype("linalg.matrix_rank", [x], complex_ok=True)
    shape = x.shape

    def compute(xp: Any, a: Any, *tol: Any) -> Any:
        if 0 in shape[-2:]:
            return xp.zeros(shape[:-2], dtype=np.int64)
        s = xp.linalg.svd(a, compute_uv=False)
        return (s > _cutoff(xp, s, shape, value, tol[0] if tol else None)).sum(axis=-1)

    return call("linalg.matrix_rank", [x, *extra], compute, dtype, [dtypes.int64])[0]


def pinv(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """The Moore-Penrose pseudo-inverse of each M x N matrix (N x M), from its SVD with singular
    values at most ``rtol`` times the largest treated as zero."""
    x = matrices("linalg.pinv", x)
    extra, value = _rtol("linalg.pinv", rtol, x)
    dtype = float_dtype("linalg.pinv", [x], complex_ok=True)
    shape = x.shape

    def compute(xp: Any, a: Any, *tol: Any) -> Any:
        if 0 in shape[-2:]:
            return xp.zeros((*shape[:-2], shape[-1], shape[-2]), dtype=a.dtype)
        u, s, vh = xp.linalg.svd(a, full_matrices=False)
        large = s > _cutoff(xp, s, shape, value, tol[0] if tol else None)
        inverse = xp.where(large, 1 / xp.where(large, s, 1), 0).astype(s.dtype)
        v, uh = xp.swapaxes(vh, -1, -2), xp.swapaxes(u, -1, -2)
        if v.dtype.kind == "c":  # the conjugate transposes
            v, uh = v.conj(), uh.conj()
        return xp.matmul(v * inverse[..., None, :], uh)

    return call("linalg.pinv", [x, *extra], compute, dtype, [dtype])[0]


__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "det", "eigh", "eigvalsh", "inv",
           "matrix_rank", "pinv", "qr", "singular_value_norm", "slogdet", "solve", "svd", "svdvals"]
