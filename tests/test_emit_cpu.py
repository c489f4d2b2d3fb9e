"""The CPU emitter: kernels built as IR by hand are emitted, imported, run by Numba and
compared with NumPy; kernels the CPU target cannot run correctly are refused."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from hetero.backends.cpu import kernels as cpu_kernels
from hetero.compiler.emit import cpu_support
from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.cpu import EMITTER
from hetero.core.target import Target
from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, bool_t, f16, f32, f64, i32, i64, u32, u64

TARGET = Target("cpu", "x86_64")


# -- a small IR builder ----------------------------------------------------------------
def loc(line: int = 1) -> ir.Loc:
    return ir.Loc("<test>", line)


def c(value: Any, t: ScalarType = i64) -> ir.Const:
    return ir.Const(t, value)


def v(name: str, t: ScalarType = i64) -> ir.Var:
    return ir.Var(t, name)


def op(o: str, a: ir.Expr, b: ir.Expr) -> ir.BinOp:
    return ir.BinOp(a.type, o, a, b)


def cmp(o: str, a: ir.Expr, b: ir.Expr) -> ir.Compare:
    return ir.Compare(bool_t, o, a, b)


def and_(a: ir.Expr, b: ir.Expr) -> ir.Logical:
    return ir.Logical(bool_t, "and", a, b)


def cast(t: ScalarType, e: ir.Expr) -> ir.Cast:
    return ir.Cast(t, e)


def wi(name: str, axis: int = 0) -> ir.WorkItem:
    return ir.WorkItem(i64, name, axis)


def load(array: str, t: ScalarType, *indices: ir.Expr) -> ir.Load:
    return ir.Load(t, array, indices)


def atomic(o: str, array: str, t: ScalarType, index: tuple[ir.Expr, ...], *args: ir.Expr) -> ir.Atomic:
    return ir.Atomic(t, o, array, index, args)


def assign(name: str, value: ir.Expr, line: int = 1) -> ir.Assign:
    return ir.Assign(loc(line), name, value)


def store(array: str, indices: tuple[ir.Expr, ...], value: ir.Expr) -> ir.Store:
    return ir.Store(loc(), array, indices, value)


def if_(cond: ir.Expr, then: list[ir.Stmt], orelse: list[ir.Stmt] = (), line: int = 1) -> ir.If:  # type: ignore[assignment]
    return ir.If(loc(line), cond, tuple(then), tuple(orelse))


def for_(var: str, start: ir.Expr, stop: ir.Expr, body: list[ir.Stmt], step: ir.Expr | None = None, line: int = 1) -> ir.For:
    return ir.For(loc(line), var, start, stop, step if step is not None else ir.Const(start.type, 1), tuple(body))


def while_(cond: ir.Expr, body: list[ir.Stmt], line: int = 1) -> ir.While:
    return ir.While(loc(line), cond, tuple(body))


def barrier(line: int = 1) -> ir.Barrier:
    return ir.Barrier(loc(line))


def arr(t: ScalarType, ndim: int = 1) -> ArrayType:
    return ArrayType(t, ndim)


def kernel(name: str, params: dict[str, Any], body: list[ir.Stmt], locals_: dict[str, ScalarType] | None = None,
           local_arrays: tuple[ir.LocalArray, ...] = (), callees: tuple[ir.Function, ...] = ()) -> ir.Function:  # fmt: skip
    return ir.Function(
        name, tuple(ir.Param(n, t) for n, t in params.items()), ir.VOID, dict(locals_ or {}),
        local_arrays, tuple(body), True, loc(), callees,
    )  # fmt: skip


# -- emitting and running --------------------------------------------------------------
_MODULES: dict[str, Any] = {}


def compile_kernel(fn: ir.Function, tmp_dir: Path) -> Any:
    """The generated entry function, imported from a module file as the launcher does."""
    source = EMITTER.emit(fn, TARGET)
    key = hashlib.sha256(source.text.encode()).hexdigest()[:16]
    if key not in _MODULES:
        path = tmp_dir / f"hetero_cpu_{fn.name}_{key}.py"
        path.write_text(source.text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        _MODULES[key] = cpu_kernels.entry_of(module, source.entry)
    return _MODULES[key]


def launch(fn: ir.Function, tmp_dir: Path, global_size: tuple[int, ...], local_size: tuple[int, ...], *args: Any) -> None:
    """A launch as the cpu backend makes it (work-groups split over its threads once compiled)."""
    cpu_kernels.launch(compile_kernel(fn, tmp_dir), global_size, local_size, args)


@pytest.fixture(scope="module")
def mod_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cpu_kernels")


# -- kernels ---------------------------------------------------------------------------
def saxpy() -> ir.Function:
    i = v("i")
    return kernel(
        "saxpy", {"x": arr(f32), "y": arr(f32), "a": f32, "n": i32},
        [
            assign("i", wi("global_id")),
            if_(cmp("<", i, cast(i64, v("n", i32))), [
                store("y", (i,), op("+", op("*", v("a", f32), load("x", f32, i)), load("y", f32, i))),
            ]),
        ],
        {"i": i64},
    )  # fmt: skip


def test_saxpy_with_partial_last_group(mod_dir: Path) -> None:
    rng = np.random.default_rng(1)
    n = 1000
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    expected = np.float32(2.5) * x + y
    launch(saxpy(), mod_dir, (n,), (64,), x, y, np.float32(2.5), np.int32(n))
    np.testing.assert_array_equal(y, expected)


def test_items_past_the_global_size_do_not_run(mod_dir: Path) -> None:
    n = 100
    x, y = np.ones(n + 28, np.float32), np.zeros(n + 28, np.float32)
    launch(saxpy(), mod_dir, (n,), (64,), x, y, np.float32(1), np.int32(n + 28))
    assert y[:n].tolist() == [1.0] * n and y[n:].tolist() == [0.0] * 28


TILE = 8


def tiled_matmul() -> ir.Function:
    tx, ty, row, col, t, k = v("tx"), v("ty"), v("row"), v("col"), v("t"), v("k")
    M, N, K = (cast(i64, v(name, i32)) for name in "MNK")
    T = c(TILE)
    kk, kk2 = v("kk"), v("kk2")
    return kernel(
        "matmul", {"A": arr(f32, 2), "B": arr(f32, 2), "C": arr(f32, 2), "M": i32, "N": i32, "K": i32},
        [
            assign("tx", wi("local_id", 0)),
            assign("ty", wi("local_id", 1)),
            assign("col", wi("global_id", 0)),
            assign("row", wi("global_id", 1)),
            assign("acc", c(0.0, f32)),
            assign("ntiles", op("//", op("-", op("+", K, T), c(1)), T)),
            for_("t", c(0), v("ntiles"), [
                assign("kk", op("+", op("*", t, T), tx)),
                if_(and_(cmp("<", row, M), cmp("<", kk, K)),
                    [store("As", (ty, tx), load("A", f32, row, kk))],
                    [store("As", (ty, tx), c(0.0, f32))]),
                assign("kk2", op("+", op("*", t, T), ty)),
                if_(and_(cmp("<", kk2, K), cmp("<", col, N)),
                    [store("Bs", (ty, tx), load("B", f32, kk2, col))],
                    [store("Bs", (ty, tx), c(0.0, f32))]),
                barrier(),
                for_("k", c(0), T, [
                    assign("acc", op("+", v("acc", f32), op("*", load("As", f32, ty, k), load("Bs", f32, k, tx)))),
                ]),
                barrier(),
            ]),
            if_(and_(cmp("<", row, M), cmp("<", col, N)), [store("C", (row, col), v("acc", f32))]),
        ],
        {"tx": i64, "ty": i64, "row": i64, "col": i64, "acc": f32, "ntiles": i64, "t": i64, "k": i64, "kk": i64, "kk2": i64},
        local_arrays=(ir.LocalArray("As", f32, (TILE, TILE)), ir.LocalArray("Bs", f32, (TILE, TILE))),
    )  # fmt: skip


def test_tiled_matmul_with_barriers_in_a_uniform_loop(mod_dir: Path) -> None:
    rng = np.random.default_rng(2)
    M, N, K = 37, 29, 45
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    up = lambda n: -(-n // TILE) * TILE
    launch(tiled_matmul(), mod_dir, (up(N), up(M)), (TILE, TILE), A, B, C, np.int32(M), np.int32(N), np.int32(K))
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


GROUP = 64


def reduction() -> ir.Function:
    lid, gid, s = v("lid"), v("gid"), v("s")
    return kernel(
        "reduce", {"x": arr(f32), "result": arr(f32), "n": i64},
        [
            assign("lid", wi("local_id")),
            assign("gid", wi("global_id")),
            store("tmp", (lid,), ir.Select(f32, cmp("<", gid, v("n")), load("x", f32, gid), c(0.0, f32))),
            barrier(),
            assign("s", op("//", wi("local_size"), c(2))),
            while_(cmp(">", s, c(0)), [
                if_(cmp("<", lid, s), [
                    store("tmp", (lid,), op("+", load("tmp", f32, lid), load("tmp", f32, op("+", lid, s)))),
                ]),
                barrier(),
                assign("s", op("//", s, c(2))),
            ]),
            if_(cmp("==", lid, c(0)), [ir.ExprStmt(loc(), atomic("add", "result", f32, (c(0),), load("tmp", f32, c(0))))]),
        ],
        {"lid": i64, "gid": i64, "s": i64},
        local_arrays=(ir.LocalArray("tmp", f32, (GROUP,)),),
    )  # fmt: skip


def test_work_group_reduction_then_one_atomic_per_group(mod_dir: Path) -> None:
    n = 100_003
    x = np.random.default_rng(3).random(n, dtype=np.float32)
    result = np.zeros(1, np.float32)
    launch(reduction(), mod_dir, (-(-n // GROUP) * GROUP,), (GROUP,), x, result, np.int64(n))
    assert result[0] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-4)


def test_barriers_under_a_uniform_if_and_a_counting_down_loop(mod_dir: Path) -> None:
    lid, gid = v("lid"), v("gid")
    fn = kernel(
        "uniform_if", {"out": arr(i32), "out2": arr(i32), "flag": i32},
        [
            assign("lid", wi("local_id")),
            assign("gid", wi("global_id")),
            if_(cmp(">", v("flag", i32), c(0, i32)), [
                store("tmp", (lid,), cast(i32, gid)),
                barrier(),
                store("out", (gid,), load("tmp", i32, op("-", op("-", wi("local_size"), c(1)), lid))),
            ], [store("out", (gid,), c(-1, i32))]),
            for_("t", c(3), c(-1), [
                barrier(),
                store("out2", (gid,), op("+", load("out2", i32, gid), cast(i32, v("t")))),
            ], step=c(-1)),
        ],
        {"lid": i64, "gid": i64, "t": i64},
        local_arrays=(ir.LocalArray("tmp", i32, (16,)),),
    )  # fmt: skip
    out, out2 = np.zeros(64, np.int32), np.zeros(64, np.int32)
    launch(fn, mod_dir, (64,), (16,), out, out2, np.int32(1))
    assert out.tolist() == [16 * (i // 16) + 15 - i % 16 for i in range(64)]
    assert out2.tolist() == [6] * 64
    launch(fn, mod_dir, (64,), (16,), out, out2, np.int32(0))
    assert out.tolist() == [-1] * 64 and out2.tolist() == [12] * 64


def histogram() -> ir.Function:
    i = v("i")
    bin_ = cast(i64, op("%", load("data", i32, i), v("nbins", i32)))
    return kernel(
        "histogram", {"data": arr(i32), "hist": arr(i32), "nbins": i32, "n": i64},
        [
            assign("i", wi("global_id")),
            if_(cmp("<", i, v("n")), [ir.ExprStmt(loc(), atomic("add", "hist", i32, (bin_,), c(1, i32)))]),
        ],
        {"i": i64},
    )  # fmt: skip


def test_atomic_histogram_counts_every_item(mod_dir: Path) -> None:
    n, nbins = 1 << 20, 37
    data = np.random.default_rng(4).integers(-1000, 1000, n, dtype=np.int32)
    hist = np.zeros(nbins, np.int32)
    launch(histogram(), mod_dir, (n,), (256,), data, hist, np.int32(nbins), np.int64(n))
    np.testing.assert_array_equal(hist, np.bincount(data % nbins, minlength=nbins))


def atomics(t: ScalarType) -> ir.Function:
    i = v("i")
    value = load("x", t, i)
    return kernel(
        f"atomics_{t}", {"x": arr(t), "ticket": arr(t), "acc": arr(t), "lo": arr(t), "hi": arr(t), "n": i64},
        [
            assign("i", wi("global_id")),
            if_(cmp("<", i, v("n")), [
                store("ticket", (i,), atomic("add", "acc", t, (c(0),), c(1, t))),
                ir.ExprStmt(loc(), atomic("sub", "acc", t, (c(1),), value)),
                ir.ExprStmt(loc(), atomic("min", "lo", t, (c(0),), value)),
                ir.ExprStmt(loc(), atomic("max", "hi", t, (c(0),), value)),
            ]),
        ],
        {"i": i64},
    )  # fmt: skip


@pytest.mark.parametrize("t", [i32, u32, i64, u64, f32, f64], ids=str)
def test_atomics_are_atomic_and_return_the_old_value(mod_dir: Path, t: ScalarType) -> None:
    n = 50_000
    rng = np.random.default_rng(5)
    x = (rng.random(n) * 1000).astype(t.dtype)
    ticket = np.zeros(n, t.dtype)
    acc = np.zeros(2, t.dtype)
    acc[1] = x.sum(dtype=t.dtype) if t.is_int else 0
    lo, hi = np.array([x.max()], t.dtype), np.array([x.min()], t.dtype)
    launch(atomics(t), mod_dir, (n,), (128,), x, ticket, acc, lo, hi, np.int64(n))
    assert sorted(ticket.tolist()) == list(range(n))  # every old value seen exactly once
    assert acc[0] == n
    if t.is_int:
        assert acc[1] == 0
    else:
        assert acc[1] == pytest.approx(-float(x.astype(np.float64).sum()), rel=1e-3)
    assert lo[0] == x.min() and hi[0] == x.max()


def test_compare_and_swap_loop_increments_exactly(mod_dir: Path) -> None:
    old, ok = v("old", i32), v("ok", bool_t)
    fn = kernel(
        "cas_counter", {"counter": arr(i32)},
        [
            while_(c(True, bool_t), [
                assign("old", load("counter", i32, c(0))),
                if_(cmp("==", atomic("cas", "counter", i32, (c(0),), old, op("+", old, c(1, i32))), old), [ir.Break(loc())]),
            ]),
        ],
        {"old": i32, "ok": bool_t},
    )  # fmt: skip
    counter = np.zeros(1, np.int32)
    launch(fn, mod_dir, (20_000,), (64,), counter)
    assert counter[0] == 20_000
    del ok


def test_local_atomics_then_one_global_merge(mod_dir: Path) -> None:
    lid = v("lid")
    fn = kernel(
        "local_hist", {"data": arr(i32), "hist": arr(i32)},
        [
            assign("lid", wi("local_id")),
            if_(cmp("<", lid, c(4)), [store("bins", (lid,), c(0, i32))]),
            barrier(),
            ir.ExprStmt(loc(), atomic("add", "bins", i32, (cast(i64, load("data", i32, wi("global_id"))),), c(1, i32))),
            barrier(),
            if_(cmp("<", lid, c(4)), [ir.ExprStmt(loc(), atomic("add", "hist", i32, (lid,), load("bins", i32, lid)))]),
        ],
        {"lid": i64},
        local_arrays=(ir.LocalArray("bins", i32, (4,)),),
    )  # fmt: skip
    data = np.random.default_rng(6).integers(0, 4, 4096, dtype=np.int32)
    hist = np.zeros(4, np.int32)
    launch(fn, mod_dir, (4096,), (32,), data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=4))


def elementwise(name: str, t: ScalarType, result: ScalarType, exprs: list[Any], nargs: int = 2) -> ir.Function:
    """``out[k, i] = exprs[k](a0[i], a1[i], ...)``: many operations in one kernel (one compile)."""
    i = v("i")
    args = [load(f"a{k}", t, i) for k in range(nargs)]
    params: dict[str, Any] = {f"a{k}": arr(t) for k in range(nargs)}
    body: list[ir.Stmt] = [assign("i", wi("global_id"))]
    body += [store("out", (c(k), i), expr_of(*args)) for k, expr_of in enumerate(exprs)]
    return kernel(name, {**params, "out": arr(result, 2)}, body, {"i": i64})


def run_elementwise(fn: ir.Function, mod_dir: Path, out_dtype: Any, *inputs: np.ndarray) -> np.ndarray:
    rows = sum(isinstance(s, ir.Store) for s in fn.body)
    out = np.zeros((rows, inputs[0].size), out_dtype)
    launch(fn, mod_dir, (inputs[0].size,), (32,), *inputs, out)
    return out


def binary(o: str) -> Any:
    return lambda x, y: op(o, x, y)


def test_floor_division_and_modulo_follow_python_on_negative_ints(mod_dir: Path) -> None:
    a = np.array([-7, 7, -7, 7, -8, 0, 2**31 - 1, -(2**31)], np.int32)
    b = np.array([2, -2, -2, 2, 3, 5, -1, 3], np.int32)
    div, mod = run_elementwise(elementwise("floor_int", i32, i32, [binary("//"), binary("%")]), mod_dir, np.int32, a, b)
    assert div.tolist() == (a // b).tolist() and mod.tolist() == (a % b).tolist()
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    fdiv, fmod = run_elementwise(elementwise("floor_f32", f32, f32, [binary("//"), binary("%")]), mod_dir, np.float32, fa, fb)
    np.testing.assert_array_equal(fmod, np.mod(fa, fb))
    np.testing.assert_array_equal(fdiv, np.floor_divide(fa, fb))


def test_division_by_zero_gives_zero_on_ints_and_inf_on_floats(mod_dir: Path) -> None:
    a, b = np.array([7, -7], np.int32), np.zeros(2, np.int32)
    div, mod = run_elementwise(elementwise("int_by_zero", i32, i32, [binary("//"), binary("%")]), mod_dir, np.int32, a, b)
    assert div.tolist() == [0, 0] and mod.tolist() == [0, 0]
    a64, b64 = np.array([np.iinfo(np.int64).min, 7, -7], np.int64), np.array([-1, 0, -1], np.int64)
    div, mod = run_elementwise(elementwise("i64_edges", i64, i64, [binary("//"), binary("%")]), mod_dir, np.int64, a64, b64)
    assert div.tolist() == [np.iinfo(np.int64).min, 0, 7] and mod.tolist() == [0, 0, 0]
    (out,) = run_elementwise(
        elementwise("f32_by_zero", f32, f32, [binary("/")]), mod_dir, np.float32, a.astype(np.float32), b.astype(np.float32)
    )
    assert out.tolist() == [np.inf, -np.inf]


def test_narrow_integers_wrap_like_c(mod_dir: Path) -> None:
    a = np.array([2**31 - 1, -(2**31), 65536, 3, -1, 100_000], np.int32)
    b = np.array([1, -1, 65536, 4, 3, 30_000], np.int32)
    shift = np.array([1, 31, 16, 4, 3, 0], np.int32)
    ops = [lambda x, y, s: op("+", x, y), lambda x, y, s: op("-", x, y), lambda x, y, s: op("*", x, y),
           lambda x, y, s: op("&", x, y), lambda x, y, s: op("^", x, y), lambda x, y, s: op("min", x, y),
           lambda x, y, s: op("max", x, y), lambda x, y, s: ir.UnaryOp(i32, "~", x), lambda x, y, s: ir.UnaryOp(i32, "-", x),
           lambda x, y, s: ir.UnaryOp(i32, "abs", x), lambda x, y, s: op("<<", x, s), lambda x, y, s: op(">>", x, s),
           lambda x, y, s: op("**", x, s), lambda x, y, s: cast(i32, cast(i64, x))]  # fmt: skip
    got = run_elementwise(elementwise("wrap_i32", i32, i32, ops, nargs=3), mod_dir, np.int32, a, b, shift)
    wrap = lambda n: (int(n) + 2**31) % 2**32 - 2**31
    pairs = list(zip(a.tolist(), b.tolist(), shift.tolist()))
    expected = [[x + y for x, y, _ in pairs], [x - y for x, y, _ in pairs], [x * y for x, y, _ in pairs],
                [x & y for x, y, _ in pairs], [x ^ y for x, y, _ in pairs], [min(x, y) for x, y, _ in pairs],
                [max(x, y) for x, y, _ in pairs], [~x for x, _, _ in pairs], [-x for x, _, _ in pairs],
                [abs(x) for x, _, _ in pairs], [x << k for x, _, k in pairs], [x >> k for x, _, k in pairs],
                [x**k for x, _, k in pairs], a.tolist()]  # fmt: skip
    for row, want in zip(got, expected):
        assert row.tolist() == [wrap(n) for n in want]
    ua, ub = np.array([0, 1, 2**32 - 1], np.uint32), np.array([1, 2, 2], np.uint32)
    uops = [binary("-"), binary("+"), binary("*"), lambda x, y: ir.UnaryOp(u32, "-", x), lambda x, y: ir.UnaryOp(u32, "~", x), binary(">>")]
    got = run_elementwise(elementwise("wrap_u32", u32, u32, uops), mod_dir, np.uint32, ua, ub)
    with np.errstate(over="ignore"):
        expected = [ua - ub, ua + ub, ua * ub, -ua, ~ua, ua >> ub]
    for row, want in zip(got, expected):
        assert row.tolist() == want.tolist()


def test_f32_arithmetic_stays_f32(mod_dir: Path) -> None:
    a = np.random.default_rng(7).standard_normal(1000, dtype=np.float32)
    b = np.random.default_rng(8).standard_normal(1000, dtype=np.float32)
    exprs = [lambda x, y: op("/", op("+", op("*", x, y), c(0.1, f32)), op("-", y, c(3.0, f32)))]
    (got,) = run_elementwise(elementwise("f32expr", f32, f32, exprs), mod_dir, np.float32, a, b)
    np.testing.assert_array_equal(got, (a * b + np.float32(0.1)) / (b - np.float32(3.0)))


MATH_CASES = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "fabs": np.fabs, "floor": np.floor, "ceil": np.ceil, "rsqrt": lambda x: 1 / np.sqrt(x),
    "pow": np.power, "fmin": np.fmin, "fmax": np.fmax,
}  # fmt: skip


@pytest.mark.parametrize("t", [f32, f64], ids=str)
def test_math_functions(mod_dir: Path, t: ScalarType) -> None:
    x = np.random.default_rng(9).random(257).astype(t.dtype) * 10 + t.dtype.type(0.01)
    y = np.random.default_rng(10).standard_normal(257).astype(t.dtype)
    y[:3] = np.nan

    def math_call(name: str) -> Any:
        return lambda a, b, d: ir.Math(t, name, (a, b) if name in ("pow", "fmin", "fmax") else (a,))

    exprs = [math_call(name) for name in MATH_CASES]
    exprs.append(lambda a, b, d: ir.Math(t, "fma", (a, b, d)))
    got = run_elementwise(elementwise(f"math_{t}", t, t, exprs, nargs=3), mod_dir, t.dtype, x, y, x)
    with np.errstate(invalid="ignore"):
        for row, (name, ref) in zip(got, MATH_CASES.items()):
            want = ref(x, y) if name in ("pow", "fmin", "fmax") else ref(x)
            np.testing.assert_allclose(row, want, rtol=2e-6 if t == f32 else 1e-13, err_msg=name)
    exact = [float(Fraction(p) * Fraction(q) + Fraction(p)) if not math.isnan(q) else math.nan for p, q in zip(x.tolist(), y.tolist())]
    np.testing.assert_array_equal(got[-1], np.array(exact).astype(t.dtype))


def test_early_return_ends_only_that_work_item(mod_dir: Path) -> None:
    i, k = v("i"), v("k")
    fn = kernel(
        "early", {"out": arr(i32), "n": i64},
        [
            assign("i", wi("global_id")),
            if_(cmp(">=", i, v("n")), [ir.Return(loc())]),
            store("out", (i,), c(1, i32)),
            for_("k", c(0), c(10), [
                if_(cmp("==", k, op("%", i, c(10))), [ir.Return(loc())]),
                store("out", (i,), op("+", load("out", i32, i), c(1, i32))),
            ]),
            store("out", (i,), c(-1, i32)),
        ],
        {"i": i64, "k": i64},
    )  # fmt: skip
    n = 200
    out = np.zeros(n + 56, np.int32)
    launch(fn, mod_dir, (n + 56,), (64,), out, np.int64(n))
    assert out[:n].tolist() == [1 + i % 10 for i in range(n)]
    assert not out[n:].any()


def test_assigning_a_scalar_parameter_is_per_work_item(mod_dir: Path) -> None:
    n = v("n")
    fn = kernel(
        "param_copy", {"out": arr(i64), "n": i64},
        [assign("n", op("+", n, wi("global_id"))), store("out", (wi("global_id"),), n)],
        {},
    )  # fmt: skip
    out = np.zeros(100, np.int64)
    launch(fn, mod_dir, (100,), (16,), out, np.int64(1000))
    assert out.tolist() == [1000 + i for i in range(100)]


def test_f16_loads_and_stores_round_to_nearest_even(mod_dir: Path) -> None:
    i = v("i")
    value = op("+", op("*", cast(f32, load("x", f16, i)), c(2.0, f32)), c(0.1, f32))
    wide = op("*", cast(f64, load("x", f16, i)), cast(f64, v("a", f16)))
    fn = kernel(
        "half", {"x": arr(f16), "y": arr(f16), "z": arr(f16), "a": f16},
        [assign("i", wi("global_id")), store("y", (i,), cast(f16, value)), store("z", (i,), cast(f16, wide))],
        {"i": i64},
    )  # fmt: skip
    assert EMITTER.emit(fn, TARGET).abi[-1].dtype == f32  # Numba has no float16 scalars
    x = np.random.default_rng(11).standard_normal(4096).astype(np.float16)
    x[:4] = [np.inf, -np.inf, np.nan, 6e-8]
    y, z = np.zeros_like(x), np.zeros_like(x)
    launch(fn, mod_dir, (x.size,), (64,), x.view(np.uint16), y.view(np.uint16), z.view(np.uint16), np.float32(1.1))
    expected = (x.astype(np.float32) * np.float32(2) + np.float32(0.1)).astype(np.float16)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))
    expected = (x.astype(np.float64) * float(np.float16(1.1))).astype(np.float16)
    np.testing.assert_array_equal(z.view(np.uint16), expected.view(np.uint16))


def test_device_functions_with_hidden_work_item_ids(mod_dir: Path) -> None:
    axpy = ir.Function(
        "axpy", (ir.Param("a", f32), ir.Param("x", f32), ir.Param("y", f32)), f32, {"r": f32}, (),
        (assign("r", op("+", op("*", v("a", f32), v("x", f32)), v("y", f32))), ir.Return(loc(), v("r", f32))),
        False, loc(),
    )  # fmt: skip
    mine = ir.Function(
        "mine", (ir.Param("src", arr(f32)),), f32, {}, (), (ir.Return(loc(), load("src", f32, wi("global_id"))),), False, loc()
    )
    i = v("i")
    call = ir.Call(f32, "axpy", (v("a", f32), ir.Call(f32, "mine", (ir.Var(f32, "x"),)), load("y", f32, i)))
    fn = kernel("calls", {"x": arr(f32), "y": arr(f32), "a": f32}, [assign("i", wi("global_id")), store("y", (i,), call)], {"i": i64},
                callees=(axpy, mine))  # fmt: skip
    x, y = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
    launch(fn, mod_dir, (100,), (32,), x, y, np.float32(3))
    assert y.tolist() == (3 * np.arange(100, dtype=np.float32) + 1).tolist()


# -- what the CPU target refuses -----------------------------------------------------------
def _barrier_under(cond: ir.Expr, prelude: list[ir.Stmt] = (), locals_: dict[str, ScalarType] | None = None) -> ir.Function:  # type: ignore[assignment]
    return kernel("bad", {"x": arr(i64)}, [*prelude, if_(cond, [barrier(line=42)], line=41)], locals_ or {})


@pytest.mark.parametrize(
    "fn",
    [
        _barrier_under(cmp("<", wi("local_id"), c(4))),
        _barrier_under(cmp("<", load("x", i64, c(0)), c(4))),
        _barrier_under(cmp("<", v("m"), c(4)), [assign("m", op("+", wi("global_id"), c(1)))], {"m": i64}),
        _barrier_under(cmp("<", v("m"), c(4)), [assign("m", c(0)), if_(cmp("==", wi("local_id"), c(0)), [assign("m", c(9))])], {"m": i64}),
        kernel("bad_loop", {"x": arr(i64)}, [for_("t", c(0), load("x", i64, c(0)), [barrier(line=42)])], {"t": i64}),
    ],
    ids=["local_id", "load", "tainted_var", "implicit_flow", "loop_bound"],
)
def test_barrier_under_divergent_control_flow_is_refused(fn: ir.Function) -> None:
    with pytest.raises(CompileError, match="barrier\\(\\) inside control flow that depends on the work-item") as info:
        EMITTER.emit(fn, TARGET)
    assert info.value.line == 42


def test_break_across_a_barrier_and_return_before_one_are_refused() -> None:
    leaving = kernel(
        "leave", {"x": arr(i64)}, [for_("t", c(0), c(4), [barrier(), if_(cmp("==", v("t"), c(2)), [ir.Break(loc(7))])])], {"t": i64}
    )
    with pytest.raises(CompileError, match="'break' here leaves a loop that contains barrier"):
        EMITTER.emit(leaving, TARGET)
    early = kernel(
        "early_bar", {"x": arr(i64)},
        [if_(cmp(">", wi("global_id"), c(4)), [ir.Return(loc(3))]), barrier(), store("x", (wi("global_id"),), c(1))],
    )  # fmt: skip
    with pytest.raises(CompileError, match="'return' before a barrier"):
        EMITTER.emit(early, TARGET)


def test_output_is_deterministic() -> None:
    assert EMITTER.emit(tiled_matmul(), TARGET).text == EMITTER.emit(tiled_matmul(), TARGET).text
    assert EMITTER.emit(reduction(), TARGET).entry == "hetero_reduce"


# -- runtime helpers -------------------------------------------------------------------
@numba.njit
def _halves_to_floats(bits: np.ndarray) -> np.ndarray:
    out = np.empty(bits.size, np.float32)
    for k in range(bits.size):
        out[k] = cpu_support.h2f(bits[k])
    return out


@numba.njit
def _floats_to_halves(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size, np.uint16)
    for k in range(values.size):
        out[k] = cpu_support.f2h(values[k])
    return out


@numba.njit
def _doubles_to_halves(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size, np.uint16)
    for k in range(values.size):
        out[k] = cpu_support.f2h_f64(values[k])
    return out


def test_h2f_matches_numpy_on_every_half() -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    expected = bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(_halves_to_floats(bits).view(np.uint32), expected.view(np.uint32))


def test_f2h_matches_numpy_on_halves_midpoints_and_random_floats() -> None:
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    finite = np.sort(halves[np.isfinite(halves)])
    midpoints = (finite[:-1] + finite[1:]) / 2  # ties: round to even
    rng = np.random.default_rng(12)
    random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for values in (halves, midpoints, np.nextafter(midpoints, np.inf), np.nextafter(midpoints, -np.inf), random_bits):
            f32_values = values.astype(np.float32)
            np.testing.assert_array_equal(_floats_to_halves(f32_values), f32_values.astype(np.float16).view(np.uint16))
            f64_values = values.astype(np.float64)
            np.testing.assert_array_equal(_doubles_to_halves(f64_values), f64_values.astype(np.float16).view(np.uint16))
