"""An array's values as Python objects: ``x.item()`` and ``x.tolist()``, as NumPy gives them.

Both download what they return and hand back Python scalars of the kind NumPy's ``item()``
gives: ``bool`` for bool arrays, ``int`` for signed and unsigned integers, ``float`` for
float16/32/64, ``complex`` for complex64/128. ``item()`` with an index reads one element
(a flat index counts in the array's C order, a view's included), downloading only it.
:class:`hetero.Array` inherits :class:`HostValueMethods`.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from hetero.array.ndarray import Array


class HostValueMethods:
    """``item()`` and ``tolist()`` of :class:`hetero.Array`."""

    __slots__ = ()

    def item(self, *args: Any) -> Any:
        """One element as a Python scalar (NumPy's ``ndarray.item``): with no argument, the only
        element of a size-1 array (ValueError otherwise); with one int, the element at that flat
        index in C order (negative from the end); with one int per axis (or a tuple of them), the
        element there. The errors are NumPy's."""
        array = cast("Array", self)
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        if not args:
            if array.size != 1:
                raise ValueError("can only convert an array of size 1 to a Python scalar")
            return array._host().item()
        if len(args) == 1:
            flat, size = operator.index(args[0]), array.size
            if not -size <= flat < size:
                where = "axis 0 with size" if array.ndim == 1 else "size"  # NumPy's two wordings
                raise IndexError(f"index {flat} is out of bounds for {where} {size}")
            where = tuple(int(i) for i in np.unravel_index(flat % size, array.shape))
        elif len(args) == array.ndim:
            where = tuple(operator.index(i) for i in args)
        else:
            raise ValueError("incorrect number of indices for array")
        return array[where]._host().item()

    def tolist(self) -> Any:
        """The values as nested Python lists of Python scalars (NumPy's ``ndarray.tolist``); a
        0-d array gives its scalar."""
        return cast("Array", self)._host().tolist()
