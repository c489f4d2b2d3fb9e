"""Where torch really runs for a hetero device: ``hetero.torch_device(device)``.

hetero runs on more devices than torch has backends for, so the two can differ: an Intel GPU
(``oneapi:0``) is torch's ``xpu:0`` only where this torch has XPU, and a PoCL or other OpenCL
device is never a torch device at all. The rules, each checked against the torch in this process:

- ``cuda:N`` -> ``cuda:N`` where torch is a CUDA build with a usable GPU (``torch.version.cuda``,
  ``torch.cuda.is_available()``), else ``cpu``;
- ``rocm:N`` -> ``cuda:N`` (ROCm builds of torch name AMD GPUs ``cuda``) where torch is a ROCm
  build with a usable GPU (``torch.version.hip``, ``torch.cuda.is_available()``), else ``cpu``;
- an Intel GPU of ``oneapi`` -> ``xpu:N`` where ``torch.xpu.is_available()``, else ``cpu``;
- everything else (``cpu``, oneAPI's CPU devices, PoCL and other OpenCL devices) -> ``cpu``.

The other way, :func:`hetero_spec`: a ``torch.device`` given where hetero takes a device
(``hetero.device(torch.device("cuda", 0))``, ``device=`` of array creation, ``.to``) names the hetero
device those rules pair with it: ``cpu`` -> ``cpu``; ``cuda:N`` -> ``cuda:N``, or ``rocm:N`` where this
torch is a ROCm build; ``xpu:N`` -> the Intel GPU of ``oneapi`` that is torch's ``xpu:N``. A torch
device without a hetero counterpart (``meta``, ``mps``) is a :class:`~hetero.DeviceNotFoundError`.

On the ground floor, so the reports of every floor (the guard's, the heartbeat's, ``hetero-run``'s)
can name both devices. torch is imported only to answer for a GPU, never by ``import hetero``, and
never to read a ``torch.device`` (recognised by its type's module and name).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.device import Device
from hetero.core.errors import DeviceNotFoundError


def torch_device(device: Device | str | None = None) -> str:
    """torch's name for where torch state on ``device`` lives (the module docs give the rules):
    ``cuda:N``, ``xpu:N`` or ``cpu`` (``cpu`` too when this torch has no backend for the GPU).

    ``device``: a :class:`hetero.Device`, or a name/spec (``"oneapi:0"``, ``"cuda"``) looked up
    with :func:`hetero.device`; ``None`` is ``hetero.device()``. Imports torch to answer for a GPU;
    raises ``ImportError`` (with the remedy) when torch is not installed."""
    found = _resolve(device)
    if not is_gpu(found):
        return "cpu"
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"hetero.torch_device({found.name!r}): torch is not installed; "
                          "pip install 'hetero[torch]' (or torch itself)") from exc
    return _for_gpu(torch, found)


def loaded_torch_device(device: Any) -> str | None:
    """What a report says torch's device is for ``device`` (a Device, or anything with ``backend``,
    ``kind`` and ``index``): as :func:`torch_device`, but never importing torch nor looking a device
    up: ``None`` for a GPU while this process has not imported torch (no torch
    state exists then)."""
    if not is_gpu(device):
        return "cpu"
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda"):  # absent, or still being imported
        return None
    return _for_gpu(torch, device)


def _resolve(device: Device | str | None) -> Any:
    if device is None or isinstance(device, str) or is_torch_device(device):
        from hetero.core.registry import device as find_device

        return find_device(device)
    return device


def is_gpu(device: Any) -> bool:
    """Whether torch could run on ``device`` as a GPU: a GPU kind of a backend torch has (CUDA, ROCm,
    oneAPI); then its torch device depends on this torch's build."""
    # A CPU-kind device of any backend (cpu, oneAPI's CPU runtime, PoCL) uses host memory, and
    # torch has no OpenCL backend: torch state for those is on the CPU whatever torch is built with.
    return str(device.kind) != "cpu" and device.backend in ("cuda", "rocm", "oneapi")


def _for_gpu(torch: Any, device: Any) -> str:
    version = getattr(torch, "version", None)
    if device.backend == "cuda":
        usable = bool(getattr(version, "cuda", None)) and not getattr(version, "hip", None) and torch.cuda.is_available()
    elif device.backend == "rocm":
        usable = bool(getattr(version, "hip", None)) and torch.cuda.is_available()
    else:
        xpu = getattr(torch, "xpu", None)  # torch >= 2.4 builds with Intel GPU support
        usable = xpu is not None and xpu.is_available()
    return _gpu_name(device) if usable else "cpu"


def _gpu_name(device: Any) -> str:
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
        wanted = gpus[:1] if index is None else [d for d in gpus if _gpu_name(d) == f"xpu:{index}"]
        if not wanted:
            named = "xpu" if index is None else f"xpu:{index}"
            raise DeviceNotFoundError(named, [d.name for d in gpus], (
                f"torch's {named} is an Intel GPU, which hetero lists as a oneapi GPU (torch's xpu:N is oneapi:N); "
                + ("hetero sees none here" if not gpus else "that one is not among them")))
        return str(wanted[0].name)
    raise DeviceNotFoundError(str(spec), ["cpu", "cuda", "xpu"],
                              f"torch device '{kind}' has no hetero counterpart; hetero takes torch's cpu, cuda and xpu")
