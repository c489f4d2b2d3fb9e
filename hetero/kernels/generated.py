"""Kernels the array library generates as IR (not from Python source), compiled for one device
and launched as a ``@hetero.kernel`` is, so launch counters, fault injection and the device's queue
order see them: :class:`GeneratedSpecialization`, and :class:`SpecializationCache` for a family of
them (one per hashable description and device).

The IR comes from :mod:`hetero.compiler.array_kernels`; the array library in :mod:`hetero.array`
and the CUDA C front end's raw kernels (:mod:`hetero.compat.cuda.raw`) launch through here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from hetero.compiler.build import pipeline
from hetero.compiler.ir import nodes as ir
from hetero.core.device import Device
from hetero.kernels.kernel import Specialization, device_target
from hetero.kernels.launch_args import shares_memory

S = TypeVar("S")  # a kernel family's spec: a hashable description its IR is built from
_unaliased_lock = threading.RLock()


class GeneratedSpecialization(Specialization):
    """A kernel made as IR (not from Python source) compiled for one device, launched like any kernel."""

    def __init__(self, function: ir.Function, device: Device, restrict: bool = True) -> None:
        self.kernel = None  # type: ignore[assignment]  # no @hetero.kernel behind it: nothing here reads it
        self.function = function
        target = device_target(function.name, device)
        compiled = pipeline.compile_function(function, device.runtime, target, restrict=restrict)
        types = tuple(param.type for param in function.params)
        self._setup(function.name, [param.name for param in function.params], types, device, compiled, target, restrict)

    def _ir(self) -> ir.Function:
        return self.function

    def unaliased(self) -> Specialization:
        if self._unaliased is None:
            with _unaliased_lock:
                if self._unaliased is None:
                    self._unaliased = GeneratedSpecialization(self.function, self.device, restrict=False)
        return self._unaliased

    def run(self, global_size: tuple[int, ...], args: Sequence[Any], local_size: tuple[int, ...] | None = None) -> None:
        """One launch, as :class:`hetero.kernels.kernel.Launcher` makes it (``local_size``: the work-group
        size a kernel with barriers was built for; None lets the runtime choose)."""
        entry: Specialization = self
        if self.alias_positions and shares_memory(args, self.alias_positions):
            entry = self.unaliased()
        entry.check_sizes(global_size, local_size)
        entry.launch(global_size, local_size, args)
        next(entry.launches)


class SpecializationCache(Generic[S]):
    """Built kernels of one family, one per (spec, device): ``get`` builds a spec's IR with
    ``build`` and compiles it the first time, once even when threads ask together."""

    def __init__(self, build: Callable[[S], ir.Function]) -> None:
        self._build = build
        self._lock = threading.RLock()
        self._entries: dict[tuple[S, Device], GeneratedSpecialization] = {}

    def get(self, spec: S, device: Device) -> GeneratedSpecialization:
        key = (spec, device)
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    entry = self._entries[key] = GeneratedSpecialization(self._build(spec), device)
        return entry
