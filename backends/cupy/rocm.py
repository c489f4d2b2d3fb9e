"""The ``rocm`` backend: AMD GPUs through CuPy's ROCm build (see :mod:`.cupy_runtime`).

HIP errors carry hipError_t names (:mod:`.hip_errors`); health comes from amdsmi or sysfs
(:mod:`.rocm_health`). torch's ROCm builds call these GPUs ``cuda``: ``Array.torch()`` and
``hetero.asarray(tensor)`` meet them through DLPack (device type kDLROCM).
"""

from __future__ import annotations

from hetero.core.plugin import BackendRegistration

from hetero.backends.cupy.runtime import CuPyBackend

INSTALL_HINT = "pip install 'hetero[rocm]' (CuPy's ROCm build) and the ROCm driver"


def open_backend() -> CuPyBackend:
    return CuPyBackend("rocm", INSTALL_HINT)


registration = BackendRegistration(
    name="rocm",
    factory=open_backend,
    priority=90,
    description="AMD GPUs through CuPy's ROCm build (HIP runtime, hipRTC)",
    install_hint=INSTALL_HINT,
)
