"""An array's values as Python objects: ``x.item()``, ``x.tolist()``, and pickling by value.

``item()`` and ``tolist()`` download what they return and hand back Python scalars of the kind
NumPy's ``item()`` gives: ``bool`` for bool arrays, ``int`` for signed and unsigned integers,
``float`` for float16/32/64, ``complex`` for complex64/128. ``item()`` with an index reads one
element (a flat index counts in the array's C order, a view's included), downloading only it.

``pickle.dumps(x)`` keeps the array's values (a view's own elements in C order, never its base's
buffer), its dtype, shape and device *name*; ``pickle.loads`` uploads them to the device of that
name in the loading process. Where no device of that name is present there (another machine,
its backend not installed, excluded by ``HETERO_BACKENDS``, unavailable), or it is quarantined
(as :func:`hetero.device` refuses it), the array comes back on the host, with a ``RuntimeWarning``
naming both devices and why. The host is hetero's ``cpu`` device (its arrays share memory with NumPy); in a process
without it (``HETERO_BACKENDS`` leaves it out), the default device, :func:`hetero.device`.
``copy.copy`` and ``copy.deepcopy`` give :meth:`hetero.Array.copy`: a new array on the same device.

Unpickling runs what the pickle names, so load only pickles you trust, as with any pickle. What
hetero's part of it does is narrow: :func:`rebuild` takes bytes, a dtype *name* among hetero's
dtypes, a tuple of sizes and a device name, checks that they agree, and uploads the bytes.
:class:`hetero.Array` inherits :class:`HostValueMethods`.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from hetero.core import dtypes
from hetero.core.device import Device
from hetero.core.errors import BackendUnavailableError, DeviceNotFoundError, DeviceQuarantinedError, HeteroError
from hetero.core.named_device import device as find_device

if TYPE_CHECKING:
    from hetero.array.ndarray import Array

_DTYPES = {kind.name: kind for kind in dtypes.SUPPORTED}


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

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by value: the elements' bytes in C order, the dtype's name, the shape and the
        device's name (see the module docstring)."""
        array = cast("Array", self)
        return (rebuild, (array._host().tobytes(), array.dtype.name, array.shape, array.device.name))

    def __copy__(self) -> Array:
        return cast("Array", self).copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Array:
        return cast("Array", self).copy()


#: ``hetero.array.ndarray.from_host``, put here by that module when it is imported: it imports this
#: module for :class:`HostValueMethods`, so this one may not import it back.
_FROM_HOST: list[Callable[..., Array]] = []


def provide_from_host(function: Callable[..., Array]) -> None:
    """Called once by :mod:`hetero.array.ndarray` with its ``from_host``."""
    _FROM_HOST[:] = [function]


def rebuild(data: bytes, dtype: str, shape: tuple[int, ...], device: str) -> Array:
    """The array a pickle holds: ``data`` (C order) as ``dtype`` (a name, ``"float32"``) of
    ``shape`` on the device named ``device``, else on the host with a warning. Takes nothing
    but these plain values, and refuses them when they do not agree."""
    from_host = _FROM_HOST[0]  # set by hetero.array.ndarray, which imports this module (not the other way)
    if not isinstance(data, bytes) or not isinstance(dtype, str) or not isinstance(device, str) \
            or not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
        raise TypeError("a pickled hetero.Array holds bytes, a dtype name, a tuple of sizes and a device name; "
                        f"got {type(data).__name__}, {dtype!r}, {shape!r}, {device!r}")
    kind = _DTYPES.get(dtype)
    if kind is None:
        raise ValueError(f"a pickled hetero.Array names dtype {dtype!r}; hetero arrays hold {', '.join(_DTYPES)}")
    if len(data) != math.prod(shape) * kind.itemsize:
        raise ValueError(f"a pickled hetero.Array of {kind}{list(shape)} needs {math.prod(shape) * kind.itemsize} "
                         f"bytes, and holds {len(data)}")
    host = np.frombuffer(data, dtype=kind).reshape(shape)
    return from_host(host, _target(device, kind, shape), copy=True)


def _target(name: str, kind: np.dtype[Any], shape: tuple[int, ...]) -> Device:
    """The device named ``name`` here, else the host (module docstring), with a warning saying why."""
    try:
        return find_device(name)
    except (DeviceNotFoundError, BackendUnavailableError, DeviceQuarantinedError) as exc:
        why = exc
    host = find_device("cpu") if _usable("cpu") else find_device(None)
    warnings.warn(f"hetero.Array pickled on {name}: that device is not present here or not usable ({why}); its "
                  f"{kind}{list(shape)} values are loaded on {host.name} instead", RuntimeWarning, stacklevel=3)
    return host


def _usable(name: str) -> bool:
    try:
        find_device(name)
    except HeteroError:
        return False
    return True
