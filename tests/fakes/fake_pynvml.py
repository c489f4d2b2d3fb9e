"""A FAKE ``pynvml`` (nvidia-ml-py) for tests: the functions and constants hetero's NVML code
uses, answering from a scenario in ``nvml_scenarios.json`` and replaying its event sequence
through ``nvmlEventSetWait``. Constants and the NVMLError class behave as nvidia-ml-py's do
(``NVMLError(value)`` with ``.value``; ``NVMLError_Timeout`` etc. as subclasses).

Use: ``fake = FakePynvml("xid_79_48_31")``, then pass it as the module (``Nvml(fake)``) or put it
in ``sys.modules["pynvml"]``. ``fake.calls`` records every call by name.
"""

from __future__ import annotations

import json
import threading
import time
import types
from pathlib import Path
from typing import Any, ClassVar

SCENARIOS: dict[str, Any] = json.loads((Path(__file__).with_name("nvml_scenarios.json")).read_text())

# Values as in nvml.h / pynvml.
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
_ERROR_NAMES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
                6: "Not Found", 9: "Driver Not Loaded", 10: "Timeout", 12: "NVML Shared Library Not Found",
                13: "Function Not Found", 15: "GPU is lost", 999: "Unknown Error"}
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_TEMPERATURE_GPU = 0
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
nvmlEventTypeSingleBitEccError = 0x1
nvmlEventTypeDoubleBitEccError = 0x2
nvmlEventTypeXidCriticalError = 0x8


class NVMLError(Exception):
    """As pynvml's: ``NVMLError(value)`` returns the subclass for that value."""

    _classes: ClassVar[dict[int, type[NVMLError]]] = {}

    def __new__(cls, value: int) -> NVMLError:  # noqa: PYI034 - returns a subclass, as pynvml's
        target = NVMLError._classes.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(target)
        obj.value = value
        return obj

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_NAMES.get(self.value, f"NVML Error with code {self.value}")


for _value, _name in ((NVML_ERROR_NOT_SUPPORTED, "NotSupported"), (NVML_ERROR_TIMEOUT, "Timeout"),
                      (NVML_ERROR_GPU_IS_LOST, "GpuIsLost"), (NVML_ERROR_DRIVER_NOT_LOADED, "DriverNotLoaded"),
                      (NVML_ERROR_NOT_FOUND, "NotFound")):
    NVMLError._classes[_value] = type(f"NVMLError_{_name}", (NVMLError,), {})


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakePynvml(types.ModuleType):
    """One fake NVML library state: a scenario's devices and its event sequence."""

    def __init__(self, scenario: str, *, init_error: int | None = None) -> None:
        super().__init__("fake_pynvml")
        data = SCENARIOS[scenario]
        self.devices: list[dict[str, Any]] = data["devices"]
        self.events: list[dict[str, Any]] = list(data["events"])
        self.init_error = init_error
        self.calls: list[str] = []
        self.registered: dict[int, int] = {}
        self._lock = threading.Lock()
        for name, value in globals().items():  # constants and NVMLError, as the real module has them
            if name.startswith(("NVML_", "nvmlEventType")) or name == "NVMLError":
                setattr(self, name, value)
        for name in ("NotSupported", "Timeout", "GpuIsLost", "DriverNotLoaded", "NotFound"):
            setattr(self, f"NVMLError_{name}", next(c for c in NVMLError._classes.values() if c.__name__.endswith(name)))

    # -- helpers ----------------------------------------------------------------------------
    def _device(self, handle: _Handle, call: str) -> dict[str, Any]:
        self.calls.append(call)
        device = self.devices[handle.index]
        if device.get("lost"):
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return device

    @staticmethod
    def _supported(value: Any) -> Any:
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    # -- the pynvml functions hetero calls --------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> _Handle:
        self.calls.append("nvmlDeviceGetHandleByUUID")
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        for index, device in enumerate(self.devices):
            if device["uuid"] == text:
                return _Handle(index)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return str(self.devices[handle.index]["uuid"])

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, error_type: int, counter_type: int) -> int:
        ecc = self._supported(self._device(handle, "nvmlDeviceGetTotalEccErrors")["ecc"])
        return int(ecc["volatile" if counter_type == NVML_VOLATILE_ECC else "aggregate"][error_type])

    def nvmlDeviceGetRetiredPages(self, handle: _Handle, cause: int) -> list[int]:
        pages = self._supported(self._device(handle, "nvmlDeviceGetRetiredPages")["retired_pages"])
        return list(pages["sbe" if cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS else "dbe"])

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: _Handle) -> int:
        return int(self._supported(self._device(handle, "nvmlDeviceGetRetiredPagesPendingStatus")["retired_pending"]))

    def nvmlDeviceGetRemappedRows(self, handle: _Handle) -> tuple[int, int, int, int]:
        rows = self._supported(self._device(handle, "nvmlDeviceGetRemappedRows")["remapped_rows"])
        return tuple(rows)  # type: ignore[return-value]

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        return int(self._supported(self._device(handle, "nvmlDeviceGetTemperature")["temperature"]))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return int(self._supported(self._device(handle, "nvmlDeviceGetCurrentClocksEventReasons")["clock_event_reasons"]))

    def nvmlDeviceGetFieldValues(self, handle: _Handle, field_ids: list[int]) -> list[Any]:
        action = self._device(handle, "nvmlDeviceGetFieldValues")["recovery_action"]
        value = types.SimpleNamespace(uiVal=action or 0)
        return [types.SimpleNamespace(fieldId=f, nvmlReturn=NVML_SUCCESS if action is not None else NVML_ERROR_NOT_SUPPORTED,
                                      value=value) for f in field_ids]

    def nvmlDeviceGetSupportedEventTypes(self, handle: _Handle) -> int:
        self._device(handle, "nvmlDeviceGetSupportedEventTypes")
        return nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeSingleBitEccError

    def nvmlEventSetCreate(self) -> object:
        self.calls.append("nvmlEventSetCreate")
        return object()

    def nvmlDeviceRegisterEvents(self, handle: _Handle, event_types: int, event_set: object) -> None:
        self._device(handle, "nvmlDeviceRegisterEvents")
        self.registered[handle.index] = event_types

    def nvmlEventSetWait(self, event_set: object, timeout_ms: int) -> Any:
        with self._lock:
            event = self.events.pop(0) if self.events else None
        if event is None:
            time.sleep(min(timeout_ms, 20) / 1000)
            raise NVMLError(NVML_ERROR_TIMEOUT)
        if event["type"] == "lost":
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        kind = nvmlEventTypeXidCriticalError if event["type"] == "xid" else nvmlEventTypeDoubleBitEccError
        return types.SimpleNamespace(device=_Handle(event["device"]), eventType=kind, eventData=event.get("data", 0))

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.calls.append("nvmlEventSetFree")

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
