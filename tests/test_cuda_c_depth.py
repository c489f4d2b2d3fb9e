"""CUDA C nested too deep for the front end: a CompileError naming the file, the line and the
limit, never libclang crashing the process (a 15,000-term expression was a SIGSEGV), a
RecursionError, or part of a kernel silently dropped inside libclang's callbacks. Each risky
source is compiled in a child process, so that a crash shows as a signal, not a dead pytest."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.compat.cuda import RawKernel

pytestmark = pytest.mark.skipif(importlib.util.find_spec("clang") is None,
                                reason="libclang is not installed (pip install libclang)")

#: Compiles stdin's kernel ``k`` (its path argv[1]); when it compiles, runs it once on cpu with
#: a = [1, 2, 3, 4]. argv[2] = "starved": no stack room for the lowering beyond Python's limit of 400.
_CHILD = r"""
import json, sys
import numpy as np
import hetero
from hetero.compat.cuda import RawKernel
from hetero.core.errors import CompileError
if sys.argv[2] == "starved":
    try:
        from hetero.compiler.frontend import cuda_c_cursors
        cuda_c_cursors.FRAMES_PER_LEVEL = 0
    except ImportError:
        pass
    sys.setrecursionlimit(400)
try:
    kernel = RawKernel(sys.stdin.read(), "k", path=sys.argv[1])
except CompileError as exc:
    print(json.dumps({"outcome": "CompileError", "message": exc.message, "file": exc.file, "line": exc.line}))
else:
    a, out = np.array([1, 2, 3, 4], np.float32), np.zeros(1, np.float32)
    with hetero.use_device("cpu"):
        kernel((1,), (1,), (a, out))
    print(json.dumps({"outcome": "compiled", "out": float(out[0])}))
"""


def _sum(terms: int) -> str:
    return " + ".join(f"a[{i % 4}]" for i in range(terms))


def _sum_kernel(terms: int) -> str:
    return f"__global__ void k(const float* a, float* out) {{\n    out[0] = {_sum(terms)};\n}}\n"


def _nested_ifs_kernel(levels: int) -> str:
    body = "out[0] = 1.0f;"
    for i in range(levels):
        body = f"if (a[{i % 4}] > 0.0f) {{ {body} }}"
    return f"__global__ void k(const float* a, float* out) {{\n    {body}\n}}\n"


def _compile_in_child(source: str, path: Path, mode: str = "plain") -> dict[str, object]:
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path), mode], input=source, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, f"the child died (status {result.returncode}):\n{result.stderr[-3000:]}"
    assert "Exception ignored" not in result.stderr, result.stderr[-3000:]  # nothing lost in a libclang callback
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_an_expression_of_15000_terms_is_a_compile_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "wide.cu"
    report = _compile_in_child(_sum_kernel(15_000), path)
    assert report["outcome"] == "CompileError", report
    assert report["file"] == str(path) and report["line"] == 2
    assert "more than 256 operators" in str(report["message"]) and "MAX_OPERATORS" in str(report["message"])


@pytest.mark.parametrize(("what", "source", "expected"), [
    ("500 terms", _sum_kernel(500), 1250.0),
    ("250 nested ifs", _nested_ifs_kernel(250), 1.0),
])
def test_deep_source_compiles_right_or_is_refused_by_a_limit(tmp_path: Path, what: str, source: str,
                                                              expected: float) -> None:
    path = tmp_path / "deep.cu"
    report = _compile_in_child(source, path)
    if report["outcome"] == "compiled":
        assert report["out"] == expected, (what, report)
    else:
        assert report["file"] == str(path) and report["line"] == 2, report
        assert "cuda_c_limits.MAX_" in str(report["message"]), report


def test_depth_made_by_macros_is_measured_on_the_parsed_tree(tmp_path: Path) -> None:
    """The text scan sees ``out[0] = T1024;``; clang's tree holds 1024 terms."""
    path = tmp_path / "macros.cu"
    source = f"""#define T4 {_sum(4)}
#define T16 T4 + T4 + T4 + T4
#define T64 T16 + T16 + T16 + T16
#define T256 T64 + T64 + T64 + T64
#define T1024 T256 + T256 + T256 + T256
__global__ void k(const float* a, float* out) {{
    out[0] = T1024;
}}
"""
    report = _compile_in_child(source, path)
    assert report["outcome"] == "CompileError", report
    assert report["file"] == str(path) and report["line"] == 7, report
    assert "MAX_TREE_DEPTH" in str(report["message"]), report


def test_running_out_of_python_stack_is_a_compile_error_naming_where(tmp_path: Path) -> None:
    """With no room given (and a recursion limit of 400), 200 terms exhaust the stack mid-walk:
    that is said, with the file and line, instead of a RecursionError or children dropped."""
    path = tmp_path / "starved.cu"
    report = _compile_in_child(_sum_kernel(200), path, "starved")
    assert report["outcome"] == "CompileError", report
    assert report["file"] == str(path) and report["line"] in (1, 2), report
    assert "too deep for Python's stack" in str(report["message"]), report


def test_an_expression_of_200_terms_runs_right(device: hetero.Device) -> None:
    """Deep but legal: split into parts the backends take (the CPU backend's Python parser stops
    at 200 nested brackets), each device computes the sum."""
    kernel = RawKernel(_sum_kernel(200), "k")
    a, out = np.array([1, 2, 3, 4], np.float32), np.zeros(1, np.float32)
    with hetero.use_device(device):
        kernel((1,), (1,), (a, out))
    assert out[0] == 500.0
