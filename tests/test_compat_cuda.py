"""hetero.compat.cuda: Numba-CUDA kernels, with Numba's typing and launch semantics, on every device."""

from __future__ import annotations

import gc
import importlib.util
import math
from collections.abc import Iterator

import numba
import numpy as np
import pytest

import hetero
import hetero.compat
from hetero.compat import cuda
from hetero.compat.cuda import float32, float64, int32, types
from hetero.core.errors import CompileError, KernelLaunchError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    """Every test here runs with ``device`` as hetero.device(): where to_device and launches go."""
    with hetero.use_device(device):
        yield device


# -- kernels used below (module level: Numba's typing and globals as users write them) --------------
@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def typed_literals(out, n):
    i = cuda.grid(1)
    if i == 0:
        out[0] = 1 / 3  # int / int: f64 in Numba (hetero's own rule gives f32)
        out[1] = 0.1 * 3  # a float literal is f64
        out[2] = n / 7
        x = np.float32(0.1)
        out[3] = x * 2.0  # f32 * f64 literal: f64
        out[4] = 7 // 2 + (-7) % 3


@cuda.jit
def where_am_i(ids):
    x, y, z = cuda.grid(3)
    sx, sy, sz = cuda.gridsize(3)
    if x < ids.shape[0] and y < ids.shape[1] and z < ids.shape[2]:
        ids[x, y, z, 0] = cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.threadIdx.z
        ids[x, y, z, 1] = cuda.blockIdx.x + 10 * cuda.blockIdx.y + 100 * cuda.blockIdx.z
        ids[x, y, z, 2] = cuda.blockDim.x + 10 * cuda.blockDim.y + 100 * cuda.blockDim.z
        ids[x, y, z, 3] = cuda.gridDim.x + 10 * cuda.gridDim.y + 100 * cuda.gridDim.z
        ids[x, y, z, 4] = sx + 10 * sy + 100 * sz


@cuda.jit
def block_sums(data, out):
    shared = cuda.shared.array(shape=64, dtype=float32)
    tid = cuda.threadIdx.x
    shared[tid] = data[cuda.grid(1)]
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            shared[tid] += shared[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = shared[0]


@cuda.jit
def histogram(values, bins):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(bins, values[i], 1)


@cuda.jit
def claim(flag, winners):
    i = cuda.grid(1)
    if i < winners.size:
        winners[i] = cuda.atomic.compare_and_swap(flag, 0, i + 1)


@cuda.jit(device=True)
def scaled(x, k):
    return x * k


@numba.jit
def host_and_device(x):
    return 2 * x + 1


@cuda.jit
def calls(a, out):
    i = cuda.grid(1)
    if i < a.size:
        lo, hi = a[i], a[i] * 2
        hi, lo = lo, hi  # a swap: both values are read before either is assigned
        out[i] = scaled(lo, 3) + host_and_device(hi)


@cuda.jit("void(float32[:], float32)")
def signed(a, k):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] * k


OFFSETS = np.array([1.0, 2.0, 3.0, 4.0])


def _collected() -> None:
    """Let a test's kernels go, with the copies of globals they keep on each device (a module-level
    kernel keeps them for the process, as Numba's keep their constant memory): the placement tests
    that run later in the suite rank devices by what is allocated on them."""
    gc.collect()


@cuda.jit
def whole_array_sin(x, r):
    np.sin(x, r)


# -- tests ---------------------------------------------------------------------------------
def test_vector_add_launch_and_forall(on: hetero.Device) -> None:
    a = cuda.to_device(np.arange(1000, dtype=np.float64))
    b = cuda.to_device(np.ones(1000))
    c = cuda.device_array_like(a)
    assert c.device is on
    add[(1000 + 255) // 256, 256](a, b, c)
    np.testing.assert_array_equal(c.copy_to_host(), np.arange(1000) + 1)
    add.forall(len(a))(b, b, c)
    np.testing.assert_array_equal(c.copy_to_host(), np.full(1000, 2.0))


def test_numba_typing_of_literals_and_division(on: hetero.Device) -> None:
    if not on.fp64:
        pytest.skip(f"{on.name} has no fp64")
    out = cuda.device_array(5, dtype=np.float64)
    typed_literals[1, 1](out, 5)
    got = out.copy_to_host()
    assert got[0] == 1 / 3 and got[1] == 0.1 * 3 and got[2] == 5 / 7  # f64, bit for bit
    assert got[3] == np.float64(np.float32(0.1)) * 2.0
    assert got[4] == 7 // 2 + (-7) % 3


def test_index_builtins_map_blocks_onto_work_groups_in_3d(on: hetero.Device) -> None:
    shape = (4, 6, 2)
    ids = cuda.to_device(np.full(shape + (5,), -1, dtype=np.int32))
    where_am_i[(2, 3, 1), (2, 2, 2)](ids)
    got = ids.copy_to_host()
    for x, y, z in np.ndindex(shape):
        assert got[x, y, z, 0] == x % 2 + 10 * (y % 2) + 100 * (z % 2)
        assert got[x, y, z, 1] == x // 2 + 10 * (y // 2) + 100 * (z // 2)
    assert (got[..., 2] == 2 + 20 + 200).all() and (got[..., 3] == 2 + 30 + 100).all()
    assert (got[..., 4] == 4 + 60 + 200).all()


def test_shared_memory_and_syncthreads(on: hetero.Device) -> None:
    data = np.random.default_rng(0).random(256).astype(np.float32)
    out = np.zeros(4, dtype=np.float32)
    block_sums[4, 64](data, out)  # NumPy arrays: copied in and back, as Numba does
    np.testing.assert_allclose(out, data.reshape(4, 64).sum(axis=1), rtol=1e-5)


def test_atomics(on: hetero.Device) -> None:
    values = np.random.default_rng(1).integers(0, 8, 500).astype(np.int32)
    bins = cuda.to_device(np.zeros(8, dtype=np.int32))
    histogram[4, 128](cuda.to_device(values), bins)
    np.testing.assert_array_equal(bins.copy_to_host(), np.bincount(values, minlength=8))
    flag = cuda.to_device(np.zeros(1, dtype=np.int64))
    winners = cuda.device_array(64, dtype=np.int64)
    claim[1, 64](flag, winners)
    got = winners.copy_to_host()
    assert (got == 0).sum() == 1 and flag[0] == np.flatnonzero(got == 0)[0] + 1


def test_device_functions_numba_jit_callees_and_tuple_swap(on: hetero.Device) -> None:
    a = np.arange(10, dtype=np.float32)
    out = cuda.device_array(10, dtype=np.float64)
    calls.forall(10)(cuda.to_device(a), out)
    np.testing.assert_allclose(out.copy_to_host(), (2 * a) * 3 + (2 * a + 1))


def test_a_signature_converts_scalars_and_checks_arrays(on: hetero.Device) -> None:
    a = cuda.to_device(np.ones(8, dtype=np.float32))
    signed[1, 8](a, 3)  # an int to a float32 parameter
    np.testing.assert_array_equal(a.copy_to_host(), np.full(8, 3.0, np.float32))
    with pytest.raises(TypeError, match="float64"):
        signed[1, 8](cuda.to_device(np.ones(8)), 2.0)


def test_globals_numpy_frozen_device_arrays_live(on: hetero.Device) -> None:
    @cuda.jit
    def uses_global(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = OFFSETS[i] * 10

    out = cuda.device_array(4, dtype=np.float64)
    uses_global[1, 4](out)
    np.testing.assert_array_equal(out.copy_to_host(), [10, 20, 30, 40])
    OFFSETS[0] = 100.0  # frozen at the first launch, as Numba freezes it at compile time
    try:
        uses_global[1, 4](out)
        np.testing.assert_array_equal(out.copy_to_host(), [10, 20, 30, 40])
    finally:
        OFFSETS[0] = 1.0
        del uses_global
        _collected()


def test_const_array_like(on: hetero.Device) -> None:
    @cuda.jit
    def uses_const_memory(out):
        table = cuda.const.array_like(OFFSETS)
        i = cuda.grid(1)
        if i < out.size:
            out[i] = table[i] + len(table)

    out = cuda.device_array(4, dtype=np.float64)
    uses_const_memory[1, 4](out)
    np.testing.assert_array_equal(out.copy_to_host(), OFFSETS + 4)
    del uses_const_memory
    _collected()


def test_a_ufunc_on_whole_arrays_in_one_thread(on: hetero.Device) -> None:
    x = np.linspace(-3, 3, 11).astype(np.float32)
    r = np.zeros_like(x)
    whole_array_sin[1, 1](x, r)
    np.testing.assert_allclose(r, np.sin(x), rtol=1e-6, atol=1e-6)


def test_reduce(on: hetero.Device) -> None:
    @cuda.reduce
    def total(a, b):
        return a + b

    values = np.arange(5000, dtype=np.int64)
    assert total(cuda.to_device(values)) == values.sum()
    assert total(cuda.to_device(values), init=7) == values.sum() + 7
    maximum = cuda.reduce(lambda a, b: max(a, b))
    assert maximum(np.array([3.0, 9.5, -1.0])) == 9.5


def test_device_array_host_side(on: hetero.Device) -> None:
    d = cuda.to_device(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert d.shape == (2, 3) and d.size == 6 and d.dtype == np.int32 and len(d) == 2
    assert d[1, 2] == 5
    with pytest.raises(IndexError):
        d[2, 0]
    d.copy_to_device(np.zeros((2, 3), dtype=np.int32))
    assert not d.copy_to_host().any()
    host = np.empty((2, 3), dtype=np.int32)
    assert d.copy_to_host(host) is host
    with pytest.raises(ValueError, match="does not match"):
        d.copy_to_device(np.zeros(4, dtype=np.int32))
    assert list(cuda.to_device(np.array([1, 2, 3]))) == [1, 2, 3]


@cuda.jit
def numba_own_types(out):
    tile = cuda.shared.array(4, numba.float32)  # numba's own type objects, as users import them
    i = cuda.threadIdx.x
    tile[i] = numba.float32(i) / 3
    cuda.syncthreads()
    out[i] = tile[3 - i]


def test_numba_own_type_objects_name_dtypes_and_cast(on: hetero.Device) -> None:
    out = np.zeros(4, dtype=np.float32)
    numba_own_types[1, 4](out)
    np.testing.assert_array_equal(out, (np.arange(4, dtype=np.float32) / np.float32(3))[::-1])


@cuda.jit
def python_casts(x, ints, floats, truth):
    i = cuda.grid(1)
    if i < x.size:
        ints[i] = int(x[i])  # Numba: i64, truncating towards zero
        floats[i] = float(ints[i]) / 4  # f64
        truth[i] = bool(x[i])


def test_int_float_bool_casts_as_numba_types_them(on: hetero.Device) -> None:
    if not on.fp64:
        pytest.skip(f"{on.name} has no fp64")
    x = np.array([-2.7, -0.5, 0.0, 3.9], dtype=np.float32)
    ints, floats, truth = np.zeros(4, np.int64), np.zeros(4), np.zeros(4, np.bool_)
    python_casts[1, 4](x, ints, floats, truth)
    np.testing.assert_array_equal(ints, [-2, 0, 0, 3])
    np.testing.assert_array_equal(floats, [-0.5, 0.0, 0.0, 0.75])
    np.testing.assert_array_equal(truth, [True, True, False, True])


def test_what_is_refused_says_so() -> None:
    with pytest.raises(KernelLaunchError, match="configuration"):
        add(1, 2, 3)
    with pytest.raises(KernelLaunchError, match="shared_mem is a number of bytes"):
        add[1, 32, 0, -1]
    with pytest.raises(CompileError, match="raw pointer"):
        cuda.jit(types.void(types.CPointer(types.uint8), types.uint32))(lambda x, n: None)

    @cuda.jit
    def grid_as_scalar(a):
        a[0] = cuda.grid(2)

    with pytest.raises(CompileError, match="unpack it"):
        grid_as_scalar[1, 1](np.zeros(1))

    @cuda.jit
    def private_atomic(a):
        tmp = cuda.local.array(4, int32)
        cuda.atomic.add(tmp, 0, 1)
        a[0] = tmp[0]

    with pytest.raises(CompileError, match="per-thread array"):
        private_atomic[1, 1](np.zeros(1))


def test_math_on_integers_is_f64_and_on_f32_stays_f32(on: hetero.Device) -> None:
    @cuda.jit
    def roots(ints, floats, out64, out32):
        i = cuda.grid(1)
        if i < ints.size:
            out64[i] = math.sqrt(ints[i])
            out32[i] = math.sqrt(floats[i])

    ints = np.array([2, 3, 5], dtype=np.int32)
    out64, out32 = np.zeros(3), np.zeros(3, dtype=np.float32)
    roots[1, 3](ints, ints.astype(np.float32), out64, out32)
    np.testing.assert_array_equal(out64, np.sqrt(ints.astype(np.float64)))
    np.testing.assert_allclose(out32, np.sqrt(ints.astype(np.float32)), rtol=1e-6)


def test_explain_names_needs_memory_and_devices() -> None:
    text = hetero.compat.explain(block_sums, "void(float32[:], float32[:])")
    assert "numba typing" in text and "256 bytes in shared" in text and "barriers: yes" in text
    for device in hetero.devices():
        assert f"{device.name}: runs" in text
    assert "needs: fp64" in hetero.compat.explain(typed_literals, "void(float64[:], int64)")
    with pytest.raises(ValueError, match="not been launched"):
        hetero.compat.explain(cuda.jit(lambda a: None))


@cuda.jit
def votes(out):
    i = cuda.threadIdx.x
    n = cuda.syncthreads_count(i % 3 == 0)
    every = cuda.syncthreads_and(i < 1000)
    some = cuda.syncthreads_or(i == 5)
    none = cuda.syncthreads_or(i > 1000)
    g = cuda.grid(1)
    out[g, 0] = n
    out[g, 1] = every
    out[g, 2] = some
    out[g, 3] = none


def test_syncthreads_count_and_or(on: hetero.Device) -> None:
    out = np.zeros((128, 4), dtype=np.int32)
    votes[2, 64](out)
    np.testing.assert_array_equal(out, np.tile([22, 1, 1, 0], (128, 1)))


@cuda.jit
def more_atomics(bits, counters, floats, olds):
    i = cuda.grid(1)
    if i < 64:
        cuda.atomic.or_(bits, 0, np.uint32(1) << np.uint32(i % 32))
        cuda.atomic.and_(bits, 1, ~(np.uint32(1) << np.uint32(i % 32)))
        cuda.atomic.xor(bits, 2, np.uint32(i))
        cuda.atomic.inc(counters, 0, np.uint32(9))  # wraps to 0 after 9: 64 increments from 0 end at 64 % 10
        cuda.atomic.dec(counters, 1, np.uint32(9))
        olds[i] = cuda.atomic.exch(floats, 0, np.float32(i))


def test_exchange_bitwise_and_wrapping_atomics(on: hetero.Device) -> None:
    bits = np.array([0, 0xFFFFFFFF, 0], dtype=np.uint32)
    counters = np.array([0, 0], dtype=np.uint32)
    floats = np.array([-1.0], dtype=np.float32)
    olds = np.zeros(64, dtype=np.float32)
    more_atomics[2, 32](bits, counters, floats, olds)
    want_xor = 0
    for i in range(64):
        want_xor ^= i
    np.testing.assert_array_equal(bits, [0xFFFFFFFF, 0, want_xor])
    assert counters[0] == 64 % 10
    assert counters[1] == (0 - 64) % 10  # dec from 0 wraps to 9, then counts down
    seen = sorted([*olds.tolist(), float(floats[0])])  # every value stored was read back exactly once
    assert seen == [-1.0, *map(float, range(64))]


def test_bitwise_atomics_refuse_floats() -> None:
    @cuda.jit
    def bad(a):
        cuda.atomic.and_(a, 0, 1)

    with pytest.raises(CompileError, match="integer arrays"):
        bad[1, 1](np.zeros(1, dtype=np.float32))


@cuda.jit
def wide_atomics(signed, unsigned, doubles):
    i = cuda.grid(1)
    if i < 40:
        cuda.atomic.or_(signed, 0, np.int64(1) << i)
        cuda.atomic.xor(unsigned, 0, np.uint64(1) << np.uint64(i))
        cuda.atomic.and_(unsigned, 1, ~(np.uint64(1) << np.uint64(i)))
        cuda.atomic.inc(unsigned, 2, np.uint64(100))
        cuda.atomic.dec(unsigned, 3, np.uint64(100))
        cuda.atomic.exch(doubles, 0, 0.5)


def test_64_bit_exchange_bitwise_and_wrapping_atomics(on: hetero.Device) -> None:
    signed = np.zeros(1, dtype=np.int64)
    unsigned = np.array([0, 2**64 - 1, 0, 0], dtype=np.uint64)
    doubles = np.zeros(1)
    wide_atomics[1, 64](signed, unsigned, doubles)
    assert signed[0] == 2**40 - 1
    np.testing.assert_array_equal(unsigned, np.array([2**40 - 1, (2**64 - 1) ^ (2**40 - 1), 40, 101 - 40],
                                                     dtype=np.uint64))
    assert doubles[0] == 0.5


@cuda.jit
def private_arrays(data, out):
    window = cuda.local.array(shape=3, dtype=float32)  # each thread its own, across a barrier too
    shared = cuda.shared.array(64, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    for k in range(3):
        window[k] = data[i] * (k + 1)
    shared[t] = window[2]
    cuda.syncthreads()
    out[i] = window[0] + window[1] + shared[(t + 1) % 64]


def test_per_thread_arrays_keep_their_values_across_barriers(on: hetero.Device) -> None:
    data = np.arange(128, dtype=np.float32)
    out = np.zeros(128, dtype=np.float32)
    private_arrays[2, 64](data, out)
    neighbour = np.roll(data.reshape(2, 64), -1, axis=1).ravel()
    np.testing.assert_array_equal(out, data * 3 + neighbour * 3)


@cuda.jit(device=True)
def _block_sum(buf, v):
    t = cuda.threadIdx.x
    buf[t] = v
    cuda.syncthreads()  # a barrier in a device function: hetero inlines the function into the kernel
    s = 0.0
    for k in range(buf.shape[0]):
        s += buf[k]
    cuda.syncthreads()
    return s


@cuda.jit(device=True)
def _fill(row, value):
    for k in range(row.size):
        row[k] = value + k


@cuda.jit
def _uses_helpers(x, out):
    buf = cuda.shared.array(64, float64)
    mine = cuda.local.array(3, float64)
    _fill(mine, x[cuda.grid(1)])  # a per-thread array passed to a device function
    out[cuda.grid(1)] = _block_sum(buf, x[cuda.grid(1)]) + mine[2]


def test_device_functions_take_local_arrays_and_hold_barriers(on: hetero.Device) -> None:
    x = np.arange(128, dtype=np.float64)
    out = np.zeros(128)
    _uses_helpers[2, 64](x, out)
    np.testing.assert_array_equal(out, np.repeat([x[:64].sum(), x[64:].sum()], 64) + x + 2)


@cuda.jit
def _dynamic_sum(x, out):
    buf = cuda.shared.array(0, dtype=float32)  # sized by the launch's 4th argument
    t = cuda.threadIdx.x
    buf[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    if t == 0:
        s = float32(0)
        for k in range(buf.size):
            s += buf[k]
        out[cuda.blockIdx.x] = s


@pytest.mark.parametrize("threads", [32, 64])
def test_dynamic_shared_memory_takes_the_launch_size(on: hetero.Device, threads: int) -> None:
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128 // threads, np.float32)
    _dynamic_sum[128 // threads, threads, 0, threads * 4](x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, threads).sum(axis=1))


def test_dynamic_shared_memory_needs_a_size() -> None:
    with pytest.raises(CompileError, match="4th launch argument"):
        _dynamic_sum[1, 32](np.zeros(32, np.float32), np.zeros(1, np.float32))


def test_emitters_refuse_a_local_array_passed_to_a_device_function() -> None:
    """The frontend inlines such calls; IR that still has one (a bundle, a bug) is refused by every
    emitter, never run with the wrong memory (the CPU target keeps one row per work-item)."""
    from hetero.compiler.emit import cpu as emit_cpu
    from hetero.compiler.ir import nodes as ir
    from hetero.core.target import Target
    from hetero.core.types import ArrayType, f32, i64

    loc = ir.Loc("k.py", 1)
    callee = ir.Function("put", (ir.Param("a", ArrayType(f32, 1)),), ir.VOID, {}, (),
                         (ir.Store(loc, "a", (ir.Const(i64, 0),), ir.Const(f32, 1.0)),), False, loc)
    kernel = ir.Function("k", (ir.Param("out", ArrayType(f32, 1)),), ir.VOID, {}, (ir.LocalArray("mine", f32, (1,), True),),
                         (ir.ExprStmt(loc, ir.Call(ir.VOID, "put", (ir.Var(f32, "mine"),))),), True, loc, (callee,))
    with pytest.raises(CompileError, match="local array"):
        emit_cpu.EMITTER.emit(kernel, Target("cpu", "x86_64", frozenset({"fp64"}), "numba"))


_FOREIGN = r"""
#include "scale.h"
extern "C" __device__ int scaled_mul(float *ret, float x, float y) { *ret = SCALE * x * y; return 0; }
extern "C" __device__ int dot(double *ret, float *a, int n) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += a[i] * a[i];
    *ret = s;
    return 0;
}
"""


_NEEDS_CLANG = pytest.mark.skipif(importlib.util.find_spec("clang") is None,
                                  reason="libclang is not installed (pip install libclang): the CUDA C front end needs it")


@_NEEDS_CLANG
def test_declare_device_links_cuda_c_functions(on: hetero.Device, tmp_path) -> None:
    """Numba's foreign functions: the C source through hetero's front end, Numba's ABI (a pointer to
    the result first), an include folder from config.CUDA_NVRTC_EXTRA_SEARCH_PATHS, and a CPointer
    argument given the kernel's array."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.h").write_text("#define SCALE 3.0f\n")
    (tmp_path / "f.cu").write_text(_FOREIGN)
    mul = cuda.declare_device("scaled_mul", "float32(float32, float32)", link=str(tmp_path / "f.cu"))
    dot = cuda.declare_device("dot", "float64(CPointer(float32), int32)", link=str(tmp_path / "f.cu"))

    @cuda.jit
    def use(r, x, total):
        i = cuda.grid(1)
        if i < r.size:
            r[i] = mul(x[i], x[i])
        if i == 0:
            total[0] = dot(x, x.size)

    x = np.arange(8, dtype=np.float32)
    r, total = np.zeros_like(x), np.zeros(1)
    old = cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS
    cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = str(tmp_path / "inc")
    try:
        use[1, 8](r, x, total)
    finally:
        cuda.config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = old
    np.testing.assert_array_equal(r, 3 * x * x)
    assert total[0] == float((x.astype(np.float64) ** 2).sum())


@_NEEDS_CLANG
def test_declare_device_refuses_what_breaks_numbas_abi(tmp_path) -> None:
    (tmp_path / "g.cu").write_text('extern "C" __device__ float plain(float x) { return x; }\n')
    plain = cuda.declare_device("plain", "float32(float32)", link=str(tmp_path / "g.cu"))
    missing = cuda.declare_device("absent", "float32(float32)", link=str(tmp_path / "g.cu"))

    @cuda.jit
    def k(r):
        r[0] = plain(r[0])

    @cuda.jit
    def k2(r):
        r[0] = missing(r[0])

    with pytest.raises(CompileError, match="Numba's ABI"):
        k[1, 1](np.zeros(1, np.float32))
    with pytest.raises(CompileError, match="not defined as a __device__ function"):
        k2[1, 1](np.zeros(1, np.float32))


@cuda.jit
def _zero_d(r, x):
    r[()] = x[0] * 2


def test_zero_dimensional_arrays_stay_zero_dimensional(on: hetero.Device) -> None:
    """r = np.ndarray((), float32) is indexed r[()] in the kernel, as numba-cuda's examples do."""
    r = np.ndarray((), dtype=np.float32)
    _zero_d[1, 1](r, np.array([1.5], np.float32))
    assert r[()] == 3.0


@cuda.jit(device=True)
def _sum_and_difference(a, b):
    if a < b:
        return b + a, b - a
    return a + b, a - b


@cuda.jit(device=True)
def _writes_and_returns(out, a):
    out[0] = a
    return a, a


@cuda.jit
def _unpacks(x, y, s, d):
    i = cuda.grid(1)
    if i < x.size:
        s[i], d[i] = _sum_and_difference(x[i], y[i])


def test_device_functions_return_tuples(on: hetero.Device) -> None:
    x, y = np.arange(8.0), np.arange(8.0)[::-1].copy()
    s, d = np.zeros(8), np.zeros(8)
    _unpacks[1, 8](x, y, s, d)
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(d, np.abs(x - y))


def test_a_tuple_returning_function_that_writes_memory_is_refused() -> None:
    @cuda.jit
    def k(out):
        a, b = _writes_and_returns(out, 1.0)
        out[1] = a + b

    with pytest.raises(CompileError, match="returns a tuple and writes memory"):
        k[1, 1](np.zeros(2))
