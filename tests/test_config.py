"""Configuration: YAML file plus environment, parsed into a frozen dataclass; bad input
names the file, the key and the valid choices."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hetero.core.config import Config, load_config
from hetero.core.errors import ConfigError


def _write(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "hetero.yaml"
    path.write_text(text)
    return {"HETERO_CONFIG": str(path)}


def test_defaults_without_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config({"XDG_CONFIG_HOME": str(tmp_path)})
    assert config.device == "auto" and config.backends is None and config.log == "WARNING"
    assert config.device_order == ("gpu", "accelerator", "cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.device = "cpu"  # type: ignore[misc]


def test_file_values_are_parsed(tmp_path: Path) -> None:
    env = _write(tmp_path, "device: oneapi\nbackends: [cpu, oneapi]\ncache_dir: ~/hc\nlog: debug\ndevice_order: [cpu, gpu]\n")
    config = load_config(env)
    assert config.device == "oneapi" and config.backends == ("cpu", "oneapi")
    assert config.cache_dir == Path("~/hc").expanduser() and config.log == "DEBUG"
    assert config.device_order == ("cpu", "gpu") and config.source == env["HETERO_CONFIG"]


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    env = _write(tmp_path, "device: oneapi\nbackends: cpu\n")
    config = load_config({**env, "HETERO_DEVICE": "cpu", "HETERO_BACKENDS": "cpu, opencl", "HETERO_CACHE_DIR": "/x"})
    assert config.device == "cpu" and config.backends == ("cpu", "opencl") and config.cache_dir == Path("/x")


def test_unknown_key_names_file_key_and_choices(tmp_path: Path) -> None:
    env = _write(tmp_path, "devise: cpu\n")
    with pytest.raises(ConfigError) as info:
        load_config(env)
    message = str(info.value)
    assert env["HETERO_CONFIG"] in message and "'devise'" in message
    assert "valid keys" in message and "did you mean 'device'" in message


def test_bad_value_names_the_valid_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="valid levels: DEBUG"):
        load_config(_write(tmp_path, "log: loud\n"))
    with pytest.raises(ConfigError, match="valid kinds: gpu, accelerator, cpu"):
        load_config(_write(tmp_path, "device_order: [gpu, tpu]\n"))
    with pytest.raises(ConfigError, match="'backends' is empty"):
        load_config(_write(tmp_path, "backends: []\n"))
    with pytest.raises(ConfigError, match="environment variable HETERO_LOG"):
        load_config({"HETERO_LOG": "chatty", "HETERO_CONFIG": _write(tmp_path, "")["HETERO_CONFIG"]})


def test_bad_yaml_and_bad_top_level(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "device: [unclosed\n"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(_write(tmp_path, "- cpu\n"))


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "device: !!python/object/apply:os.system ['echo hacked']\n"))


def test_missing_config_file_named_by_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a file"):
        load_config({"HETERO_CONFIG": str(tmp_path / "nope.yaml")})


def test_local_hetero_yaml_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hetero.yaml").write_text("device: cpu\n")
    monkeypatch.chdir(tmp_path)
    assert load_config({}).device == "cpu"


def test_config_is_a_frozen_dataclass() -> None:
    assert dataclasses.is_dataclass(Config) and Config.__dataclass_params__.frozen  # type: ignore[attr-defined]
