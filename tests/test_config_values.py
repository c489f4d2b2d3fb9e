"""Sizes and directories in the configuration (issue 12, item 13a): SI and IEC units mean
what they say, bytes are whole, and every bad value is a ConfigError naming the variable
and the valid forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetero.core.config import load_config
from hetero.core.errors import ConfigError
from hetero.core.sizes import parse_size


@pytest.mark.parametrize(("text", "nbytes"), [
    ("1GB", 10**9), ("1gb", 10**9), ("1.5GB", 1_500_000_000), ("2 MB", 2 * 10**6), ("1kB", 1000), ("1TB", 10**12),
    ("1GiB", 1 << 30), ("1.5GiB", 1610612736), ("512MiB", 512 << 20), ("1KiB", 1024), ("1TiB", 1 << 40),
    ("1g", 1 << 30), ("1.5g", 3 << 29), ("4k", 4096),
    ("1073741824", 1 << 30), ("1073741824B", 1 << 30), ("1e9", 10**9), (4096, 4096), (1e9, 10**9),
])
def test_si_units_are_powers_of_ten_and_iec_units_powers_of_two(text: str | int, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize(("value", "words"), [
    ("inf", ["HETERO_QUOTA", "'inf'", "GiB", "GB"]),
    ("1e400", ["HETERO_QUOTA", "'1e400'", "larger than"]),
    ("nan", ["HETERO_QUOTA", "'nan'", "GiB"]),
    ("1.5", ["HETERO_QUOTA", "'1.5'", "whole number of bytes"]),
    ("1.5B", ["HETERO_QUOTA", "whole number of bytes"]),
    ("foo=1GiB", ["HETERO_QUOTA", "'foo'", "cuda", "cpu", "'*'"]),
    ("cdua=1GiB", ["HETERO_QUOTA", "'cdua'", "did you mean 'cuda'"]),
    ("cdua:0=1GiB", ["HETERO_QUOTA", "'cdua:0'", "did you mean 'cuda'"]),
    ("cpu=inf", ["HETERO_QUOTA", "quota for cpu", "'inf'"]),
    ("1GBB", ["HETERO_QUOTA", "unknown unit", "GiB", "GB"]),
])
def test_bad_quotas_name_the_variable_and_the_valid_forms(value: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"HETERO_QUOTA": value})
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1.5, 1e400])
def test_bad_numeric_sizes(value: float) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(value)


def test_the_config_docstring_says_what_the_units_mean() -> None:
    import hetero.core.config

    assert "GB = 10**9" in (hetero.core.config.__doc__ or "") and "GiB = 2**30" in (hetero.core.config.__doc__ or "")


@pytest.mark.parametrize("variable", ["HETERO_STATE_DIR", "HETERO_CACHE_DIR"])
@pytest.mark.parametrize("path", ["/dev/null/x", "/dev/null", "/etc/hostname/sub/dir"])
def test_a_directory_setting_under_a_file_is_refused(variable: str, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config({variable: path})
    message = str(info.value)
    assert variable in message and path in message and "not a directory" in message, message


def test_a_directory_that_does_not_exist_yet_is_fine(tmp_path: object) -> None:
    assert str(load_config({"HETERO_STATE_DIR": f"{tmp_path}/new/state"}).state_dir).endswith("new/state")


def test_the_drill_quarantine_setting_names_a_file(tmp_path: Path) -> None:
    # hetero-run hands its workers the run's drill store, a JSON file that exists once the run began.
    store = tmp_path / "run" / "drill-quarantine.json"
    store.parent.mkdir()
    store.write_text("{}")
    assert load_config({"HETERO_DRILL_QUARANTINE": str(store)}).drill_quarantine == store
    with pytest.raises(ConfigError) as info:
        load_config({"HETERO_DRILL_QUARANTINE": "/dev/null/drill.json"})
    assert "HETERO_DRILL_QUARANTINE" in str(info.value) and "/dev/null" in str(info.value)
    with pytest.raises(ConfigError):
        load_config({"HETERO_DRILL_QUARANTINE": str(tmp_path)})  # a directory, not a file
