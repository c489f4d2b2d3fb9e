"""The frontend: the kernel language lowers to typed IR with the documented promotion
rules; anything outside it is a CompileError at the user's line."""

from __future__ import annotations

import inspect
import re

import pytest

import hetero
from hetero.compiler.frontend import typing_rules
from hetero.core.types import bool_t, f16, f32, f64, i8, i16, i32, i64, u8, u32, u64
from kernels import corpus, unsupported

UNSUPPORTED = [(name, obj) for name, obj in vars(unsupported).items() if isinstance(obj, hetero.Kernel)]


def _marked_line(kernel: hetero.Kernel) -> tuple[int, str]:
    lines, first = inspect.getsourcelines(kernel.py_func)
    for offset, line in enumerate(lines):
        match = re.search(r"# error: (.*)$", line)
        if match:
            return first + offset, match.group(1).strip()
    raise AssertionError(f"{kernel.name} has no '# error:' marker")


@pytest.mark.parametrize("name,kernel", UNSUPPORTED, ids=[n for n, _ in UNSUPPORTED])
def test_unsupported_construct_names_file_line_and_what(name: str, kernel: hetero.Kernel) -> None:
    line, expected = _marked_line(kernel)
    with pytest.raises(hetero.CompileError) as info:
        kernel.ir("f32[:]")
    error = info.value
    assert error.file.endswith("unsupported.py") and error.line == line, str(error)
    assert expected in str(error)
    assert "\n" in str(error) and "^" in str(error)  # shows the line and points at the column


def test_corpus_ir_is_printable_and_typed() -> None:
    text = corpus.saxpy.ir("f32, f32[:], f32[:]")
    assert "kernel saxpy(a: f32, x: f32[:], y: f32[:])" in text
    assert "y[i] = ((a * x[i]) + y[i])" in text


def test_weak_literals_keep_f32() -> None:
    text = corpus.saxpy.ir("f32, f32[:], f32[:]")
    assert "f64" not in text
    assert "f64" not in corpus.mandelbrot.ir("i32[:, :], i32")
    assert "fp64" not in corpus.mandelbrot._lowered(hetero.compiler.frontend.signature.parse_signature("i32[:,:], i32")[1]).features


def test_local_types_unify_like_numba() -> None:
    text = corpus.reduce_sum.ir("f32[:], f32[:]")
    assert "local stride: i64" in text
    assert "local i: i64" in text


def test_constant_folding_and_dead_code() -> None:
    @hetero.kernel
    def folded(x):
        dead = 3 * 7
        if 2 > 3:
            x[0] = 1.0
        x[1] = 2 * 3 + 1
        return
        x[2] = 5.0  # unreachable

    text = folded.ir("f32[:]")
    assert "x[1:i64] = 7.0:f32" in text
    assert "dead" not in text and "x[0:i64]" not in text and "x[2:i64]" not in text


@pytest.mark.parametrize("a,b,want", [
    (i8, i8, i32), (u8, i16, i32), (i32, u32, u32), (i64, u32, i64), (u64, i64, u64), (i32, f32, f32),
    (f16, f16, f32), (f16, f64, f64), (bool_t, bool_t, i32), (f32, f64, f64), (u32, i64, i64),
])
def test_promotion_table(a: hetero.ScalarType, b: hetero.ScalarType, want: hetero.ScalarType) -> None:
    assert typing_rules.promote(a, b) == want
    assert typing_rules.promote(b, a) == want


def test_literal_rules() -> None:
    assert typing_rules.weak_literal_type(2.0, f32) == f32
    assert typing_rules.weak_literal_type(2, f64) == f64
    assert typing_rules.weak_literal_type(2.5, i64) == f32
    assert typing_rules.weak_literal_type(1, u8) == i32
    assert typing_rules.literal_type(2**40) == i64


def test_device_function_called_from_kernel() -> None:
    text = corpus.apply_smoothstep.ir("f32[:], f32[:]")
    assert text.count("func ") == 2  # smoothstep and clamp, each emitted once
    assert "-> f32" in text


def test_recursion_is_refused() -> None:
    @hetero.func
    def forever(v):
        return forever(v)

    @hetero.kernel
    def calls_forever(x):
        x[0] = forever(x[0])

    with pytest.raises(hetero.CompileError, match="recursion"):
        calls_forever.ir("f32[:]")


def test_signature_errors() -> None:
    with pytest.raises(hetero.CompileError, match="bad type"):
        corpus.saxpy.ir("f32, float[:], f32[:]")
    with pytest.raises(hetero.CompileError, match="declared f32"):
        corpus.saxpy.ir("f32, i32[:], f32[:]")
    with pytest.raises(hetero.CompileError, match="takes 3 argument"):
        corpus.saxpy.ir("f32, f32[:]")
