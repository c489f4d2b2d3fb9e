"""``hetero.astype`` and ``Array.astype``: an array converted to another dtype by one generated
kernel on its device (the elementwise kernel of :mod:`hetero.arraylib.elementwise` whose tree is
the operand itself, stored as the new dtype), never through the host.

The values are NumPy 2's ``x.astype(dtype)`` wherever NumPy defines them: integers wrap into
a narrower integer, numbers round to the nearest float, a float becomes an integer truncated
toward zero, and a number becomes bool as ``x != 0`` (NaN is True). Where NumPy leaves the
answer to the platform (it warns "invalid value encountered in cast"), hetero defines it, the
same on every device: NaN becomes 0, and a float past the integer's range (an infinity
included) saturates to the integer's minimum or maximum. float64 to float16 rounds once, as
NumPy does (not through float32, which could round a value near a halfway point twice).

To a complex dtype, each part goes through that kernel (a real array's imaginary part is 0:
:func:`hetero.arraylib.complex.elementwise.astype_complex`); from complex to a real dtype is a TypeError
(NumPy drops the imaginary part with a warning; the standard leaves it undefined).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.arraylib.elementwise import evaluate
from hetero.array.hooks import CAST
from hetero.arraylib.hooks import COMPLEX_CAST
from hetero.compiler.array_kernels import elementwise
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.core.named_device import device as resolve_device
from hetero.core.types import scalar_type


def _builder(target: np.dtype[Any]) -> Any:
    def build(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
        source = leaf_dtypes[0]
        leaf = elementwise.Input(0, scalar_type(source))
        if target.kind in "iub" and source.kind == "f" or target == dtypes.bool_:
            # the saturating float -> int conversion and ``!= 0`` (elementwise_ops' ``astype``)
            return elementwise.Apply("astype", (leaf,), scalar_type(source), scalar_type(target)), target
        return leaf, target  # the kernel's store converts (C's conversions are NumPy's here)
    return build


def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: str | Device | None = None) -> Array:
    """``x`` as ``dtype`` (the array API's ``astype``; values as the module docstring says), on
    ``device`` when given (else ``x``'s). ``copy=False`` returns ``x`` itself when it already has
    the dtype and device; otherwise (and always for ``copy=True``) the result is a new array."""
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.astype takes a hetero.Array, not {type(x).__name__}; make one first: "
                         "hetero.asarray(value, device=...)")
    target = dtypes.as_dtype(dtype)
    if target == x.dtype:
        if device is not None and resolve_device(device) is not x.device:
            return x.to(device)  # a new array already
        return x.copy() if copy else x
    if target.kind == "c":  # the real and imaginary parts, each by the cast kernel
        result = cast(Array, COMPLEX_CAST.call(x, target))
    elif x.dtype.kind == "c":
        raise UnsupportedDtypeError(f"astype from {x.dtype} to {target} would drop the imaginary part (the array API "
                                    f"standard leaves it undefined); take the part you mean first: "
                                    f"hetero.xp.real(x).astype({target.name!r}), or abs(x)")
    else:
        result = evaluate(f"astype_{target}", (x,), _builder(target))
    return result if device is None else result.to(device)


CAST.register(astype)

__all__ = ["astype"]
