"""``@hetero.kernel``: write a kernel once in Python, launch it on any device.

    @hetero.kernel
    def saxpy(a: hetero.f32, x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
        i = hetero.global_id(0)
        if i < x.shape[0]:
            y[i] = a * x[i] + y[i]

    saxpy[n](2.0, x, y)              # n work-items; the backend picks the work-group size
    saxpy[(n,), (256,)](2.0, x, y)   # explicit global and local sizes

Sizes count work-items on every device (OpenCL's NDRange, not CUDA's blocks). A local size
must divide the global size on every device, else :class:`KernelLaunchError` names both and
the rounded-up launch; sizes, keyword arguments and scalar values that do not fit their
parameter are refused the same way everywhere (:mod:`hetero.kernels.launch_args`). A launch whose
array arguments share memory runs a variant without ``restrict`` (:meth:`Specialization.unaliased`),
so it computes what the Python reading of the kernel says.

A launch given a strided view it cannot pass as it is (not contiguous, or at an offset on a
non-host device) runs on a contiguous copy, and the views the kernel writes (its IR's stores
and atomics) get the results copied back (:mod:`hetero.arraylib.copy`); the dispatch key tells
such views apart, so contiguous arrays launch exactly as before.

A launch runs on the device that holds the array arguments. The first launch for a
new combination of argument types and device compiles: Python -> IR -> the device's
dialect -> the vendor's compiler, cached in memory and on disk; or, when a bundle loaded
with ``hetero.load_bundle`` holds the kernel, uses what the bundle prebuilt. Later launches take
a fast path keyed on the argument types. Launches are asynchronous: ``.numpy()``,
``device.synchronize()`` and ``hetero.synchronize()`` wait.

Scalars passed to unannotated parameters are typed as Numba does, except that a
Python float is f32 (hetero's default float): ``bool`` -> bool, ``int`` -> i64,
``float`` -> f32, NumPy scalars -> their own type.

``kernel.split(devices=[...] | "all")[n](…)`` spreads one launch over several devices in
proportion to their predicted speed (see :mod:`hetero.kernels.split.launch`). :func:`launch_counts` counts
launches per device (one counter step per launch); timing samples for the cost model are
taken only while :func:`hetero.scheduler.cost_model.sampling` is on, by swapping the launch
method, so that with sampling off a launch runs no sampling code at all. ``HETERO_COST_SAMPLING=k``
(config ``cost_sampling``) turns it on for every k-th launch when this module is first imported,
and saves the samples at exit.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from hetero.core import fusion_state as _fusion
from hetero.array.ndarray import Array, asarray, empty, zeros
from hetero.array.components import components
from hetero.compiler.frontend import python as frontend
from hetero.compiler.ir import bounds, grid_sync, nodes as ir
from hetero.compiler.build import pipeline
from hetero.compiler.ir.queries import written_arrays
from hetero.compiler.ir.text import format_function
from hetero.compiler.frontend.signature import format_signature, parse_signature
from hetero.compiler.frontend.source import Fingerprint, source_fingerprint
from hetero.core.config import get_config
from hetero.core.device import Device
from hetero.core.errors import CompileError, KernelLaunchError
from hetero.core.launch_counts import counter as launch_counter
from hetero.core.launch_counts import launch_counts  # re-exported: read from here too
from hetero.kernels.bounds_check import BoundsFlags
from hetero.kernels.launch_values import key_builder, matcher_builder, values_builder
from hetero.array.hooks import STAGED_LAUNCH
from hetero.kernels.hooks import SPLIT_KERNEL
from hetero.kernels.launch_args import arg_type, check_sizes, keyword_error, scalar_converter, shares_memory, size_tuple
from hetero.core.registry import device as resolve_device
from hetero.scheduler import cost_model
from hetero.core.types import ArrayType, ScalarType, i64, scalar_type, u32

if TYPE_CHECKING:
    from hetero.kernels.split.launch import SplitKernel

ParamType = ScalarType | ArrayType
log = logging.getLogger(__name__)


def _exact_sizes(config: Any) -> bool:
    """Whether ``config`` is made of plain ints only (cheap): a cached launcher may serve it.
    Anything else is checked afresh, so that ``kernel[100.0]`` fails even after ``kernel[100]``."""
    if type(config) is int:
        return True
    if type(config) is not tuple:
        return False
    for part in config:
        if type(part) is tuple:
            for size in part:
                if type(size) is not int:
                    return False
        elif type(part) is not int:
            return False
    return True


def device_target(name: str, device: Device) -> Any:
    """The kernel target of ``device``; KernelLaunchError when its backend runs no hetero kernels."""
    target = device.runtime.kernel_target()
    if target is None:
        raise KernelLaunchError(f"{device.name} cannot run hetero kernels (its backend has no kernel support)")
    return target


class Specialization:
    """One kernel compiled for one argument-type signature on one device.

    ``restrict=False`` is the variant for launches whose array arguments share memory: its
    array parameters make no no-alias promise to the vendor compiler (see :meth:`unaliased`)."""

    #: The arrays from outside the kernel its body reads, passed after the declared arguments.
    captured: tuple[Array, ...] = ()
    declared_count = 0
    declared_types: tuple[ParamType, ...] = ()
    #: Whether a launch needs no more than the plan's values (no captured, complex, grid-sync or checked parts).
    direct = False
    grid_params: tuple[tuple[str, ParamType], ...] = ()
    #: A checked kernel's flag array (hetero.kernels.bounds_check), passed last and read after each launch.
    bounds: BoundsFlags | None = None

    def __init__(self, kernel: Kernel, types: tuple[ParamType, ...], device: Device, restrict: bool = True) -> None:
        self.kernel = kernel
        target = device_target(kernel.name, device)
        checks = "bounds" if kernel.checked() else ""
        compiled = pipeline.compile_for_device(kernel.py_func, types, device.runtime, target,
                                               fingerprint=kernel.source_fingerprint(),
                                               lowered=functools.partial(kernel._lowered, types, bool(checks)),
                                               restrict=restrict, checks=checks)
        params = kernel.param_names()
        extra = [a.param for a in compiled.source.abi if a.param not in params and a.param != bounds.FLAGS
                 and _complex_part(a.param, params) is None]
        grid = list(dict.fromkeys(p for p in extra if p.startswith("_grid_")))
        captured = captured_arguments(kernel, [p for p in extra if not p.startswith("_grid_")], device)
        if captured and restrict and pipeline.declares_restrict(target.dialect):
            # an array read from outside may be one of the arguments too: no no-alias promise
            restrict = False
            compiled = pipeline.compile_for_device(kernel.py_func, types, device.runtime, target,
                                                   fingerprint=kernel.source_fingerprint(),
                                                   lowered=functools.partial(kernel._lowered, types, bool(checks)),
                                                   restrict=False, checks=checks)
        self.captured = tuple(captured.values())
        self.declared_count = len(params)
        self.declared_types = types  # the kernel's own parameters' (self.types adds what hetero passes)
        grid_types = tuple(_grid_param_type(name) for name in grid)
        flags = (bounds.FLAGS,) if checks else ()
        self._setup(kernel.name, [*params, *captured, *grid, *flags],
                    (*types, *(ArrayType(scalar_type(a.dtype), a.ndim) for a in captured.values()), *grid_types,
                     *(ArrayType(u32, 1) for _ in flags)), device, compiled, target, restrict)
        if checks:  # after the declared, captured and grid-sync arguments, each launch passes the flags
            self.bounds = BoundsFlags(kernel.name, device, functools.partial(kernel.bounds_sites, types))
        # the arrays a grid-sync launch adds are its own: only the caller's may share memory
        self.alias_positions: tuple[int, ...] = tuple(i for i in self.alias_positions if i < len(params))
        if grid:  # a kernel with grid syncs: launched phase after phase (hetero.compiler.ir.grid_sync)
            self.grid_params = tuple(zip(grid, grid_types, strict=True))
            self.launch = self._launch_phases  # type: ignore[method-assign]
        # a launch is the runtime's call on the arguments' values, nothing more (Launcher's fast path)
        self.direct = not grid and not self.captured and not self.complex_arrays and self.bounds is None

    def _setup(self, name: str, params: Sequence[str], types: tuple[ParamType, ...], device: Device,
               compiled: pipeline.Compiled, target: Any, restrict: bool) -> None:
        """What a launch needs of a compiled kernel (shared with kernels made as IR, :mod:`hetero.arraylib.copy`)."""
        self.name = name
        self.types = types
        self.param_names = list(params)
        self._written: tuple[int, ...] | None = None  # positions of the array parameters it writes (on first need)
        self.device = device
        self.runtime = device.runtime
        self.restrict = restrict
        self.source = compiled.source
        self.loaded = compiled.loaded
        index = {param: i for i, param in enumerate(params)}
        # per argument: kind, parameter position, shape axis, and the NumPy dtype of an array's
        # elements or the checking converter of a scalar (see hetero.kernels.launch_args.scalar_converter)
        self.plan: list[tuple[str, int, int, Any]] = []
        #: Positions of complex array parameters: a launch passes their float component view
        #: (hetero.compiler.ir.complex_lowering gives the kernel that parameter).
        self.complex_arrays = tuple(i for i, t in enumerate(types) if isinstance(t, ArrayType) and t.dtype.is_complex)
        for arg in self.source.abi:
            part = _complex_part(arg.param, params) if arg.param not in index else None
            if part is not None:  # one float part of a complex scalar parameter
                whole, which = part
                converter = scalar_converter(name, arg.param, arg.dtype, arg.dtype.dtype)
                self.plan.append((arg.kind, index[whole], arg.axis, _part_converter(converter, which)))
                continue
            declared = types[index[arg.param]]
            if arg.kind == "scalar" and isinstance(declared, ScalarType):
                converter = scalar_converter(name, arg.param, declared, arg.dtype.dtype)
                self.plan.append((arg.kind, index[arg.param], arg.axis, converter))
            else:
                self.plan.append((arg.kind, index[arg.param], arg.axis, arg.dtype.dtype))
        #: Positions of the array parameters a launch must check for shared memory (none when the
        #: dialect makes no no-alias promise, or this is already the variant that makes none).
        arrays = tuple(i for i, t in enumerate(types) if isinstance(t, ArrayType))
        self.alias_positions = arrays if restrict and len(arrays) > 1 and pipeline.declares_restrict(target.dialect) else ()
        self._unaliased: Specialization | None = None
        self.host = self.runtime.host_memory
        self._checked_sizes: set[tuple[Any, Any]] = set()
        self._values = values_builder(self.plan, self.host)
        self._matchers: dict[tuple[Any, ...], Callable[[Sequence[Any]], list[Any] | None]] = {}
        self.launches = launch_counter(device.name)
        self.calls = 0  # launches seen while sampling is on (every k-th is timed)

    def matcher(self, key: tuple[Any, ...]) -> Callable[[Sequence[Any]], list[Any] | None]:
        """``args -> launch values`` for arguments of dispatch ``key`` (the key this specialization
        is found under in its kernel's table, which never changes once there), None for others."""
        found = self._matchers.get(key)
        if found is None:
            found = self._matchers[key] = matcher_builder(key, self.plan, self.host, Array)
        return found

    def prepare(self) -> None:
        """Have the device's runtime finish building this kernel before its first launch (on
        ``cpu`` Numba compiles at the first call); the guard's standby calls it in the background.
        A kernel whose stand-in arguments cannot be made (complex arrays) is left to its launch."""
        if self.complex_arrays:
            return
        values: list[Any] = []
        for kind, position, _, how in self.plan:
            if kind == "array":
                ndim = cast(ArrayType, self.types[position]).ndim
                if ndim is None:  # an array of any rank: its launches decide
                    return
                values.append(np.empty((0,) * ndim, how))
            elif kind == "shape":
                values.append(0)
            else:
                values.append(how(0))
        self.runtime.prepare_kernel(self.loaded, values)

    def unaliased(self) -> Specialization:
        """The variant of this specialization for launches whose arrays share memory (built once)."""
        if self._unaliased is None:
            with self.kernel._lock:
                if self._unaliased is None:
                    self._unaliased = Specialization(self.kernel, self.declared_types, self.device, restrict=False)
        return self._unaliased

    def _ir(self) -> ir.Function:
        return cast(ir.Function, self.kernel._lowered(self.declared_types))

    def written_positions(self) -> tuple[int, ...]:
        """Positions of the array parameters this kernel may write (a store or an atomic in its IR;
        every array when it calls device functions)."""
        if self._written is None:
            arrays = tuple(i for i, t in enumerate(self.types) if isinstance(t, ArrayType))
            written = written_arrays(self._ir())
            self._written = arrays if written is None else tuple(i for i in arrays if self.param_names[i] in written)
        return self._written

    def check_sizes(self, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
        """The same rules on every device (:func:`hetero.kernels.launch_args.check_sizes`), checked once per sizes."""
        if (global_size, local_size) in self._checked_sizes:
            return
        check_sizes(self.name, self.device, global_size, local_size)
        limit = self.source.max_group
        if limit:
            items = 0 if local_size is None else int(np.prod(local_size))
            if not 0 < items <= limit:
                raise KernelLaunchError(
                    f"{self.name}: a kernel with warp operations runs in CUDA's blocks of at most {limit} threads "
                    f"on every device; give a local size (block) of 1..{limit} work-items, not {local_size}")
        if len(self._checked_sizes) >= 4096:  # sizes that change every call must not grow this forever
            self._checked_sizes.clear()
        self._checked_sizes.add((global_size, local_size))

    def _launch_phases(self, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]) -> None:
        """A kernel with grid syncs: one launch per phase, each work-item resuming where it stopped,
        until a phase ends with none stopped at a sync (its state and locals kept on the device)."""
        items = 1
        for size in global_size:
            items *= size
        if not items:
            return
        state: list[Any] = []
        more = None
        for name, t in self.grid_params:
            if name == grid_sync.PHASE:
                state.append(None)
            elif name == grid_sync.STATE or name == grid_sync.MORE:
                array = zeros(items if name == grid_sync.STATE else 1, np.int64, device=self.device)
                state.append(array)
                more = array if name == grid_sync.MORE else more
            else:
                slots = grid_sync.spill_layout(name)[1]  # type: ignore[index]
                state.append(empty((items, slots), cast(ArrayType, t).dtype.dtype, device=self.device))
        assert more is not None
        position = [name for name, _ in self.grid_params].index(grid_sync.PHASE)
        phase = 0
        while True:
            phase += 1
            state[position] = np.int64(phase)
            Specialization.launch(self, global_size, local_size, (*args, *state))
            if int(more.numpy()[0]) != phase:
                return

    def launch(self, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]) -> None:
        """Launch with sizes already checked by :meth:`check_sizes`."""
        if not all(global_size):
            return
        if self.captured:
            args = (*args[:self.declared_count], *self.captured, *args[self.declared_count:])
        if self.complex_arrays:
            args = list(args)
            for position in self.complex_arrays:
                args[position] = components(args[position])
        if _fusion.PENDING:  # recorded elementwise work reading what this launch writes runs first
            _fusion.before_write([args[i] for i in self.written_positions()])
        if self.bounds is None:
            self.runtime.launch(self.loaded, global_size, local_size, self._values(args))
            return
        self.runtime.launch(self.loaded, global_size, local_size, self._values((*args, self.bounds.array)))
        self.bounds.check()


def _complex_part(abi_param: str, params: Sequence[str]) -> tuple[str, str] | None:
    """``(parameter, "re" | "im")`` when ``abi_param`` is a part of complex scalar ``parameter``
    (``z__re``, ``z__im``: hetero.compiler.ir.complex_lowering's names), else None."""
    for which in ("re", "im"):
        suffix = f"__{which}"
        if abi_param.endswith(suffix) and abi_param[:-len(suffix)] in params:
            return abi_param[:-len(suffix)], which
    return None


def _part_converter(converter: Callable[[Any], Any], which: str) -> Callable[[Any], Any]:
    """The launch value of one part of a complex scalar argument (checked as a float of its width)."""
    if which == "re":
        return lambda value: converter(complex(value).real)
    return lambda value: converter(complex(value).imag)


def captured_arguments(kernel: Kernel, names: Sequence[str], device: Device) -> dict[str, Array]:
    """The arrays outside ``kernel`` that its body reads (see the frontend's ``captured_arrays``), on
    ``device``: a NumPy array is copied there now (Numba freezes it at compile time, so later changes
    to it are not seen), a device array is passed as it is (changes to it are seen)."""
    found: dict[str, Array] = {}
    if not names:  # the common case: nothing captured, and no source to read for it
        return found
    source = frontend.function_source(kernel.py_func)
    for name in dict.fromkeys(names):
        value = source.resolve(name)
        if isinstance(value, np.ndarray):
            found[name] = asarray(np.array(value, copy=True), device=device)
            continue
        array = value.__hetero_array__() if hasattr(value, "__hetero_array__") else None
        if not isinstance(array, Array):
            raise KernelLaunchError(f"{kernel.name}: {name!r} changed since the kernel was compiled: it is no "
                                    "longer an array")
        if array.device is not device:
            raise KernelLaunchError(f"{kernel.name} reads the array {name!r}, which is on {array.device.name}, in a "
                                    f"launch on {device.name}; move it with .to({device.name!r}) or launch there")
        found[name] = array
    return found


def _grid_param_type(name: str) -> ParamType:
    if name == grid_sync.PHASE:
        return i64
    layout = grid_sync.spill_layout(name)
    return ArrayType(scalar_type(layout[0]), 2) if layout else ArrayType(i64, 1)


class Launcher:
    """``kernel[global]`` or ``kernel[global, local]``: call it with the kernel's arguments."""

    __slots__ = ("_checked", "_fast", "_items", "global_size", "kernel", "local_size")

    def __init__(self, kernel: Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
        self.kernel = kernel
        self.global_size = global_size
        self.local_size = local_size
        self._items = all(global_size)  # False: a launch of no work-items, which runs nothing
        self._checked: Specialization | None = None  # the last specialization these sizes passed on
        # that specialization, when its launches are plain (no arrays that may share memory, work-items
        # to run, all parts its own), with its matcher: args -> its launch values, or None for
        # arguments of another key (Specialization.matcher). One attribute, so that threads
        # launching with other arguments never pair one specialization's values with another's kernel.
        self._fast: tuple[Callable[[Sequence[Any]], list[Any] | None], Specialization] | None = None

    def __call__(self, *args: Any, **keywords: Any) -> None:
        fast = self._fast
        if fast is not None and not keywords and not _fusion.PENDING:
            values = fast[0](args)
            if values is not None:  # the launcher's usual arguments: no key to build, nothing to check
                entry = fast[1]
                entry.runtime.launch(entry.loaded, self.global_size, self.local_size, values)
                next(entry.launches)
                return
        kernel = self.kernel
        if keywords:
            raise keyword_error(kernel.name, kernel.param_names(), keywords)
        key = kernel._key_of(args)
        entry = kernel._dispatch.get(key)
        if entry is None:
            entry = kernel._specialize_views(args, key) if any(type(k) is tuple and k[1] < 0 for k in key) \
                else kernel._specialize(args, key)
        if entry.alias_positions and shares_memory(args, entry.alias_positions):
            entry = entry.unaliased()
        if entry is not self._checked:  # a cached launcher checks its sizes once per specialization
            entry.check_sizes(self.global_size, self.local_size)
            self._checked = entry
            self._fast = (entry.matcher(key), entry) \
                if entry.direct and self._items and not entry.alias_positions else None
        if entry.direct and self._items and not _fusion.PENDING:  # the common launch, without a call more
            entry.runtime.launch(entry.loaded, self.global_size, self.local_size, entry._values(args))
        else:
            entry.launch(self.global_size, self.local_size, args)
        next(entry.launches)

    _plain_call = __call__

    def _sampled_call(self, *args: Any, **keywords: Any) -> None:
        """``__call__`` while sampling is on: every k-th launch of a specialization waits for
        its device before and after, and records the time in the cost model."""
        kernel = self.kernel
        if keywords:
            raise keyword_error(kernel.name, kernel.param_names(), keywords)
        key = kernel._key_of(args)
        entry = kernel._dispatch.get(key)
        fresh = entry is None  # the first launch compiles: never a sample
        if entry is None:
            entry = kernel._specialize_views(args, key) if any(type(k) is tuple and k[1] < 0 for k in key) \
                else kernel._specialize(args, key)
        if entry.alias_positions and shares_memory(args, entry.alias_positions):
            fresh = fresh or entry._unaliased is None  # so does the first aliased one
            entry = entry.unaliased()
        if entry is not self._checked:
            entry.check_sizes(self.global_size, self.local_size)
            self._checked = entry
        every = _sampling_every
        entry.calls += 1
        if fresh or not every or entry.calls % every:
            entry.launch(self.global_size, self.local_size, args)
        else:
            device = entry.device
            device.synchronize()
            start = time.perf_counter()
            entry.launch(self.global_size, self.local_size, args)
            device.synchronize()
            seconds = time.perf_counter() - start
            work_items = 1
            for size in self.global_size:
                work_items *= size
            cost_model.default_model().record(kernel.cost_key(), device.stable_id, work_items, seconds,
                                              signature=kernel.signature(entry.types), device_name=device.name)
        next(entry.launches)


_sampling_every: int | None = None


def _on_sampling_change(every: int | None) -> None:
    """Switch the launch method: the plain one when sampling is off, the timing one when on."""
    global _sampling_every
    _sampling_every = every
    Launcher.__call__ = Launcher._sampled_call if every else Launcher._plain_call  # type: ignore[method-assign]


class Kernel:
    """A ``@hetero.kernel`` function. Launch with ``kernel[global_size](…)`` or
    ``kernel[global_size, local_size](…)``; inspect with :meth:`ir` and :meth:`source`."""

    def __init__(self, py_func: Callable[..., Any], debug: bool = False) -> None:
        self.py_func = py_func
        self.name = py_func.__name__
        #: Checked mode for this kernel (hetero.compiler.ir.bounds); HETERO_BOUNDS_CHECK=1 checks every kernel.
        self.debug = debug
        functools.update_wrapper(self, py_func)  # type: ignore[arg-type]
        self._declared: list[ParamType | None] | None = None
        self._fingerprint: Fingerprint | None = None
        self._param_names: list[str] | None = None
        self._dispatch: dict[tuple[Any, ...], Specialization] = {}
        code = getattr(py_func, "__code__", None)  # the launch's dispatch key, written out for the arity
        self._key_of = key_builder(code.co_argcount if code is not None else 0, Array)
        self._ir: dict[tuple[ParamType, ...] | tuple[tuple[ParamType, ...], str], Any] = {}
        self._launchers: dict[Any, Launcher] = {}
        self._lock = threading.RLock()

    def __getitem__(self, config: Any) -> Launcher:
        if _exact_sizes(config):
            launcher = self._launchers.get(config)
            if launcher is not None:
                return launcher
        if isinstance(config, tuple) and len(config) == 2 and not isinstance(config[0], (int, np.integer)):
            global_size = size_tuple(config[0], "global size", self.name)
            local_size: tuple[int, ...] | None = size_tuple(config[1], "local size", self.name)
        else:
            global_size, local_size = size_tuple(config, "global size", self.name), None
        launcher = Launcher(self, global_size, local_size)
        if len(self._launchers) >= 1024:  # sizes that change every call must not grow this forever
            self._launchers.clear()
        if _exact_sizes(config):  # others (a list, NumPy ints) are checked afresh each time
            self._launchers[config] = launcher
        return launcher

    def __call__(self, *args: Any, **keywords: Any) -> None:
        raise KernelLaunchError(f"launch kernel {self.name} with sizes: {self.name}[n](…) or {self.name}[(n,), (256,)](…)")

    def __repr__(self) -> str:
        return f"<hetero.kernel {self.py_func.__qualname__}>"

    def split(self, devices: Sequence[str | Device] | str = "all", combine: dict[str, str] | None = None,
              model: cost_model.CostModel | None = None, adaptive: bool = True) -> SplitKernel:
        """This kernel spread over several devices: ``kernel.split(["cpu", "oneapi:0"])[n](…)``.

        The launch's work-items along one axis are divided among ``devices`` (``"all"``: every
        healthy device that runs kernels) in proportion to their predicted speed including
        copies, run concurrently, and gathered into the arrays passed. ``combine`` names arrays
        every part updates as a whole (``{"total": "sum"}``: atomics, reductions), with how to
        merge them: ``sum``, ``min`` or ``max``. ``model`` is the cost model to plan with
        (default: the process's). With ``adaptive`` (the default) the launcher also times the
        arrays' own device alone now and then, and runs there when that is measured faster than
        the split (devices sharing cores or memory bandwidth do not add up as the model assumes).
        See :mod:`hetero.kernels.split.launch` for what can be split."""
        split: SplitKernel = SPLIT_KERNEL.call(self, devices, combine or {}, model, adaptive)
        return split

    def cost_key(self) -> str:
        """This kernel's key in the cost model (name and source fingerprint)."""
        return cost_model.kernel_key(self.name, self.fingerprint())

    # -- compilation ---------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A hash of this kernel's source and of every value its free names resolve to (device
        functions, constants, closure values, module globals), taken at the first compile."""
        return self.source_fingerprint().digest

    def source_fingerprint(self) -> Fingerprint:
        """:meth:`fingerprint` with the names whose values could not be keyed (then no cache
        record is read or written for this kernel: it is lowered afresh in every process)."""
        if self._fingerprint is None:
            self._fingerprint = source_fingerprint(self.py_func)
        return self._fingerprint

    def param_names(self) -> list[str]:
        if self._param_names is None:
            code = getattr(self.py_func, "__code__", None)
            if code is not None:  # the positional parameters, as the source lists them: no parse (a cache hit needs none)
                self._param_names = list(code.co_varnames[:code.co_argcount])
            else:
                self._param_names = [a.arg for a in frontend.function_source(self.py_func).tree.args.args]
        return self._param_names

    def declared(self) -> list[ParamType | None]:
        if self._declared is None:
            self._declared = frontend.declared_types(self.py_func)
        return self._declared

    def checked(self) -> bool:
        """Whether this kernel's specializations check every array index (``debug=True`` or
        ``HETERO_BOUNDS_CHECK=1`` when the specialization is made)."""
        return self.debug or get_config().bounds_check

    def _lowered(self, types: tuple[ParamType, ...], checked: bool = False) -> Any:
        with self._lock:
            if types not in self._ir:
                self._ir[types] = pipeline.lower(self.py_func, types)
            if not checked:
                return self._ir[types]
            key = (types, "bounds")
            if key not in self._ir:
                self._ir[key] = bounds.instrument(self._ir[types])[0]
            return self._ir[key]

    def bounds_sites(self, types: tuple[ParamType, ...]) -> tuple[bounds.Site, ...]:
        """The checked accesses of this kernel for ``types``, numbered as its checked IR numbers them."""
        return bounds.instrument(self._lowered(types))[1]

    def _parse(self, signature: str | Sequence[ParamType]) -> tuple[ParamType, ...]:
        if isinstance(signature, str):
            name, types = parse_signature(signature)
            if name is not None and name != self.name:
                raise CompileError(f"signature {signature!r} names {name!r}, but this kernel is {self.name!r}")
            return types
        return tuple(signature)

    def ir(self, signature: str | Sequence[ParamType]) -> str:
        """The optimised IR for ``signature`` (``"f32, f32[:], f32[:]"``), as text."""
        return format_function(self._lowered(self._parse(signature)))

    def source(self, device: str | Device | None = None, signature: str | Sequence[ParamType] | None = None) -> str:
        """The generated source for ``device``, for ``signature`` (default: the last one launched there)."""
        target_device = resolve_device(device)
        if signature is None:
            launched = [s for s in self._dispatch.values() if s.device is target_device]
            if not launched:
                raise CompileError(f"{self.name} has not run on {target_device.name} yet; pass a signature, "
                                   f"e.g. {self.name}.source({target_device.name!r}, 'f32, f32[:]')")
            return launched[-1].source.text
        target = target_device.runtime.kernel_target()
        if target is None:
            raise KernelLaunchError(f"{target_device.name} cannot run hetero kernels")
        return pipeline.emit(self._lowered(self._parse(signature), self.checked()), target).text

    def signature(self, types: Sequence[ParamType]) -> str:
        return format_signature(self.name, tuple(types))

    # -- the slow path of a launch ----------------------------------------------------------
    def arg_types(self, args: Sequence[Any]) -> tuple[ParamType, ...]:
        """The signature a launch with ``args`` compiles for (checked against the declared types)."""
        declared = self.declared()
        names = self.param_names()
        if len(args) != len(declared):
            raise KernelLaunchError(f"{self.name} takes {len(declared)} argument(s) ({', '.join(names)}), got {len(args)}")
        return tuple(arg_type(self.name, name, want, arg) for name, want, arg in zip(names, declared, args, strict=True))

    def _specialize(self, args: Sequence[Any], key: tuple[Any, ...]) -> Specialization:
        names = self.param_names()
        types = self.arg_types(args)
        devices: dict[str, str] = {}
        for name, arg in zip(names, args, strict=True):
            if isinstance(arg, Array):
                devices.setdefault(arg.device.name, name)
        if len(devices) > 1:
            where = ", ".join(f"{param} on {dev}" for dev, param in devices.items())
            raise KernelLaunchError(f"{self.name}: array arguments are on different devices ({where}); "
                                    "move them to one device with .to(…)")
        device = next((a.device for a in args if isinstance(a, Array)), None) or resolve_device(None)
        with self._lock:
            entry = self._dispatch.get(key)
            if entry is None:
                entry = Specialization(self, tuple(types), device)
                self._dispatch[key] = entry
                _note_specialized(self)
        return entry

    def prebuild(self, device: Device, on: Device) -> int:
        """Build for ``device`` every plain specialization this kernel has on ``on`` (what a move of
        the work from ``on`` to ``device`` would build at its first launches); returns how many
        were built. Used by the guard's standby, in the background."""
        with self._lock:
            wanted = [(key, entry.declared_types) for key, entry in self._dispatch.items()
                      if isinstance(entry, Specialization) and entry.device is on and _plain_key(key)]
        built = 0
        for key, types in wanted:
            moved = tuple((k[0], k[1], device) if type(k) is tuple else k for k in key)
            if moved in self._dispatch:
                continue
            entry = Specialization(self, types, device)  # compiles (outside the lock: it takes a while)
            try:
                entry.prepare()  # and what the runtime leaves to the first launch
            except Exception as exc:  # noqa: BLE001 -- then its first launch finishes the build, as without a standby
                log.info("%s: not prepared for %s ahead of a launch: %s", self.name, device.name, exc)
            with self._lock:
                if self._dispatch.setdefault(moved, entry) is entry:
                    built += 1
        return built

    def _specialize_views(self, args: Sequence[Any], key: tuple[Any, ...]) -> Specialization:
        """The launch for ``args`` some of which are views no kernel can take as they are: the
        kernel for contiguous arrays, run on copies (:class:`hetero.arraylib.copy.StagedSpecialization`)."""
        plain = tuple((k[0], -1 - k[1], k[2]) if type(k) is tuple and k[1] < 0 else k for k in key)
        inner = self._dispatch.get(plain) or self._specialize(args, plain)
        with self._lock:
            entry = self._dispatch.get(key)
            if entry is None:
                # Launched as a Specialization is (check_sizes, launch, launches): not a subclass.
                entry = cast(Specialization, STAGED_LAUNCH.call(self, inner, args))
                self._dispatch[key] = entry
        return entry


#: Kernels with a specialization, and a count that moves each time one gains another (the
#: guard's standby builds the new ones for its failover device).
_SPECIALIZED: weakref.WeakSet[Kernel] = weakref.WeakSet()
_generation = 0


def _note_specialized(kernel: Kernel) -> None:
    global _generation
    _SPECIALIZED.add(kernel)
    _generation += 1


def _plain_key(key: tuple[Any, ...]) -> bool:
    """A dispatch key of contiguous arrays (not a view's staged launch)."""
    return all(not (type(k) is tuple and k[1] < 0) for k in key)


def specialization_generation() -> int:
    """A number that changes whenever some kernel is compiled for new argument types or a new device."""
    return _generation


def specialized_kernels() -> list[Kernel]:
    """The kernels compiled at least once in this process (alive ones)."""
    return list(_SPECIALIZED)


def kernel(py_func: Callable[..., Any] | None = None, *, debug: bool = False) -> Any:
    """Make ``py_func`` a hetero kernel (see the module docstring): ``@hetero.kernel``, or
    ``@hetero.kernel(debug=True)`` for a kernel that checks every array index and raises
    :class:`~hetero.core.errors.KernelIndexError` for one out of bounds (as ``HETERO_BOUNDS_CHECK=1``
    does for every kernel)."""
    if py_func is None:
        return functools.partial(Kernel, debug=debug)
    return Kernel(py_func, debug=debug)


cost_model.add_sampling_listener(_on_sampling_change)


def _save_sampled_costs() -> None:
    """At exit, with ``HETERO_COST_SAMPLING`` on: merge this process's samples into the state dir."""
    try:
        cost_model.default_model().save()
    except OSError as exc:
        warnings.warn(f"hetero: could not save the cost model's launch samples ({exc}); check HETERO_STATE_DIR",
                      RuntimeWarning, stacklevel=1)


if get_config().cost_sampling and not cost_model.sampling_interval():  # HETERO_COST_SAMPLING=k
    cost_model.set_sampling(get_config().cost_sampling)
    atexit.register(_save_sampled_costs)
