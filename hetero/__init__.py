"""hetero: run AI code unchanged on NVIDIA, AMD, Intel and CPU devices.

``import hetero`` loads no vendor library: backends are found through the
``hetero.backends`` entry-point group and opened when devices are first listed.

This module is above every floor (docs/architecture.md): it re-exports the public names of the
rooms below and names each hook's provider, so it may import any room.

    >>> import hetero
    >>> dev = hetero.device()                 # best healthy device, GPUs first
    >>> x = hetero.arange(10, device=dev)
    >>> x.to("cpu").numpy()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero.core import dtypes
from hetero._version import __version__
from hetero.array.ndarray import Array, arange, asarray, copyto, empty, from_dlpack, full, ones, zeros
from hetero.array.views import broadcast_to, expand_dims, flip, moveaxis, permute_dims, reshape, squeeze
from hetero.array.promotion import ScalarOverflowError, can_cast, result_type
from hetero.core.config import Config, get_config, reload_config
from hetero.core.device import Device, DeviceInfo, Health, HealthState, Kind
from hetero.core.dtypes import (
    bool_, complex64, complex128, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
from hetero.core.errors import (
    CompileError, ContextCorruptedError, DeviceDegradedError, DeviceLostError, KernelBuildError, QuotaExceeded,
    RecoveryFailedError, KernelLaunchError, ArrayError, BackendUnavailableError, BundleBuildError, BundleError,
    ConfigError, DeviceError, DeviceNotFoundError, DeviceOutOfMemoryError, DeviceQuarantinedError, HeteroError,
    PluginError, ToolchainNotFoundError, UnsupportedDtypeError, DeviceSpecError, MissingDependencyError,
)
from hetero.core.notices import HeteroWarning, PerformanceWarning
from hetero import math
from hetero.language import (
    DeviceFunction, atomic_add, atomic_cas, atomic_max, atomic_min, atomic_sub, barrier, func, global_id, global_size,
    group_id, local_array, local_id, local_size, num_groups,
)
from hetero.core.types import ArrayType, ScalarType, c64, c128, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from hetero.core.registry import BackendStatus, backend_statuses, devices, opened_devices, register_backend
from hetero.core.named_device import REFUSE_QUARANTINED as _REFUSE_QUARANTINED
from hetero.core.named_device import device, use_device
from hetero.core.registry import APPLY_QUOTA as _APPLY_QUOTA
from hetero.core.registry import AUTO_DEVICE as _AUTO_DEVICE
from hetero.core.registry import CHECK_REQUEST as _CHECK_REQUEST
from hetero.core.registry import RUNTIMES_OPENED as _RUNTIMES_OPENED
from hetero.kernels.hooks import SPLIT_KERNEL as _SPLIT_KERNEL
from hetero.core.cluster_hooks import RAY_RUN as _RAY_RUN
from hetero.array import hooks as _array_hooks
from hetero.arraylib import hooks as _arraylib_hooks
from hetero.core import fusion_state as _fusion_state
from hetero.core.injection_hooks import TORCH_RULES_CHANGED as _TORCH_RULES_CHANGED
from hetero.core.injection_hooks import TORCH_RULES_CONFIGURED as _TORCH_RULES_CONFIGURED
from hetero.core.injection_hooks import arm_configured_torch_rules as _arm_configured_torch_rules
from hetero.scheduler.inputs import QUARANTINED_IDS as _QUARANTINED_IDS
from hetero.scheduler.inputs import QUOTAS_CHANGED as _QUOTAS_CHANGED
from hetero.scheduler.inputs import SUBSCRIBE as _SUBSCRIBE
from hetero.core import moved as _moved

# The floors join here. A lower floor asks through a hook what a floor above answers; each
# answering module registers itself when imported, and is named here so that the first question
# imports it (`import hetero` stays light: none of these is loaded now). See hetero.core.hooks.
_AUTO_DEVICE.provided_by("hetero.scheduler.placement")
_CHECK_REQUEST.provided_by("hetero.scheduler.request")
_APPLY_QUOTA.provided_by("hetero.scheduler.quota")
_RUNTIMES_OPENED.provided_by("hetero.fault.injection")
_QUARANTINED_IDS.provided_by("hetero.fault.quarantine")
_REFUSE_QUARANTINED.provided_by("hetero.fault.quarantine")
_SUBSCRIBE.provided_by("hetero.fault.event_bus")
_SPLIT_KERNEL.provided_by("hetero.kernels.split.launch")
_RAY_RUN.provided_by("hetero.ray.train")  # hetero-run --ray
for _hook in (_array_hooks.COPY_INTO, _array_hooks.ASSIGN, _array_hooks.VIEW_TO_NUMPY, _array_hooks.STAGED_LAUNCH):
    _hook.provided_by("hetero.arraylib.copy")
_array_hooks.REDUCTION.provided_by("hetero.arraylib.reductions")
_array_hooks.CAST.provided_by("hetero.arraylib.cast")
del _hook
_array_hooks.ELEMENTWISE.provided_by("hetero.arraylib.eager")
_arraylib_hooks.FUSE.provided_by("hetero.arraylib.fusion")
_fusion_state.REALIZE.provided_by("hetero.arraylib.fusion")
_array_hooks.MATMUL.provided_by("hetero.arraylib.linalg.matmul")
_array_hooks.NAMESPACE.provided_by("hetero.xp")
_array_hooks.ADVANCED_GET.provided_by("hetero.arraylib.advanced_index")
_array_hooks.ADVANCED_SET.provided_by("hetero.arraylib.advanced_index")
_arraylib_hooks.COMPLEX_ELEMENTWISE.provided_by("hetero.arraylib.complex.elementwise")
_arraylib_hooks.COMPLEX_CAST.provided_by("hetero.arraylib.complex.elementwise")
_arraylib_hooks.COMPLEX_REDUCTION.provided_by("hetero.arraylib.complex.reductions")
_QUOTAS_CHANGED.provided_by("hetero.torch.memory")
_TORCH_RULES_CHANGED.provided_by("hetero.torch.injection")
_TORCH_RULES_CONFIGURED.provided_by("hetero.torch.injection")
_arm_configured_torch_rules()  # HETERO_FAULTS rules for torch ops: a pure torch loop opens no hetero backend
_moved.install()  # the module paths the documentation named before the rooms (hetero.plugin ...)


if TYPE_CHECKING:
    from types import ModuleType

    from hetero import checkpoint
    from hetero.arraylib.reductions import all, any, argmax, argmin, cumulative_prod, cumulative_sum, max, mean, min, prod, std, sum, var  # noqa: A004 (the array API's names)
    from hetero.arraylib.linalg.matmul import explain_op, matmul, matrix_transpose, tensordot, vecdot

    fault: ModuleType  # hetero.fault / hetero.scheduler live in the fault/ and scheduler/ folders
    scheduler: ModuleType
    from hetero import xp
    from hetero.arraylib.cast import astype
    from hetero.arraylib.creation import empty_like, eye, full_like, linspace, meshgrid, ones_like, tril, triu, zeros_like
    from hetero.arraylib.fusion import fusion
    from hetero.arraylib.manipulation import concat, repeat, roll, stack, tile
    from hetero.compiler.build.bundle_registry import load_bundle
    from hetero.recovery.guard import guard
    from hetero.plans import ConcretizationError, JitError, jit
    from hetero.fault.heartbeat import heartbeat
    from hetero.kernels.kernel import Kernel, kernel
    from hetero.checkpoint.resume import resumable
    from hetero.kernels.stream import Stream
    from hetero.core.torch_devices import torch_device

# Lazily loaded public names: attribute -> (module, name in it; None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "kernel": ("hetero.kernels.kernel", "kernel"),
    "Kernel": ("hetero.kernels.kernel", "Kernel"),
    "load_bundle": ("hetero.compiler.build.bundle_registry", "load_bundle"),
    "guard": ("hetero.recovery.guard", "guard"),
    "jit": ("hetero.plans.function", "jit"),  # launch plans: trace once, replay (hetero/plans/)
    "JitError": ("hetero.plans.errors", "JitError"),
    "ConcretizationError": ("hetero.plans.errors", "ConcretizationError"),
    "heartbeat": ("hetero.fault.heartbeat", "heartbeat"),
    "resumable": ("hetero.checkpoint.resume", "resumable"),
    "Stream": ("hetero.kernels.stream", "Stream"),
    "torch_device": ("hetero.core.torch_devices", "torch_device"),
    "checkpoint": ("hetero.checkpoint", None),
    "fault": ("hetero.fault", None),
    "scheduler": ("hetero.scheduler", None),
    "xp": ("hetero.xp", None),  # the array API namespace (x.__array_namespace__())
    "onnx": ("hetero.onnx", None),  # ONNX Runtime sessions and failover pools
    # reductions and scans (hetero.arraylib.reductions) load the compiler: on first use too
    "sum": ("hetero.arraylib.reductions", "sum"),
    "prod": ("hetero.arraylib.reductions", "prod"),
    "min": ("hetero.arraylib.reductions", "min"),
    "max": ("hetero.arraylib.reductions", "max"),
    "mean": ("hetero.arraylib.reductions", "mean"),
    "std": ("hetero.arraylib.reductions", "std"),
    "var": ("hetero.arraylib.reductions", "var"),
    "any": ("hetero.arraylib.reductions", "any"),
    "all": ("hetero.arraylib.reductions", "all"),
    "argmax": ("hetero.arraylib.reductions", "argmax"),
    "argmin": ("hetero.arraylib.reductions", "argmin"),
    "cumulative_sum": ("hetero.arraylib.reductions", "cumulative_sum"),
    "cumulative_prod": ("hetero.arraylib.reductions", "cumulative_prod"),
    "fusion": ("hetero.arraylib.fusion", "fusion"),
    # linear algebra (hetero.arraylib.linalg.matmul): vendor BLAS or hetero's tiled kernel
    "matmul": ("hetero.arraylib.linalg.matmul", "matmul"),
    "vecdot": ("hetero.arraylib.linalg.matmul", "vecdot"),
    "tensordot": ("hetero.arraylib.linalg.matmul", "tensordot"),
    "matrix_transpose": ("hetero.arraylib.linalg.matmul", "matrix_transpose"),
    "explain_op": ("hetero.arraylib.linalg.matmul", "explain_op"),
}
#: The array API's elementwise functions (hetero.arraylib.functions): each is a generated kernel.
ELEMENTWISE_FUNCTIONS = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert",
    "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "copysign",
    "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal",
    "hypot", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log10", "log1p", "log2", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "reciprocal", "remainder", "round", "sign", "signbit", "sin",
    "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc", "where",
)
_LAZY.update({name: ("hetero.arraylib.functions", name) for name in ELEMENTWISE_FUNCTIONS})
#: Creation, conversion and manipulation that make new arrays through generated kernels.
CREATION_FUNCTIONS = ("empty_like", "eye", "full_like", "linspace", "meshgrid", "ones_like", "tril", "triu", "zeros_like")
MANIPULATION_FUNCTIONS = ("concat", "repeat", "roll", "stack", "tile")
_LAZY.update({name: ("hetero.arraylib.creation", name) for name in CREATION_FUNCTIONS})
_LAZY.update({name: ("hetero.arraylib.manipulation", name) for name in MANIPULATION_FUNCTIONS})
_LAZY["astype"] = ("hetero.arraylib.cast", "astype")


def __getattr__(name: str) -> object:
    # The kernel API pulls in the compiler, the guard the fault layer: load each on first use,
    # keeping `import hetero` light.
    if name not in _LAZY:
        raise AttributeError(f"module 'hetero' has no attribute {name!r}")
    import importlib

    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def synchronize() -> None:
    """Wait for the queued work of every device opened so far (opening no other backend)."""
    for each in opened_devices():
        each.synchronize()


__all__ = [
    "ArrayType", "CompileError", "DeviceFunction", "Kernel", "KernelBuildError", "KernelLaunchError", "ScalarType",
    "atomic_add", "atomic_cas", "atomic_max", "atomic_min", "atomic_sub", "barrier", "c64", "c128", "f16", "f32", "f64", "func",
    "global_id", "global_size", "group_id", "i8", "i16", "i32", "i64", "kernel", "local_array", "local_id",
    "load_bundle", "local_size", "math", "num_groups", "u8", "u16", "u32", "u64",
    "Array", "ArrayError", "BackendStatus", "BackendUnavailableError", "BundleBuildError", "BundleError", "Config",
    "ConfigError", "ContextCorruptedError", "DeviceDegradedError", "DeviceLostError", "QuotaExceeded",
    "RecoveryFailedError", "Stream", "checkpoint", "fault", "fusion", "onnx", "guard", "jit", "JitError", "ConcretizationError", "heartbeat", "resumable", "scheduler", "use_device", "xp",
    "Device", "DeviceError", "DeviceInfo", "DeviceNotFoundError", "DeviceOutOfMemoryError", "DeviceQuarantinedError",
    "Health", "HealthState", "HeteroError", "HeteroWarning", "PerformanceWarning", "Kind", "PluginError",
    "ToolchainNotFoundError", "UnsupportedDtypeError", "DeviceSpecError", "MissingDependencyError",
    "__version__", "arange", "asarray", "broadcast_to", "expand_dims", "flip", "moveaxis", "permute_dims", "reshape",
    "squeeze", "ScalarOverflowError", "can_cast", "result_type", *ELEMENTWISE_FUNCTIONS, "sum", "prod", "min",
    "max", "mean", "std", "var", "any", "all", "argmax", "argmin", "cumulative_sum", "cumulative_prod",
    "astype", "empty_like", "eye", "full_like", "linspace", "meshgrid", "ones_like", "tril", "triu", "zeros_like",
    "concat", "repeat", "roll", "stack", "tile",
    "matmul", "vecdot", "tensordot", "matrix_transpose", "explain_op",
    "backend_statuses", "bool_", "complex64", "complex128", "copyto", "device", "devices", "dtypes", "empty", "float16", "float32", "float64",
    "from_dlpack", "full", "get_config", "int8", "int16", "int32", "int64", "ones", "register_backend",
    "reload_config", "synchronize", "torch_device", "uint8", "uint16", "uint32", "uint64", "zeros",
]
