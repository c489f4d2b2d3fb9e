"""The ``cuda`` backend: NVIDIA GPUs through CuPy (CUDA build) (see :mod:`.cupy_runtime`).

Kernels compile at run time with NVRTC (:mod:`.nvrtc_compile`) or load from bundles; errors carry
cudaError_t/CUresult names (:mod:`.cuda_errors`); health and Xid events come from NVML
(:mod:`.nvml_health`, :mod:`.xid_listener`). Checked on a GPU by ``benchmarks/gpu_check.py``.
"""

from __future__ import annotations

from hetero.core.plugin import BackendRegistration

from hetero.backends.cupy.runtime import CuPyBackend

INSTALL_HINT = "pip install 'hetero[cuda]' (CuPy for CUDA 13; 'hetero[cuda12]' for CUDA 12) and the NVIDIA driver"


def open_backend() -> CuPyBackend:
    return CuPyBackend("cuda", INSTALL_HINT)


registration = BackendRegistration(
    name="cuda",
    factory=open_backend,
    priority=100,
    description="NVIDIA GPUs through CuPy (CUDA runtime, NVRTC)",
    install_hint=INSTALL_HINT,
)
