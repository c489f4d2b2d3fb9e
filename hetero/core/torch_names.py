"""torch's names for hetero's devices, and the hetero device a ``torch.device`` names, without torch.

A ``torch.device`` given where hetero takes a device (``hetero.device(torch.device("cuda", 0))``,
``device=`` of array creation, ``.to``) names the hetero device :func:`hetero.torch_device` pairs
with it (:mod:`hetero.core.torch_devices` gives those rules): ``cpu`` -> ``cpu``; ``cuda:N`` ->
``cuda:N``, or ``rocm:N`` where this torch is a ROCm build (which names AMD GPUs ``cuda``);
``xpu:N`` -> the Intel GPU of ``oneapi`` that is torch's ``xpu:N``. A torch device without a hetero
counterpart (``meta``, ``mps``) is a :class:`~hetero.DeviceNotFoundError`.

A ``torch.device`` is recognised by its type's module and name and read through ``.type`` and
``.index``: this module never imports torch (the registry, which every floor imports, uses it;
the scheduler must stay free of vendor libraries).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.errors import DeviceNotFoundError


def is_gpu(device: Any) -> bool:
    """Whether torch could run on ``device`` as a GPU: a GPU kind of a backend torch has (CUDA, ROCm,
    oneAPI); then its torch device depends on this torch's build."""
    # A CPU-kind device of any backend (cpu, oneAPI's CPU runtime, PoCL) uses host memory, and
    # torch has no OpenCL backend: torch state for those is on the CPU whatever torch is built with.
    return str(device.kind) != "cpu" and device.backend in ("cuda", "rocm", "oneapi")


def gpu_name(device: Any) -> str:
    """torch's name for a GPU of cuda, rocm or oneapi, where this torch has its backend."""
    return f"{'xpu' if device.backend == 'oneapi' else 'cuda'}:{device.index}"


def is_torch_device(spec: object) -> bool:
    """Whether ``spec`` is a ``torch.device`` (told by its type, never importing torch)."""
    kind = type(spec)
    return kind.__module__ == "torch" and kind.__name__ == "device"


def hetero_spec(spec: Any, oneapi_devices: Callable[[], Sequence[Any]]) -> str:
    """The hetero device spec a ``torch.device`` names (the module docs give the rules).
    ``oneapi_devices`` lists the ``oneapi`` backend's devices, where torch's ``xpu`` GPUs are
    found (called for an ``xpu`` device only)."""
    kind, index = str(spec.type), spec.index
    if kind == "cpu":
        return "cpu"
    if kind == "cuda":  # a ROCm build of torch names AMD GPUs cuda (torch is loaded: the device came from it)
        torch = sys.modules.get("torch")
        backend = "rocm" if getattr(getattr(torch, "version", None), "hip", None) else "cuda"
        return backend if index is None else f"{backend}:{index}"
    if kind == "xpu":
        gpus = [d for d in oneapi_devices() if is_gpu(d)]
        wanted = gpus[:1] if index is None else [d for d in gpus if gpu_name(d) == f"xpu:{index}"]
        if not wanted:
            named = "xpu" if index is None else f"xpu:{index}"
            raise DeviceNotFoundError(named, [d.name for d in gpus], (
                f"torch's {named} is an Intel GPU, which hetero lists as a oneapi GPU (torch's xpu:N is oneapi:N); "
                + ("hetero sees none here" if not gpus else "that one is not among them")))
        return str(wanted[0].name)
    raise DeviceNotFoundError(str(spec), ["cpu", "cuda", "xpu"],
                              f"torch device '{kind}' has no hetero counterpart; hetero takes torch's cpu, cuda and xpu")
