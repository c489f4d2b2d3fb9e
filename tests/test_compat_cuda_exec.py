"""Kernels made by ``exec`` of a template, as numba-cuda's own tests make their atomics kernels: the
front end compiles from source, and finds the text the audit hook of hetero.compat.cuda saw."""

from __future__ import annotations

from textwrap import dedent

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.frontend import exec_sources

TEMPLATE = dedent("""
    def kernel(res, ary):
        i = cuda.threadIdx.x
        {op}(res, 0, ary[i])

    def kernel_shared(res, ary):
        i = cuda.threadIdx.x
        buf = cuda.shared.array(32, float64)
        buf[i] = ary[i]
        cuda.syncthreads()
        {op}(res, 0, buf[i])
""")


def _made(op: str) -> dict[str, object]:
    found: dict[str, object] = {}
    exec(TEMPLATE.format(op=op), {"cuda": cuda, "float64": cuda.float64}, found)  # noqa: S102 - the test's own text
    return found


@pytest.mark.parametrize("op, fold", [("cuda.atomic.max", np.max), ("cuda.atomic.min", np.min),
                                      ("cuda.atomic.add", np.sum)])
def test_a_kernel_made_by_exec_of_a_template_compiles_and_runs(device: hetero.Device, op: str, fold: object) -> None:
    made = _made(op)
    ary = np.random.default_rng(3).standard_normal(32)
    for name in ("kernel", "kernel_shared"):
        with hetero.use_device(device):
            res = cuda.to_device(np.zeros(1) if op.endswith("add") else ary[:1].copy())
            cuda.jit(made[name])[1, 32](res, cuda.to_device(ary))
            got = res.copy_to_host()[0]
        np.testing.assert_allclose(got, fold(ary), rtol=1e-12)  # type: ignore[operator]


def test_text_that_changed_under_the_same_name_is_not_taken_for_another_function() -> None:
    first = _made("cuda.atomic.max")["kernel"]
    _made("cuda.atomic.min")  # the same pseudo-file name, other text: first's code keeps first's text
    lines = exec_sources.lines_of(first.__code__)  # type: ignore[attr-defined]
    assert lines is not None and "cuda.atomic.max" in "".join(lines)
    code = first.__code__  # type: ignore[attr-defined]
    other = TEMPLATE.format(op="cuda.atomic.min")
    exec_sources._texts[code] = ("<string>", other)  # as if another text had been recorded for it
    try:
        assert exec_sources.lines_of(code) is None  # that text does not compile to this function's code
    finally:
        exec_sources._texts[code] = ("<string>", TEMPLATE.format(op="cuda.atomic.max"))
    assert exec_sources.lines_of(code.replace(co_firstlineno=code.co_firstlineno + 1)) is None  # never seen
