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

The other way (a ``torch.device`` given where hetero takes a device) is
:mod:`hetero.core.torch_names`, which never imports torch.

On the ground floor, so the reports of every floor (the guard's, the heartbeat's, ``hetero-run``'s)
can name both devices. torch is imported only to answer for a GPU, never by ``import hetero``.
"""

from __future__ import annotations

import sys
from typing import Any

from hetero.core.device import Device
from hetero.core.torch_names import gpu_name, is_gpu, is_torch_device


def torch_device(device: Device | str | None = None) -> str:
    """torch's name for where torch state on ``device`` lives (the module docs give the rules):
    ``cuda:N``, ``xpu:N`` or ``cpu`` (``cpu`` too when this torch has no backend for the GPU).

    ``device``: a :class:`hetero.Device`, or a name/spec (``"oneapi:0"``, ``"cuda"``) looked up
    with :func:`hetero.device`; ``None`` is ``hetero.device()``. Imports torch to answer for a GPU;
    raises ``MissingDependencyError`` (an ImportError, with the extra to install) when torch is not installed."""
    found = _resolve(device)
    if not is_gpu(found):
        return "cpu"
    from hetero.core.optional import require

    torch = require("torch", extra="torch", feature=f"hetero.torch_device({getattr(found, 'name', str(found))!r})")
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


def _for_gpu(torch: Any, device: Any) -> str:
    version = getattr(torch, "version", None)
    if device.backend == "cuda":
        usable = bool(getattr(version, "cuda", None)) and not getattr(version, "hip", None) and torch.cuda.is_available()
    elif device.backend == "rocm":
        usable = bool(getattr(version, "hip", None)) and torch.cuda.is_available()
    else:
        xpu = getattr(torch, "xpu", None)  # torch >= 2.4 builds with Intel GPU support
        usable = xpu is not None and xpu.is_available()
    return gpu_name(device) if usable else "cpu"
