"""The errors a hetero user can meet: one hierarchy under :class:`HeteroError`.

Every error says what happened, to which device/backend/file, and what to do.
Later floors (compiler, fault handling, launcher) extend this hierarchy; this module
imports nothing else of the project at import time (:mod:`hetero.core.sizes`, a ground-floor
sibling, when a quota message is written).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class HeteroError(Exception):
    """Base class of every error hetero raises on purpose."""


class ConfigError(HeteroError, ValueError):
    """A configuration file or environment variable holds a bad key or value."""


class BackendUnavailableError(HeteroError, RuntimeError):
    """A backend the user asked for cannot be used here (library, driver or device missing)."""

    def __init__(self, backend: str, reason: str, remedy: str = "") -> None:
        self.backend = backend
        self.reason = reason
        self.remedy = remedy
        message = f"backend {backend!r} is unavailable: {reason}"
        if remedy:
            message += f" ({remedy})"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.backend, self.reason, self.remedy))


class DeviceNotFoundError(HeteroError, LookupError):
    """A device spec names no device that is present."""

    def __init__(self, spec: str, valid: Iterable[str], detail: str = "") -> None:
        self.spec = spec
        self.valid = sorted(valid)
        self.detail = detail
        message = f"no device {spec!r}"
        if detail:
            message += f": {detail}"
        message += f"; valid devices: {', '.join(self.valid) or '(none)'}"
        message += did_you_mean(spec, self.valid)
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.spec, self.valid, self.detail))


class DeviceSpecError(HeteroError, ValueError):
    """A list of devices that does not parse (``"cpu;oneapi"``, ``"cuda:x"``): what was given, the
    entry that is wrong, and the syntax (:func:`hetero.core.device_list.parse_devices`)."""

    def __init__(self, spec: str, entry: str, what: str = "devices") -> None:
        self.spec = spec
        self.entry = entry
        self.what = what
        problem = ("is empty" if not entry else "is not a device name" if entry == spec
                   else f"has {entry!r}, which is not a device name")
        named = f"{what} {spec!r}" if what else repr(spec)
        super().__init__(f"{named} {problem}; write BACKEND or BACKEND:INDEX (cpu, cuda:0, oneapi:1), "
                         "several separated by commas, e.g. 'cpu,oneapi:0', or 'all'")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.spec, self.entry, self.what))


class MissingDependencyError(HeteroError, ImportError):
    """An optional library a feature needs is not installed (or does not import): one line naming
    the feature, the library and the extra that brings it (:func:`hetero.core.optional.require`)."""

    def __init__(self, module: str, extra: str, feature: str, package: str | None = None, cause: str = "") -> None:
        self.module = module
        self.extra = extra
        self.feature = feature
        self.package = package or module.partition(".")[0]
        self.cause = cause
        broken = f" ({cause})" if cause else ""
        super().__init__(f"{feature} needs {self.package}{broken}: pip install 'hetero[{extra}]'", name=module)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.module, self.extra, self.feature, self.package, self.cause))


class DeviceQuarantinedError(HeteroError, RuntimeError):
    """The user named a device that is quarantined (by a real fault, or ``hetero quarantine add``):
    says the fault recorded, since when and for how long, and the remedies. Raised when the name
    is resolved (``hetero.device("oneapi:0")``, ``device="oneapi:0"``), never by a launch; not a
    :class:`DeviceError`, so ``hetero.guard`` does not take it for a fault to recover from.

    ``expires``: epoch seconds, or None for "until released by hand"; ``health``: the device's
    health now, when the entry's time is up but the device is not healthy (it stays quarantined
    until it is); ``release``: what ``hetero quarantine release`` takes for it, when the entry was
    recorded under another name (its stable id then)."""

    def __init__(self, device: str, stable_id: str, fault_class: str, reason: str, since: float,
                 expires: float | None, health: str = "", release: str = "") -> None:
        import time  # when the error is raised, only

        self.device, self.stable_id, self.fault_class, self.reason = device, stable_id, fault_class, reason
        self.since, self.expires, self.health, self.release = since, expires, health, release
        recorded = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        if expires is None:
            left = "until released by hand"
        elif health:
            left = f"its time is up, but it stays quarantined until its health reads ok (now: {health})"
        else:
            minutes = max(expires - time.time(), 0.0) / 60
            left = (f"{minutes:.0f} min left" if minutes >= 1 else "under a minute left") + \
                f" (until {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(expires))})"
        super().__init__(
            f"{device} is quarantined: {fault_class} ({reason}), recorded {recorded}; {left}. hetero keeps work off "
            f"it; to end the quarantine: hetero quarantine release {release or device}; to use it anyway: pass "
            "allow_quarantined=True where you name it (hetero.device(..., allow_quarantined=True)), or set "
            "HETERO_ALLOW_QUARANTINED=1 (config key allow_quarantined)")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_quarantined, (self.args[0], self.device, self.stable_id, self.fault_class, self.reason,
                                       self.since, self.expires, self.health, self.release))


def _rebuild_quarantined(text: str, device: str, stable_id: str, fault_class: str, reason: str, since: float,
                         expires: float | None, health: str, release: str) -> DeviceQuarantinedError:
    # the message as raised: its "min left" is the time left then
    error = DeviceQuarantinedError.__new__(DeviceQuarantinedError)
    Exception.__init__(error, text)
    error.device, error.stable_id, error.fault_class, error.reason = device, stable_id, fault_class, reason
    error.since, error.expires, error.health, error.release = since, expires, health, release
    return error


class DeviceError(HeteroError, RuntimeError):
    """A vendor runtime call failed on a device.

    Carries the backend, the device name and the vendor's own error code and name,
    so that fault handling can classify it without parsing text.
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        device: str,
        code: int | None = None,
        code_name: str | None = None,
        xid: int | None = None,
        injected: bool = False,
    ) -> None:
        self.backend = backend
        self.device = device
        self.code = code
        self.code_name = code_name
        self.xid = xid  # NVIDIA Xid seen with the error, when known
        self.injected = injected  # raised by hetero.fault injection, not by the device
        vendor = " ".join(p for p in (code_name, None if code is None else f"code {code}",
                                      None if xid is None else f"Xid {xid}", "injected" if injected else None) if p)
        super().__init__(f"{device}: {message}" + (f" [{vendor}]" if vendor else ""))

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_device_error, (type(self), self.args[0], self.backend, self.device, self.code, self.code_name,
                                        self.xid, self.injected))


def _rebuild_device_error(
    cls: type[DeviceError], text: str, backend: str, device: str, code: int | None, code_name: str | None,
    xid: int | None = None, injected: bool = False,
) -> DeviceError:
    error = cls.__new__(cls)
    Exception.__init__(error, text)
    error.backend, error.device, error.code, error.code_name = backend, device, code, code_name
    error.xid, error.injected = xid, injected
    return error


class DeviceOutOfMemoryError(DeviceError, MemoryError):
    """The device could not allocate the memory asked for (recoverable: free memory or shrink, then retry)."""


class ContextCorruptedError(DeviceError):
    """A "sticky" error: the device's context is unusable in this process (CUDA 700, 710, 714-719,
    their HIP equivalents, OpenCL CL_OUT_OF_RESOURCES after a kernel). Work must move to another
    device or the process must restart."""


class DeviceLostError(DeviceError):
    """The device is gone (fell off the bus, Xid 79, removed, CL_DEVICE_NOT_AVAILABLE)."""


class DeviceDegradedError(DeviceError):
    """The device reports a hardware problem (uncorrectable ECC 214, pending page retirement or row
    remap, thermal): move work off it and quarantine it."""


class QuotaExceeded(HeteroError, MemoryError):
    """An allocation would take a task past its memory quota on a device; raised before the vendor
    allocator is touched."""

    def __init__(self, device: str, task: str, quota: int, used: int, requested: int) -> None:
        from hetero.core.sizes import format_size  # errors load first; sizes only when one is raised

        self.device, self.task, self.quota, self.used, self.requested = device, task, quota, used, requested
        super().__init__(
            f"{device}: allocating {requested} bytes ({format_size(requested)}) would exceed task {task!r}'s memory "
            f"quota of {quota} bytes ({format_size(quota)}) ({used} bytes in use, {format_size(used)}); free arrays, "
            "or raise the quota (hetero.scheduler.task(..., quota=...), HETERO_QUOTA / the config's quota, "
            "or hetero-run --quota)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.device, self.task, self.quota, self.used, self.requested))


class RecoveryFailedError(HeteroError, RuntimeError):
    """``hetero.guard`` could not recover: no healthy device is left, or retries ran out.
    ``history`` lists each fault and what was tried; the last device error is ``__cause__``."""

    def __init__(self, message: str, history: list[dict[str, object]] | None = None) -> None:
        self.history = list(history or [])
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.args[0], self.history))


class ArrayError(HeteroError, ValueError):
    """An array operation got input it cannot work with (shape, dtype, layout, device)."""


class UnsupportedDtypeError(ArrayError, TypeError):
    """A dtype hetero arrays do not hold (complex, object, strings, …)."""


class CompileError(HeteroError, SyntaxError):
    """A kernel uses something outside hetero's kernel language, or is mistyped.

    Names the user's file, line and column, shows the line, and says what is wrong.
    """

    def __init__(self, message: str, file: str = "<kernel>", line: int = 0, col: int = 0, source_line: str = "") -> None:
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.source_line = source_line
        text = f"{file}:{line}:{col + 1}: {message}" if line else message
        if source_line:
            text += f"\n    {source_line.rstrip()}\n    {' ' * max(col, 0)}^"
        Exception.__init__(self, text)
        # What Python's traceback prints a SyntaxError from (left unset it says "<no detail available>").
        self.msg = message
        self.filename = file if line else None
        self.lineno = line or None
        self.offset = col + 1 if line else None
        self.text = source_line or None

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.file, self.line, self.col, self.source_line))


class KernelBuildError(HeteroError, RuntimeError):
    """A vendor compiler rejected generated source (a bug in hetero or a toolchain limit).

    Carries the source, the options, the backend/device and the compiler's full log;
    :meth:`dump` prints the source with line numbers.
    """

    def __init__(self, message: str, *, source: str, options: tuple[str, ...] = (), target: str = "", log: str = "") -> None:
        self.source = source
        self.options = tuple(options)
        self.target = target
        self.log = log
        super().__init__(f"{target}: {message}\noptions: {' '.join(self.options) or '(none)'}\n{log}".rstrip())

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_build_error, (self.args[0], self.source, self.options, self.target, self.log))

    def dump(self) -> str:
        return "\n".join(f"{n:4d}  {line}" for n, line in enumerate(self.source.splitlines(), 1))


def _rebuild_build_error(text: str, source: str, options: tuple[str, ...], target: str, log: str) -> KernelBuildError:
    error = KernelBuildError.__new__(KernelBuildError)
    Exception.__init__(error, text)
    error.source, error.options, error.target, error.log = source, options, target, log
    return error


class ToolchainNotFoundError(HeteroError, RuntimeError):
    """A vendor compiler (nvcc, hipcc, …) that a build needs is not installed or not on PATH."""

    def __init__(self, tool: str, purpose: str, install_hint: str) -> None:
        self.tool = tool
        self.purpose = purpose
        self.install_hint = install_hint
        super().__init__(f"{tool} not found on PATH; it is needed {purpose}. Install it: {install_hint}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.tool, self.purpose, self.install_hint))


class BundleError(HeteroError, ValueError):
    """A kernel bundle (``.hbundle``) is malformed, tampered with, or from an unknown format version."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"kernel bundle {path} rejected: {problem}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.problem))


class BundleBuildError(HeteroError, RuntimeError):
    """``hetero compile`` could not build some kernels for some targets.

    ``failures`` holds ``(what, error)`` pairs: the kernel, signature and target, and the
    error with the toolchain's full log.
    """

    def __init__(self, failures: list[tuple[str, str]], total: int) -> None:
        self.failures = list(failures)
        self.total = total
        named = "; ".join(what for what, _ in self.failures[:3]) + ("; ..." if len(self.failures) > 3 else "")
        # the first line names what failed: the CLI shows only it without --debug
        lines = [f"{len(self.failures)} of {total} builds failed ({named}); --keep-going writes the bundle "
                 "without them; the logs:"]
        lines += [f"--- {what}\n{error}" for what, error in self.failures]
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.failures, self.total))


class KernelLaunchError(HeteroError, ValueError):
    """A kernel was launched with arguments or sizes it cannot take (names the parameter)."""


class KernelIndexError(KernelLaunchError, IndexError):
    """A kernel in checked mode (``HETERO_BOUNDS_CHECK=1``, ``debug=True``) indexed an array out of
    its bounds: names the kernel, the array, the index, the axis's extent and the source line.
    Also an ``IndexError``, as Python's own out-of-range index is."""


class ArgumentError(HeteroError, TypeError):
    """A hetero function was called with a keyword it does not take (a ``TypeError``, as Python's own)."""


class PluginError(HeteroError, RuntimeError):
    """A backend plugin broke the plugin contract (bad entry point, bad registration)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix for error messages, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
