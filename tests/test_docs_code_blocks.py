"""Every code block of README.md and docs/ runs as written.

Each ```python block runs in a fresh interpreter (this environment's Python), as a script in a
temporary folder that holds links to the repository's ``examples/`` and ``benchmarks/`` (so
``from examples.make_onnx_model import write_model`` works, as from the repository's root); each ```console
block's ``$ `` lines (a trailing ``\\`` continues one) and each ```sh / ```bash block run in bash
from such a folder, this environment's ``bin/`` first on PATH, so ``python``, ``hetero`` and
``hetero-run`` are the ones installed here. Blocks in any other language (```text, ```yaml,
```toml) and console blocks without a ``$ `` line are output or configuration, and not run.

A block that needs more than pip brings (PoCL's ``opencl:0``, a GPU, hipcc or nvcc, torch's CUDA,
a running server, minutes of training) says so with ``<!-- skip: REASON -->`` on the line before
it (blank lines between are allowed) or a ``# skip: REASON`` line inside it, and is skipped with
that reason. The devices pip brings are ``cpu`` and ``oneapi:0`` (Intel's OpenCL CPU runtime).

Every run gets a fresh ``HETERO_STATE_DIR`` (quarantines and run folders of the drills stay
there); the kernel cache is the environment's, so blocks reuse the kernels other runs built.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_AS_PYTHON = {"python", "py", "python3"}
RUN_AS_SHELL = {"sh", "bash", "shell"}
RUN_AS_CONSOLE = {"console", "shell-session"}
TIMEOUT_S = 240
SKIP_COMMENT = re.compile(r"<!--\s*skip:\s*(.+?)\s*-->")
SKIP_INSIDE = re.compile(r"^\s*#\s*skip:\s*(.+?)\s*$")
FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """A console block's ``$ `` commands, continuation lines joined."""
        commands: list[str] = []
        lines = iter(self.code.splitlines())
        for line in lines:
            if not line.startswith("$ "):
                continue
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + " " + next(lines, "").strip()
            commands.append(command)
        return commands


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the skip reason each declares."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].lstrip())
        if not match:
            i += 1
            continue
        fence, language = match.group(1), match.group(2).lower()
        indent = len(lines[i]) - len(lines[i].lstrip())
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = [line[indent:] if line[:indent].isspace() else line for line in lines[i + 1:end]]
        reason = None
        before = i - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        if before >= 0 and (comment := SKIP_COMMENT.search(lines[before])):
            reason = comment.group(1)
        for line in body:
            if inside := SKIP_INSIDE.match(line):
                reason = inside.group(1)
        found.append(Block(path, i + 1, language, "\n".join(body) + "\n", reason))
        i = end + 1
    return found


def runnable(block: Block) -> bool:
    if block.language in RUN_AS_PYTHON or block.language in RUN_AS_SHELL:
        return True
    return block.language in RUN_AS_CONSOLE and bool(block.commands())


BLOCKS = [block for path in FILES for block in blocks_of(path) if runnable(block)]


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HETERO_STATE_DIR"] = str(tmp_path / "state")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("HETERO_FAULTS", None)
    return env


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "benchmarks"):
        (work / name).symlink_to(ROOT / name)
    return work


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_code_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(block.skip)
    work, env = _workdir(tmp_path), _environment(tmp_path)
    if block.language in RUN_AS_PYTHON:
        script = work / "docs_block.py"  # beside the examples/ link: `from examples.x import y` works
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        commands = block.commands() if block.language in RUN_AS_CONSOLE else [block.code]
        script.write_text("set -euo pipefail\n" + "\n".join(commands) + "\n", encoding="utf-8")
        argv = ["bash", str(script)]
    try:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id}: still running after {TIMEOUT_S} s; shorten it, or mark it "
                    "<!-- skip: long: ... --> with where it runs instead")
    assert done.returncode == 0, (f"{block.id} ({block.language}) exited {done.returncode}\n--- block ---\n{block.code}"
                                  f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}")


def test_blocks_are_found_and_every_skip_says_why() -> None:
    assert len(BLOCKS) >= 20, [block.id for block in BLOCKS]
    for block in BLOCKS:
        assert block.skip is None or len(block.skip) > 5, f"{block.id}: say what the block needs, not only that it is skipped"
