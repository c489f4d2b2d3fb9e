"""``@cuda.jit`` for ``hetero.compat.cuda``: Numba-CUDA kernels and device functions, lowered by
hetero's compiler for every device.

Launches keep Numba's meaning: ``kernel[blocks, threads](…)`` runs ``blocks × threads`` threads
in work-groups of ``threads`` (1-, 2- or 3-D; a block is a work-group exactly), ``[…, stream,
shared_mem]`` queue the launch on that stream (:mod:`hetero.compat.cuda.streams`), and
``kernel.forall(n)`` covers ``n`` threads. ``shared_mem`` sizes ``cuda.shared.array(0, dtype)``,
the launch's dynamic shared memory (a variant of the kernel is compiled per size). Arguments are
taken as Numba takes them:

* a :class:`~hetero.compat.cuda.arrays.DeviceNDArray` or :class:`hetero.Array` is passed as it is;
* a NumPy array is copied to the device before the launch and back after it (Numba's rule);
* a Python ``int`` is i64, ``float`` f64, ``complex`` c128, ``bool`` bool; NumPy scalars keep
  their type; complex arrays and scalars work as in Numba
  (:mod:`hetero.compiler.ir.complex_lowering`);
* a tuple or namedtuple (nested, or empty) is passed item by item: each scalar or array in it is
  an argument of its own, and the kernel reads them through the tuple's name
  (:mod:`hetero.compiler.frontend.tuple_args`; a variant of the kernel per layout of tuples);
* with a signature, scalars are converted to its types and arrays must match them.

The kernel runs on the device its arrays live on, else on ``hetero.device()``; the body is
typed by Numba's rules (:mod:`hetero.compiler.frontend.typing_numba`).
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from hetero.array.ndarray import Array
from hetero.compat.cuda import types as nbtypes
from hetero.compat.cuda.arrays import DeviceNDArray
from hetero.compat.cuda.streams import scope as stream_scope
from hetero.compat.cuda.tuple_launch import flattened_function
from hetero.compiler.frontend import tuple_args
from hetero.core.device import Device
from hetero.core.errors import CompileError, KernelLaunchError
from hetero.kernels.kernel import Kernel
from hetero.language import DeviceFunction, TupleLayout, set_dynamic_shared, set_tuple_args, set_typing
from hetero.core.types import ArrayType, ScalarType

#: Threads per block ``forall`` launches with (Numba asks the driver for an occupancy-based
#: size; hetero uses one size every device takes).
FORALL_BLOCK = 128
_IGNORED_OPTIONS = {"inline", "fastmath", "lineinfo", "cache", "opt", "max_registers", "lto", "boundscheck",
                    "forceinline"}


def jit(func_or_sig: Any = None, device: bool = False, link: Sequence[str] = (), debug: bool = False,
        **options: Any) -> Any:
    """Numba's ``cuda.jit``: ``@cuda.jit``, ``@cuda.jit("void(float32[:])")``, ``@cuda.jit(device=True)``.
    ``debug=True`` checks every array index of the kernel, as Numba's does: an index out of bounds
    raises :class:`~hetero.core.errors.KernelIndexError` (an ``IndexError``) after the launch, naming
    the kernel, the array, the index and the line (a device function is checked in its kernel)."""
    unknown = set(options) - _IGNORED_OPTIONS
    if unknown:
        raise TypeError(f"cuda.jit() got unsupported option(s) {', '.join(sorted(unknown))}")
    if link:
        raise CompileError("cuda.jit(link=…): hetero compiles CUDA C through its own front end; declare each foreign "
                           "function with cuda.declare_device(name, sig, link=file) instead")

    def wrap(py_func: Callable[..., Any], signature: Any = None) -> Any:
        if device:
            return DeviceFunction(py_func, typing="numba")
        return Dispatcher(py_func, signature, debug=debug)

    if callable(func_or_sig) and not isinstance(func_or_sig, (str, nbtypes.NumbaType, nbtypes.Signature)):
        return wrap(func_or_sig)
    return functools.partial(wrap, signature=func_or_sig)


class Dispatcher:
    """A ``@cuda.jit`` kernel: launch with ``kernel[blocks, threads](…)`` or ``kernel.forall(n)(…)``."""

    def __init__(self, py_func: Callable[..., Any], signature: Any = None, debug: bool = False) -> None:
        set_typing(py_func, "numba")
        self.py_func = py_func
        self.debug = debug
        self.kernel = Kernel(py_func, debug=debug)
        functools.update_wrapper(self, py_func)  # type: ignore[arg-type]
        self.signature = nbtypes.parse(signature, py_func.__name__) if signature is not None else None
        self._declared = self.signature.hetero_types(py_func.__name__) if self.signature is not None else None
        if self._declared is not None and len(self._declared) != len(self.kernel.param_names()):
            raise CompileError(f"{py_func.__name__}: the signature has {len(self._declared)} argument(s), the "
                               f"function {len(self.kernel.param_names())}")
        self._variants: dict[tuple[int, TupleLayout], Kernel] = {}  # by shared memory bytes and tuple layout
        #: Numba's per-signature compiled kernels, keyed by the signature given to ``cuda.jit``.
        self.overloads: dict[Any, Overload] = {}
        if signature is not None:
            overload = Overload(self)
            self.overloads[self.signature] = overload
            try:
                self.overloads[signature] = overload
            except TypeError:  # an unhashable spelling (a list): reachable through the parsed signature
                pass

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda kernel {self.py_func.__qualname__}>"

    def kernel_for(self, shared_mem: int, layout: TupleLayout = ()) -> Kernel:
        """The kernel compiled for ``shared_mem`` bytes of dynamic shared memory (``cuda.shared.array(0,
        dtype)`` takes that size) and for tuple arguments of ``layout``: a variant of its own per size and
        layout, keyed apart in every cache."""
        if not shared_mem and not layout:
            return self.kernel
        variant = self._variants.get((shared_mem, layout))
        if variant is None:
            f = self.py_func
            if layout:
                names = self.kernel.param_names()
                copy = flattened_function(f, tuple_args.parameters(names, layout))
            else:
                copy = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
                copy.__dict__.update(f.__dict__)
                copy.__qualname__ = f.__qualname__
            if shared_mem:
                set_dynamic_shared(copy, shared_mem)
            if layout:
                set_tuple_args(copy, layout)
            variant = self._variants.setdefault((shared_mem, layout), Kernel(copy, debug=self.debug))
        return variant

    def __getitem__(self, config: Any) -> LaunchConfig:
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise KernelLaunchError(f"{self.py_func.__name__}[…] takes [blocks, threads] or [blocks, threads, stream, "
                                    f"shared_mem], got {config!r}")
        return LaunchConfig(self, launch_dims(config[0], "blocks"), launch_dims(config[1], "threads"),
                            config[3] if len(config) > 3 else 0, config[2] if len(config) > 2 else 0)

    def forall(self, ntasks: int, tpb: int = 0, stream: Any = 0, sharedmem: int = 0) -> LaunchConfig:
        """A launch covering ``ntasks`` threads (``tpb`` per block; the kernel must test its index)."""
        if int(ntasks) < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks} ({self.py_func.__name__}.forall)")
        threads = tpb or min(FORALL_BLOCK, max(1, int(ntasks)))
        return LaunchConfig(self, (max(1, math.ceil(int(ntasks) / threads)),), (threads,), sharedmem, stream)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise KernelLaunchError(f"launch {self.py_func.__name__} with a configuration: "
                                f"{self.py_func.__name__}[blocks, threads](…) or .forall(n)(…)")

    def source(self, device: str | Device | None = None) -> str:
        """The code generated for ``device`` at its last launch there."""
        return self.kernel.source(device)

    # -- what the kernel compiles to (hetero.compat.cuda.inspection) ------------------------------
    def inspect_asm(self, signature: Any = None) -> str | dict[Any, str]:
        """The PTX hetero's CUDA path (NVRTC) makes of this kernel: for ``signature``, or
        ``{signature: PTX}`` for each signature it has (see :mod:`hetero.compat.cuda.inspection`)."""
        from hetero.compat.cuda import inspection

        return inspection.asm(self, signature)

    def inspect_lto_ptx(self, signature: Any = None) -> str | dict[Any, str]:
        """The PTX of :meth:`inspect_asm` (hetero links no LTO-IR: the PTX is the whole kernel)."""
        return self.inspect_asm(signature)

    def inspect_types(self, signature: Any = None, file: Any = None, **kwargs: Any) -> None:
        """Print hetero's typed IR of each signature (the types it inferred for every value) to ``file``."""
        import sys

        from hetero.compat.cuda import inspection

        print(inspection.typed_ir(self, signature), file=file or sys.stdout)

    def inspect_llvm(self, signature: Any = None) -> Any:
        """Refused: hetero compiles through CUDA C++ and NVRTC, not NVVM, so there is no LLVM IR."""
        from hetero.compat.cuda import inspection

        raise inspection.refuse(self, "inspect_llvm", "hetero compiles kernels through CUDA C++ and NVRTC, not NVVM, "
                                "so it makes no LLVM IR", ["inspect_asm() for the PTX", "source(device)"])

    def inspect_sass(self, signature: Any = None) -> Any:
        """Refused: SASS needs cuobjdump on a cubin, which hetero does not run."""
        from hetero.compat.cuda import inspection

        raise inspection.refuse(self, "inspect_sass", "SASS comes from cuobjdump on a cubin, which hetero does not run",
                                ["inspect_asm() for the PTX"])


class Overload:
    """What Numba's ``kernel.overloads[signature]`` answers about one compiled signature."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def max_cooperative_grid_blocks(self, blockdim: int | tuple[int, ...]) -> int:
        """The most blocks a launch of this kernel with grid syncs may have. hetero runs grid syncs
        as phases of launches (:mod:`hetero.compiler.ir.grid_sync`), which need no block resident at
        once, so the limit is the launch's own: 2**31 - 1 threads."""
        threads = math.prod(launch_dims(blockdim, "blockdim"))
        return (2**31 - 1) // threads


def launch_dims(value: Any, what: str) -> tuple[int, ...]:
    """A grid or block size: an int or a tuple of 1 to 3 positive ints (a KernelLaunchError else)."""
    parts = value if isinstance(value, tuple) else (value,)
    if not 1 <= len(parts) <= 3 or not all(isinstance(p, (int, np.integer)) and p >= 1 for p in parts):
        raise KernelLaunchError(f"{what} must be a positive int or a tuple of 1 to 3 of them, got {value!r}")
    return tuple(int(p) for p in parts)


class LaunchConfig:
    """A kernel with its grid: call it with the kernel's arguments."""

    def __init__(self, dispatcher: Dispatcher, blocks: tuple[int, ...], threads: tuple[int, ...], shared_mem: Any,
                 stream: Any = 0) -> None:
        if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise KernelLaunchError(f"{dispatcher.py_func.__name__}: shared_mem is a number of bytes, got {shared_mem!r}")
        self.shared_mem = int(shared_mem)
        self.stream = stream
        stream_scope(stream)  # a TypeError now, at the launch's configuration, for what is not a stream
        ndim = max(len(blocks), len(threads))
        blocks = blocks + (1,) * (ndim - len(blocks))
        threads = threads + (1,) * (ndim - len(threads))
        self.dispatcher = dispatcher
        self.local_size = threads
        self.global_size = tuple(b * t for b, t in zip(blocks, threads, strict=True))

    def __call__(self, *args: Any) -> None:
        with stream_scope(self.stream):  # inside: the stream's device is hetero.device(), its queue the launch's
            self._launch(args)

    def _launch(self, args: tuple[Any, ...]) -> None:
        dispatcher = self.dispatcher
        declared = dispatcher._declared
        flat = [leaf for a in args for leaf in (tuple_args.leaves(a) if isinstance(a, tuple) else [a])]
        device = next((a.device for a in flat if isinstance(a, (DeviceNDArray, Array))), None) or hetero.device()
        values: list[Any] = []
        copies: list[tuple[np.ndarray, Array]] = []
        layout: list[tuple[str, Any]] = []
        names = dispatcher.kernel.param_names()
        for position, arg in enumerate(args):
            want = declared[position] if declared is not None and position < len(declared) else None
            if isinstance(arg, tuple):  # passed item by item (hetero.compiler.frontend.tuple_args)
                if want is not None or position >= len(names):
                    raise TypeError(f"{dispatcher.py_func.__name__}: argument {position} is a tuple; tuple arguments "
                                    "are taken without a signature (leave the signature out of cuda.jit)")
                layout.append((names[position], tuple_args.layout_of(arg)))
                values.extend(_argument(dispatcher.py_func.__name__, position, item, None, device, copies)
                              for item in tuple_args.leaves(arg))
                continue
            values.append(_argument(dispatcher.py_func.__name__, position, arg, want, device, copies))
        if layout and len(args) != len(names):
            raise KernelLaunchError(f"{dispatcher.py_func.__name__} takes {len(names)} argument(s) ({', '.join(names)}), "
                                    f"got {len(args)}")
        dispatcher.kernel_for(self.shared_mem, tuple(layout))[self.global_size, self.local_size](*values)
        for host, staged in copies:  # Numba copies NumPy arguments back after the launch
            if host.flags.writeable:
                np.copyto(host, staged.numpy())


def _argument(name: str, position: int, arg: Any, want: Any, device: Device, copies: list[tuple[np.ndarray, Array]]) -> Any:
    if isinstance(arg, DeviceNDArray):
        arg = arg.array
    elif isinstance(arg, np.ndarray):
        # (np.ascontiguousarray would make a 0-d array 1-d: a kernel indexes it r[()])
        staged = hetero.asarray(arg if arg.flags.c_contiguous else arg.copy(order="C"), device=device)
        copies.append((arg, staged))
        arg = staged
    if isinstance(arg, Array):
        if isinstance(want, ArrayType) and (np.dtype(arg.dtype) != want.dtype.dtype or arg.ndim != want.ndim):
            raise TypeError(f"{name}: argument {position} is {arg.dtype}[{arg.ndim}d], the signature says {want}")
        return arg
    if isinstance(want, ScalarType):
        return want.dtype.type(arg)
    if isinstance(arg, bool):
        return np.bool_(arg)
    if isinstance(arg, int):
        return np.int64(arg)
    if isinstance(arg, float):
        return np.float64(arg)
    if isinstance(arg, complex):
        return np.complex128(arg)
    if isinstance(arg, np.generic):
        return arg
    raise TypeError(f"{name}: argument {position} is a {type(arg).__name__}; kernels take arrays (NumPy or device "
                    "arrays) and int, float, complex or bool scalars")
