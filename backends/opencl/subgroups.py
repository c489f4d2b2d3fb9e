"""The sub-group sizes an OpenCL kernel may require of a device (``CL_DEVICE_SUB_GROUP_SIZES_INTEL``).

PyOpenCL does not know this query (``cl_intel_required_subgroup_size``), so it goes to
``clGetDeviceInfo`` through ctypes, in the ICD loader PyOpenCL itself loaded: the device
handle is PyOpenCL's. A device without the extension, or a query that fails, has none.
"""

from __future__ import annotations

import ctypes
import glob
import os
from types import ModuleType
from typing import Any

CL_DEVICE_SUB_GROUP_SIZES_INTEL = 0x4108
EXTENSION = "cl_intel_required_subgroup_size"


def _loader(cl: ModuleType) -> ctypes.CDLL | None:
    bundled = sorted(glob.glob(os.path.join(os.path.dirname(cl.__file__ or ""), ".libs", "libOpenCL*.so*")))
    for name in [*bundled, "libOpenCL.so.1"]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def subgroup_sizes(cl: ModuleType, cl_device: Any) -> tuple[int, ...]:
    """The sizes ``intel_reqd_sub_group_size`` accepts on ``cl_device`` (``()`` where it has none)."""
    if EXTENSION not in str(cl_device.extensions).split():
        return ()
    lib = _loader(cl)
    if lib is None:
        return ()
    get_info = lib.clGetDeviceInfo
    get_info.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    get_info.restype = ctypes.c_int
    handle = ctypes.c_void_p(int(cl_device.int_ptr))
    size = ctypes.c_size_t(0)
    if get_info(handle, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, None, ctypes.byref(size)) != 0 or size.value == 0:
        return ()
    count = size.value // ctypes.sizeof(ctypes.c_size_t)
    values = (ctypes.c_size_t * count)()
    if get_info(handle, CL_DEVICE_SUB_GROUP_SIZES_INTEL, size, values, None) != 0:
        return ()
    return tuple(int(v) for v in values)
