"""NVIDIA GPU health through NVML (``nvidia-ml-py``, imported as ``pynvml``).

:class:`Nvml` reads, per device (found by UUID, so ``CUDA_VISIBLE_DEVICES`` renumbering does not
matter): ECC error counts (volatile = since the driver loaded, aggregate = lifetime; corrected
and uncorrected), retired pages and pending retirement, remapped rows (corrected, uncorrected,
pending, failed), temperature, clock throttle reasons and the driver's GPU recovery action, and
turns them into a :class:`~hetero.core.device.Health`:

- ``unhealthy``: NVML says the GPU is lost; the driver asks for a reset/reboot/drain (recovery
  action); row remapping failed; a reset is required;
- ``degraded``: uncorrectable ECC errors since the driver loaded, pages or rows waiting for
  retirement/remapping (they take effect at the next GPU reset), thermal or power-brake slowdown;
- ``ok`` otherwise; ``unknown`` when NVML is absent or fails (with the reason).

Counters a GPU does not support (NVML_ERROR_NOT_SUPPORTED: consumer boards have no ECC) are None.
The ``pynvml`` module is a parameter, so the tests replay scenarios through a fake one.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from hetero.core.device import Health, HealthState

#: nvmlClocksEventReasons bits that mean the GPU is being slowed by heat or power protection.
THROTTLE_BITS = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x1: "gpu_idle", 0x2: "applications_clocks", 0x10: "sync_boost",
    0x100: "display_clocks",
}
#: Throttle reasons that make a device degraded (idle, power caps and clock settings do not).
DEGRADING_THROTTLE = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
#: nvmlGpuRecoveryAction_t values (pynvml NVML_GPU_RECOVERY_ACTION_*): what the driver asks for.
RECOVERY_ACTIONS = {0: "none", 1: "gpu_reset", 2: "node_reboot", 3: "drain_p2p", 4: "drain_and_reset",
                    5: "recover_imex_domain", 6: "bus_reset", 7: "system_reboot"}
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230  # pynvml's field id (nvml.h NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)


def nvml_uuid(stable_id: str) -> str:
    """NVML's spelling of a device UUID (``GPU-<uuid>``) from hetero's stable id."""
    return stable_id if stable_id.startswith(("GPU-", "MIG-")) else f"GPU-{stable_id}"


@dataclasses.dataclass(frozen=True)
class Reading:
    """One NVML health reading of a device: the raw fields and the health they make."""

    health: Health
    fields: dict[str, Any]


class Nvml:
    """NVML for this process, initialised on first use (``nvmlInit`` once; later failures are kept
    as the reason every reading is ``unknown``)."""

    def __init__(self, module: ModuleType | None = None) -> None:
        self._module = module
        self._lock = threading.Lock()
        self._error: str | None = None
        self._ready = False

    def module(self) -> ModuleType | None:
        """pynvml, initialised; None when it cannot be (see :attr:`error`)."""
        with self._lock:
            if self._ready or self._error is not None:
                return self._module if self._ready else None
            try:
                if self._module is None:
                    import pynvml

                    self._module = pynvml
                self._module.nvmlInit()
                self._ready = True
            except ImportError as exc:
                self._error = f"NVML is not available: pynvml is not installed ({exc}); pip install nvidia-ml-py"
            except Exception as exc:  # noqa: BLE001 - NVMLError: library missing, driver not loaded, ...
                self._error = f"NVML could not start: {exc} (is the NVIDIA driver loaded? nvidia-smi must work)"
            return self._module if self._ready else None

    @property
    def error(self) -> str | None:
        return self._error

    def handle(self, stable_id: str) -> Any:
        nvml = self.module()
        if nvml is None:
            raise RuntimeError(self._error)
        return nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(stable_id))

    def read(self, stable_id: str) -> Reading:
        """Every health field of the device with this UUID, and its health."""
        nvml = self.module()
        if nvml is None:
            return Reading(Health(HealthState.UNKNOWN, self._error or "NVML is not available"), {})
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(stable_id))
            fields = read_fields(nvml, handle)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == nvml.NVML_ERROR_GPU_IS_LOST:
                return Reading(Health(HealthState.UNHEALTHY, "NVML reports the GPU is lost (fallen off the bus?); "
                                      "the node needs the GPU reset or a reboot"), {"lost": True})
            return Reading(Health(HealthState.UNKNOWN, f"NVML query failed: {exc}"), {})
        return Reading(assess(fields), fields)


def _optional(nvml: Any, call: Callable[[], Any]) -> Any:
    """``call()``; None when the GPU does not support it. GPU_IS_LOST and other errors propagate."""
    try:
        return call()
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND,
                                           nvml.NVML_ERROR_NO_PERMISSION):
            return None
        raise
    except AttributeError:  # an older pynvml without this function
        return None


def read_fields(nvml: Any, handle: Any) -> dict[str, Any]:
    """The raw health fields of one device (see the module docstring)."""
    fields: dict[str, Any] = {}
    for counter, counter_name in ((nvml.NVML_VOLATILE_ECC, "volatile"), (nvml.NVML_AGGREGATE_ECC, "aggregate")):
        for error_type, type_name in ((nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"),
                                      (nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected")):
            fields[f"ecc_{counter_name}_{type_name}"] = _optional(
                nvml, functools.partial(nvml.nvmlDeviceGetTotalEccErrors, handle, error_type, counter))
    for cause, cause_name in ((nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, "sbe"),
                              (nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, "dbe")):
        pages = _optional(nvml, functools.partial(nvml.nvmlDeviceGetRetiredPages, handle, cause))
        fields[f"retired_pages_{cause_name}"] = None if pages is None else len(pages)
    pending = _optional(nvml, lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    fields["retired_pages_pending"] = None if pending is None else bool(pending)
    rows = _optional(nvml, lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    corrected, uncorrected, pending_rows, failed = (None,) * 4 if rows is None else (int(v) for v in rows)
    fields.update(remapped_rows_corrected=corrected, remapped_rows_uncorrected=uncorrected,
                  remapped_rows_pending=None if rows is None else bool(pending_rows),
                  remapped_rows_failed=None if rows is None else bool(failed))
    fields["temperature_c"] = _optional(nvml, lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
    reasons = _optional(nvml, lambda: int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)))
    if reasons is None:
        reasons = _optional(nvml, lambda: int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)))
    fields["throttle_reasons"] = None if reasons is None else [n for bit, n in sorted(THROTTLE_BITS.items()) if reasons & bit]
    fields["recovery_action"] = _recovery_action(nvml, handle)
    return fields


def _recovery_action(nvml: Any, handle: Any) -> str | None:
    """The driver's recovery action (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, drivers >= R570)."""
    field = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
    values = _optional(nvml, lambda: nvml.nvmlDeviceGetFieldValues(handle, [field]))
    if not values or int(getattr(values[0], "nvmlReturn", 1)) != 0:
        return None
    code = int(values[0].value.uiVal)
    return RECOVERY_ACTIONS.get(code, f"action {code}")


def assess(fields: dict[str, Any]) -> Health:
    """The health a set of NVML fields makes (worst finding first, every finding in the reason)."""
    unhealthy: list[str] = []
    degraded: list[str] = []
    action = fields.get("recovery_action")
    if action not in (None, "none"):
        unhealthy.append(f"the driver asks for recovery action {action!r}")
    if fields.get("remapped_rows_failed"):
        unhealthy.append("row remapping failed (the GPU needs service)")
    if fields.get("ecc_volatile_uncorrected"):
        degraded.append(f"{fields['ecc_volatile_uncorrected']} uncorrectable ECC error(s) since the driver loaded")
    if fields.get("retired_pages_pending"):
        degraded.append("pages are pending retirement (reset the GPU to retire them)")
    if fields.get("remapped_rows_pending"):
        degraded.append("rows are pending remapping (reset the GPU to remap them)")
    slow = [r for r in fields.get("throttle_reasons") or () if r in DEGRADING_THROTTLE]
    if slow:
        temperature = fields.get("temperature_c")
        degraded.append(f"clocks throttled ({', '.join(slow)})" + (f" at {temperature} C" if temperature is not None else ""))
    if unhealthy:
        return Health(HealthState.UNHEALTHY, "; ".join(unhealthy + degraded))
    if degraded:
        return Health(HealthState.DEGRADED, "; ".join(degraded))
    return Health(HealthState.OK)


_SHARED: Nvml | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> Nvml:
    """The process's NVML (one ``nvmlInit`` for all devices)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Nvml()
        return _SHARED
