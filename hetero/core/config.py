"""hetero's configuration: one YAML file plus environment overrides, parsed once.

Where the file is: ``$HETERO_CONFIG``, else ``./hetero.yaml``, else
``$XDG_CONFIG_HOME/hetero/config.yaml`` (``~/.config/hetero/config.yaml``).
Environment variables override the file:

======================== ================= ==================================================
variable                 key               meaning
======================== ================= ==================================================
HETERO_DEVICE            device            default device spec (``auto``, ``cuda:0``, ``cpu``…)
HETERO_BACKENDS          backends          comma-separated backends to load; others are ignored
HETERO_CACHE_DIR         cache_dir         where compiled kernels and generated files go
HETERO_STATE_DIR         state_dir         where persistent state (quarantine, costs) goes
HETERO_LOG               log               log level of the ``hetero`` logger
HETERO_FAULTS            faults            fault-injection rules, ``;``-separated (see ``hetero.fault.inject``)
HETERO_FAULTS_PERSIST    faults_persist    ``1``: quarantines for injected faults go to the persistent store too
HETERO_ALLOW_QUARANTINED allow_quarantined ``1``: a quarantined device named explicitly is used, not refused
HETERO_POLICY            policy            default placement policy of ``hetero.device("auto")``
HETERO_HEALTH_INTERVAL   health_interval   seconds between health polls of the monitor
HETERO_QUOTA             quota             memory quota of this process per device (see below)
HETERO_COST_SAMPLING     cost_sampling     time every k-th kernel launch for the cost model (0: off)
HETERO_BLAS              blas              ``auto`` (default), ``on`` or ``off``: which routine ``hetero.matmul`` runs (below)
HETERO_SUBGROUPS         subgroups         ``auto`` (default), ``off`` or ``all``: CUDA's warps on OpenCL sub-groups (below)
HETERO_HOST_FALLBACK     host_fallback     ``warn`` (default), ``allow`` or ``error``: LAPACK/FFT on the host (below)
HETERO_PROGRESS          progress          ``auto`` (default: on a terminal), ``on`` or ``off``: say so when kernel builds take long
HETERO_BOUNDS_CHECK      bounds_check      ``1``: every kernel checks each array index (below); default ``0``
======================== ================= ==================================================

``host_fallback`` says what happens when a ``linalg`` or ``fft`` function has no vendor library on
the array's device (OpenCL devices have no LAPACK or FFT hetero binds) and would run on the host
through NumPy, its operands downloaded and its results uploaded (:mod:`hetero.arraylib.host_fallback`):
``warn`` runs it and logs one WARNING per function and device (logger ``hetero.array.ndarray``),
``allow`` runs it without the warning, ``error`` refuses with :class:`hetero.ArrayError`. Every
fallback is counted either way (``hetero.arraylib.host_fallback.counts()``).

``bounds_check`` compiles every kernel specialised from then on in checked mode (as
``@hetero.kernel(debug=True)`` and ``cuda.jit(debug=True)`` do one kernel): each array access
tests its index, and an access out of bounds is not made and raises
:class:`hetero.core.errors.KernelIndexError` (an ``IndexError``) after the launch, naming the
kernel, the array, the index and the line (:mod:`hetero.compiler.ir.bounds`). Checked kernels are
cached apart and run slower (each launch waits for its flags). Off, a kernel's indices are
trusted, as CUDA trusts them: an index out of bounds reads or writes whatever memory is there.

``blas`` says how ``hetero.matmul`` picks between a device's vendor BLAS and hetero's own tiled
kernel where it has both (CLBlast on OpenCL devices; :mod:`hetero.arraylib.linalg.routine_choice`):
``auto`` runs the fastest routine per shape class as ``hetero calibrate`` measured it (CLBlast in
one call or over K in chunks, or hetero's kernel), and a built-in rule before any calibration;
``on`` always the vendor routine in one call where there is one; ``off`` always hetero's
kernel, never a vendor BLAS.

``subgroups`` says where CUDA's warp operations use 32-wide OpenCL sub-groups (Intel's runtimes;
:mod:`hetero.compiler.ir.warp_emulation`): ``auto`` uses them for votes on every such device and for
shuffles too except on CPU devices, where Intel's runtime runs 32-wide shuffles about 10 times
slower than work-group memory (``benchmarks/warp_subgroups.py``); ``all`` uses them for shuffles
on CPU devices as well; ``off`` never (a driver whose sub-groups misbehave).

The compile cache's bounds (least recently used entries go first; see
:mod:`hetero.compiler.build.cache`):

================================= ======================== ====================================
variable                          key                      meaning (default)
================================= ======================== ====================================
HETERO_CACHE_MAX_SIZE             cache_max_size           bytes on disk under ``cache_dir`` (2GiB)
HETERO_CACHE_MAX_ENTRIES          cache_max_entries        entries on disk (10000)
HETERO_CACHE_MEMORY_MAX_SIZE      cache_memory_max_size    bytes held in memory per process (256MiB)
HETERO_CACHE_MEMORY_MAX_ENTRIES   cache_memory_max_entries entries held in memory per process (512)
================================= ======================== ====================================

Each is at least 1: a size (below) or a whole number of entries.

``drill_quarantine`` (``HETERO_DRILL_QUARANTINE``, set by ``hetero-run`` for its workers) is the
run's own store for quarantines of injected faults (see :mod:`hetero.fault.quarantine`).

``cache_dir`` and ``state_dir`` need not exist yet (hetero makes them), but no part of the
path may be a file (``/dev/null/x`` is refused).

``quarantine_ttl`` (file only) maps a fault class to seconds a device stays quarantined.

``quota`` caps what this process allocates through hetero on each device: one size for every
device (``2GiB``, ``512MiB``, bytes), or per device, backend or ``*`` (a YAML mapping, or
``cuda:0=8GiB,cpu=2GiB`` in the variable). Sizes: IEC units are binary (GiB = 2**30 bytes,
also KiB, MiB, TiB and the one-letter k, m, g, t), SI units decimal (GB = 10**9 bytes, also
KB, MB, TB); a size without a unit is a whole number of bytes (``1.5`` is refused), and
infinity, NaN or more than 2**64 bytes are refused. A key must be ``*``, a backend hetero
has (``cuda``) or one of its devices (``cuda:0``). It becomes the process's scheduler task
(:func:`hetero.scheduler.set_process_task`) when backends are first listed (so before any
allocation; an explicitly set process task wins) and, under ``hetero-run --quota``, in each
worker before its program starts; an allocation past it raises :class:`hetero.QuotaExceeded`.
``cost_sampling`` applies when :mod:`hetero.kernels.kernel` is first imported
(:func:`hetero.scheduler.cost_model.set_sampling`); the samples are saved at exit.

This is the only module that reads ``os.environ`` for hetero's own settings.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetero.core.errors import ConfigError, did_you_mean
from hetero.core.sizes import parse_size

#: The compile cache's default bounds (the ``cache_*max*`` settings).
CACHE_MAX_SIZE = 2 * 2**30
CACHE_MAX_ENTRIES = 10_000
CACHE_MEMORY_MAX_SIZE = 256 * 2**20
CACHE_MEMORY_MAX_ENTRIES = 512
_CACHE_SIZES = ("cache_max_size", "cache_memory_max_size")
_CACHE_COUNTS = ("cache_max_entries", "cache_memory_max_entries")


@dataclasses.dataclass(frozen=True)
class CacheBounds:
    """How big a layer of the compile cache may grow: at most ``max_bytes`` bytes in at most
    ``max_entries`` entries (both at least 1). :attr:`Config.cache_disk_bounds` and
    :attr:`Config.cache_memory_bounds` are the ones in force."""

    max_bytes: int
    max_entries: int

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_entries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cache bound {name} must be a whole number of at least 1, got {value!r}; "
                                 "set cache_max_size/cache_max_entries (or the memory ones) in hetero.yaml")

    def exceeded(self, nbytes: int, entries: int) -> bool:
        return nbytes > self.max_bytes or entries > self.max_entries

    def as_dict(self) -> dict[str, int]:
        return {"max_bytes": self.max_bytes, "max_entries": self.max_entries}

    @classmethod
    def disk_default(cls) -> CacheBounds:
        return cls(CACHE_MAX_SIZE, CACHE_MAX_ENTRIES)

    @classmethod
    def memory_default(cls) -> CacheBounds:
        return cls(CACHE_MEMORY_MAX_SIZE, CACHE_MEMORY_MAX_ENTRIES)


DEVICE_KINDS = ("gpu", "accelerator", "cpu")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _user_dir(xdg_variable: str, fallback: str) -> Path:
    base = os.environ.get(xdg_variable) or str(Path.home() / fallback)
    return Path(base) / "hetero"


@dataclasses.dataclass(frozen=True)
class Config:
    """The settings in force. Build with :func:`get_config`; never mutated."""

    device: str = "auto"
    backends: tuple[str, ...] | None = None
    device_order: tuple[str, ...] = DEVICE_KINDS
    cache_dir: Path = dataclasses.field(default_factory=lambda: _user_dir("XDG_CACHE_HOME", ".cache"))
    state_dir: Path = dataclasses.field(default_factory=lambda: _user_dir("XDG_STATE_HOME", ".local/state"))
    log: str = "WARNING"
    faults: tuple[str, ...] = ()
    faults_persist: bool = False  # injected faults' quarantines go to the persistent store (default: the drill's)
    drill_quarantine: Path | None = None  # the run-scoped store of a drill's quarantines (hetero-run sets it)
    allow_quarantined: bool = False  # a quarantined device named explicitly is used (default: DeviceQuarantinedError)
    policy: str = "first-fit"
    health_interval: float = 5.0
    quarantine_ttl: Mapping[str, float] = dataclasses.field(default_factory=dict)
    quota: Mapping[str, int] = dataclasses.field(default_factory=dict)  # device/backend/"*" -> bytes; empty: none
    cost_sampling: int = 0  # time every k-th launch; 0: off
    blas: str = "auto"  # matmul's routine: "auto" (measured per shape class), "on" (vendor BLAS), "off" (tiled kernel)
    subgroups: str = "auto"  # CUDA's warps on 32-wide OpenCL sub-groups: "auto", "off" or "all"
    host_fallback: str = "warn"  # linalg/fft with no vendor library on the device: "warn", "allow" or "error"
    progress: str = "auto"  # kernel builds longer than a second said on stderr: "auto" (a terminal), "on", "off"
    bounds_check: bool = False  # every kernel checks its array indices (hetero.compiler.ir.bounds)
    cache_max_size: int = CACHE_MAX_SIZE  # bytes of the disk cache
    cache_max_entries: int = CACHE_MAX_ENTRIES
    cache_memory_max_size: int = CACHE_MEMORY_MAX_SIZE  # bytes of the in-process layer
    cache_memory_max_entries: int = CACHE_MEMORY_MAX_ENTRIES
    source: str | None = None  # the file the settings came from, for error messages

    @property
    def cache_disk_bounds(self) -> CacheBounds:
        return CacheBounds(self.cache_max_size, self.cache_max_entries)

    @property
    def cache_memory_bounds(self) -> CacheBounds:
        return CacheBounds(self.cache_memory_max_size, self.cache_memory_max_entries)


_KEYS = tuple(f.name for f in dataclasses.fields(Config) if f.name != "source")
_ENV = {
    "HETERO_DEVICE": "device",
    "HETERO_BACKENDS": "backends",
    "HETERO_CACHE_DIR": "cache_dir",
    "HETERO_STATE_DIR": "state_dir",
    "HETERO_LOG": "log",
    "HETERO_FAULTS": "faults",
    "HETERO_FAULTS_PERSIST": "faults_persist",
    "HETERO_DRILL_QUARANTINE": "drill_quarantine",
    "HETERO_ALLOW_QUARANTINED": "allow_quarantined",
    "HETERO_POLICY": "policy",
    "HETERO_HEALTH_INTERVAL": "health_interval",
    "HETERO_QUOTA": "quota",
    "HETERO_COST_SAMPLING": "cost_sampling",
    "HETERO_BLAS": "blas",
    "HETERO_SUBGROUPS": "subgroups",
    "HETERO_HOST_FALLBACK": "host_fallback",
    "HETERO_PROGRESS": "progress",
    "HETERO_BOUNDS_CHECK": "bounds_check",
    "HETERO_CACHE_MAX_SIZE": "cache_max_size",
    "HETERO_CACHE_MAX_ENTRIES": "cache_max_entries",
    "HETERO_CACHE_MEMORY_MAX_SIZE": "cache_memory_max_size",
    "HETERO_CACHE_MEMORY_MAX_ENTRIES": "cache_memory_max_entries",
}
_FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
POLICIES = ("first-fit", "binpack", "spread", "fastest", "priority")
HOST_FALLBACK_MODES = ("warn", "allow", "error")
PROGRESS_MODES = ("auto", "on", "off")
SUBGROUP_MODES = ("auto", "off", "all")
BLAS_MODES = ("auto", "on", "off")


def config_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The YAML file that applies, or None when there is none."""
    env = os.environ if environ is None else environ
    if env.get("HETERO_CONFIG"):
        path = Path(env["HETERO_CONFIG"])
        if not path.is_file():
            raise ConfigError(f"HETERO_CONFIG names {path}, which is not a file; fix the path or unset HETERO_CONFIG")
        return path
    for candidate in (Path("hetero.yaml"), _user_dir("XDG_CONFIG_HOME", ".config") / "config.yaml"):
        if candidate.is_file():
            return candidate
    return None


def load_config(environ: Mapping[str, str] | None = None) -> Config:
    """Read the file and the environment into a :class:`Config` (uncached; see :func:`get_config`)."""
    env = os.environ if environ is None else environ
    path = config_file(env)
    raw: dict[str, tuple[Any, str]] = {}
    if path is not None:
        raw = {key: (value, str(path)) for key, value in _read_yaml(path).items()}
    for variable, key in _ENV.items():
        if env.get(variable):
            raw[key] = (env[variable], f"environment variable {variable}")
    values = {key: _parse(key, value, origin) for key, (value, origin) in raw.items()}
    return Config(**values, source=str(path) if path else None)


@functools.lru_cache(maxsize=1)
def get_config() -> Config:
    """The configuration in force, parsed once per process."""
    return load_config()


def reload_config() -> Config:
    """Forget the parsed configuration and read it again (after changing the file or env)."""
    get_config.cache_clear()
    return get_config()


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # only when a file exists: keeps `import hetero` light

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings, got {type(data).__name__}")
    for key in data:
        if key not in _KEYS:
            raise ConfigError(
                f"{path}: unknown key {key!r}; valid keys: {', '.join(_KEYS)}{did_you_mean(str(key), _KEYS)}"
            )
    return data


def _names(value: Any, key: str, origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(part).strip() for part in value]
    else:
        raise ConfigError(f"{origin}: {key!r} must be a list or a comma-separated string, got {value!r}")
    items = [item for item in items if item]
    if not items:
        raise ConfigError(f"{origin}: {key!r} is empty; name at least one, or remove the setting")
    return tuple(items)


def _parse(key: str, value: Any, origin: str) -> Any:
    if key == "device":
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{origin}: 'device' must be a device spec such as 'auto', 'cuda:0' or 'cpu', got {value!r}")
        return value.strip()
    if key == "backends":
        return tuple(name.lower() for name in _names(value, key, origin))
    if key == "device_order":
        kinds = tuple(name.lower() for name in _names(value, key, origin))
        for kind in kinds:
            if kind not in DEVICE_KINDS:
                raise ConfigError(
                    f"{origin}: 'device_order' has {kind!r}; valid kinds: {', '.join(DEVICE_KINDS)}"
                    + did_you_mean(kind, DEVICE_KINDS)
                )
        return kinds
    if key == "blas":
        mode = {True: "on", False: "off"}.get(value, str(value).strip().lower())  # type: ignore[call-overload]
        mode = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}.get(mode, mode)
        if mode not in BLAS_MODES:
            raise ConfigError(f"{origin}: 'blas' is {value!r}; valid modes: {', '.join(BLAS_MODES)} (auto: the "
                              "faster of the vendor BLAS and hetero's kernel as measured, on: the vendor BLAS, "
                              "off: hetero's kernel)" + did_you_mean(mode, BLAS_MODES))
        return mode
    if key in ("faults_persist", "allow_quarantined", "bounds_check"):
        flag = str(value).strip().lower()
        if flag not in _FLAGS:
            raise ConfigError(f"{origin}: {key!r} must be 1/true/yes/on or 0/false/no/off, got {value!r}")
        return _FLAGS[flag]
    if key in ("cache_dir", "state_dir"):
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise ConfigError(f"{origin}: {key!r} must be a directory path, got {value!r}")
        return _directory(Path(os.path.expanduser(str(value))), key, origin)
    if key == "drill_quarantine":  # a file: the run's JSON store, in a folder that is (or can be) there
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise ConfigError(f"{origin}: 'drill_quarantine' must be a file path, got {value!r}")
        path = Path(os.path.expanduser(str(value)))
        if path.is_dir():
            raise ConfigError(f"{origin}: 'drill_quarantine' is {str(path)!r}, a directory; it names the run's "
                              f"drill quarantine file (hetero-run sets it): unset it")
        _directory(path.parent, key, origin)
        return path
    if key == "log":
        level = str(value).upper()
        if level not in LOG_LEVELS:
            raise ConfigError(f"{origin}: 'log' is {value!r}; valid levels: {', '.join(LOG_LEVELS)}")
        return level
    if key == "faults":
        if isinstance(value, str):
            rules = tuple(part.strip() for part in value.split(";") if part.strip())
        elif isinstance(value, (list, tuple)):
            rules = tuple(str(part).strip() for part in value if str(part).strip())
        else:
            raise ConfigError(f"{origin}: 'faults' must be a list of rules or a ';'-separated string, got {value!r}")
        return rules
    if key == "policy":
        policy = str(value).strip().lower()
        if policy not in POLICIES:
            raise ConfigError(f"{origin}: 'policy' is {value!r}; valid policies: {', '.join(POLICIES)}"
                              + did_you_mean(policy, POLICIES))
        return policy
    if key == "subgroups":
        mode = str(value).strip().lower()
        if mode not in SUBGROUP_MODES:
            raise ConfigError(f"{origin}: 'subgroups' is {value!r}; valid modes: {', '.join(SUBGROUP_MODES)} "
                              "(auto: votes on sub-groups, shuffles too except on CPU devices; off: never; "
                              "all: votes and shuffles wherever a device has 32-wide sub-groups)"
                              + did_you_mean(mode, SUBGROUP_MODES))
        return mode
    if key == "progress":
        mode = {True: "on", False: "off"}.get(value, str(value).strip().lower())  # type: ignore[call-overload]
        mode = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}.get(mode, mode)
        if mode not in PROGRESS_MODES:
            raise ConfigError(f"{origin}: 'progress' is {value!r}; valid modes: {', '.join(PROGRESS_MODES)} "
                              "(auto: on when stderr is a terminal)" + did_you_mean(mode, PROGRESS_MODES))
        return mode
    if key == "host_fallback":
        mode = str(value).strip().lower()
        if mode not in HOST_FALLBACK_MODES:
            raise ConfigError(f"{origin}: 'host_fallback' is {value!r}; valid modes: {', '.join(HOST_FALLBACK_MODES)} "
                              "(warn: run on the host and log it once, allow: run on the host quietly, error: refuse)"
                              + did_you_mean(mode, HOST_FALLBACK_MODES))
        return mode
    if key == "health_interval":
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = -1.0
        if not seconds > 0:
            raise ConfigError(f"{origin}: 'health_interval' must be a positive number of seconds, got {value!r}")
        return seconds
    if key == "quarantine_ttl":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{origin}: 'quarantine_ttl' must map fault classes to seconds, got {value!r}")
        ttl: dict[str, float] = {}
        for name, seconds in value.items():
            try:
                ttl[str(name)] = float(seconds)
            except (TypeError, ValueError):
                raise ConfigError(f"{origin}: quarantine_ttl[{name!r}] must be seconds, got {seconds!r}") from None
        return ttl
    if key == "quota":
        return parse_quota(value, origin)
    if key == "cost_sampling":
        every = value.strip() if isinstance(value, str) else value
        if isinstance(every, str) and every.isdigit():
            every = int(every)
        if not isinstance(every, int) or isinstance(every, bool) or every < 0:
            raise ConfigError(f"{origin}: 'cost_sampling' must be a whole number k >= 0 (time every k-th kernel "
                              f"launch; 0 turns sampling off), got {value!r}")
        return every
    if key in _CACHE_SIZES:
        try:
            size = parse_size(value.strip() if isinstance(value, str) else value, repr(key))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{origin}: {exc}") from None
        if size < 1:
            raise ConfigError(f"{origin}: {key!r} must be at least 1 byte (a size such as '2GiB'), got {value!r}; "
                              "unset it for the default")
        return size
    if key in _CACHE_COUNTS:
        count = value.strip() if isinstance(value, str) else value
        if isinstance(count, str) and count.isdigit():
            count = int(count)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ConfigError(f"{origin}: {key!r} must be a whole number of entries, at least 1, got {value!r}; "
                              "unset it for the default")
        return count
    raise ConfigError(f"{origin}: unknown key {key!r}; valid keys: {', '.join(_KEYS)}")  # pragma: no cover


def _directory(path: Path, key: str, origin: str) -> Path:
    """``path`` when it is a directory or could become one: the nearest part that exists
    must be a directory (under ``/dev/null`` every later write would fail, far from here)."""
    for part in (path, *path.parents):
        try:
            is_dir = part.is_dir()
            exists = is_dir or part.exists()
        except OSError:  # unreadable: let the first real use say why
            return path
        if is_dir:
            return path
        if exists:
            what = "is" if part == path else f"would be under {part}, which is"
            raise ConfigError(f"{origin}: {key!r} is {str(path)!r}, which {what} not a directory; "
                              f"give a directory path (it may not exist yet) or unset it for the default")
    return path


_QUOTA_KEY = re.compile(r"\*|(?P<backend>[a-z][a-z0-9_.-]*)(:\d+)?")
# The built-in backends; plugins add theirs through the hetero.backends entry points.
_BUILTIN_BACKENDS = ("cpu", "cuda", "oneapi", "opencl", "rocm")


def _backend_names() -> tuple[str, ...]:
    from importlib.metadata import entry_points  # only for a quota that names a backend

    return tuple(sorted({*_BUILTIN_BACKENDS, *(ep.name for ep in entry_points(group="hetero.backends"))}))


def parse_quota(value: Any, origin: str = "quota") -> dict[str, int]:
    """The ``quota`` setting as ``{device, backend or "*": bytes}`` from a size (``"2GiB"``, bytes:
    every device), a mapping, or ``"cuda:0=8GiB,cpu=2GiB"``; ``origin`` names where it came
    from in the :class:`~hetero.core.errors.ConfigError` raised for a bad one."""
    if isinstance(value, str) and "=" in value:
        pairs: list[tuple[Any, Any]] = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, size = part.partition("=")
            if not sep:
                raise ConfigError(f"{origin}: quota part {part!r} is not DEVICE=SIZE; write e.g. 'cuda:0=8GiB,cpu=2GiB'"
                                  " or one size for every device")
            pairs.append((name, size))
        items = dict(pairs)
    elif isinstance(value, Mapping):
        items = dict(value)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        items = {"*": value}
    else:
        raise ConfigError(f"{origin}: 'quota' must be a size such as '2GiB' or a mapping of devices to sizes, "
                          f"got {value!r}")
    quota: dict[str, int] = {}
    for raw_name, size in items.items():
        name = str(raw_name).strip().lower()
        key = _QUOTA_KEY.fullmatch(name)
        if key is None:
            raise ConfigError(f"{origin}: quota key {raw_name!r} is not a device ('cuda:0'), a backend ('cuda') or '*'")
        backends = _backend_names() if key["backend"] else ()
        if key["backend"] and key["backend"] not in backends:
            raise ConfigError(f"{origin}: quota key {raw_name!r} names no backend hetero has; a key is '*', a backend "
                              f"({', '.join(backends)}) or one of its devices ('cuda:0')"
                              + did_you_mean(key["backend"], backends))
        try:
            quota[name] = parse_size(size.strip() if isinstance(size, str) else size, f"quota for {name}")
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{origin}: {exc}") from None
    if quota.get("*") == 0 and len(quota) == 1:
        raise ConfigError(f"{origin}: a quota of 0 bytes on every device allows no allocation; give a size such as "
                          "'2GiB', or unset it for no quota")
    return quota
