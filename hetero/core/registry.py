"""Backends found at run time through entry points, opened lazily, and the devices they hold.

Lenient when discovering (a backend that cannot load is *unavailable, with the
reason*, and logged), strict when the user named it (``hetero.device("cuda")``
or ``HETERO_BACKENDS=cuda`` raise with the reason and the remedy).

On the ground floor: what it needs from the floors above (the scheduler's ``"auto"`` choice,
quotas, fault injection) it asks through the hooks below, which those floors register into
(see :mod:`hetero.core.hooks`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hetero.core.config import get_config
from hetero.core.device import FIND_DEVICE, Device
from hetero.core.errors import BackendUnavailableError, ConfigError, DeviceNotFoundError, PluginError, did_you_mean
from hetero.core.hooks import Hook
from hetero.core.notices import install_handlers
from hetero.core.plugin import Backend, BackendRegistration, DeviceRuntime
from hetero.core.torch_names import hetero_spec, is_torch_device

if TYPE_CHECKING:
    from importlib import metadata

ENTRY_POINT_GROUP = "hetero.backends"
#: The device ``hetero.device()`` (no spec) returns in this context, set by :func:`use_device`
#: (``hetero.guard`` moves it when work migrates). None: the configured default.
CURRENT_DEVICE: contextvars.ContextVar[Device | None] = contextvars.ContextVar("hetero_current_device", default=None)
log = logging.getLogger("hetero.core.registry")

#: ``hetero.device("auto", policy, **request)``: the scheduler places it (hetero.scheduler.placement).
AUTO_DEVICE: Hook[Callable[..., Device]] = Hook("auto_device", "the device 'auto' names, placed by the scheduler")
#: Check request keywords (``memory=``, ``kinds=``...), with did-you-mean for a misspelt one (hetero.scheduler.request).
CHECK_REQUEST: Hook[Callable[[Mapping[str, Any]], None]] = Hook(
    "check_request", "checks the keywords of a placement request")
#: Called once, before any backend opens, when the config sets ``quota`` (hetero.scheduler.quota).
APPLY_QUOTA: Hook[Callable[[], object]] = Hook("apply_quota", "caps this process's allocations by the configured quota")
#: Called with each backend's runtimes, and the configured fault rules, before its devices are made:
#: fault injection wraps the matching ones (hetero.fault.injection). Called only when rules are
#: configured or the hook's module is loaded (an ``inject()`` block may be active), so a process
#: with no drill imports nothing for it.
RUNTIMES_OPENED: Hook[Callable[[Sequence[DeviceRuntime], Any], None]] = Hook(
    "runtimes_opened", "wraps a backend's runtimes for fault injection")


@dataclasses.dataclass(frozen=True)
class BackendStatus:
    """What became of one backend: its devices, or why it has none."""

    name: str
    available: bool
    reason: str = ""
    remedy: str = ""
    description: str = ""
    priority: int = 0
    devices: tuple[Device, ...] = ()
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)
    plugin_error: str = ""  # the traceback, when the plugin itself broke

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "available": self.available,
            "reason": self.reason,
            "remedy": self.remedy,
            "description": self.description,
            "priority": self.priority,
            "devices": [d.name for d in self.devices],
            "diagnostics": self.diagnostics,
            "plugin_error": self.plugin_error,
        }


def _apply_log_level() -> None:
    """HETERO_LOG / the config's ``log`` sets the ``hetero`` logger's level."""
    install_handlers(get_config().log)  # NullHandler, and stderr only while the application configures none


class Registry:
    """The process-wide table of backends. Use the module functions, not this class."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._registrations: dict[str, BackendRegistration] | None = None
        self._broken: dict[str, BackendStatus] = {}  # entry points that failed to load
        self._statuses: dict[str, BackendStatus] = {}
        self._by_spec: dict[str, Device] = {}

    # -- discovery -----------------------------------------------------------------
    def registrations(self) -> dict[str, BackendRegistration]:
        with self._lock:
            if self._registrations is None:
                from importlib import metadata  # only when backends are first listed

                _apply_log_level()
                if get_config().quota:  # HETERO_QUOTA: this process's allocations capped, before any device opens
                    APPLY_QUOTA.call()
                self._registrations = {}
                for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
                    self._load_entry_point(entry_point)
            return self._registrations

    def _load_entry_point(self, entry_point: metadata.EntryPoint) -> None:
        assert self._registrations is not None
        name = entry_point.name
        if name in self._registrations or name in self._broken:
            log.debug("backend %r registered twice; keeping the first (%s)", name, entry_point.value)
            return
        try:
            obj = entry_point.load()
            registration = obj if isinstance(obj, BackendRegistration) else obj()
            if not isinstance(registration, BackendRegistration):
                raise PluginError(
                    f"entry point {entry_point.value!r} gave {type(registration).__name__}, "
                    "expected a hetero.core.plugin.BackendRegistration or a function returning one"
                )
            if registration.name != name:
                raise PluginError(
                    f"entry point {name!r} registers a backend named {registration.name!r}; the names must match"
                )
        except Exception as exc:  # a broken plugin is reported, never fatal
            log.warning("backend plugin %r (%s) failed to load: %s", name, entry_point.value, exc)
            self._broken[name] = BackendStatus(
                name,
                available=False,
                reason=f"plugin failed to load: {type(exc).__name__}: {exc}",
                remedy=f"fix or uninstall the package providing entry point {entry_point.value!r}",
                plugin_error=traceback.format_exc(),
            )
            return
        self._registrations[name] = registration

    def register(self, registration: BackendRegistration) -> None:
        """Add a backend without an entry point (interactive use, tests)."""
        with self._lock:
            self.registrations()[registration.name] = registration
            self._statuses.pop(registration.name, None)
            self._broken.pop(registration.name, None)
            self._by_spec.clear()

    def names(self) -> list[str]:
        return sorted({*self.registrations(), *self._broken})

    # -- opening -------------------------------------------------------------------
    def status(self, name: str) -> BackendStatus:
        with self._lock:
            if name in self._statuses:
                return self._statuses[name]
            registrations = self.registrations()
            if name in self._broken:
                return self._broken[name]
            if name not in registrations:
                raise DeviceNotFoundError(name, self.names(), "no backend of that name is installed")
            status = self._open(registrations[name])
            self._statuses[name] = status
            return status

    def _open(self, registration: BackendRegistration) -> BackendStatus:
        def status(available: bool, reason: str = "", remedy: str = "", **fields: Any) -> BackendStatus:
            return BackendStatus(registration.name, available, reason, remedy,
                                 registration.description, registration.priority, **fields)

        try:
            backend = registration.factory()
            if not isinstance(backend, Backend):
                raise PluginError(f"factory of backend {registration.name!r} returned {type(backend).__name__}, not a Backend")
            runtimes = list(backend.devices())
            diagnostics = backend.diagnostics()
        except BackendUnavailableError as exc:
            log.info("backend %s unavailable: %s", registration.name, exc.reason)
            return status(False, exc.reason, exc.remedy or registration.install_hint)
        except Exception as exc:  # a plugin raising during discovery is reported, not fatal
            log.warning("backend %s raised during discovery: %s", registration.name, exc, exc_info=True)
            return status(False, f"discovery raised {type(exc).__name__}: {exc}", registration.install_hint,
                          plugin_error=traceback.format_exc())
        # Fault injection: rules from HETERO_FAULTS/the config or an active hetero.fault.inject() block
        # wrap the matching runtimes; with none (the usual case) this is one check and nothing is imported.
        faults = get_config().faults
        if faults or RUNTIMES_OPENED.loaded:
            RUNTIMES_OPENED.call(runtimes, faults)
        devices = tuple(Device(runtime.info, runtime) for runtime in runtimes)
        if not devices:
            return status(False, "no devices found", registration.install_hint, diagnostics=diagnostics)
        return status(True, devices=devices, diagnostics=diagnostics)

    # -- selection -----------------------------------------------------------------
    def enabled(self) -> list[str]:
        """Backend names the configuration lets load (``HETERO_BACKENDS``), checked against those installed."""
        wanted = get_config().backends
        names = self.names()
        if wanted is None:
            return names
        for name in wanted:
            if name not in names:
                raise ConfigError(
                    f"HETERO_BACKENDS/backends names {name!r}, which is not installed; "
                    f"installed backends: {', '.join(names)}{did_you_mean(name, names)}"
                )
        return list(wanted)

    def devices(self) -> list[Device]:
        """Devices of every enabled backend, most preferred first."""
        explicit = get_config().backends is not None
        found: list[Device] = []
        for name in self.enabled():
            status = self.status(name)
            if status.available:
                found.extend(status.devices)
            elif explicit:
                raise BackendUnavailableError(name, status.reason, status.remedy)
        order = {kind: rank for rank, kind in enumerate(get_config().device_order)}
        priority = {name: self.status(name).priority for name in {d.backend for d in found}}
        found.sort(key=lambda d: (order.get(str(d.kind), len(order)), -priority[d.backend], d.backend, d.index))
        return found

    def device(self, spec: str | Device | None = None, policy: str | None = None, **request: Any) -> Device:
        if request:  # a misspelt keyword: did-you-mean, not a raw TypeError
            CHECK_REQUEST.call(request)
        if (policy is not None or request) and spec is not None and str(spec).strip().lower() != "auto":
            raise ValueError(f"policy and request arguments choose among devices; they go with 'auto', not {str(spec)!r}")
        if isinstance(spec, Device):
            return spec
        if spec is not None and not isinstance(spec, str) and is_torch_device(spec):
            spec = hetero_spec(spec, self._oneapi_devices)  # torch.device("cuda", 0) -> "cuda:0"
        if spec is None:
            current = CURRENT_DEVICE.get()
            if current is not None:
                return current
        text = get_config().device if spec is None else spec
        cached = self._by_spec.get(text)
        if cached is not None:
            return cached
        if not isinstance(text, str):
            raise TypeError(f"device spec must be a string, a hetero.Device or a torch.device, got {type(text).__name__}")
        if text.strip().lower() == "auto":  # the scheduler places it, and remembers while still valid
            return AUTO_DEVICE.call(policy, **request)
        found = self._resolve(text.strip().lower())
        self._by_spec[text] = found
        return found

    def _resolve(self, spec: str) -> Device:
        if spec == "auto":
            return AUTO_DEVICE.call(None)
        backend, _, index_text = spec.partition(":")
        if backend not in self.names():
            valid = sorted({d.name for d in self._all_devices()} | set(self.names()) | {"auto"})
            raise DeviceNotFoundError(spec, valid, f"{backend!r} is not an installed backend")
        if get_config().backends is not None and backend not in self.enabled():
            raise DeviceNotFoundError(spec, [d.name for d in self.devices()], "its backend is excluded by HETERO_BACKENDS")
        status = self.status(backend)
        if not status.available:
            raise BackendUnavailableError(backend, status.reason, status.remedy)
        if not index_text:
            return status.devices[0]
        try:
            index = int(index_text)
        except ValueError:
            raise DeviceNotFoundError(spec, [d.name for d in status.devices], "the index must be a number") from None
        for candidate in status.devices:
            if candidate.index == index:
                return candidate
        raise DeviceNotFoundError(spec, [d.name for d in status.devices], f"backend {backend!r} has {len(status.devices)} device(s)")

    def _oneapi_devices(self) -> tuple[Device, ...]:
        """The oneapi backend's devices, where torch's xpu GPUs are (none where it is not installed)."""
        return self.status("oneapi").devices if "oneapi" in self.names() else ()

    def _all_devices(self) -> list[Device]:
        return [d for name in self.names() for d in self.status(name).devices]

    def reset(self) -> None:
        """Forget every backend (tests, and after changing HETERO_BACKENDS). The devices opened so
        far release the memory they keep for reuse (their arrays stay valid)."""
        with self._lock:
            opened = [d.runtime for status in self._statuses.values() for d in status.devices]
            self._registrations = None
            self._broken.clear()
            self._statuses.clear()
            self._by_spec.clear()
        for runtime in opened:
            runtime.close()


_REGISTRY = Registry()


def devices() -> list[Device]:
    """Every device of every available (and enabled) backend, the preferred one first."""
    return _REGISTRY.devices()


def device(spec: str | Device | None = None, policy: str | None = None, **request: Any) -> Device:
    """The registry's lookup: the device ``spec`` names, as :func:`hetero.device` describes it, but
    a quarantined device named explicitly is found, not refused. For hetero's own floors that
    choose among devices themselves and skip quarantined ones (``hetero-run --devices``, pools,
    the guard's candidates); a user's name goes through :func:`hetero.device`
    (:mod:`hetero.core.named_device`).

    ``"auto"`` asks :func:`hetero.scheduler.place` with ``policy`` (default ``HETERO_POLICY`` /
    the config's ``policy``, first-fit) and a request (``memory="2GiB"``, ``kinds=("gpu",)``,
    ``priority="high"``, ``kernel=k, n=...``: see :class:`hetero.scheduler.Request`); quarantined
    and unhealthy devices are never chosen. The decision is remembered until the quarantine,
    accounted usage or health may have changed, so calling this in a loop stays cheap."""
    return _REGISTRY.device(spec, policy, **request)


@contextlib.contextmanager
def use_device(spec: str | Device) -> Iterator[Device]:
    """Within the block (this thread/task), ``hetero.device()`` with no spec returns this device
    (found by the registry's lookup; :func:`hetero.use_device` also refuses a quarantined name)."""
    chosen = device(spec)
    token = CURRENT_DEVICE.set(chosen)
    try:
        yield chosen
    finally:
        CURRENT_DEVICE.reset(token)


def current_device() -> Device | None:
    """The device :func:`use_device` (or a guard) set for this thread/task; None outside one (opens nothing)."""
    return CURRENT_DEVICE.get()


def opened_devices() -> list[Device]:
    """Devices of the backends opened so far in this process (opens nothing new)."""
    with _REGISTRY._lock:
        statuses = list(_REGISTRY._statuses.values())
    return [d for status in statuses for d in status.devices]


def backend_statuses() -> list[BackendStatus]:
    """The status of every installed backend, available or not (opens each one).
    (Not ``hetero.backends()``: that name is the package of built-in backends.)"""
    return [_REGISTRY.status(name) for name in _REGISTRY.names()]


def enabled_backends() -> list[str]:
    """The backends the configuration lets load (all installed ones unless HETERO_BACKENDS says)."""
    return _REGISTRY.enabled()


def backend_names() -> list[str]:
    """Every installed backend's name, loaded or broken (opens none)."""
    return _REGISTRY.names()


def backend_status(name: str) -> BackendStatus:
    return _REGISTRY.status(name)


def register_backend(registration: BackendRegistration) -> None:
    """Register a backend from code, as an entry point would."""
    _REGISTRY.register(registration)


def reset() -> None:
    _REGISTRY.reset()


FIND_DEVICE.register(device)  # a pickled hetero.Device is looked up again by name (hetero.device)
