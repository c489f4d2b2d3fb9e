"""The OpenCL emitter: kernels built as IR by hand are emitted, built by every OpenCL
driver here and run; results must match NumPy (and Python's rules where C's differ)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.c_opencl import c_literal
from hetero.compiler.emit.opencl import EMITTER, opencl_target
from hetero.core.target import Target
from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, bool_t, f16, f32, f64, i8, i32, i64, u32, u64

LOC = ir.Loc("kernels.py", 7)
GID = ir.WorkItem(i64, "global_id", 0)
LID = ir.WorkItem(i64, "local_id", 0)
FULL = Target("opencl", "test-device", frozenset({"fp64", "fp16", "int64_atomics"}), "test")
BARE = Target("opencl", "test-device", frozenset(), "test")


# -- building IR by hand ---------------------------------------------------------------
def V(name: str, t: ScalarType = i64) -> ir.Var:
    return ir.Var(t, name)


def C(value: Any, t: ScalarType = i64) -> ir.Const:
    return ir.Const(t, value)


def op(o: str, a: ir.Expr, b: ir.Expr) -> ir.BinOp:
    return ir.BinOp(a.type, o, a, b)


def lt(a: ir.Expr, b: ir.Expr) -> ir.Compare:
    return ir.Compare(bool_t, "<", a, b)


def both(a: ir.Expr, b: ir.Expr) -> ir.Logical:
    return ir.Logical(bool_t, "and", a, b)


def load(t: ScalarType, array: str, *indices: ir.Expr) -> ir.Load:
    return ir.Load(t, array, indices)


def shape(array: str, axis: int = 0) -> ir.Shape:
    return ir.Shape(i64, array, axis)


def assign(name: str, value: ir.Expr) -> ir.Assign:
    return ir.Assign(LOC, name, value)


def store(array: str, index: ir.Expr | tuple[ir.Expr, ...], value: ir.Expr) -> ir.Store:
    return ir.Store(LOC, array, index if isinstance(index, tuple) else (index,), value)


def if_(cond: ir.Expr, then: list[ir.Stmt], orelse: list[ir.Stmt] = []) -> ir.If:  # noqa: B006
    return ir.If(LOC, cond, tuple(then), tuple(orelse))


def for_(var: str, start: ir.Expr, stop: ir.Expr, body: list[ir.Stmt], step: ir.Expr | None = None) -> ir.For:
    return ir.For(LOC, var, start, stop, step or C(1), tuple(body))


def atomic(o: str, t: ScalarType, array: str, index: ir.Expr, *args: ir.Expr) -> ir.Atomic:
    return ir.Atomic(t, o, array, (index,), args)


def arr(t: ScalarType, ndim: int = 1) -> ArrayType:
    return ArrayType(t, ndim)


def function(name: str, params: dict[str, Any], body: list[ir.Stmt], locals: dict[str, ScalarType] | None = None,
             kernel: bool = True, returns: ScalarType = ir.VOID, **more: Any) -> ir.Function:
    return ir.Function(name, tuple(ir.Param(n, t) for n, t in params.items()), returns, dict(locals or {}),
                       tuple(more.pop("local_arrays", ())), tuple(body), kernel, LOC, **more)


def saxpy() -> ir.Function:
    i = V("i")
    body = [assign("i", GID),
            if_(lt(i, shape("x")), [store("y", i, op("+", op("*", V("a", f32), load(f32, "x", i)), load(f32, "y", i)))])]
    return function("saxpy", {"a": f32, "x": arr(f32), "y": arr(f32)}, body, {"i": i64})


# -- running on the OpenCL devices here ------------------------------------------------
def opencl_device(device: hetero.Device) -> hetero.Device:
    assert device.backend in ("oneapi", "opencl"), device.name  # the fixture only gives OpenCL devices
    return device


def target_of(device: hetero.Device) -> Target:
    cl_device = device.runtime.cl_device  # type: ignore[attr-defined]
    return opencl_target(cl_device.extensions, device.fp64, device.stable_id, device.driver_version)


@functools.cache
def _queue(device: hetero.Device) -> tuple[Any, Any]:
    runtime: Any = device.runtime
    context = runtime.cl.Context([runtime.cl_device])
    return context, runtime.cl.CommandQueue(context)


def run(device: hetero.Device, fn: ir.Function, args: dict[str, Any], size: tuple[int, ...],
        local: tuple[int, ...] | None = None) -> dict[str, np.ndarray]:
    """Emit ``fn`` for ``device``, build and launch it; return the arrays as they are after."""
    source = EMITTER.emit(fn, target_of(device))
    cl = device.runtime.cl  # type: ignore[attr-defined]
    context, queue = _queue(device)
    try:
        program = cl.Program(context, source.text).build(options=list(source.options))
    except cl.RuntimeError as exc:
        raise AssertionError(f"{device.name} rejected:\n{source.text}\n{exc}") from exc
    arrays = {name: np.array(value) for name, value in args.items() if isinstance(value, np.ndarray)}
    buffers, call = {}, []
    for part in source.abi:
        if part.kind == "array":
            host = arrays[part.param]
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
            buffers[part.param] = cl.Buffer(context, flags, hostbuf=host if host.nbytes else np.zeros(1, np.uint8))
            call.append(buffers[part.param])
        elif part.kind == "shape":
            call.append(np.int64(arrays[part.param].shape[part.axis]))
        else:
            call.append(part.dtype.dtype.type(args[part.param]))
    getattr(program, source.entry)(queue, size, local, *call)
    for name, host in arrays.items():
        if host.nbytes:
            cl.enqueue_copy(queue, host, buffers[name])
    queue.finish()
    return arrays


# -- kernels run on every OpenCL device ------------------------------------------------
def test_saxpy(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    x, y = np.arange(1000, dtype=np.float32), np.linspace(-1, 1, 1000, dtype=np.float32)
    out = run(device, saxpy(), {"a": 2.5, "x": x, "y": y}, (1024,))
    np.testing.assert_allclose(out["y"], np.float32(2.5) * x + y, rtol=1e-6)


def test_tiled_matmul_with_local_arrays_and_barriers(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    tile = 8
    row, col, ly, lx, t, kk = (V(n) for n in ("row", "col", "ly", "lx", "t", "kk"))
    wid = lambda name, axis: ir.WorkItem(i64, name, axis)
    a_col, b_row = op("+", op("*", t, C(tile)), lx), op("+", op("*", t, C(tile)), ly)
    body = [
        assign("row", wid("global_id", 1)), assign("col", wid("global_id", 0)),
        assign("ly", wid("local_id", 1)), assign("lx", wid("local_id", 0)), assign("acc", C(0.0, f32)),
        for_("t", C(0), op("//", op("+", shape("a", 1), C(tile - 1)), C(tile)), [
            if_(both(lt(row, shape("a", 0)), lt(a_col, shape("a", 1))),
                [store("a_tile", (ly, lx), load(f32, "a", row, a_col))], [store("a_tile", (ly, lx), C(0.0, f32))]),
            if_(both(lt(b_row, shape("b", 0)), lt(col, shape("b", 1))),
                [store("b_tile", (ly, lx), load(f32, "b", b_row, col))], [store("b_tile", (ly, lx), C(0.0, f32))]),
            ir.Barrier(LOC),
            for_("kk", C(0), C(tile), [assign("acc", op("+", V("acc", f32), op(
                "*", load(f32, "a_tile", ly, kk), load(f32, "b_tile", kk, lx))))]),
            ir.Barrier(LOC),
        ]),
        if_(both(lt(row, shape("c", 0)), lt(col, shape("c", 1))), [store("c", (row, col), V("acc", f32))]),
    ]
    tiles = (ir.LocalArray("a_tile", f32, (tile, tile)), ir.LocalArray("b_tile", f32, (tile, tile)))
    fn = function("matmul", {"a": arr(f32, 2), "b": arr(f32, 2), "c": arr(f32, 2)}, body,
                  {"row": i64, "col": i64, "ly": i64, "lx": i64, "t": i64, "kk": i64, "acc": f32},
                  local_arrays=tiles, features=frozenset({"barrier"}))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 19), np.float32), rng.standard_normal((19, 13), np.float32)
    out = run(device, fn, {"a": a, "b": b, "c": np.zeros((20, 13), np.float32)}, (16, 24), (tile, tile))
    np.testing.assert_allclose(out["c"], a @ b, rtol=1e-4, atol=1e-5)


def test_atomic_histogram_local_then_global_and_float_atomics(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i, lid = V("i"), V("lid")
    bins = 16
    body = [
        assign("i", GID), assign("lid", LID),
        if_(lt(lid, C(bins)), [store("local_hist", lid, C(0, i32))]),
        ir.Barrier(LOC),
        if_(lt(i, shape("values")), [
            ir.ExprStmt(LOC, atomic("add", i32, "local_hist", ir.Cast(i64, load(i32, "values", i)), C(1, i32))),
            ir.ExprStmt(LOC, atomic("add", f32, "total", C(0), ir.Cast(f32, load(i32, "values", i)))),
            ir.ExprStmt(LOC, atomic("max", f32, "peak", C(0), ir.Cast(f32, load(i32, "values", i)))),
            ir.ExprStmt(LOC, atomic("min", u32, "lowest", C(0), ir.Cast(u32, load(i32, "values", i)))),
            ir.ExprStmt(LOC, atomic("sub", i32, "countdown", C(0), C(1, i32))),
            # exactly one work-item swaps 0 for its id + 1 and sees the old 0
            assign("old", atomic("cas", i32, "flag", C(0), C(0, i32), ir.Cast(i32, op("+", i, C(1))))),
            store("won", i, ir.Compare(bool_t, "==", V("old", i32), C(0, i32))),
        ]),
        ir.Barrier(LOC),
        if_(lt(lid, C(bins)), [ir.ExprStmt(LOC, atomic("add", i32, "hist", lid, load(i32, "local_hist", lid)))]),
    ]
    params = {"values": arr(i32), "hist": arr(i32), "total": arr(f32), "peak": arr(f32), "lowest": arr(u32),
              "countdown": arr(i32), "flag": arr(i32), "won": arr(bool_t)}
    fn = function("histogram", params, body, {"i": i64, "lid": i64, "old": i32},
                  local_arrays=[ir.LocalArray("local_hist", i32, (bins,))])
    values = np.random.default_rng(1).integers(0, bins, 1000).astype(np.int32)
    out = run(device, fn, {"values": values, "hist": np.zeros(bins, np.int32), "total": np.zeros(1, np.float32),
                           "peak": np.full(1, -1, np.float32), "lowest": np.full(1, 99, np.uint32),
                           "countdown": np.full(1, 5000, np.int32), "flag": np.zeros(1, np.int32),
                           "won": np.zeros(1000, np.bool_)}, (1024,), (64,))
    np.testing.assert_array_equal(out["hist"], np.bincount(values, minlength=bins))
    assert out["total"][0] == values.sum() and out["peak"][0] == values.max() and out["lowest"][0] == values.min()
    assert out["countdown"][0] == 5000 - 1000
    assert out["won"].sum() == 1 and out["flag"][0] == np.flatnonzero(out["won"])[0] + 1


def test_float_atomics_in_local_memory_and_float_compare_and_swap(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i, lid = V("i"), V("lid")
    group = ir.WorkItem(i64, "group_id", 0)
    body = [
        assign("i", GID), assign("lid", LID),
        if_(ir.Compare(bool_t, "==", lid, C(0)), [store("sums", C(0), C(0.0, f32)), store("sums", C(1), C(-1.0, f32))]),
        ir.Barrier(LOC),
        ir.ExprStmt(LOC, atomic("add", f32, "sums", C(0), load(f32, "x", i))),
        ir.ExprStmt(LOC, atomic("max", f32, "sums", C(1), load(f32, "x", i))),
        assign("old", atomic("cas", f32, "flag", C(0), C(0.0, f32), C(1.5, f32))),
        if_(ir.Compare(bool_t, "==", V("old", f32), C(0.0, f32)), [
            ir.ExprStmt(LOC, atomic("add", i32, "winners", C(0), C(1, i32)))]),
        ir.Barrier(LOC),
        if_(ir.Compare(bool_t, "==", lid, C(0)), [store("out", (group, C(0)), load(f32, "sums", C(0))),
                                                  store("out", (group, C(1)), load(f32, "sums", C(1)))]),
    ]
    fn = function("local_sums", {"x": arr(f32), "out": arr(f32, 2), "flag": arr(f32), "winners": arr(i32)}, body,
                  {"i": i64, "lid": i64, "old": f32}, local_arrays=[ir.LocalArray("sums", f32, (2,))])
    x = np.arange(256, dtype=np.float32) % 17
    out = run(device, fn, {"x": x, "out": np.zeros((4, 2), np.float32), "flag": np.zeros(1, np.float32),
                           "winners": np.zeros(1, np.int32)}, (256,), (64,))
    np.testing.assert_array_equal(out["out"][:, 0], x.reshape(4, 64).sum(axis=1))
    np.testing.assert_array_equal(out["out"][:, 1], x.reshape(4, 64).max(axis=1))
    assert out["flag"][0] == 1.5 and out["winners"][0] == 1


def test_bool_and_narrow_integer_arrays(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i = V("i")
    flag = load(bool_t, "flags", i)
    small = ir.Cast(i32, load(ScalarType("u8", "u", 8), "small", i))
    body = [assign("i", GID), if_(lt(i, shape("flags")), [
        if_(ir.Logical(bool_t, "or", ir.UnaryOp(bool_t, "not", flag), V("everything", bool_t)),
            [store("out", i, C(-1, i32))],
            [if_(lt(small, C(100, i32)), [store("out", i, op("*", small, C(2, i32)))],
                 [store("out", i, ir.Cast(i32, ir.Cast(ScalarType("i16", "i", 16), op("*", small, C(300, i32)))))])]),
        store("negated", i, ir.UnaryOp(bool_t, "not", flag)),
    ])]
    fn = function("narrow", {"flags": arr(bool_t), "small": arr(ScalarType("u8", "u", 8)), "everything": bool_t,
                             "out": arr(i32), "negated": arr(bool_t)}, body, {"i": i64})
    assert "} else if (" in EMITTER.emit(fn, FULL).text
    flags = np.arange(40) % 3 != 0
    small = (np.arange(40) * 7 % 256).astype(np.uint8)
    out = run(device, fn, {"flags": flags, "small": small, "everything": False, "out": np.zeros(40, np.int32),
                           "negated": np.zeros(40, np.bool_)}, (40,))
    wide = small.astype(np.int32)
    expected = np.where(~flags, -1, np.where(wide < 100, wide * 2, (wide * 300).astype(np.int16)))
    np.testing.assert_array_equal(out["out"], expected)
    np.testing.assert_array_equal(out["negated"], ~flags)
    everything = run(device, fn, {"flags": flags, "small": small, "everything": True, "out": np.zeros(40, np.int32),
                                  "negated": np.zeros(40, np.bool_)}, (40,))
    assert (everything["out"] == -1).all()


def test_64_bit_atomics(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    if "int64_atomics" not in target_of(device).features:
        pytest.skip(f"{device.name} has no 64-bit atomics")
    i = V("i")
    big = op("+", i, C(1 << 40))
    body = [assign("i", GID), if_(lt(i, C(500)), [
        ir.ExprStmt(LOC, atomic("add", i64, "acc", C(0), big)),
        ir.ExprStmt(LOC, atomic("max", i64, "acc", C(1), big)),
        ir.ExprStmt(LOC, atomic("min", u64, "low", C(0), ir.Cast(u64, big))),
        ir.ExprStmt(LOC, atomic("cas", u64, "low", C(1), C(0, u64), ir.Cast(u64, big))),
    ] + ([ir.ExprStmt(LOC, atomic("add", f64, "sum", C(0), C(0.5, f64)))] if device.fp64 else []))]
    fn = function("atomics64", {"acc": arr(i64), "low": arr(u64), "sum": arr(f64)}, body, {"i": i64})
    out = run(device, fn, {"acc": np.zeros(2, np.int64), "low": np.array([2**63, 0], np.uint64),
                           "sum": np.zeros(1)}, (512,))
    assert out["acc"][0] == sum(range(500)) + 500 * (1 << 40) and out["acc"][1] == 499 + (1 << 40)
    assert out["low"][0] == 1 << 40 and 1 << 40 <= out["low"][1] < 500 + (1 << 40)
    assert not device.fp64 or out["sum"][0] == 250.0


def test_floor_division_modulo_and_powers_follow_python(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i = V("i")
    body = [assign("i", GID), if_(lt(i, shape("a")), [
        store(out, i, op(o, load(t, x, i), load(t, y, i)))
        for out, o, t, x, y in [("q", "//", i32, "a", "b"), ("r", "%", i32, "a", "b"), ("q64", "//", i64, "a64", "b64"),
                                ("r64", "%", i64, "a64", "b64"), ("uq", "//", u32, "ua", "ub"), ("ur", "%", u32, "ua", "ub"),
                                ("fq", "//", f32, "fa", "fb"), ("fr", "%", f32, "fa", "fb"),
                                ("p", "**", i32, "a", "e"), ("fp", "**", f32, "fa", "fe")]])]
    names = {"a": i32, "b": i32, "e": i32, "a64": i64, "b64": i64, "ua": u32, "ub": u32, "fa": f32, "fb": f32,
             "fe": f32, "q": i32, "r": i32, "q64": i64, "r64": i64, "uq": u32, "ur": u32, "fq": f32, "fr": f32, "p": i32, "fp": f32}
    fn = function("floors", {n: arr(t) for n, t in names.items()}, body, {"i": i64})
    rng = np.random.default_rng(2)
    a = rng.integers(-50, 50, 300).astype(np.int32)
    b = rng.choice([-7, -3, -2, -1, 1, 2, 3, 7], 300).astype(np.int32)
    e = rng.integers(-2, 6, 300).astype(np.int32)
    fa, fb = (rng.standard_normal(300) * 10).astype(np.float32), (rng.standard_normal(300) * 3).astype(np.float32)
    fb[:3] = [0.5, -0.5, 2.0]
    fa[:3] = [-3.0, 3.0, -0.0]
    a[:4], b[:4] = [7, -(2**31), -7, 5], [0, -1, 0, -1]  # NumPy's answers: x // 0 == x % 0 == 0, MIN // -1 wraps
    args: dict[str, Any] = {"a": a, "b": b, "e": e, "a64": a.astype(np.int64) * 10**9, "b64": b.astype(np.int64),
            "ua": np.abs(a).astype(np.uint32), "ub": np.abs(b).astype(np.uint32), "fa": fa, "fb": fb,
            "fe": np.abs(fb)}
    args.update({n: np.zeros(300, t.dtype) for n, t in names.items() if n not in args})
    out = run(device, fn, args, (320,))
    with np.errstate(divide="ignore", over="ignore"):
        np.testing.assert_array_equal(out["q"], a // b)
        np.testing.assert_array_equal(out["r"], a % b)
        np.testing.assert_array_equal(out["q64"], args["a64"] // args["b64"])
        np.testing.assert_array_equal(out["r64"], args["a64"] % args["b64"])
        np.testing.assert_array_equal(out["uq"], args["ua"] // args["ub"])
        np.testing.assert_array_equal(out["ur"], args["ua"] % args["ub"])
    np.testing.assert_array_equal(out["fq"], np.floor_divide(fa, fb))
    np.testing.assert_allclose(out["fr"], np.remainder(fa, fb), rtol=1e-6, atol=1e-6)
    assert np.array_equal(np.signbit(out["fr"][:3]), np.signbit(np.remainder(fa[:3], fb[:3])))
    # negative exponents: the integer part of the true power (documented in ipow)
    powers = [int(x) ** int(y) if y >= 0 else int(float(x) ** int(y)) if x in (1, -1) else 0 for x, y in zip(a, e)]
    np.testing.assert_array_equal(out["p"], [(p + 2**31) % 2**32 - 2**31 for p in powers])
    np.testing.assert_allclose(out["fp"], np.power(fa.astype(np.float64), np.abs(fb)), rtol=1e-5)


def test_f16_arrays_load_store_and_round(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i, lid = V("i"), V("lid")
    x = ir.Cast(f32, load(f16, "x", i))
    body = [assign("i", GID), assign("lid", LID),
            store("tile", lid, load(f16, "x", i)),  # an f16 copied as is, into local memory
            ir.Barrier(LOC),
            store("y", i, ir.Cast(f16, op("+", op("*", x, C(2.5, f32)), C(1.0, f32)))),
            store("z", i, load(f16, "tile", lid)),
            store("w", i, ir.Cast(f32, ir.Cast(f16, op("/", x, C(3.0, f32)))))]
    fn = function("halves", {"x": arr(f16), "y": arr(f16), "z": arr(f16), "w": arr(f32)}, body,
                  {"i": i64, "lid": i64}, local_arrays=[ir.LocalArray("tile", f16, (64,))])
    x_host = np.random.default_rng(3).standard_normal(256).astype(np.float16)
    out = run(device, fn, {"x": x_host, "y": np.zeros(256, np.float16), "z": np.zeros(256, np.float16),
                           "w": np.zeros(256, np.float32)}, (256,), (64,))
    np.testing.assert_array_equal(out["y"], (x_host.astype(np.float32) * np.float32(2.5) + 1).astype(np.float16))
    np.testing.assert_array_equal(out["z"], x_host)
    np.testing.assert_array_equal(out["w"], (x_host.astype(np.float32) / 3).astype(np.float16).astype(np.float32))


def test_f16_scalars_need_cl_khr_fp16(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    i = V("i")
    body = [assign("i", GID), assign("h", ir.Cast(f16, op("*", ir.Cast(f32, load(f16, "x", i)), V("k", f32)))),
            store("y", i, V("h", f16))]
    fn = function("scale_half", {"x": arr(f16), "y": arr(f16), "k": f32}, body, {"i": i64, "h": f16})
    if "fp16" not in target_of(device).features:
        with pytest.raises(CompileError, match="cl_khr_fp16"):
            EMITTER.emit(fn, target_of(device))
        return
    x_host = np.linspace(-4, 4, 64).astype(np.float16)
    out = run(device, fn, {"x": x_host, "y": np.zeros(64, np.float16), "k": 1.5}, (64,))
    np.testing.assert_array_equal(out["y"], (x_host.astype(np.float32) * np.float32(1.5)).astype(np.float16))


def test_f64_kernel(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    if not device.fp64:
        pytest.skip(f"{device.name} has no fp64")
    i = V("i")
    x = load(f64, "x", i)
    body = [assign("i", GID), if_(lt(i, shape("x")), [
        store("y", i, op("+", op("*", x, C(0.1, f64)), ir.Math(f64, "sqrt", (x,))))])]
    fn = function("double_it", {"x": arr(f64), "y": arr(f64)}, body, {"i": i64}, features=frozenset({"fp64"}))
    x_host = np.linspace(0, 1e6, 100)
    out = run(device, fn, {"x": x_host, "y": np.zeros(100)}, (128,))
    np.testing.assert_allclose(out["y"], x_host * 0.1 + np.sqrt(x_host), rtol=1e-15)


def device_functions() -> ir.Function:
    i = V("i")
    scaled = function("scaled", {"v": arr(f32), "j": i64, "k": f32},
                      [ir.Return(LOC, op("*", load(f32, "v", V("j")), V("k", f32)))], kernel=False, returns=f32)
    twice = function("twice", {"v": arr(f32), "j": i64},
                     [ir.Return(LOC, ir.Call(f32, "scaled", (V("v", f32), V("j"), C(2.0, f32))))],
                     kernel=False, returns=f32, callees=(scaled,))
    put = function("put", {"out": arr(f32), "j": i64, "value": f32},
                   [store("out", V("j"), V("value", f32)), ir.Return(LOC)], kernel=False)
    value = op("+", ir.Call(f32, "scaled", (V("x", f32), i, C(3.0, f32))), ir.Call(f32, "twice", (V("x", f32), i)))
    body = [assign("i", GID), if_(lt(i, shape("x")), [ir.ExprStmt(LOC, ir.Call(ir.VOID, "put", (V("y", f32), i, value)))])]
    return function("calls", {"x": arr(f32), "y": arr(f32)}, body, {"i": i64}, callees=(scaled, twice, put))


def test_device_function_calls(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device(opencl_device_fixture)
    x = np.arange(50, dtype=np.float32)
    out = run(device, device_functions(), {"x": x, "y": np.zeros(50, np.float32)}, (64,))
    np.testing.assert_array_equal(out["y"], x * 5)


def test_names_loops_and_operators_keep_python_meaning(opencl_device_fixture: hetero.Device) -> None:
    """Variables named like C keywords or built-ins, loop variables reassigned in the body or
    read after the loop, run-time steps, while/break/continue, and the odd operators."""
    device = opencl_device(opencl_device_fixture)
    i, j, x = V("i"), V("j"), V("v_x")
    results = [
        V("acc"), i, V("int"), V("global"), ir.Select(i64, V("flag", bool_t), C(7), C(8)),
        ir.UnaryOp(i64, "abs", x), op("min", x, C(3)), op("max", x, C(3)), ir.UnaryOp(i64, "~", x),
        ir.UnaryOp(i64, "-", x), ir.Cast(i64, C(-2.7, f32)), V("hetero_stop0"), op("<<", x, C(2)), op(">>", C(-20), C(1)),
        C(-(2**63)), ir.Cast(i64, C(-(2**31), i32)), ir.Cast(i64, C(4_000_000_000, u32)),
        ir.Cast(i64, ir.BinOp(i8, "+", C(100, i8), C(100, i8))), ir.Cast(i64, ir.Math(f32, "sqrt", (V("float", f32),))),
        V("zero_steps"),
    ]
    body = [
        assign("acc", C(0)), assign("i", C(-1)),
        for_("i", C(0), ir.Cast(i64, V("n", i32)), [assign("i", op("*", i, C(2))), assign("acc", op("+", V("acc"), i))]),
        for_("j", C(20), C(0), [assign("int", op("+", V("int"), j))], step=V("step")),
        for_("j", C(0), C(5), [assign("zero_steps", op("+", V("zero_steps"), C(1)))], step=op("*", V("step"), C(0))),
        ir.While(LOC, C(True, bool_t), (
            assign("global", op("+", V("global"), C(1))),
            if_(ir.Compare(bool_t, "==", op("%", V("global"), C(2)), C(0)), [ir.Continue(LOC)]),
            if_(ir.Compare(bool_t, ">", V("global"), C(9)), [ir.Break(LOC)]))),
        assign("v_x", C(-5)), assign("hetero_stop0", C(41)), assign("float", C(49.0, f32)),
        *[store("out", C(k), value) for k, value in enumerate(results)],
        store("fout", C(0), C(float("nan"), f32)), store("fout", C(1), C(float("-inf"), f32)),
        store("fout", C(2), C(0.1, f32)), store("fout", C(3), C(-0.0, f32)),
    ]
    locals = {"acc": i64, "i": i64, "j": i64, "int": i64, "global": i64, "v_x": i64, "hetero_stop0": i64,
              "float": f32, "zero_steps": i64}
    fn = function("oddities", {"n": i32, "flag": bool_t, "step": i64, "out": arr(i64), "fout": arr(f32)}, body, locals)
    text = EMITTER.emit(fn, target_of(device)).text
    assert "long v_int = 0;" in text and "float v_float = 0;" in text and "long v_v_x = 0;" in text
    out = run(device, fn, {"n": 6, "flag": True, "step": -3, "out": np.zeros(len(results), np.int64),
                           "fout": np.ones(4, np.float32)}, (1,))
    expected = [sum(2 * k for k in range(6)), 10, sum(range(20, 0, -3)), 11, 7, 5, -5, 3, 4, 5, -2, 41, -20, -10,
                -(2**63), -(2**31), 4_000_000_000, -56, 7, 0]
    assert out["out"].tolist() == expected
    assert np.isnan(out["fout"][0]) and out["fout"][1] == -np.inf and out["fout"][2] == np.float32(0.1)
    assert np.signbit(out["fout"][3])


# -- what the emitter decides without a device ------------------------------------------
def test_output_is_deterministic() -> None:
    first = EMITTER.emit(device_functions(), FULL)
    assert EMITTER.emit(device_functions(), FULL) == first
    assert first.entry == "hetero_calls" and first.text.index("heterofn_scaled(") < first.text.index("heterofn_twice(")
    assert [(a.kind, a.param, a.axis) for a in first.abi] == [("array", "x", -1), ("shape", "x", 0), ("array", "y", -1),
                                                              ("shape", "y", 0)]


def test_missing_device_features_are_compile_errors() -> None:
    f64_kernel = function("needs_double", {"x": arr(f64)}, [store("x", C(0), C(1.0, f64))])
    with pytest.raises(CompileError, match="needs_double.*no fp64") as info:
        EMITTER.emit(f64_kernel, BARE)
    assert info.value.file == "kernels.py" and info.value.line == 7
    assert "cl_khr_fp64 : enable" in EMITTER.emit(f64_kernel, FULL).text
    atomic64 = function("count64", {"x": arr(i64)}, [ir.ExprStmt(LOC, atomic("add", i64, "x", C(0), C(1)))])
    with pytest.raises(CompileError, match="64-bit atomics"):
        EMITTER.emit(atomic64, BARE)
    assert "cl_khr_int64_base_atomics : enable" in EMITTER.emit(atomic64, FULL).text
    with pytest.raises(CompileError, match="i8 array"):
        EMITTER.emit(function("bytes", {"x": arr(i8)}, [ir.ExprStmt(LOC, atomic("add", i8, "x", C(0), C(1, i8)))]), FULL)
    with pytest.raises(CompileError, match="step must not be zero"):
        EMITTER.emit(function("stuck", {}, [for_("i", C(0), C(3), [], step=C(0))], {"i": i64}), FULL)


def test_a_kernel_named_as_a_generated_function_keeps_its_name() -> None:
    """Helpers are heterohelp_*, device functions heterofn_*, entries hetero_*: a kernel named floordiv_long
    (hetero's helper for that operation once had its entry point's name) compiles."""
    fn = function("floordiv_long", {"x": arr(i64)}, [store("x", C(0), op("//", load(i64, "x", C(0)), C(2)))])
    source = EMITTER.emit(fn, FULL)
    assert source.entry == "hetero_floordiv_long" and "heterohelp_floordiv_long(" in source.text


def test_local_arrays_cannot_be_passed_to_device_functions() -> None:
    helper = function("first", {"v": arr(f32)}, [ir.Return(LOC, load(f32, "v", C(0)))], kernel=False, returns=f32)
    body = [store("out", C(0), ir.Call(f32, "first", (V("tile", f32),)))]
    fn = function("k", {"out": arr(f32)}, body, local_arrays=[ir.LocalArray("tile", f32, (4,))], callees=(helper,))
    with pytest.raises(CompileError, match="local array 'tile'"):
        EMITTER.emit(fn, FULL)


def test_opencl_target_reads_extensions() -> None:
    target = opencl_target("cl_khr_fp16  cl_khr_int64_base_atomics cl_khr_byte_addressable_store", False, "dev", "3.1")
    assert target == Target("opencl", "dev", frozenset({"fp16", "int64_atomics"}), "3.1")
    assert opencl_target("", True, "dev", "3.1").features == frozenset({"fp64"})


@pytest.mark.parametrize("extensions", [
    "", "cl_khr_fp16", "cl_khr_int64_base_atomics", "cl_khr_int64_extended_atomics",
    "cl_khr_int64_base_atomics cl_khr_int64_extended_atomics cl_khr_fp16 cl_khr_fp64",
])
@pytest.mark.parametrize("fp64", [False, True])
def test_the_opencl_runtime_and_the_compiler_read_extensions_alike(extensions: str, fp64: bool) -> None:
    # A device with base int64 atomics only runs i64 atomic kernels: the emitter needs no extended ones.
    from types import SimpleNamespace

    from hetero.backends.opencl.runtime import OpenCLRuntime
    from hetero.core.device import DeviceInfo, Kind

    info = DeviceInfo(name="opencl:0", backend="opencl", index=0, vendor="Test", kind=Kind.GPU, model="test",
                      memory=1 << 30, compute_units=1, max_work_group_size=256, fp64=fp64, driver_version="3.1",
                      stable_id="test-device", extra={"platform_version": "OpenCL 3.0"})
    runtime = OpenCLRuntime(SimpleNamespace(), SimpleNamespace(extensions=extensions), info)
    target = runtime.kernel_target()
    assert target == opencl_target(extensions, fp64, "test-device", target.toolchain)


@pytest.mark.parametrize("t, value, text", [
    (f32, 0.1, "0.1f"), (f32, 2, "2.0f"), (f32, -1.5, "(-1.5f)"), (f32, float("inf"), "INFINITY"), (f32, 1e39, "INFINITY"),
    (f64, 0.1, "0.1"), (f64, float("nan"), "((double)NAN)"), (i32, -5, "(-5)"), (i64, 5, "5L"), (u32, 7, "7u"),
    (u64, 2**63, "9223372036854775808UL"), (i64, -(2**63), "(-9223372036854775807L - 1L)"), (i8, -3, "(char)(-3)"),
    (bool_t, True, "true"), (f16, 0.1, "0.099975586f"),
])
def test_literals(t: ScalarType, value: Any, text: str) -> None:
    assert c_literal(t, value) == text
