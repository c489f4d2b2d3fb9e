"""The Python operators of :class:`hetero.Array`: ``+ - * / // % ** & | ^ << >> ~``, the
comparisons, ``-x +x abs(x)``, ``@`` and ``@=`` (:mod:`hetero.arraylib.linalg.matmul`, through
:data:`hetero.array.hooks.MATMUL`; a non-array operand of ``@`` is a TypeError), their reflected forms with scalars (``2 * x``) and their
in-place forms (``x += y`` writes into ``x``, which must be able to hold the result's
dtype and shape). Each calls the elementwise operation of the array API's name (``+`` is
``hetero.add``) through :data:`hetero.array.hooks.ELEMENTWISE`
(:mod:`hetero.arraylib.elementwise`, which sits above :mod:`hetero.array.ndarray`).

NumPy scalars on either side work (NumPy defers: ``__array_ufunc__ = None``); a NumPy
array operand or a NumPy ufunc applied to a hetero array is a TypeError (convert first).

``x == y`` and ``x != y`` return bool arrays, as the standard says. Arrays stay hashable
*by identity* (``__hash__`` is ``object.__hash__``): the project keys weak dictionaries on
them, and identity is what a dict or set finds first. ``bool(x)``, ``int(x)``, ``float(x)``
(and ``complex(x)``; ``int`` and ``float`` of a complex array are a TypeError, as the standard says)
need a one-element array (any other size is a ValueError, as in NumPy), so ``if x == y:``
on a larger array is an error, never a silent answer; ``operator.index(x)`` (``x`` as a list
index or slice bound) takes a 0-d integer array only, as NumPy (a TypeError otherwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.array.hooks import ELEMENTWISE, MATMUL


#: The types :func:`_operand` took (every operation asks: one set lookup for them).
_TAKEN: set[type] = {bool, int, float}


def _operand(value: Any) -> bool:
    """Whether the operators take ``value`` (else they return NotImplemented, as Python wants).
    A NumPy array is a TypeError here: Python's fallback would make ``x == host`` a silent False."""
    if type(value) in _TAKEN:
        return True
    if isinstance(value, np.ndarray):
        raise TypeError(f"a hetero.Array and a NumPy array of shape {value.shape} cannot be operands together; "
                        "move the NumPy array to the device first: hetero.asarray(host, device=x.device)")
    taken = isinstance(value, (bool, int, float, complex, np.generic, OperatorMethods))
    if taken and len(_TAKEN) < 64:
        _TAKEN.add(type(value))
    return taken


def _binary(op: str) -> tuple[Any, Any, Any]:
    def forward(self: Any, other: Any) -> Any:
        return ELEMENTWISE.get()(op, self, other) if _operand(other) else NotImplemented

    def reflected(self: Any, other: Any) -> Any:
        return ELEMENTWISE.get()(op, other, self) if _operand(other) else NotImplemented

    def inplace(self: Any, other: Any) -> Any:
        return ELEMENTWISE.get()(op, self, other, out=self) if _operand(other) else NotImplemented

    return forward, reflected, inplace


def _unary(op: str) -> Any:
    def method(self: Any) -> Any:
        return ELEMENTWISE.get()(op, self)
    return method


def _compare(op: str) -> Any:
    return _binary(op)[0]


class OperatorMethods:
    """The operators, mixed into :class:`hetero.Array` (see the module docstring)."""

    __slots__ = ()
    __hash__ = object.__hash__
    #: NumPy defers to these operators: ``np.float32(2) * x`` is a hetero array on x's device
    #: (not a host ndarray), and a NumPy ufunc or ndarray operand is a TypeError, never a silent
    #: host computation; convert with ``x.numpy()`` or ``hetero.asarray(host, device=...)``.
    __array_ufunc__ = None

    __add__, __radd__, __iadd__ = _binary("add")
    __sub__, __rsub__, __isub__ = _binary("subtract")
    __mul__, __rmul__, __imul__ = _binary("multiply")
    __truediv__, __rtruediv__, __itruediv__ = _binary("divide")
    __floordiv__, __rfloordiv__, __ifloordiv__ = _binary("floor_divide")
    __mod__, __rmod__, __imod__ = _binary("remainder")
    __pow__, __rpow__, __ipow__ = _binary("pow")
    __and__, __rand__, __iand__ = _binary("bitwise_and")
    __or__, __ror__, __ior__ = _binary("bitwise_or")
    __xor__, __rxor__, __ixor__ = _binary("bitwise_xor")
    __lshift__, __rlshift__, __ilshift__ = _binary("bitwise_left_shift")
    __rshift__, __rrshift__, __irshift__ = _binary("bitwise_right_shift")
    def __matmul__(self, other: Any) -> Any:
        return MATMUL.get()(self, other) if _operand(other) and isinstance(other, OperatorMethods) else NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        return MATMUL.get()(other, self) if _operand(other) and isinstance(other, OperatorMethods) else NotImplemented

    def __imatmul__(self, other: Any) -> Any:
        return MATMUL.get()(self, other, inplace=True) if _operand(other) and isinstance(other, OperatorMethods) \
            else NotImplemented

    __lt__ = _compare("less")
    __le__ = _compare("less_equal")
    __gt__ = _compare("greater")
    __ge__ = _compare("greater_equal")
    __eq__ = _compare("equal")  # type: ignore[assignment]
    __ne__ = _compare("not_equal")  # type: ignore[assignment]
    __neg__ = _unary("negative")
    __pos__ = _unary("positive")
    __abs__ = _unary("abs")
    __invert__ = _unary("bitwise_invert")

    def _one(self, what: str) -> Any:
        size = getattr(self, "size")
        if size != 1:
            raise ValueError(f"{what}() of a hetero.Array of {size} elements is ambiguous; it takes a one-element "
                             "array (use hetero.all / hetero.any, or index one element)")
        return np.asarray(getattr(self, "_host")()).reshape(())[()]

    def __bool__(self) -> bool:
        return bool(self._one("bool"))

    def __int__(self) -> int:
        self._real_only("int")
        return int(self._one("int"))

    def __float__(self) -> float:
        self._real_only("float")
        return float(self._one("float"))

    def __complex__(self) -> complex:
        return complex(self._one("complex"))

    def _real_only(self, what: str) -> None:
        # The standard: int() and float() of a complex array are a TypeError (NumPy drops the imaginary part)
        if getattr(self, "dtype").kind == "c":
            raise TypeError(f"{what}() of a complex hetero.Array would drop its imaginary part; use complex(x), "
                            f"or {what}(hetero.real(x))")

    def __index__(self) -> int:
        # NumPy's rule: a 0-d integer array only (bool is not an integer here, nor is [3])
        kind, ndim = getattr(self, "dtype"), getattr(self, "ndim")
        if kind.kind not in "iu" or ndim != 0:
            raise TypeError(f"only 0-d integer hetero arrays can be used as an index, not a {ndim}-d {kind} array; "
                            "index with int(x[...]) or convert first: x.astype(hetero.int64)")
        return int(self._one("index"))
