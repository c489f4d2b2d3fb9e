"""The cached fast path of one elementwise operation: what ``x + y`` costs when it is the same
operation, on operands of the same dtypes, shapes, layouts and device, as a recent call.

Every operator of :class:`hetero.Array` and every elementwise function of the namespace comes
here first (this module answers :data:`hetero.array.hooks.ELEMENTWISE`). An operation is
described by a cheap tuple: the operation's name and, per operand, an array's dtype, shape,
strides (None for an array owning its buffer), offset and device, or a Python scalar's type
(bool, int, float). The first call with a description takes the full path
(:func:`hetero.arraylib.elementwise.apply`: promotion, broadcasting, the plan, the kernel),
then keeps a :class:`Recipe`: the plan, the result's shape and dtype, the kernel (flat or rows,
:func:`hetero.arraylib.elementwise.grid`), its global size and a launch-values function with the
layout (element count, merged shape, offsets, strides) converted once. Later calls look the
recipe up in one dict and either record the operation (fusion on: a
:class:`hetero.arraylib.fusion.Lazy` carrying the recipe, so a lone operation computes through
it and a chain still fuses) or launch it at once (fusion off, or an operand whose memory is
shared outside hetero). Nothing that decides a kernel is outside the description, so a new
dtype, device, shape, view or scalar kind is a new description, never a stale kernel.

Everything else takes the full path, unchanged: ``out=`` (the in-place operators), recorded
operands (a chain: fusion composes it), complex numbers, NumPy scalars, ``pow`` with a scalar
(its negative-exponent check), empty results, and a scalar the recipe's dtype cannot hold as
it is (an int out of range, which is an error or, in a comparison, compared as a wider type; a
float that would overflow, NaN or an infinity). A launch is the kernel's own: launch counters count it, fault injection (which wraps
the runtime's ``launch``) sees it, arrays that share memory take the kernel's unaliased variant,
and a checked kernel (``HETERO_BOUNDS_CHECK``) takes the full path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.array.hooks import ELEMENTWISE
from hetero.array.ndarray import Array, empty
from hetero.arraylib import elementwise, fusion
from hetero.compiler.array_kernels.elementwise import scalar_param_type
from hetero.core import fusion_state
from hetero.core.device import Device
from hetero.core.types import scalar_type
from hetero.kernels.generated import GeneratedSpecialization
from hetero.kernels.launch_args import shares_memory
from hetero.kernels.launch_values import values_builder

#: Recipes kept at most; past it the table starts again (a program cycling through more
#: descriptions than this pays the full path on each first call again, nothing else).
MAX_RECIPES = 1024
_SCALARS = (bool, int, float)
Converter = Callable[[Any], Any]


class Recipe:
    """One described operation, ready to run: see the module docstring."""

    __slots__ = ("addressed", "arrays", "converters", "device", "direct", "dtype", "global_size", "kernel", "layout",
                 "local_size", "plan", "scalars", "shape", "unaliased", "values", "wholes")

    def __init__(self, plan: elementwise.Plan, operands: tuple[Any, ...], shape: tuple[int, ...], device: Device) -> None:
        arrays = [x for x in operands if type(x) is Array]
        scalars = [elementwise.scalar_value(x, kind) for x, kind in zip(operands, plan.scalars, strict=True)
                   if kind is not None]
        probe = Array(None, device, shape, plan.result)  # stands for the result: its layout, no buffer
        kernel, global_size, local_size, args = elementwise.launch_args(plan, arrays, scalars, shape, probe)
        self.plan, self.shape, self.device, self.dtype = plan, shape, device, plan.result
        self.local_size = local_size
        self.kernel, self.global_size = kernel, global_size
        self.arrays = len(arrays)
        #: per operand: None for an array, else the converter of a Python scalar to the kernel's value
        self.converters: tuple[Converter | None, ...] = tuple(
            None if kind is None else _converter(kind) for kind in plan.scalars)
        self.scalars = len(scalars)
        #: per array operand: whether the kernel takes it as it is (a 1-D array owning its buffer)
        self.wholes = tuple(elementwise.whole(x) is x for x in arrays)
        #: a 1-D result from arrays alone, each taken as it is: the launch's arguments need no sorting
        self.direct = len(shape) == 1 and not scalars and all(self.wholes)
        first_layout = 1 + len(arrays) + len(scalars)
        fixed = {position: args[position] for position in range(first_layout, len(args))}
        self.layout = [None] * len(fixed)  # the layout's places in a launch's arguments (self.values fills them)
        self.values = values_builder(kernel.plan, kernel.host, fixed)
        self.unaliased = bool(kernel.alias_positions) and len(arrays) > 1
        #: whether buffers carry device addresses that may overlap though the objects differ (CuPy's
        #: ``ptr``, as DLPack imports give): then shares_memory decides, else buffer identity does
        self.addressed = type(getattr(arrays[0]._buf, "ptr", None)) is int

    @staticmethod
    def usable(kernel: GeneratedSpecialization) -> bool:
        """Whether a launch of ``kernel`` is the runtime's call on its values and nothing more."""
        return kernel.bounds is None and not kernel.captured and not kernel.complex_arrays

    def parts(self, operands: Sequence[Any]) -> list[Any] | None:
        """Per operand, the array or the scalar's kernel value; None when a scalar needs the full path."""
        parts: list[Any] = []
        for x, convert in zip(operands, self.converters):
            if convert is None:
                parts.append(x)
            else:
                value = convert(x)
                if value is None:
                    return None
                parts.append(value)
        return parts

    def launch(self, out: Array, parts: Sequence[Any]) -> None:
        """The kernel over ``parts`` (as :meth:`parts` makes them) into ``out``, a new array of the
        recipe's shape and dtype with its buffer (nothing else reads or overlaps it)."""
        # the new array's launch value made here (not through its buffer property, which would
        # ask fusion again while this very array is being computed)
        runtime = self.kernel.runtime
        if self.direct:
            out._karg = runtime.kernel_arg(out._buf, self.shape, self.dtype)
            self._go(parts, [out, *parts, *self.layout])
            return
        if len(self.shape) == 1:
            out._karg = runtime.kernel_arg(out._buf, self.shape, self.dtype)
            args: list[Any] = [out]
        else:
            flat = Array(out._buf, self.device, (out.nbytes // self.dtype.itemsize,), self.dtype)
            flat._karg = runtime.kernel_arg(out._buf, flat.shape, self.dtype)
            args = [flat]
        arrays: list[Array] = []
        wholes = self.wholes
        for part, convert in zip(parts, self.converters):
            if convert is None:
                array = part if wholes[len(arrays)] else elementwise.whole(part)
                arrays.append(array)
                args.append(array)
        for part, convert in zip(parts, self.converters):
            if convert is not None:
                args.append(part)
        args.extend(self.layout)
        self._go(arrays, args)

    def _go(self, arrays: Sequence[Array], args: list[Any]) -> None:
        """Launch the kernel (its unaliased variant where ``arrays`` share memory) on ``args``."""
        entry = self.kernel
        if self.unaliased and (shares_memory(list(arrays), tuple(range(len(arrays)))) if self.addressed
                               else len({id(array._buf) for array in arrays}) < len(arrays)):
            entry = entry.unaliased()
        entry.runtime.launch(entry.loaded, self.global_size, self.local_size, self.values(args))
        next(entry.launches)


def _converter(kind: np.dtype[Any]) -> Converter:
    """A Python scalar as the kernel takes a scalar leaf of dtype ``kind`` (what
    :func:`hetero.arraylib.elementwise.scalar_value` gives), or None for a value that function
    must see (out of range, not finite: it raises, widens or rounds to an infinity)."""
    passed = scalar_param_type(scalar_type(kind)).dtype.type
    own = kind.type
    if kind.kind == "f":
        largest = float(np.finfo(kind).max)
        return lambda value: passed(own(value)) if -largest <= value <= largest else None
    if kind.kind == "b":
        return lambda value: passed(own(value)) if type(value) is bool else None
    info = np.iinfo(kind)
    low, high = int(info.min), int(info.max)
    return lambda value: passed(own(value)) if type(value) is not float and low <= value <= high else None


_recipes: dict[tuple[Any, ...], Recipe | None] = {}


def _describe(x: Any) -> Any:
    """An operand's part of a description; None for one the fast path does not take."""
    kind = type(x)
    if kind is Array:
        if x._pending is not None:  # a recorded operand: the chain is fusion's
            return None
        return (x.dtype, x.shape, x._strides, x.offset, x._device)
    if kind is bool or kind is int or kind is float:
        return kind
    return None


def apply(op: str, *operands: Any, out: Array | None = None) -> Array:
    """:func:`hetero.arraylib.elementwise.apply`, through a recipe when one is kept for this description."""
    if out is not None or not operands:
        return elementwise.apply(op, *operands, out=out)
    described: list[Any] = [op]
    for x in operands:  # each as _describe says, written out: this runs before every operation
        kind = type(x)
        if kind is Array and x._pending is None:
            described.append((x.dtype, x.shape, x._strides, x.offset, x._device))
        elif kind is float or kind is int or kind is bool:
            described.append(kind)
        else:
            return elementwise.apply(op, *operands)
    key = tuple(described)
    recipe = _recipes.get(key)
    if recipe is not None:
        parts = recipe.parts(operands) if recipe.scalars else operands
        if parts is not None:
            return _run(recipe, operands, parts)
    elif key not in _recipes:
        made = elementwise.apply(op, *operands)  # errors are the full path's, raised here
        _remember(key, op, operands)
        return made
    return elementwise.apply(op, *operands)


def _remember(key: tuple[Any, ...], op: str, operands: tuple[Any, ...]) -> None:
    """Keep the recipe of ``op`` on ``operands`` (None: this description takes the full path)."""
    recipe: Recipe | None = None
    if op in elementwise.OPS and not (op == "pow" and any(type(x) is not Array for x in operands)) \
            and all(type(x) is not Array or x.dtype.kind != "c" for x in operands):
        arrays = [x for x in operands if type(x) is Array]
        plan = elementwise._plan(op, operands, elementwise._builders[op])
        shape = arrays[0].shape
        if any(x.shape != shape for x in arrays):
            shape = tuple(np.broadcast_shapes(*(x.shape for x in arrays)))
        if any(kind is not None and _converter(kind)(x) is None for x, kind in zip(operands, plan.scalars, strict=True)):
            return  # this scalar took the full path's widening or rounding: a later one may keep a recipe
        if all(shape):
            candidate = Recipe(plan, operands, shape, arrays[0].device)
            if Recipe.usable(candidate.kernel):
                recipe = candidate
    if len(_recipes) >= MAX_RECIPES:
        _recipes.clear()
    _recipes[key] = recipe


def _run(recipe: Recipe, operands: Sequence[Any], parts: Sequence[Any]) -> Array:
    """Record the operation (fusion on) or compute it now into a new array."""
    arrays = [x for x, convert in zip(operands, recipe.converters) if convert is None] if recipe.scalars else operands
    escaped = False
    for x in arrays:
        if (x._base if x._base is not None else x)._escaped:
            escaped = True
            break
    if not fusion_state.ENABLED or escaped:
        result = empty(recipe.shape, recipe.dtype, device=recipe.device)
        recipe.launch(result, parts)
        return result
    node = fusion.Lazy(recipe.plan, tuple(parts), recipe.shape, recipe.device, 1, recipe.arrays,
                       frozenset([id(x._buf) for x in arrays]), recipe)
    result = Array(None, recipe.device, recipe.shape, recipe.dtype)
    result._pending = node
    fusion_state.record(result)
    return result


ELEMENTWISE.register(apply)

__all__ = ["MAX_RECIPES", "Recipe", "apply"]
