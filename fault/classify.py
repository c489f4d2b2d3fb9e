"""Classify an exception into a fault class and the action it calls for.

``classify(error)`` joins these signals:

1. the error's class (:class:`~hetero.core.errors.DeviceOutOfMemoryError`,
   :class:`~hetero.core.errors.ContextCorruptedError`, :class:`~hetero.core.errors.DeviceLostError`,
   :class:`~hetero.core.errors.DeviceDegradedError`): the backend built it knowing what it was
   doing (OpenCL ``-5`` on an allocation is out of memory, after a kernel a sticky fault), so
   it decides over the vendor code;
2. else, for a plain :class:`~hetero.core.errors.DeviceError`, the vendor code
   (:mod:`hetero.fault.taxonomy` tables: CUDA, HIP, OpenCL);
3. NVIDIA Xids: the error's own ``xid`` and the ``xid`` events about the same device seen in
   the last :data:`WINDOW` seconds (from the event bus unless ``events`` is given). The most
   severe of these and the class from 1-2 wins, except that an application-level Xid event
   (13, 31, 43, 94...: possibly another process's fault on a shared GPU) only classifies an
   error that 1-2 left unclassified.

Joins the tables cannot express alone: a sticky error with Xid 13/31/43 is an application
bug on a healthy GPU (migrate, quarantine briefly); a sticky error with Xid 79 is a lost
device; any error with Xid 48/94/95 is a degraded device.

torch's and CuPy's own device errors, raised from user code, are read first as the hetero error
hetero's backend would have raised (:mod:`hetero.fault.foreign_errors`): CuPy's
``CUDARuntimeError``/``CUDADriverError`` by their ``status`` through the CUDA/HIP tables;
``torch.AcceleratorError`` by its ``error_code``; ``torch.OutOfMemoryError`` as out of memory;
other torch messages by the table :data:`hetero.fault.torch_errors.TORCH_ERRORS`, one row per
spelling (``CUDA error: an illegal memory access was encountered`` -> CUDA 700,
context-corrupting; ``CUDA out of memory`` -> 2, recoverable; ``device-side assert triggered`` ->
710; ``uncorrectable ECC error encountered`` -> 214, degraded; the HIP, XPU and MPS spellings;
``CUBLAS_STATUS_*``, ``CUDNN_STATUS_*``, MIOpen, NCCL's ``ncclUnhandledCudaError``), each citing
the torch or runtime source it comes from. They name no hetero device: the classification's
device is the current one (``hetero.device()`` inside a guard), or none. torch is never imported
to classify. Any other error that is not a :class:`~hetero.core.errors.DeviceError` is class ``none``:
the guard re-raises it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.fault import event_bus, foreign_errors
from hetero.fault.taxonomy import CODE_TABLES, DEFAULT_ACTION, SEVERITY, XIDS, Action, CodeRow, FaultClass, XidRow, ttl_for

log = logging.getLogger("hetero.fault.classify")

#: Seconds before an error within which health events are joined with it.
WINDOW = 30.0

_CLASS_OF_ERROR: tuple[tuple[type[DeviceError], FaultClass], ...] = (
    (DeviceLostError, FaultClass.DEVICE_LOST),
    (DeviceDegradedError, FaultClass.DEGRADED),
    (ContextCorruptedError, FaultClass.CONTEXT_CORRUPTING),
    (DeviceOutOfMemoryError, FaultClass.RECOVERABLE),
)
_FAMILY_OF_BACKEND = {"cuda": "cuda", "rocm": "hip", "hip": "hip", "oneapi": "opencl", "opencl": "opencl"}


@dataclasses.dataclass(frozen=True)
class Classification:
    """What a fault means and what to do about it.

    ``quarantine``: put the device in quarantine for ``ttl`` seconds. ``sticky``: the device
    cannot be used again in this process (its context is gone), even if not quarantined.
    ``reason`` is one line a log or an operator can read. ``xids`` are the Xids joined in.
    """

    fault_class: FaultClass
    action: Action
    quarantine: bool
    ttl: float | None
    reason: str
    sticky: bool = False
    application_bug: bool = False
    backend: str | None = None
    device: str | None = None
    code: int | None = None
    code_name: str | None = None
    xids: tuple[int, ...] = ()
    injected: bool = False

    @property
    def is_fault(self) -> bool:
        """True for a device fault (anything but class ``none``)."""
        return self.fault_class is not FaultClass.NONE

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["fault_class"], data["action"], data["xids"] = str(self.fault_class), str(self.action), list(self.xids)
        return data


def code_row(error: DeviceError) -> tuple[str | None, CodeRow | None]:
    """The taxonomy row for the error's vendor code: ``(family, row)``; family is ``cuda``,
    ``hip`` or ``opencl`` (from the code's name, else the backend, else the code's sign)."""
    if error.code is None:
        return None, None
    name = (error.code_name or "").lower()
    if name.startswith(("cudaerror", "cuda_error")):
        family: str | None = "cuda"
    elif name.startswith("hiperror"):
        family = "hip"
    elif name.startswith("cl_"):
        family = "opencl"
    else:
        family = _FAMILY_OF_BACKEND.get(error.backend)
    if family is None:  # cpu or a plugin reporting a vendor code: OpenCL codes are negative
        family = "opencl" if error.code < 0 else "cuda"
    return family, CODE_TABLES[family].get(error.code)


def _device_xids(error: DeviceError, events: Iterable[Mapping[str, Any]]) -> list[int]:
    """Xids of ``xid`` events about the error's device (or naming no device)."""
    found: list[int] = []
    for event in events:
        if event.get("kind") != "xid" or event.get("xid") is None:
            continue
        if event.get("device") not in (None, error.device):
            continue
        try:
            found.append(int(event["xid"]))
        except (TypeError, ValueError):
            continue
    return found


def _fresh_events(error: DeviceError) -> list[dict[str, Any]]:
    """Publish what the error's device has to say now (so an Xid logged just before the error
    is joined without waiting for the monitor's next poll), then read the recent history."""
    try:
        from hetero.fault.monitor import drain_device_events
        from hetero.core.registry import opened_devices

        for device in opened_devices():
            if device.name == error.device:
                drain_device_events(device)
    except Exception:  # classification never fails because a health source did
        log.debug("draining health events of %s failed", error.device, exc_info=True)
    return event_bus.recent(within=WINDOW)


def _ttl(fault_class: FaultClass, app_bug: bool, row: CodeRow | None, overrides: Mapping[str, float] | None) -> float | None:
    key = "application-bug" if app_bug and fault_class is FaultClass.CONTEXT_CORRUPTING else str(fault_class)
    if overrides and key in overrides:
        return ttl_for(key, overrides)
    if row is not None and row.ttl is not None and row.fault_class is fault_class:
        return row.ttl
    return ttl_for(key)


def classify(error: BaseException, events: Iterable[Mapping[str, Any]] | None = None) -> Classification:
    """The :class:`Classification` of ``error``, joined with health ``events`` (default: the
    event bus' events of the last :data:`WINDOW` seconds)."""
    if not isinstance(error, DeviceError):
        from hetero.core.registry import current_device

        found = foreign_errors.recognise(error, current_device())
        if found is None:
            return Classification(FaultClass.NONE, Action.NONE, False, None,
                                  f"{type(error).__name__} is not a device error")
        inner = classify(found.error, events)
        return dataclasses.replace(inner, reason=f"{found.basis}; {inner.reason}")
    candidates: list[tuple[FaultClass, str]] = []
    family, row = code_row(error)
    by_type = next(((cls, t) for t, cls in _CLASS_OF_ERROR if isinstance(error, t)), None)
    if by_type is not None:  # the backend knew what it was doing (e.g. OpenCL -5 on an allocation: out of memory)
        text = f"{by_type[1].__name__}"
        if row is not None:
            text += f" ({family} {error.code} {row.name})"
        candidates.append((by_type[0], text))
        if row is not None and row.fault_class is not by_type[0]:
            row = None  # the row's action and TTL are for another class
    elif row is not None:
        candidates.append((row.fault_class, f"{family} {error.code} {row.name}: {row.note}"))
    seen = list(events) if events is not None else _fresh_events(error)
    xids = ([error.xid] if error.xid is not None else []) + _device_xids(error, seen)
    xids = list(dict.fromkeys(xids))  # unique, first seen first
    xid_rows: list[tuple[int, XidRow]] = [(x, XIDS[x]) for x in xids if x in XIDS]
    classified = bool(candidates)
    for xid, xid_row in xid_rows:
        if xid_row.fault_class is FaultClass.NONE:
            continue
        # An Xid event is about the device, not this process: an application-level one (13, 31,
        # 94...) may come from another process on the same GPU, so it only classifies an error
        # nothing else classified; a device-level one (48, 79, 95...) always counts.
        device_level = SEVERITY[xid_row.fault_class] > SEVERITY[FaultClass.CONTEXT_CORRUPTING]
        if device_level or xid == error.xid or not classified:
            candidates.append((xid_row.fault_class, f"Xid {xid} {xid_row.name} (NVIDIA: {xid_row.nvidia_action})"))
    if not candidates:
        code = "" if error.code is None else f" (code {error.code} is not in hetero's fault tables)"
        return Classification(FaultClass.NONE, Action.NONE, False, None,
                              f"{type(error).__name__}{code}: not a known device fault",
                              backend=error.backend, device=error.device, code=error.code,
                              code_name=error.code_name, xids=tuple(xids), injected=error.injected)
    fault_class, _ = max(candidates, key=lambda c: SEVERITY[c[0]])
    # The device itself is fine when the Xids joined are all application faults (13/31/43).
    app_bug = fault_class is FaultClass.CONTEXT_CORRUPTING and any(r.app_bug for _, r in xid_rows) and not any(
        SEVERITY[r.fault_class] > SEVERITY[FaultClass.CONTEXT_CORRUPTING] for _, r in xid_rows)
    action = DEFAULT_ACTION[fault_class]
    if row is not None and row.action is not None and row.fault_class is fault_class:
        action = row.action
    from hetero.core.config import get_config

    ttl = _ttl(fault_class, app_bug, row, get_config().quarantine_ttl)
    if action in (Action.RETRY, Action.RESTART_PROCESS):  # the device is fine (or the process is at fault)
        ttl = None
    reasons = [text for cls, text in candidates if cls is fault_class] + [text for cls, text in candidates if cls is not fault_class]
    reasons += [f"Xid {x} {r.name} seen on the device" for x, r in xid_rows
                if not any(text.startswith(f"Xid {x} ") for _, text in candidates)]
    reason = "; ".join(dict.fromkeys(reasons))
    if app_bug:
        reason += "; an application bug on a healthy GPU"
    return Classification(
        fault_class=fault_class, action=action, quarantine=ttl is not None, ttl=ttl, reason=reason,
        sticky=SEVERITY[fault_class] >= SEVERITY[FaultClass.CONTEXT_CORRUPTING], application_bug=app_bug,
        backend=error.backend, device=error.device, code=error.code,
        code_name=error.code_name or (row.name if row else None), xids=tuple(xids), injected=error.injected,
    )
