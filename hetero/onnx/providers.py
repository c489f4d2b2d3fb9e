"""Which ONNX Runtime execution provider a hetero device needs, and how to ask for it.

=========== ====================================== ===============================================
backend     provider                               install
=========== ====================================== ===============================================
cpu         CPUExecutionProvider                   onnxruntime (always there)
cuda        CUDAExecutionProvider (``device_id``)  onnxruntime-gpu (it replaces onnxruntime)
rocm        MIGraphXExecutionProvider, else        onnxruntime-migraphx / onnxruntime-rocm
            ROCMExecutionProvider (``device_id``)  (AMD's builds; they replace onnxruntime)
oneapi      OpenVINOExecutionProvider, on the      onnxruntime-ep-openvino (a plugin beside
            OpenVINO device of the hetero device's onnxruntime), or onnxruntime-openvino (a whole
            kind (CPU, GPU)                        build that replaces onnxruntime)
opencl      none: ONNX Runtime has no OpenCL       run the model on cpu, or on the GPU's vendor
            provider                               backend (cuda, rocm, oneapi)
=========== ====================================== ===============================================

``onnxruntime-ep-openvino`` is ONNX Runtime's plugin-EP form (ONNX Runtime >= 1.23): a shared
library that :func:`onnxruntime.register_execution_provider_library` loads into the stock
``onnxruntime`` package, so the CPU, CUDA or other build a project already uses stays. The older
``onnxruntime-openvino`` is a separate build of all of ONNX Runtime with OpenVINO compiled in: it
replaces ``onnxruntime`` (both own the ``onnxruntime`` module), so installing it beside another
build breaks one of them. hetero registers the plugin on first use when the package is installed,
and picks the OpenVINO EP device whose ``ov_device`` matches the hetero device's kind.

Same model, same answer: OpenVINO's CPU plugin computes in bfloat16 by default on CPUs that have
it (AVX-512 BF16, AMX), which moved this MLP's outputs by 1e-2 against 4e-7 on the CPU provider;
hetero asks OpenVINO for f32 (``INFERENCE_PRECISION_HINT``). Pass ``provider_options={"load_config":
...}`` to choose bf16 on purpose.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import threading
from typing import Any

from hetero.core.device import Device, Kind

log = logging.getLogger("hetero.onnx")

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
MIGRAPHX = "MIGraphXExecutionProvider"
ROCM = "ROCMExecutionProvider"
OPENVINO = "OpenVINOExecutionProvider"
#: The module of the OpenVINO plugin EP package (``pip install onnxruntime-ep-openvino``).
OPENVINO_PLUGIN = "onnxruntime_ep_openvino"

_REMEDY = {
    "cpu": "reinstall onnxruntime (pip install onnxruntime)",
    "cuda": "pip install onnxruntime-gpu (in place of onnxruntime; its CUDA and cuDNN major versions must match the "
            "driver's) and check that `python -c \"import onnxruntime; print(onnxruntime.get_available_providers())\"` "
            "lists CUDAExecutionProvider",
    "rocm": "install AMD's ONNX Runtime build with MIGraphX (pip install onnxruntime-migraphx, from repo.radeon.com) "
            "in place of onnxruntime",
    "oneapi": "pip install onnxruntime-ep-openvino (OpenVINO as a plugin beside onnxruntime)",
    "opencl": "ONNX Runtime has no OpenCL execution provider: run the model on 'cpu', or on the GPU through its "
              "vendor's backend (cuda, rocm, oneapi)",
}

_plugin_lock = threading.Lock()
_plugin_registered: bool | None = None  # None: not tried yet


@dataclasses.dataclass(frozen=True)
class ProviderChoice:
    """How to ask ONNX Runtime for a device: ``providers`` for ``InferenceSession(providers=...)``, or
    ``ep_devices`` (plugin EPs) for ``SessionOptions.add_provider_for_devices``; ``provider`` is the
    name ``get_providers()`` must list once the session exists."""

    provider: str
    providers: list[Any]
    ep_devices: list[Any]
    ep_options: dict[str, str]
    remedy: str


def remedy(backend: str) -> str:
    return _REMEDY.get(backend, f"no ONNX Runtime provider is known for backend {backend!r}")


def wanted(device: Device) -> str | None:
    """The provider a device's backend needs, whether or not it is installed (None: there is none)."""
    return {"cpu": CPU, "cuda": CUDA, "rocm": MIGRAPHX, "oneapi": OPENVINO}.get(device.backend)


def choose(ort: Any, device: Device) -> ProviderChoice | None:
    """The provider request for ``device``, or None when this ONNX Runtime cannot serve it (the
    provider is not installed or the backend has none)."""
    backend = device.backend
    available = set(ort.get_available_providers())
    fix = remedy(backend)
    if backend == "cpu":
        return ProviderChoice(CPU, [CPU], [], {}, fix)
    if backend == "cuda" and CUDA in available:
        return ProviderChoice(CUDA, [(CUDA, {"device_id": str(device.index)}), CPU], [], {}, fix)
    if backend == "rocm":
        for name in (MIGRAPHX, ROCM):
            if name in available:
                return ProviderChoice(name, [(name, {"device_id": str(device.index)}), CPU], [], {}, fix)
        return None
    if backend == "oneapi":
        return _openvino(ort, device, available, fix)
    return None


def _openvino(ort: Any, device: Device, available: set[str], fix: str) -> ProviderChoice | None:
    ov_device = "GPU" if device.kind in (Kind.GPU, Kind.ACCELERATOR) else "CPU"
    if _register_plugin(ort):
        matches = [d for d in ort.get_ep_devices()
                   if d.ep_name == OPENVINO and dict(d.ep_metadata).get("ov_device") == ov_device]
        if matches:  # f32: OpenVINO's CPU plugin otherwise computes in bf16 where the CPU has it
            return ProviderChoice(OPENVINO, [], matches[:1],
                                  {"load_config": json.dumps({ov_device: {"INFERENCE_PRECISION_HINT": "f32"}})}, fix)
        log.info("the OpenVINO plugin sees no %s device for %s", ov_device, device.name)
        return None
    if OPENVINO in available:  # the onnxruntime-openvino build: the provider is compiled in
        return ProviderChoice(OPENVINO, [(OPENVINO, {"device_type": ov_device, "precision": "FP32"}), CPU], [], {}, fix)
    return None


def _register_plugin(ort: Any) -> bool:
    """Register the OpenVINO plugin EP with ONNX Runtime once per process; False when the package
    is not installed or this ONNX Runtime has no plugin EPs (< 1.23)."""
    global _plugin_registered
    with _plugin_lock:
        if _plugin_registered is None:
            _plugin_registered = False
            try:
                plugin = importlib.import_module(OPENVINO_PLUGIN)
            except ImportError:
                return False
            if not hasattr(ort, "register_execution_provider_library"):
                log.warning("%s is installed but onnxruntime %s has no plugin execution providers (needs >= 1.23)",
                            OPENVINO_PLUGIN, getattr(ort, "__version__", "?"))
                return False
            name = plugin.get_ep_name()
            if not any(d.ep_name == name for d in ort.get_ep_devices()):  # someone may have registered it already
                ort.register_execution_provider_library(name, plugin.get_library_path())
            _plugin_registered = True
        return _plugin_registered


__all__ = ["CPU", "CUDA", "MIGRAPHX", "OPENVINO", "ROCM", "ProviderChoice", "choose", "remedy", "wanted"]
