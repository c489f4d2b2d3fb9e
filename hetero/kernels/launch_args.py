"""What a kernel launch passes, checked in one place before any backend sees it.

Launch sizes (:func:`size_tuple`, :func:`check_sizes`), scalar arguments (:func:`scalar_converter`:
a value that does not fit its parameter's type is a :class:`~hetero.core.errors.KernelLaunchError`
naming the parameter, never a raw NumPy or driver error, and never silently truncated) and
arrays that share memory (:func:`shares_memory`, for kernels whose dialect declares array
parameters ``restrict``). The rules are the same on every device; see "Launch sizes" in the
README.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hetero.array.ndarray import Array
from hetero.core.errors import KernelLaunchError
from hetero.core.types import ArrayType, ScalarType, bool_t, c64, f32, i64, scalar_type

if TYPE_CHECKING:
    from hetero.core.device import Device

#: The largest launch: hetero.global_id() and global_size() are i64 in every dialect.
MAX_WORK_ITEMS = (1 << 63) - 1


def size_tuple(value: Any, what: str, kernel: str | None = None) -> tuple[int, ...]:
    """``value`` (an int or 1 to 3 ints) as a size tuple; KernelLaunchError naming ``what`` otherwise."""
    who = f"{kernel}: " if kernel else ""
    try:
        dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    except TypeError:
        dims = (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))
                                          and d >= 0 for d in dims):
        raise KernelLaunchError(f"{who}{what} must be 1 to 3 non-negative integers, got {value!r}; "
                                "launch with kernel[n](…) or kernel[(n,), (local,)](…)")
    sizes = tuple(int(d) for d in dims)
    if math.prod(sizes) > MAX_WORK_ITEMS:
        raise KernelLaunchError(f"{who}{what} {sizes} has more than 2**63 - 1 work-items (global_id is a 64-bit "
                                "integer); launch fewer and loop inside the kernel")
    return sizes


def check_sizes(kernel: str, device: Device, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
    """The rules every device follows: the local size has the global size's dimensions, holds
    1 to the device's maximum work-items, and divides the global size in every dimension."""
    if local_size is None:
        return
    if len(local_size) != len(global_size):
        raise KernelLaunchError(f"{kernel}: local size {local_size} and global size {global_size} "
                                "must have the same number of dimensions")
    items = math.prod(local_size)
    if items == 0 or items > device.max_work_group_size:
        raise KernelLaunchError(f"{kernel}: local size {local_size} ({items} work-items) is outside "
                                f"1..{device.max_work_group_size} on {device.name}")
    check_divides(kernel, global_size, local_size)


def check_divides(kernel: str, global_size: tuple[int, ...], local_size: tuple[int, ...]) -> None:
    """KernelLaunchError unless ``local_size`` divides ``global_size`` in every dimension."""
    if any(g % loc for g, loc in zip(global_size, local_size, strict=True)):
        rounded = tuple(-(-g // loc) * loc for g, loc in zip(global_size, local_size, strict=True))
        raise KernelLaunchError(
            f"{kernel}: global size {global_size} is not a multiple of local size {local_size} (the global size "
            f"counts work-items, not work-groups, on every device); launch {kernel}[{_sizes(rounded)}, "
            f"{_sizes(local_size)}](…) and guard with `if i < n:` in the kernel, or give no local size")


def _sizes(sizes: tuple[int, ...]) -> str:
    return f"({sizes[0]},)" if len(sizes) == 1 else str(sizes)


def keyword_error(kernel: str, params: Sequence[str], keywords: dict[str, Any]) -> KernelLaunchError:
    """The error for a launch given keyword arguments (kernels take their arguments by position)."""
    named = ", ".join(repr(k) for k in keywords)
    unknown = [k for k in keywords if k not in params]
    hint = f" ({', '.join(repr(k) for k in unknown)} is not a parameter)" if unknown else ""
    return KernelLaunchError(f"{kernel}: parameter {named} was passed by keyword{hint}; kernel launches take "
                             f"their arguments by position: {kernel}[n]({', '.join(params)})")


def scalar_converter(kernel: str, param: str, declared: ScalarType, passed: np.dtype[Any]) -> Callable[[Any], Any]:
    """A function making the launch value of scalar parameter ``param`` (of type ``declared``,
    passed to the backend as ``passed``), or raising KernelLaunchError when the value does not
    fit: an integer out of range, a float for an integer or bool parameter, a finite float
    that overflows to infinity, an int other than 0 or 1 for a bool."""
    convert = passed.type
    # A value already of the parameter's own NumPy type fits by construction: passed on as it is
    # (the common case on the launch path, e.g. np.float32 for f32), with no check or conversion.
    own = convert if passed == np.dtype(declared.dtype) else None
    if declared.kind in "iu":
        bounds = np.iinfo(declared.dtype)
        low, high = int(bounds.min), int(bounds.max)

        def integer(value: Any) -> Any:
            if type(value) is own:
                return value
            if type(value) is int:
                if low <= value <= high:
                    return convert(value)
            elif isinstance(value, (bool, np.bool_)):
                return convert(value)
            elif isinstance(value, (int, np.integer)):
                if low <= int(value) <= high:
                    return convert(value)
            else:
                raise _bad_scalar(kernel, param, declared, value, "is not an integer; round or convert it first")
            raise _bad_scalar(kernel, param, declared, value, f"is outside {low}..{high}")

        integer.own = own  # type: ignore[attr-defined]
        return integer
    if declared.kind == "f":
        floats = np.finfo(declared.dtype)
        largest = float(floats.max)
        below = float(np.nextafter(floats.max, np.zeros((), declared.dtype)))
        limit = largest + (largest - below) / 2  # from here on a value rounds to infinity (inf for f64)

        def real(value: Any) -> Any:
            kind = type(value)
            if kind is own:
                return value
            if kind is float and -limit < value < limit:
                return convert(value)
            try:
                # A NumPy scalar compares as a Python float (exact): against ``limit`` NumPy would
                # cast the limit to the value's own width and warn of an overflow.
                number = float(value) if isinstance(value, (np.floating, np.integer)) else value
                if -limit < number < limit or math.isnan(number) or math.isinf(number):
                    return convert(value)
            except (OverflowError, TypeError, ValueError):
                pass  # an int too large for any float
            raise _bad_scalar(kernel, param, declared, value, f"overflows {declared} (largest {largest:.7g})")

        real.own = own  # type: ignore[attr-defined]
        return real

    def boolean(value: Any) -> Any:
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
            return convert(value)
        raise _bad_scalar(kernel, param, declared, value, "is not a bool (pass True or False)")

    return boolean


def _bad_scalar(kernel: str, param: str, declared: ScalarType, value: Any, why: str) -> KernelLaunchError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else f"{shown[:20]}…{shown[-8:]}"
    return KernelLaunchError(f"{kernel}: parameter {param!r} is {declared}, got {shown}, which {why}")


def arg_type(kernel: str, name: str, want: ScalarType | ArrayType | None, arg: Any) -> ScalarType | ArrayType:
    """The type parameter ``name`` compiles for when a launch passes ``arg`` (``want``: its annotation).
    Values are checked per launch by :func:`scalar_converter`."""
    if isinstance(arg, Array):
        given = ArrayType(scalar_type(arg.dtype), arg.ndim)
        if isinstance(want, ScalarType):
            raise KernelLaunchError(f"{kernel}: parameter {name!r} is a scalar {want}, got an array {given}")
        if isinstance(want, ArrayType) and (want.dtype != given.dtype or want.ndim not in (None, given.ndim)):
            raise KernelLaunchError(f"{kernel}: parameter {name!r} is declared {want}, got an array {given} "
                                    f"on {arg.device.name}")
        return given
    if isinstance(arg, np.ndarray):
        raise KernelLaunchError(f"{kernel}: parameter {name!r} got a numpy array; pass a hetero array: "
                                "hetero.asarray(x, device=…)")
    if isinstance(arg, (bool, np.bool_)):
        given_scalar = bool_t
    elif isinstance(arg, (int, np.integer)) and not isinstance(arg, np.generic):
        given_scalar = i64
    elif isinstance(arg, float) and not isinstance(arg, np.generic):
        given_scalar = f32
    elif isinstance(arg, complex) and not isinstance(arg, np.generic):
        given_scalar = c64
    elif isinstance(arg, np.generic) and arg.dtype.kind in "biufc":
        given_scalar = scalar_type(arg.dtype)
    else:
        raise KernelLaunchError(f"{kernel}: parameter {name!r} got {type(arg).__name__}; kernels take hetero arrays "
                                "and int, float, complex or bool scalars")
    if isinstance(want, ArrayType):
        raise KernelLaunchError(f"{kernel}: parameter {name!r} is declared {want}, got a scalar {given_scalar}")
    return want if want is not None else given_scalar


def shares_memory(args: Sequence[Any], positions: tuple[int, ...]) -> bool:
    """Whether two of the (hetero array) arguments at ``positions`` may share memory: the same
    buffer object, or overlapping address ranges where the buffer has a device address
    (CuPy's ``MemoryPointer.ptr``, as DLPack imports give). Empty arrays overlap nothing."""
    buffers: list[Any] = []
    ranges: list[tuple[int, int]] = []
    for position in positions:
        array = args[position]
        if not array.nbytes:
            continue
        buffer = array._buffer
        for other in buffers:
            if other is buffer:
                return True
        buffers.append(buffer)
        address = getattr(buffer, "ptr", None)
        if type(address) is int:
            end = address + array.nbytes
            for start, stop in ranges:
                if address < stop and start < end:
                    return True
            ranges.append((address, end))
    return False
