"""A cold first operation says that it is building kernels, on a terminal, and where they are cached."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hetero
from hetero.core import build_progress


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_progress, "THRESHOLD", 0.05)
    monkeypatch.setattr(build_progress, "GRACE", 0.05)


def _wait_for(capfd: pytest.CaptureFixture[str], text: str, seconds: float = 10.0) -> str:
    seen = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen += capfd.readouterr().err
        if text in seen:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"{text!r} not printed in {seconds} s; stderr: {seen!r}")


def test_slow_builds_are_announced_then_summed_up(fast: None, monkeypatch: pytest.MonkeyPatch,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HETERO_PROGRESS", "on")
    hetero.reload_config()
    with build_progress.building("probe:0", "k1(f32[:])", "/cache/here"):
        time.sleep(0.3)
    with build_progress.building("probe:0", "k2(f32[:])", "/cache/here"):  # within the grace: the same episode
        pass
    err = _wait_for(capfd, "built 2 kernels for probe:0")
    assert err.count("building kernels for probe:0") == 1
    assert "cached in /cache/here" in err


def test_fast_builds_and_progress_off_say_nothing(fast: None, monkeypatch: pytest.MonkeyPatch,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HETERO_PROGRESS", "on")
    hetero.reload_config()
    with build_progress.building("probe:1", "quick()"):
        pass
    monkeypatch.setenv("HETERO_PROGRESS", "off")
    hetero.reload_config()
    with build_progress.building("probe:2", "slow()"):
        time.sleep(0.3)
    time.sleep(0.3)
    assert "probe" not in capfd.readouterr().err


def test_auto_says_nothing_when_stderr_is_not_a_terminal(fast: None, monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HETERO_PROGRESS", "auto")
    hetero.reload_config()
    with build_progress.building("probe:3", "slow()"):
        time.sleep(0.3)
    time.sleep(0.3)
    assert "probe" not in capfd.readouterr().err


def test_bad_progress_setting_names_the_valid_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_PROGRESS", "loud")
    with pytest.raises(hetero.ConfigError, match="'progress' is 'loud'; valid modes: auto, on, off"):
        hetero.reload_config()
    monkeypatch.delenv("HETERO_PROGRESS")
    hetero.reload_config()


def test_a_cold_first_operation_on_a_terminal_says_it_is_building(tmp_path: Path) -> None:
    """The newcomer's case: a fresh cache, stderr a terminal, the first array operation on cpu."""
    if "cpu" not in [d.name for d in hetero.devices()]:
        pytest.skip("no cpu device")
    code = ("import numpy as np, hetero; x = hetero.arange(10, dtype='float64', device='cpu');"
            "print('result', float(np.asarray((x * 3 + 1).sum())))")
    env = {**os.environ, "HETERO_CACHE_DIR": str(tmp_path / "cache"), "HETERO_PROGRESS": "auto"}
    env.pop("HETERO_LOG", None)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=follower, env=env)
        os.close(follower)
        err = b""
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    err += os.read(leader, 4096)
                except OSError:
                    break
        out = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0].decode()
        while select.select([leader], [], [], 0.1)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(leader)
    text = err.decode(errors="replace")
    assert "result 145.0" in out
    assert "hetero: building kernels for cpu" in text, text
    assert f"for cpu in " in text and f"cached in {tmp_path / 'cache'}" in text, text
