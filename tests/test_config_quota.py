"""The ``quota`` and ``cost_sampling`` settings: parsed from the file and the environment, bad
values named with their origin; a configured quota caps a plain ``python`` process (applied
when backends are first listed) and an explicitly set process task wins over it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_python

from hetero.core.config import Config, load_config, parse_quota
from hetero.core.errors import ConfigError

MIB = 1 << 20


def _file(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "hetero.yaml"
    path.write_text(text)
    return {"HETERO_CONFIG": str(path)}


def test_defaults_are_no_quota_and_no_sampling() -> None:
    assert Config().quota == {} and Config().cost_sampling == 0
    assert load_config({}).quota == {} and load_config({}).cost_sampling == 0


@pytest.mark.parametrize(("text", "quota"), [
    ("64MiB", {"*": 64 * MIB}),
    ("1073741824", {"*": 1 << 30}),
    ("1.5g", {"*": 3 << 29}),
    ("cuda:0=8GiB, CPU=512 MiB", {"cuda:0": 8 << 30, "cpu": 512 * MIB}),
    ("cuda=2GiB,*=1GiB", {"cuda": 2 << 30, "*": 1 << 30}),
])
def test_the_environment_gives_one_size_or_device_sizes(text: str, quota: dict[str, int]) -> None:
    assert load_config({"HETERO_QUOTA": text}).quota == quota


def test_the_file_gives_a_size_or_a_mapping_and_the_environment_overrides_it(tmp_path: Path) -> None:
    assert load_config(_file(tmp_path, "quota: 2GiB\n")).quota == {"*": 2 << 30}
    assert load_config(_file(tmp_path, "quota: 1048576\n")).quota == {"*": MIB}
    env = _file(tmp_path, "quota:\n  cuda:0: 8GiB\n  oneapi: 1GiB\n  cpu: 0\ncost_sampling: 10\n")
    config = load_config(env)
    assert config.quota == {"cuda:0": 8 << 30, "oneapi": 1 << 30, "cpu": 0}  # 0 on one device: forbidden there
    assert config.cost_sampling == 10
    overridden = load_config({**env, "HETERO_QUOTA": "64MiB", "HETERO_COST_SAMPLING": "0"})
    assert overridden.quota == {"*": 64 * MIB} and overridden.cost_sampling == 0


@pytest.mark.parametrize(("value", "words"), [
    ("64XB", ["HETERO_QUOTA", "'64XB'", "512MiB"]),
    ("-1GiB", ["HETERO_QUOTA", "must not be negative"]),
    ("0", ["HETERO_QUOTA", "0 bytes", "allows no allocation"]),
    ("cuda:0=8GiB,cpu", ["HETERO_QUOTA", "'cpu'", "DEVICE=SIZE"]),
    ("cuda 0=1GiB", ["HETERO_QUOTA", "'cuda 0'", "a backend"]),
])
def test_bad_environment_quotas_name_the_variable_and_the_remedy(value: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"HETERO_QUOTA": value})
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("text", ["quota: [1, 2]\n", "quota: true\n", "quota: {cpu: lots}\n"])
def test_bad_file_quotas_name_the_file(tmp_path: Path, text: str) -> None:
    env = _file(tmp_path, text)
    with pytest.raises(ConfigError, match="quota") as info:
        load_config(env)
    assert env["HETERO_CONFIG"] in str(info.value)


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "true"])
def test_bad_cost_sampling_is_named(value: str) -> None:
    with pytest.raises(ConfigError, match="HETERO_COST_SAMPLING: 'cost_sampling' must be a whole number"):
        load_config({"HETERO_COST_SAMPLING": value})


def test_bad_cost_sampling_in_the_file(tmp_path: Path) -> None:
    env = _file(tmp_path, "cost_sampling: 2.5\n")
    with pytest.raises(ConfigError, match="cost_sampling") as info:
        load_config(env)
    assert env["HETERO_CONFIG"] in str(info.value)


def test_parse_quota_names_its_origin() -> None:
    assert parse_quota("cpu=1KiB", "--quota") == {"cpu": 1024}
    with pytest.raises(ConfigError, match="^--quota: "):
        parse_quota("lots", "--quota")


PLAIN = '''
import hetero
from hetero.scheduler import context
assert context.current_task() is None  # nothing applied at import: only when backends are listed
hetero.devices()
task = hetero.scheduler.current_task()
assert task is not None and task.name.startswith("process ") and task.limit("cpu") == 4 << 20, task
kept = hetero.empty(3 << 20, hetero.uint8, device="cpu")  # within
assert task.usage("cpu") == 3 << 20
try:
    hetero.empty(2 << 20, hetero.uint8, device="cpu")
except hetero.QuotaExceeded as exc:
    print("refused:", exc)
else:
    raise SystemExit("no QuotaExceeded past the configured quota")
del kept
'''


def test_a_configured_quota_caps_a_plain_process(tmp_path: Path) -> None:
    result = run_python(PLAIN, env={"HETERO_QUOTA": "4MiB", "HETERO_STATE_DIR": str(tmp_path)})
    assert "refused: cpu: allocating 2097152 bytes" in result.stdout and f"quota of {4 << 20} bytes" in result.stdout


def test_a_per_backend_quota_leaves_other_devices_unlimited(tmp_path: Path) -> None:
    code = ('import hetero\n'
            'hetero.devices()\n'
            'task = hetero.scheduler.current_task()\n'
            'assert task.limit("cpu") == 1024 and task.limit("oneapi:0") is None, task\n'
            'try:\n    hetero.empty(2048, hetero.uint8, device="cpu")\n'
            'except hetero.QuotaExceeded:\n    print("cpu capped")\n')
    result = run_python(code, env={"HETERO_QUOTA": "cpu=1KiB", "HETERO_STATE_DIR": str(tmp_path)})
    assert "cpu capped" in result.stdout


def test_an_explicit_process_task_wins_and_none_is_set_without_a_quota(tmp_path: Path) -> None:
    code = ('import hetero\n'
            'from hetero.scheduler import Task, set_process_task\n'
            'mine = Task("mine", quota="1GiB")\n'
            'set_process_task(mine)\n'
            'hetero.devices()\n'
            'assert hetero.scheduler.current_task() is mine\n'
            'hetero.empty(8 << 20, hetero.uint8, device="cpu")\n'
            'print("ok")\n')
    assert "ok" in run_python(code, env={"HETERO_QUOTA": "4MiB", "HETERO_STATE_DIR": str(tmp_path)}).stdout
    none = 'import hetero\nhetero.devices()\nassert hetero.scheduler.current_task() is None\nprint("none")\n'
    env = {"HETERO_STATE_DIR": str(tmp_path), "HETERO_QUOTA": ""}  # empty: unset
    assert "none" in run_python(none, env=env).stdout


def test_a_bad_quota_fails_the_process_with_the_config_error(tmp_path: Path) -> None:
    result = run_python("import hetero\nhetero.devices()\n", env={"HETERO_QUOTA": "lots",
                                                                   "HETERO_STATE_DIR": str(tmp_path)}, check=False)
    assert result.returncode != 0 and "ConfigError" in result.stderr and "HETERO_QUOTA" in result.stderr


TORCH_LATER = '''
import sys
import hetero
from hetero.torch import memory as torch_memory
seen = []
real = torch_memory.apply_torch_fractions
torch_memory.apply_torch_fractions = lambda: seen.append("torch" in sys.modules) or real()
hetero.devices()  # the configured quota becomes the process task; torch is not imported yet
import torch
assert float(torch.ones(3).sum()) == 3.0  # the import went through as usual
print("fractions applied with torch imported:", seen[-1], len(seen))
'''


def test_torch_imported_after_the_quota_gets_its_memory_fractions(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = run_python(TORCH_LATER, env={"HETERO_QUOTA": "1GiB", "HETERO_STATE_DIR": str(tmp_path)}).stdout
    assert "fractions applied with torch imported: True 2" in out, out  # once at activation, once after torch
