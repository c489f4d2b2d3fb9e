"""Emitters: one per dialect (OpenCL C, CUDA C, HIP, the CPU's Python/Numba), each turning typed IR
into source for a target (:mod:`.registry` picks one). The C family shares :mod:`.c` and the
dialect strategies :mod:`.c_dialect`, :mod:`.c_cuda`, :mod:`.c_opencl`.

May import: the ground floor and the IR room.
"""
