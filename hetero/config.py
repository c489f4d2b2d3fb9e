"""hetero's configuration: one YAML file plus environment overrides, parsed once.

Where the file is: ``$HETERO_CONFIG``, else ``./hetero.yaml``, else
``$XDG_CONFIG_HOME/hetero/config.yaml`` (``~/.config/hetero/config.yaml``).
Environment variables override the file:

================== ============== ==========================================
variable           key            meaning
================== ============== ==========================================
HETERO_DEVICE      device         default device spec (``auto``, ``cuda:0``, ``cpu``…)
HETERO_BACKENDS    backends       comma-separated backends to load; others are ignored
HETERO_CACHE_DIR   cache_dir      where compiled kernels and generated files go
HETERO_STATE_DIR   state_dir      where persistent state (quarantine, costs) goes
HETERO_LOG         log            log level of the ``hetero`` logger
HETERO_FAULTS      faults         fault-injection rules, ``;``-separated (see ``hetero.fault.inject``)
HETERO_POLICY      policy         default placement policy of ``hetero.device("auto")``
HETERO_HEALTH_INTERVAL health_interval seconds between health polls of the monitor
================== ============== ==========================================

``quarantine_ttl`` (file only) maps a fault class to seconds a device stays quarantined.

This is the only module that reads ``os.environ`` for hetero's own settings.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetero.errors import ConfigError, did_you_mean

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
    policy: str = "first-fit"
    health_interval: float = 5.0
    quarantine_ttl: Mapping[str, float] = dataclasses.field(default_factory=dict)
    source: str | None = None  # the file the settings came from, for error messages


_KEYS = tuple(f.name for f in dataclasses.fields(Config) if f.name != "source")
_ENV = {
    "HETERO_DEVICE": "device",
    "HETERO_BACKENDS": "backends",
    "HETERO_CACHE_DIR": "cache_dir",
    "HETERO_STATE_DIR": "state_dir",
    "HETERO_LOG": "log",
    "HETERO_FAULTS": "faults",
    "HETERO_POLICY": "policy",
    "HETERO_HEALTH_INTERVAL": "health_interval",
}
POLICIES = ("first-fit", "binpack", "spread", "fastest", "priority")


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
    if key in ("cache_dir", "state_dir"):
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise ConfigError(f"{origin}: {key!r} must be a directory path, got {value!r}")
        return Path(os.path.expanduser(str(value)))
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
    raise ConfigError(f"{origin}: unknown key {key!r}; valid keys: {', '.join(_KEYS)}")  # pragma: no cover
