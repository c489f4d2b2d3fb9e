"""The questions :mod:`hetero.array.ndarray` and :mod:`hetero.kernels.kernel` ask of :mod:`hetero.array.copy`
(which launches the strided copy kernel, so it sits above both), and that
:class:`hetero.Array`'s reduction methods and ``astype`` ask of :mod:`hetero.array.reductions`
and :mod:`hetero.array.cast`; see :mod:`hetero.core.hooks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetero.core.hooks import Hook

#: ``copy_into(dst, src)``: ``dst[...] = src`` for arrays (views) of one shape and dtype, any devices.
COPY_INTO: Hook[Callable[..., None]] = Hook("copy_into", "a copy between views")
#: ``assign(dst, value)``: ``dst[...] = value`` for a scalar, NumPy array or hetero array.
ASSIGN: Hook[Callable[..., None]] = Hook("assign", "a write into a view")
#: ``view_to_numpy(view)``: ``view.numpy()``.
VIEW_TO_NUMPY: Hook[Callable[..., Any]] = Hook("view_to_numpy", "a view's data as NumPy")
#: ``staged(kernel, inner, args)``: the launch of a kernel given views it cannot take as they are.
STAGED_LAUNCH: Hook[Callable[..., Any]] = Hook("staged_launch", "a kernel launch given views")
#: ``apply(op, *operands, out=None)``: an elementwise operation (the operators of ``hetero.Array``).
ELEMENTWISE: Hook[Callable[..., Any]] = Hook("elementwise", "an elementwise operation")
#: ``fuse(plan, operands, shape, device, out)``: an elementwise operation recorded (``out`` None) or
#: fused with its recorded operands into ``out`` (:mod:`hetero.array.fusion`).
FUSE: Hook[Callable[..., Any]] = Hook("fuse", "a fused elementwise operation")
#: ``astype(x, dtype, *, copy=True, device=None)``: ``x`` converted by the generated cast kernel.
CAST: Hook[Callable[..., Any]] = Hook("astype", "a conversion to another dtype")
#: ``reduction(name, x, *args, **kwargs)``: the reduction or scan ``name`` (``"sum"``, ``"argmax"``,
#: ``"cumulative_sum"`` ...) of array ``x``, for the methods of :class:`hetero.Array`.
REDUCTION: Hook[Callable[..., Any]] = Hook("reduction", "a reduction or scan of an array")
#: ``matmul(x1, x2, inplace=False)``: ``x1 @ x2`` (``x1 @= x2`` with ``inplace``), :mod:`hetero.array.linalg.matmul`.
MATMUL: Hook[Callable[..., Any]] = Hook("matmul", "a matrix product of arrays")
#: ``getitem(x, key)`` / ``setitem(x, key, value)``: ``x[key]`` and ``x[key] = value`` for keys holding
#: integer arrays or boolean masks (a gather and a scatter, :mod:`hetero.array.advanced_index`).
ADVANCED_GET: Hook[Callable[..., Any]] = Hook("advanced_getitem", "indexing by integer arrays or masks")
ADVANCED_SET: Hook[Callable[..., None]] = Hook("advanced_setitem", "assignment by integer arrays or masks")
#: ``apply_complex(op, *operands, out=None)``: an elementwise operation with a complex operand,
#: composed from real ones on the component views (:mod:`hetero.array.complex.elementwise`).
COMPLEX_ELEMENTWISE: Hook[Callable[..., Any]] = Hook("complex_elementwise", "an elementwise operation on complex numbers")
#: ``astype_complex(x, dtype)``: ``x`` converted to a complex dtype (:mod:`hetero.array.complex.elementwise`).
COMPLEX_CAST: Hook[Callable[..., Any]] = Hook("complex_astype", "a conversion to a complex dtype")
#: ``complex_reduction(name, x, *args, **kwargs)``: a reduction of a complex array (:mod:`hetero.array.complex.reductions`).
COMPLEX_REDUCTION: Hook[Callable[..., Any]] = Hook("complex_reduction", "a reduction of a complex array")
#: ``namespace()``: the array API namespace module every array names (:mod:`hetero.xp`).
NAMESPACE: Hook[Callable[[], Any]] = Hook("array_namespace", "the array API namespace")
#: ``unary(r, op, a)`` / ``power(base, exponent)``: the complex functions beyond arithmetic
#: (:mod:`hetero.array.complex.functions`), for :mod:`hetero.array.complex.elementwise`.
COMPLEX_UNARY: Hook[Callable[..., Any]] = Hook("complex_unary", "a complex elementary function")
COMPLEX_POWER: Hook[Callable[..., Any]] = Hook("complex_power", "a complex power")
