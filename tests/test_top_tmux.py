"""``hetero top`` in a real terminal: started in a detached tmux session of a fixed size (a private
tmux server, ignoring the user's configuration), it draws the devices and the quarantine, quits on
``q``, Ctrl-C or SIGTERM, and gives the terminal back as it was (canonical mode and echo on again)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the live view needs a real terminal")
SESSION = "top"
DRAW_TIMEOUT_S = 90.0  # device discovery, then the first frame (a loaded CI machine is slow)
EXIT_TIMEOUT_S = 20.0


class Tmux:
    """A tmux server of its own (its socket in a fresh folder), killed with everything in it."""

    def __init__(self, folder: Path) -> None:
        self.socket = folder / "tmux.sock"

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert TMUX is not None
        return subprocess.run([TMUX, "-S", str(self.socket), "-f", "/dev/null", *args], capture_output=True,
                              text=True, timeout=30, check=check)

    def pane(self) -> str:
        found = self("capture-pane", "-p", "-t", SESSION, check=False)
        return found.stdout if found.returncode == 0 else ""

    def wait_for(self, words: tuple[str, ...], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        pane = ""
        while time.monotonic() < deadline:
            pane = self.pane()
            if all(word in pane for word in words):
                return pane
            time.sleep(0.2)
        raise AssertionError(f"the pane never showed {words} within {timeout:g}s; it shows:\n{pane}")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    folder = Path(tempfile.mkdtemp(prefix="hetero-top-"))  # short: a unix socket path has ~100 bytes
    server = Tmux(folder)
    try:
        yield server
    finally:
        server("kill-server", check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for_file(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"hetero top did not exit within {timeout:g}s of the key")


def _child_of(pid: int) -> int:
    """The one child process of ``pid`` (the shell's ``hetero top``), from /proc."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.parametrize("key", ["q", "C-c", "SIGTERM"])
def test_top_draws_devices_and_quarantine_then_quits_and_restores_the_terminal(
        key: str, tmux: Tmux, state_dir: Path, tmp_path: Path) -> None:
    from hetero.fault import quarantine

    quarantine.add("id-maintained", "maintenance", "degraded", ttl=3600, name="cuda:7", quiet=True)
    exit_file, stty_file = tmp_path / "exit-status", tmp_path / "stty"
    # `trap : INT`: the wrapping shell outlives a Ctrl-C (hetero top's own), and its children still get SIGINT
    command = (f"trap : INT; env PYTHONPATH={ROOT} HETERO_STATE_DIR={state_dir} {sys.executable} -m hetero.cli.main "
               f"top --interval 0.3; status=$?; stty -a > {stty_file}; echo $status > {exit_file}.part; "
               f"mv {exit_file}.part {exit_file}")
    tmux("new-session", "-d", "-x", "140", "-y", "50", "-s", SESSION, f"sh -c '{command}'")
    pane = tmux.wait_for(("Devices", "Quarantine", "cuda:7"), DRAW_TIMEOUT_S)
    lines = pane.splitlines()
    assert any(line.startswith("│ cpu ") for line in lines), pane
    assert "maintenance" in pane and "degraded" in pane and "q quits" in pane
    assert re.search(r"\b\d+m \d\ds\b", next(line for line in lines if "cuda:7" in line))  # time left: "59m 58s"
    if key == "SIGTERM":  # a service manager or `kill` stopping it: the terminal must come back too
        if not Path("/proc/self/task").is_dir():
            pytest.skip("finding the process to signal reads /proc (Linux)")
        shell = int(tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").stdout)
        os.kill(_child_of(shell), signal.SIGTERM)
    else:
        tmux("send-keys", "-t", SESSION, key)
    status = _wait_for_file(exit_file, EXIT_TIMEOUT_S)
    assert status.strip() == ("143" if key == "SIGTERM" else "0")  # 128 + SIGTERM, as a shell reports a kill
    modes = stty_file.read_text().split()
    assert "icanon" in modes and "echo" in modes and "-icanon" not in modes and "-echo" not in modes
