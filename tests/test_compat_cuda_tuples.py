"""hetero.compat.cuda: tuple values in Numba-CUDA kernels (hetero.compiler.frontend.tuple_locals,
tuple_args), operator functions (operator_calls) and loops over enumerate/zip (loops), on
every device: tuple locals, constant indexing, a tuple as an array index, unpacking, ``len``,
``cuda.grid(n)`` kept as a value, a constant tuple given to a device function; the forms still
refused say so at the user's line."""

from __future__ import annotations

import operator
from collections import namedtuple
from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import uint32
from hetero.core.errors import CompileError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def tuple_local_index(ary, out):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    at = (tx, ty)
    at = (at[1] % 8, at[-2] % 4)  # reassigned from itself: every item read before any is written
    out[at[1], at[0]] = ary[at[1], at[0]] * 10 + len(at)


@cuda.jit
def grid_value(ary, out):
    gid = cuda.grid(2)
    if gid[0] < out.shape[0] and gid[1] < out.shape[1]:
        out[gid] = ary[gid] + gid[0] * 100 + gid[1]


@cuda.jit
def unpack_and_loop(out):
    pair = (cuda.threadIdx.x, 7)
    a, b = pair
    total = 0
    for item in pair:
        total += item
    out[a] = a * 1000 + b * 10 + total


@cuda.jit(device=True)
def shared_add(ary, shape, dtype, op):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sm = cuda.shared.array(shape, dtype)
    sm[tx, ty] = ary[tx, ty]
    cuda.syncthreads()
    where = (tx % shape[0], (ty + 1) % shape[1])
    op(sm, where, 1)
    cuda.syncthreads()
    ary[tx, ty] = sm[tx, ty]


@cuda.jit
def atomic_with_tuple_index(ary):
    shared_add(ary, (4, 8), uint32, cuda.atomic.add)


def test_tuple_local_indexed_with_constants(on: hetero.Device) -> None:
    ary = np.arange(32, dtype=np.int64).reshape(4, 8)
    out = np.zeros_like(ary)
    tuple_local_index[1, (4, 8)](ary, out)
    np.testing.assert_array_equal(out, ary * 10 + 2)


def test_cuda_grid_kept_as_a_tuple_indexes_arrays(on: hetero.Device) -> None:
    ary = np.arange(15, dtype=np.float64).reshape(3, 5)
    out = np.zeros_like(ary)
    grid_value[(1, 2), (4, 4)](ary, out)  # more threads than elements: the test guards
    rows, cols = np.indices(ary.shape)
    np.testing.assert_array_equal(out, ary + rows * 100 + cols)


def test_tuple_unpacked_and_looped_over(on: hetero.Device) -> None:
    out = np.zeros(4, dtype=np.int64)
    unpack_and_loop[1, 4](out)
    lanes = np.arange(4)
    np.testing.assert_array_equal(out, lanes * 1000 + 70 + lanes + 7)


def test_atomic_through_a_device_function_with_a_tuple_index(on: hetero.Device) -> None:
    """numba-cuda's atomic tests' form: a shape tuple, a type and cuda.atomic.add passed to a device
    function that builds a tuple index."""
    ary = np.arange(32, dtype=np.uint32).reshape(4, 8)
    expected = ary.copy()
    for tx in range(4):
        for ty in range(8):
            expected[tx % 4, (ty + 1) % 8] += 1
    atomic_with_tuple_index[1, (4, 8)](ary)
    np.testing.assert_array_equal(ary, expected)


def _compile_error(kernel: object, *args: object) -> str:
    with pytest.raises(CompileError) as info:
        kernel[1, 1](*args)  # type: ignore[index]
    return str(info.value)


def test_run_time_index_of_a_tuple_is_refused_with_the_remedy() -> None:
    @cuda.jit
    def runtime_index(out, k):
        t = (1, 2, 3)
        out[0] = t[k]

    message = _compile_error(runtime_index, np.zeros(1, np.int64), 1)
    assert "indexed with a constant integer" in message and "cuda.local.array" in message


def test_out_of_range_tuple_index_is_refused() -> None:
    @cuda.jit
    def past_the_end(out):
        t = (1, 2)
        out[0] = t[2]

    assert "tuple index 2 is out of range" in _compile_error(past_the_end, np.zeros(1, np.int64))


def test_tuple_used_whole_is_refused() -> None:
    @cuda.jit
    def whole(out):
        t = (1, 2)
        out[0] = t + 1

    assert "'t' is a tuple" in _compile_error(whole, np.zeros(1, np.int64))


def test_local_holding_a_scalar_and_a_tuple_is_refused() -> None:
    @cuda.jit
    def both(out):
        t = (1, 2)
        t = 3
        out[0] = t

    assert "scalar or a tuple, not both" in _compile_error(both, np.zeros(1, np.int64))


def test_tuples_of_two_lengths_in_one_local_are_refused() -> None:
    @cuda.jit
    def lengths(out):
        t = (1, 2)
        t = (1, 2, 3)
        out[0] = t[0]

    assert "tuple of 2 item(s) elsewhere and 3 here" in _compile_error(lengths, np.zeros(1, np.int64))


def test_run_time_tuple_given_to_a_device_function_is_refused() -> None:
    @cuda.jit(device=True)
    def first(t):
        return t[0]

    @cuda.jit
    def caller(out):
        t = (cuda.threadIdx.x, 2)
        out[0] = first(t)

    assert "pass its items as arguments" in _compile_error(caller, np.zeros(1, np.int64))


# -- tuple and namedtuple kernel arguments (hetero.compiler.frontend.tuple_args) --------------------
Point = namedtuple("Point", ("x", "y", "r"))
SCALE = 3


@cuda.jit
def read_tuple_argument(out, t):
    i = cuda.grid(1)
    if i < len(t[0]):
        a, b = t[2]
        out[i] = t[0][i] * t[1] + a - b + len(t) * 1000 + SCALE


@cuda.jit
def read_namedtuple(out_i, out_f, p):
    out_i[0] = p.x
    out_i[1] = p[1]
    out_f[0] = p.r


@cuda.jit
def index_with_a_tuple(out, at):
    out[at] = 5
    pair = at
    out[pair[1], pair[0]] = 7


def test_nested_tuple_of_array_scalar_and_tuple(on: hetero.Device) -> None:
    data = np.arange(6, dtype=np.float64)
    out = np.zeros(6)
    read_tuple_argument[1, 8](out, (data, 2.5, (10, 4)))
    np.testing.assert_array_equal(out, data * 2.5 + 6 + 3000 + SCALE)


def test_tuple_argument_arrays_are_written_back(on: hetero.Device) -> None:
    @cuda.jit
    def add_into(x):
        i = cuda.grid(1)
        if i < x[0].size:
            x[0][i] = x[1][i] + x[2][i]

    dest, a, b = np.zeros(10), np.arange(10.0), np.full(10, 3.0)
    add_into[1, 16]((dest, a, b))
    np.testing.assert_array_equal(dest, a + b)


def test_namedtuple_fields_and_items(on: hetero.Device) -> None:
    out_i, out_f = np.zeros(2, np.int64), np.zeros(1)
    read_namedtuple[1, 1](out_i, out_f, Point(4, 5, 2.236))
    assert out_i.tolist() == [4, 5] and out_f[0] == 2.236


def test_tuple_argument_as_an_array_index(on: hetero.Device) -> None:
    out = np.zeros((3, 3), np.int64)
    index_with_a_tuple[1, 1](out, (2, 0))
    expected = np.zeros((3, 3), np.int64)
    expected[2, 0], expected[0, 2] = 5, 7
    np.testing.assert_array_equal(out, expected)


def test_each_tuple_layout_gets_its_own_variant(on: hetero.Device) -> None:
    """Two launches with tuples of different lengths and types: neither is served the other's code."""
    @cuda.jit
    def total(out, t):
        s = 0.0
        for v in t:
            s += v
        out[0] = s + len(t)

    out = np.zeros(1)
    total[1, 1](out, (1, 2))
    assert out[0] == 5
    total[1, 1](out, (1.5, 2.5, 3.0))
    assert out[0] == 10
    total[1, 1](out, ())
    assert out[0] == 0


def test_tuple_argument_errors_name_the_form() -> None:
    @cuda.jit
    def bad_index(out, t, k):
        out[0] = t[k]

    @cuda.jit
    def bad_field(out, p):
        out[0] = p.z

    @cuda.jit
    def assigns(out, t):
        t = 1
        out[0] = t

    out = np.zeros(1)
    assert "indexed with a constant integer" in _compile_error(bad_index, out, (1, 2), 0)
    assert "no attribute 'z'" in _compile_error(bad_field, out, Point(1, 2, 3.0))
    assert "tuple index 2 is out of range" in _compile_error(read_namedtuple_past_end, out, (1, 2))
    assert "cannot be assigned" in _compile_error(assigns, out, (1, 2))
    with pytest.raises(TypeError, match="tuple arguments are taken without a signature"):
        cuda.jit("void(float64[:], int64)")(read_namedtuple_past_end.py_func)[1, 1](out, (1, 2))


@cuda.jit
def read_namedtuple_past_end(out, t):
    out[0] = t[2]


# -- operator functions called in kernels and given to device functions (operator_calls) ------------
@cuda.jit(device=True)
def combine(op, x, y):
    return op(x, y)


def test_operator_functions_as_values(on: hetero.Device) -> None:
    cases = [(operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
             (operator.truediv, np.true_divide), (operator.floordiv, np.floor_divide), (operator.mod, np.mod),
             (operator.lt, np.less), (operator.ge, np.greater_equal)]
    a = np.array([7.0, -3.5, 2.0, 9.25])
    b = np.array([2.0, 1.5, -4.0, 0.5])
    for op, reference in cases:
        @cuda.jit
        def direct(out, x, y):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = op(x[i], y[i])

        @cuda.jit
        def through_device_function(out, x, y):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = combine(op, x[i], y[i])

        for kernel in (direct, through_device_function):
            out = np.zeros(4)
            kernel[1, 4](out, a, b)
            np.testing.assert_array_equal(out, reference(a, b).astype(np.float64), err_msg=f"{op.__name__}")


def test_unary_operator_functions(on: hetero.Device) -> None:
    @cuda.jit
    def unary(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = operator.neg(x[i]) + operator.abs(x[i]) * 10

    x = np.array([3, -4, 0], dtype=np.int64)
    out = np.zeros(3, np.int64)
    unary[1, 3](out, x)
    np.testing.assert_array_equal(out, -x + np.abs(x) * 10)


def test_operator_function_with_the_wrong_arity_is_refused() -> None:
    @cuda.jit
    def wrong(out):
        out[0] = operator.add(1, 2, 3)

    assert "operator.add() takes 2 positional argument(s), got 3" in _compile_error(wrong, np.zeros(1))


# -- for loops over enumerate()/zip() (hetero.compiler.frontend.loops) -------------------------------
WEIGHTS = (1, 2, 3)
OFFSETS = (0.5, 0.25, 0.125, 99.0)


@cuda.jit
def enumerate_zip_arrays(x, y, out, error):
    count = 0
    for i, (a, b) in enumerate(zip(x, y), 10):
        out[i - 10] = a * b + i
        count += 1
    for k, v in enumerate(x):
        if x[k] != v:
            error[0] = 1
    error[1] = count


@cuda.jit
def zip_tuples(out):
    total = 0.0
    for w, o in zip(WEIGHTS, OFFSETS):  # the shorter tuple bounds the loop: 99.0 is never read
        total += w * o
    pair_sum = 0.0
    for pair in zip(WEIGHTS, OFFSETS):
        pair_sum += pair[0] + pair[1]
    out[0] = total
    out[1] = pair_sum


def test_loop_over_enumerate_of_zip_of_arrays(on: hetero.Device) -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([5.0, 6.0, 7.0])  # shorter: zip stops at 3
    out = np.zeros(4)
    error = np.zeros(2, np.int64)
    enumerate_zip_arrays[1, 1](x, y, out, error)
    np.testing.assert_array_equal(out, [5.0 + 10, 12.0 + 11, 21.0 + 12, 0.0])
    assert error.tolist() == [0, 3]


def test_loop_over_zip_of_tuples_from_outside(on: hetero.Device) -> None:
    out = np.zeros(2)
    zip_tuples[1, 1](out)
    assert out[0] == 1 * 0.5 + 2 * 0.25 + 3 * 0.125
    assert out[1] == 6 + 0.875


def test_loop_over_rows_is_refused_with_the_remedy() -> None:
    @cuda.jit
    def rows(a, out):
        for k, row in enumerate(a):
            out[k] = 0

    message = _compile_error(rows, np.zeros((2, 2)), np.zeros(2))
    assert "its items would be rows" in message and "range(len(a))" in message


def test_tuple_argument_given_to_a_device_function_is_refused_with_the_remedy() -> None:
    @cuda.jit(device=True)
    def first(t):
        return t[0]

    @cuda.jit
    def caller(out, t):
        out[0] = first(t)

    assert "pass its items as arguments" in _compile_error(caller, np.zeros(1), (1.0, 2.0))


def test_device_array_inside_a_tuple_picks_the_launch_device(device: hetero.Device) -> None:
    """No other argument says where to run: the device array inside the tuple does."""
    @cuda.jit
    def double(t):
        i = cuda.grid(1)
        if i < t[0].size:
            t[0][i] = t[0][i] * 2

    with hetero.use_device(device):
        d = cuda.to_device(np.arange(4.0))
    double[1, 4]((d,))
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(4.0) * 2)


@cuda.jit(device=True)
def sum_and_difference(a, b):
    return a + b, a - b


@cuda.jit
def tuple_from_a_device_function(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        sd = sum_and_difference(x[i], y[i])
        out[i, 0] = sd[0]
        out[i, 1] = sd[-1] * len(sd)


def test_tuple_returned_by_a_device_function_kept_in_a_local(on: hetero.Device) -> None:
    x, y = np.array([1.0, 5.0, -2.0]), np.array([4.0, 0.5, 3.0])
    out = np.zeros((3, 2))
    tuple_from_a_device_function[1, 4](x, y, out)
    np.testing.assert_array_equal(out, np.stack([x + y, (x - y) * 2], axis=1))
