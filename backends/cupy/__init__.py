"""The CuPy stack: the ``cuda`` backend (NVIDIA, :mod:`.cuda`) and the ``rocm`` backend (AMD,
:mod:`.rocm`), one runtime for both builds of CuPy (:mod:`.runtime`) with GPU discovery, pinned
staging, NVRTC, the CUDA/HIP error tables and health: NVML with its Xid listener, amdsmi or sysfs.

May import: the ground floor (:mod:`hetero.core`); CuPy, NVML and amdsmi only inside a
registration's factory, never at import.
"""
