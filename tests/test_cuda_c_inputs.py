"""What the CUDA C front end reads and writes: only regular files (a FIFO never ended its open,
``/dev/zero`` grew to gigabytes), a parse bounded in time, memory and preprocessed size that
says which limit it passed (macro bombs ran for minutes and took 2.4 GB), and stand-ins for
missing headers only in a private folder (``#include "/abs/dir/x.h"`` and ``"../../x.h"``
created files where they pointed). Each case runs in a child process with a timeout, so that a
hang or a runaway parse fails the test instead of holding CI."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("clang") is None, reason="libclang is not installed (pip install libclang)"),
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs and /dev/zero"),
]

KERNEL = "__global__ void k(float* out) { out[0] = 1.0f; }\n"

#: argv[1]: the case (JSON): what to build, and limits to set first. Prints one JSON line: the
#: outcome, a CompileError's message, file and line, and the largest child process's memory.
_CHILD = r"""
import json, resource, sys
case = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # a runaway read fails here, not on the machine
try:
    from hetero.compiler.frontend import cuda_c_limits
    for name, value in case.get("limits", {}).items():
        setattr(cuda_c_limits, name, value)
except ImportError:
    pass
import numpy as np
from hetero.compat import cuda
from hetero.compat.cuda import RawKernel, RawModule
from hetero.core.errors import CompileError
try:
    if case["build"] == "kernel":
        RawKernel(case["code"], "k", path=case["path"])
    elif case["build"] == "module":
        RawModule(path=case["path"])
    else:
        mul = cuda.declare_device("mul", "float32(float32, float32)", link=case["path"])

        @cuda.jit
        def square(x):
            x[0] = mul(x[0], x[0])

        square[1, 1](np.ones(1, np.float32))
    report = {"outcome": "compiled"}
except CompileError as exc:
    report = {"outcome": "CompileError", "message": exc.message, "file": exc.file, "line": exc.line}
report["children_max_rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps(report))
"""


def _child(folder: Path) -> str:
    """The child's script, as a file: a @cuda.jit kernel needs its source in one."""
    script = folder / "child.py"
    script.write_text(_CHILD)
    return str(script)


def _build(case: dict[str, object], folder: Path, timeout: float = 120) -> tuple[dict[str, object], float]:
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, _child(folder), json.dumps(case)], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"building {case['build']} from {case.get('path')} did not return in {timeout} s")
    elapsed = time.monotonic() - start
    assert done.returncode == 0, f"the child failed (status {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1]), elapsed


def _bomb(doublings: int, seed: str = "1,") -> str:
    """Macros doubling ``doublings`` times over: ``A<n>`` expands to 2**n copies of ``seed``."""
    return "\n".join([f"#define A0 {seed}", *(f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, doublings + 1))])


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.cu"
    os.mkfifo(path)
    return path


def test_an_include_of_a_fifo_is_refused_naming_it(tmp_path: Path, fifo: Path) -> None:
    source = tmp_path / "k.cu"
    report, elapsed = _build({"build": "kernel", "path": str(source), "code": f'#include "{fifo}"\n{KERNEL}'}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert f"{fifo} is not a regular file (a FIFO)" in str(report["message"]) or f"{fifo}, a FIFO" in str(report["message"])
    assert (report["file"], report["line"]) == (str(source), 1)
    assert elapsed < 60


def test_a_module_or_a_linked_file_that_is_a_fifo_is_refused(tmp_path: Path, fifo: Path) -> None:
    for build in ("module", "declare_device"):
        report, elapsed = _build({"build": build, "path": str(fifo)}, tmp_path)
        assert report["outcome"] == "CompileError", (build, report)
        assert f"{fifo} is not a regular file (a FIFO)" in str(report["message"]), (build, report)
        assert elapsed < 60


def test_an_include_of_dev_zero_is_refused_not_read(tmp_path: Path) -> None:
    report, elapsed = _build({"build": "kernel", "path": str(tmp_path / "k.cu"), "code": f'#include "/dev/zero"\n{KERNEL}'}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert "/dev/zero, a device" in str(report["message"]), report
    assert report["line"] == 1 and elapsed < 60


def test_a_header_past_the_source_size_limit_is_refused(tmp_path: Path) -> None:
    header = tmp_path / "big.h"
    with open(header, "wb") as out:
        out.truncate(2 << 20)  # sparse: 2 MiB of zeros, past the 1 MiB limit set below
    report, _ = _build({"build": "kernel", "path": str(tmp_path / "k.cu"), "code": f'#include "big.h"\n{KERNEL}',
                        "limits": {"MAX_SOURCE_BYTES": 1 << 20}}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert str(header) in str(report["message"]) and "MAX_SOURCE_BYTES" in str(report["message"]), report


def test_a_macro_bomb_past_the_token_limit_says_so(tmp_path: Path) -> None:
    """2**20 tokens from twenty doublings; the limit set to 100,000."""
    code = f"{_bomb(20)}\nint sink[] = {{ A20 0 }};\n{KERNEL}"
    report, elapsed = _build({"build": "kernel", "path": str(tmp_path / "k.cu"), "code": code,
                              "limits": {"MAX_PREPROCESSED_TOKENS": 100_000}}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert re.search(r"preprocesses to 2[0-9]{6} tokens, more than 100000 ", str(report["message"])), report
    assert "MAX_PREPROCESSED_TOKENS" in str(report["message"])
    assert report["file"] == str(tmp_path / "k.cu") and elapsed < 60


def test_a_macro_bomb_past_the_memory_limit_says_so_and_stays_under_it(tmp_path: Path) -> None:
    """2**24 (2.4 GB in libclang before): stopped at the limit, set to 512 MiB here."""
    code = f"{_bomb(24)}\nint sink[] = {{ A24 0 }};\n{KERNEL}"
    report, elapsed = _build({"build": "kernel", "path": str(tmp_path / "k.cu"), "code": code,
                              "limits": {"MAX_PARSE_MEMORY": 512 << 20}}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert "more than 512 MiB of memory" in str(report["message"]) and "MAX_PARSE_MEMORY" in str(report["message"])
    assert int(report["children_max_rss"]) < 768 << 20, report  # the parse's process, stopped near the limit
    assert elapsed < 60


def test_preprocessing_past_the_time_limit_says_so(tmp_path: Path) -> None:
    """An ``#if`` over 2**24 terms: seconds of preprocessing and little memory; the limit set to 1 s."""
    code = f"{_bomb(24, '+1')}\n#if 0 A24\n#endif\n{KERNEL}"
    report, elapsed = _build({"build": "kernel", "path": str(tmp_path / "k.cu"), "code": code,
                              "limits": {"MAX_PARSE_SECONDS": 1.0}}, tmp_path)
    assert report["outcome"] == "CompileError", report
    assert "took longer than 1 s" in str(report["message"]) and "MAX_PARSE_SECONDS" in str(report["message"])
    assert elapsed < 60


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def test_stand_ins_for_missing_headers_stay_in_a_private_folder(tmp_path: Path) -> None:
    """``#include`` of missing headers by an absolute path, by ``../../``, and by enough ``../`` to
    climb to the root and back down into this test's folder: nothing appears outside the private
    temp folder, which is gone when the process ends."""
    work = tmp_path / "cwd" / "a" / "b"
    work.mkdir(parents=True)
    private = tmp_path / "tmp"
    private.mkdir()
    source = work / "k.cu"
    source.write_text(KERNEL)
    evil = tmp_path / "evil" / "dir" / "x.h"
    climb = "../" * 40 + str(tmp_path / "climbed" / "y.h").lstrip("/")
    code = f'#include "{evil}"\n#include "../../x.h"\n#include <{climb}>\n#include "{climb}"\n{KERNEL}'
    env = {**os.environ, "TMPDIR": str(private)}
    case = json.dumps({"build": "kernel", "path": str(source), "code": code})
    script = _child(private)
    before = _files_under(tmp_path)
    done = subprocess.run([sys.executable, script, case], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["outcome"] == "compiled", done.stdout
    assert not evil.exists() and not (tmp_path / "climbed").exists()
    assert not (tmp_path / "cwd" / "x.h").exists()  # "../../x.h" from the source's folder
    assert _files_under(tmp_path) - before == set(), "files left behind outside the private folder, or in it"
