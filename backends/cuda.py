"""The ``cuda`` backend: NVIDIA GPUs through CuPy (CUDA build)."""

from __future__ import annotations

from hetero.plugin import BackendRegistration

from .cupy_runtime import CuPyBackend

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
