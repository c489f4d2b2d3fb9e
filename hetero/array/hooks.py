"""The questions the Array type (this room, loaded by ``import hetero``) and the kernels room ask
of the array library a floor above them (:mod:`hetero.arraylib`, which builds and launches
kernels); see :mod:`hetero.core.hooks`. Each is answered by the library module named in its
comment when that module is imported, and ``hetero/__init__.py`` names it so that the first
question imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetero.core.hooks import Hook

#: ``copy_into(dst, src)``: ``dst[...] = src`` for arrays (views) of one shape and dtype, any devices
#: (:mod:`hetero.arraylib.copy`, as are the next three).
COPY_INTO: Hook[Callable[..., None]] = Hook("copy_into", "a copy between views")
#: ``assign(dst, value)``: ``dst[...] = value`` for a scalar, NumPy array or hetero array.
ASSIGN: Hook[Callable[..., None]] = Hook("assign", "a write into a view")
#: ``view_to_numpy(view)``: ``view.numpy()``.
VIEW_TO_NUMPY: Hook[Callable[..., Any]] = Hook("view_to_numpy", "a view's data as NumPy")
#: ``staged(kernel, inner, args)``: the launch of a kernel given views it cannot take as they are
#: (asked by :mod:`hetero.kernels.kernel`).
STAGED_LAUNCH: Hook[Callable[..., Any]] = Hook("staged_launch", "a kernel launch given views")
#: ``apply(op, *operands, out=None)``: an elementwise operation (the operators of ``hetero.Array``;
#: :mod:`hetero.arraylib.elementwise`).
ELEMENTWISE: Hook[Callable[..., Any]] = Hook("elementwise", "an elementwise operation")
#: ``astype(x, dtype, *, copy=True, device=None)``: ``x`` converted by the generated cast kernel
#: (:mod:`hetero.arraylib.cast`).
CAST: Hook[Callable[..., Any]] = Hook("astype", "a conversion to another dtype")
#: ``reduction(name, x, *args, **kwargs)``: the reduction or scan ``name`` (``"sum"``, ``"argmax"``,
#: ``"cumulative_sum"`` ...) of array ``x``, for the methods of :class:`hetero.Array`
#: (:mod:`hetero.arraylib.reductions`).
REDUCTION: Hook[Callable[..., Any]] = Hook("reduction", "a reduction or scan of an array")
#: ``matmul(x1, x2, inplace=False)``: ``x1 @ x2`` (``x1 @= x2`` with ``inplace``), :mod:`hetero.arraylib.linalg.matmul`.
MATMUL: Hook[Callable[..., Any]] = Hook("matmul", "a matrix product of arrays")
#: ``getitem(x, key)`` / ``setitem(x, key, value)``: ``x[key]`` and ``x[key] = value`` for keys holding
#: integer arrays or boolean masks (a gather and a scatter, :mod:`hetero.arraylib.advanced_index`).
ADVANCED_GET: Hook[Callable[..., Any]] = Hook("advanced_getitem", "indexing by integer arrays or masks")
ADVANCED_SET: Hook[Callable[..., None]] = Hook("advanced_setitem", "assignment by integer arrays or masks")
#: ``namespace()``: the array API namespace module every array names (:mod:`hetero.xp`).
NAMESPACE: Hook[Callable[[], Any]] = Hook("array_namespace", "the array API namespace")
