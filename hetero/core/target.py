"""What kernel code is generated for: a dialect, an architecture and the features it has.

A backend describes each device as a ``Target``; the compiler emits for targets and
never sees devices. Vocabulary: imports nothing else of the project.
"""

from __future__ import annotations

import dataclasses

DIALECTS = ("opencl", "cpu", "cuda", "hip")
#: Features a kernel may need and a target may lack.
FEATURES = ("fp64", "fp16", "int64_atomics")
#: What a target may offer that no kernel needs but the compiler uses where present: ``subgroups32``,
#: sub-groups of 32 work-items the kernel can ask for (Intel's ``intel_reqd_sub_group_size(32)``)
#: with shuffles and ballots (``cl_khr_subgroup_shuffle``, ``cl_khr_subgroup_ballot``), on which
#: CUDA's warp votes run without going through work-group memory; ``subgroup_shuffles32``: its
#: shuffles are fast enough to take CUDA's shuffles too (not on Intel's CPU runtime).
CAPABILITIES = ("subgroups32", "subgroup_shuffles32")
#: The OpenCL extensions ``subgroups32`` needs, besides 32 among the device's sub-group sizes.
SUBGROUP_EXTENSIONS = ("cl_intel_required_subgroup_size", "cl_khr_subgroup_shuffle", "cl_khr_subgroup_ballot")


@dataclasses.dataclass(frozen=True)
class Target:
    """``dialect`` is one of :data:`DIALECTS`; ``arch`` names the instruction set or device
    (``sm_90``, ``gfx90a``, an OpenCL device's stable id, ``x86_64``); ``features`` is a
    subset of :data:`FEATURES` and :data:`CAPABILITIES`; ``toolchain`` is the compiler/driver version (a cache-key part)."""

    dialect: str
    arch: str
    features: frozenset[str] = frozenset()
    toolchain: str = ""

    def __str__(self) -> str:
        return f"{self.dialect}:{self.arch}"


def opencl_target(extensions: str, fp64: bool, arch: str, toolchain: str, subgroup_sizes: tuple[int, ...] = (),
                  subgroup_shuffles: bool = True) -> Target:
    """The Target of an OpenCL device, from its extension string, double support, the sub-group
    sizes a kernel may require of it (``CL_DEVICE_SUB_GROUP_SIZES_INTEL``) and whether CUDA's
    shuffles should use them: the one reading of OpenCL extensions, which the OpenCL runtime and
    the compiler's tests both use.

    ``int64_atomics`` needs ``cl_khr_int64_base_atomics`` only: the OpenCL C emitter uses its
    ``atom_add``/``atom_sub``/``atom_cmpxchg`` and builds 64-bit min/max from compare-and-swap,
    so it never needs ``cl_khr_int64_extended_atomics``."""
    present = set(extensions.split())
    features = {"fp64"} if fp64 else set()
    if "cl_khr_fp16" in present:
        features.add("fp16")
    if "cl_khr_int64_base_atomics" in present:
        features.add("int64_atomics")
    if 32 in subgroup_sizes and all(ext in present for ext in SUBGROUP_EXTENSIONS):
        features.add("subgroups32")
        if subgroup_shuffles:
            features.add("subgroup_shuffles32")
    return Target("opencl", arch, frozenset(features), toolchain)
