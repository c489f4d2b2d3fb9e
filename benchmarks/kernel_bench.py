"""What the kernel benchmarks share: the devices they run on, and the reference side —
hand-written OpenCL C built with PyOpenCL on a hetero device's own context and launched
on its own queue, so both sides use the same device, runtime and memory.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import hetero

# The kernel benchmarks' default devices: the Intel OpenCL CPU runtime (the goals), the
# host through Numba, and PoCL (for information).
DEFAULT_DEVICES = ("oneapi:0", "cpu", "opencl:0")


def choose_devices(names: Sequence[str]) -> tuple[list[hetero.Device], dict[str, str]]:
    """The devices among ``names`` that this machine has, and why each missing one is missing."""
    found: list[hetero.Device] = []
    missing: dict[str, str] = {}
    for name in names:
        try:
            found.append(hetero.device(name))
        except hetero.HeteroError as exc:
            missing[name] = str(exc).splitlines()[0]
    return found, missing


def describe(device: hetero.Device) -> dict[str, Any]:
    return {"name": device.name, "backend": device.backend, "kind": str(device.kind), "model": device.model,
            "driver_version": device.driver_version, "compute_units": device.compute_units}


def is_opencl(device: hetero.Device) -> bool:
    from hetero.backends.opencl.runtime import OpenCLRuntime  # here: isort files hetero.backends as third-party

    return isinstance(device.runtime, OpenCLRuntime)


def opencl(device: hetero.Device) -> tuple[Any, Any, Any]:
    """(pyopencl, context, queue) of an OpenCL ``device``: hetero's own, opened if need be."""
    runtime: Any = device.runtime
    if runtime.queue is None:
        hetero.empty(1, hetero.uint8, device=device)  # the first allocation opens the context and queue
    return runtime.cl, runtime.context, runtime.queue


def cl_buffer(array: hetero.Array) -> Any:
    """The ``cl.Buffer`` of an array on an OpenCL device, for a hand-written PyOpenCL call (the
    array's buffer is the pool's handle around it; keep the array alive while it is used)."""
    return array.buffer.mem


def build_opencl(device: hetero.Device, source: str, options: Sequence[str] = ()) -> Any:
    """OpenCL C ``source`` built for ``device`` with PyOpenCL: a ``pyopencl.Program``. Keep it
    alive while its kernels (``cl.Kernel(program, name)``) are in use."""
    cl, context, _ = opencl(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)  # the Intel compiler chatters on success
        return cl.Program(context, source).build(options=list(options))


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work is the main source of noise."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    return bool(got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol))


def print_footer(missing: dict[str, str], load_before: object, path: object) -> None:
    """The closing lines every kernel benchmark prints: what was not measured, load, results file."""
    for name, reason in missing.items():
        print(f"not measured: {name}: {reason}")
    print(f"load average at start {load_before}, results: {path}")
