"""Strided views on every device: basic indexing, writes through views, view manipulations,
the strided copy kernel, kernels given views, interop; each checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.core.launch_counts import launch_counts

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def keys_for(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[object, ...]:
    """A basic index into an array of ``shape`` (possibly with too many indices for it)."""
    key: list[object] = []
    axis = 0
    ellipsis = False
    for _ in range(len(shape) + 2):
        choice = draw(st.sampled_from(["stop", "int", "slice", "none", "ellipsis"]))
        if choice == "stop":
            break
        if choice == "none":
            key.append(None)
        elif choice == "ellipsis" and not ellipsis:
            ellipsis = True
            key.append(Ellipsis)
        elif axis < len(shape):
            size = shape[axis]
            if choice == "int" and size:
                key.append(draw(st.integers(-size, size - 1)))
            else:
                bound = st.none() | st.integers(-size - 2, size + 2)
                step = st.none() | st.integers(-3, 3).filter(bool)
                key.append(slice(draw(bound), draw(bound), draw(step)))
            axis += 1
    return tuple(key)


@st.composite
def shapes_and_keys(draw: st.DrawFn, max_dims: int = 4) -> tuple[tuple[int, ...], tuple[object, ...]]:
    """A shape (0-d and zero-size included) and a basic index into it."""
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=max_dims)))
    return shape, draw(keys_for(shape))


def _data(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def _element_strides(host: np.ndarray) -> tuple[int, ...]:
    return tuple(s // host.itemsize for s in host.strides)


@SETTINGS
@given(case=shapes_and_keys(), second=st.data())
def test_basic_indexing_matches_numpy(device: hetero.Device, case: tuple[tuple[int, ...], tuple[object, ...]],
                                      second: st.DataObject) -> None:
    shape, key = case
    host = _data(shape)
    x = hetero.asarray(host, device=device)
    try:
        want = host[key]
    except IndexError as error:  # after an ellipsis an int may land on an empty axis: the same error
        with pytest.raises(IndexError, match=str(error).split(" with size")[0]):
            x[key]
        return
    view = x[key]
    assert view.shape == want.shape
    assert view.base is x and view.device is device
    if want.size:
        assert view.strides == _element_strides(want)
        assert view.byte_strides == want.strides
    np.testing.assert_array_equal(view.numpy(), want)
    copied = view.copy()
    assert copied.base is None and copied.is_contiguous
    np.testing.assert_array_equal(copied.numpy(), want)
    inner_key = second.draw(keys_for(want.shape))
    try:
        again = want[inner_key]
    except IndexError:
        with pytest.raises(IndexError):
            view[inner_key]
        return
    np.testing.assert_array_equal(view[inner_key].numpy(), again)  # a view of a view
    assert view[inner_key].base is x


@SETTINGS
@given(case=shapes_and_keys(max_dims=3), kind=st.sampled_from(["scalar", "numpy", "hetero", "row"]))
def test_setitem_matches_numpy(device: hetero.Device, case: tuple[tuple[int, ...], tuple[object, ...]], kind: str) -> None:
    shape, key = case
    host = _data(shape, "int32")
    x = hetero.asarray(host, device=device)
    try:
        target = host[key]
    except IndexError:
        return
    value: object
    if kind == "scalar":
        value = -7
    elif kind == "row":  # broadcast along every axis but the last
        value = (np.arange(target.shape[-1], dtype=np.int32) * 3 - 100) if target.ndim else np.int32(5)
    else:
        value = np.arange(target.size, dtype=np.int32).reshape(target.shape) * 2 + 1000
    host[key] = value
    x[key] = hetero.asarray(value, device=device) if kind == "hetero" else value
    np.testing.assert_array_equal(x.numpy(), host)


def test_writes_through_views_reach_the_base(device: hetero.Device) -> None:
    host = _data((4, 6))
    x = hetero.asarray(host, device=device)
    column = x[:, 2]
    column[...] = 0
    host[:, 2] = 0
    x[::-2, 1::2] = np.array([10, 20, 30], np.float32)  # broadcast rows, negative step
    host[::-2, 1::2] = [10, 20, 30]
    np.testing.assert_array_equal(x.numpy(), host)
    np.testing.assert_array_equal(column.numpy(), host[:, 2])
    inner = x[1:][:, ::-1][1]  # views of views write into the same buffer
    inner[0] = 99
    host[2, -1] = 99
    np.testing.assert_array_equal(x.numpy(), host)
    hetero.copyto(x[0], x[3])  # overlapping views of one buffer
    host[0] = host[3]
    np.testing.assert_array_equal(x.numpy(), host)
    x[1:3] = x[0:2]  # overlapping source and destination: read before written, as NumPy
    host[1:3] = host[0:2].copy()
    np.testing.assert_array_equal(x.numpy(), host)


def test_index_errors_say_what_was_wrong(device: hetero.Device) -> None:
    x = hetero.zeros((3, 4), device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        x[0, -5]
    with pytest.raises(IndexError, match="too many indices for array: array is 2-dimensional, but 3 were indexed"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="valid indices, got float"):
        x[0.5]
    # masks and integer arrays are advanced indexing now (tests/test_array_advanced_index.py)
    assert x[True].shape == (1, 3, 4) and x[[0, 1]].shape == (2, 4)
    with pytest.raises(IndexError, match="array is 0-dimensional, but 1 were indexed"):  # as NumPy says
        hetero.zeros((), device=device)[0]
    with pytest.raises(hetero.ArrayError, match="broadcast"):
        x[0] = np.ones(3, np.float32)


def test_manipulations_are_views_matching_numpy(device: hetero.Device) -> None:
    host = _data((2, 3, 4))
    x = hetero.asarray(host, device=device)
    cases = {
        "T": (x.T, host.T), "mT": (x.mT, np.swapaxes(host, -1, -2)),
        "permute_dims": (hetero.permute_dims(x, (1, 2, 0)), np.transpose(host, (1, 2, 0))),
        "moveaxis": (hetero.moveaxis(x, 0, -1), np.moveaxis(host, 0, -1)),
        "moveaxis2": (x.moveaxis((0, 1), (2, 0)), np.moveaxis(host, (0, 1), (2, 0))),
        "expand_dims": (hetero.expand_dims(x, 1), np.expand_dims(host, 1)),
        "expand_dims2": (x.expand_dims((0, -1)), np.expand_dims(host, (0, -1))),
        "squeeze": (hetero.squeeze(x[:, :1], axis=1), np.squeeze(host[:, :1], axis=1)),
        "flip": (hetero.flip(x), np.flip(host)), "flip1": (hetero.flip(x, axis=1), np.flip(host, axis=1)),
        "broadcast_to": (hetero.broadcast_to(x[:, :1], (5, 2, 3, 4)), np.broadcast_to(host[:, :1], (5, 2, 3, 4))),
        "reshape": (hetero.reshape(x, (6, -1)), host.reshape(6, -1)),
    }
    for name, (view, want) in cases.items():
        assert view.base is x, name
        assert view.shape == want.shape, name
        np.testing.assert_array_equal(view.numpy(), want, err_msg=name)
        np.testing.assert_array_equal(view.copy().numpy(), want, err_msg=name)
    x[0, 0, 0] = -1  # the views share the buffer
    assert cases["flip"][0].numpy()[-1, -1, -1] == -1 and cases["T"][0].numpy()[0, 0, 0] == -1
    with pytest.raises(hetero.ArrayError, match="cannot squeeze axis 0"):
        hetero.squeeze(x, axis=0)
    with pytest.raises(hetero.ArrayError, match="cannot broadcast"):
        hetero.broadcast_to(x, (2, 3, 5))
    with pytest.raises(hetero.ArrayError, match="mT needs"):
        x[0, 0].mT


def test_broadcast_views_have_stride_zero_and_are_read_only(device: hetero.Device) -> None:
    row = hetero.asarray(np.arange(4, dtype=np.float32), device=device)
    wide = hetero.broadcast_to(row, (3, 4))
    assert wide.strides == (0, 1) and wide.base is row
    np.testing.assert_array_equal(wide.numpy(), np.broadcast_to(np.arange(4), (3, 4)))
    with pytest.raises(hetero.ArrayError, match="broadcast view"):
        wide[...] = 1
    out = hetero.zeros((3, 4), device=device)
    out[...] = wide  # a stride-0 source through the copy kernel
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(np.arange(4), (3, 4)))


def test_reshape_is_a_view_when_the_layout_allows_else_a_copy(device: hetero.Device) -> None:
    host = _data((4, 6))
    x = hetero.asarray(host, device=device)
    assert x.reshape(3, 8).base is x and x[:, :3].reshape(4, 3, 1).base is x
    assert x[::2].reshape(2, 3, 2).base is x  # a step on the outer axis only
    flat = x.T.reshape(-1)  # no strides read a transpose in C order
    assert flat.base is None or flat.base.base is None
    np.testing.assert_array_equal(flat.numpy(), host.T.reshape(-1))
    np.testing.assert_array_equal(x[:, ::2].reshape(12).numpy(), host[:, ::2].reshape(12))
    with pytest.raises(hetero.ArrayError, match="without copying"):
        x.T.reshape(24, copy=False)
    with pytest.raises(hetero.ArrayError, match="cannot reshape an array of size 24 into shape"):
        x.reshape(5, 5)
    with pytest.raises(hetero.ArrayError, match="one -1"):
        x.reshape(-1, -1)
    assert x.reshape(24, copy=True).base is None


def test_kernels_read_and_write_views(device: hetero.Device) -> None:
    @hetero.kernel
    def scale_add(a: hetero.f32, x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]) -> None:
        i = hetero.global_id(0)
        if i < y.shape[0]:
            y[i] = a * x[i] + y[i]

    host_x, host_y = _data((6, 5)), _data((5, 6)) * 10
    x = hetero.asarray(host_x, device=device)
    y = hetero.asarray(host_y, device=device)
    before = launch_counts().get(device.name, 0)
    scale_add[5](np.float32(2), x[1:, 1], y[::-1, 2])  # a strided read, a strided reversed write
    host_y[::-1, 2] += 2 * host_x[1:, 1]
    np.testing.assert_array_equal(y.numpy(), host_y)
    assert launch_counts()[device.name] > before + 1  # the copies are kernel launches too
    plain_key = next(k for k in scale_add._dispatch if all(type(p) is not tuple or p[1] >= 0 for p in k))
    assert type(scale_add._dispatch[plain_key]) is hetero.kernels.kernel.Specialization  # contiguous: unchanged path
    scale_add[5](np.float32(1), y[0, :5], x[2])  # contiguous views (offset) too
    host_x[2] += host_y[0, :5]
    np.testing.assert_array_equal(x.numpy(), host_x)


def test_views_move_between_devices(device_pair: tuple[hetero.Device, hetero.Device]) -> None:
    a, b = device_pair
    host = _data((5, 7), "int16")
    x = hetero.asarray(host, device=a)
    for key in [(slice(None, None, -2), slice(1, 6, 3)), (2,), (Ellipsis, 0, None), (slice(1, 4),)]:
        moved = x[key].to(b)
        assert moved.device is b and (moved.base is None or a is b)  # to() its own device: the view itself
        np.testing.assert_array_equal(moved.numpy(), host[key])
    dst = hetero.zeros((5, 7), dtype="int16", device=b)
    dst[1:4, ::-3] = x[:3, :3]
    want = np.zeros_like(host)
    want[1:4, ::-3] = host[:3, :3]
    np.testing.assert_array_equal(dst.numpy(), want)
    assert np.array_equal(hetero.asarray(x.T, device=b).numpy(), host.T)


def test_zero_size_and_zero_d_views(device: hetero.Device) -> None:
    x = hetero.asarray(_data((3, 4)), device=device)
    empty = x[2:2, ::-1]
    assert empty.shape == (0, 4) and empty.size == 0 and empty.numpy().shape == (0, 4)
    empty[...] = 5
    assert empty.copy().shape == (0, 4) and empty.to("cpu").shape == (0, 4)
    scalar = x[1, 2]
    assert scalar.shape == () and scalar.numpy() == 6
    scalar[...] = 42
    assert x.numpy()[1, 2] == 42 and scalar.copy().numpy() == 42
    z = hetero.asarray(np.float32(3), device=device)
    assert z[...].shape == () and z[None].shape == (1,) and z.reshape(1, 1).numpy()[0, 0] == 3
    assert hetero.zeros((0, 3), device=device).T.reshape(3, 0).shape == (3, 0)


def test_cpu_views_share_memory_with_numpy_dlpack_and_torch() -> None:
    pytest.importorskip("torch")
    x = hetero.asarray(_data((4, 5)), device="cpu")
    view = x[1:, ::2]
    host = view.numpy()
    assert np.shares_memory(host, x.numpy()) and host.strides == view.byte_strides
    tensor = view.torch()
    assert tuple(tensor.stride()) == view.strides and tensor.shape == view.shape
    tensor[0, 0] = -3
    assert x.numpy()[1, 0] == -3
    np.testing.assert_array_equal(np.from_dlpack(view), x.numpy()[1:, ::2])
    assert hetero.asarray(view) is view and hetero.asarray(view, copy=True).base is None
    assert not hetero.broadcast_to(x[0], (2, 5)).numpy().flags.writeable


def test_strided_views_far_apart_are_gathered_on_the_device(device: hetero.Device) -> None:
    host = np.arange(1000, dtype=np.float64)
    x = hetero.asarray(host, device=device)
    sparse = x[::10]  # covers ten times its size: made contiguous by the copy kernel before moving
    np.testing.assert_array_equal(sparse.numpy(), host[::10])
    np.testing.assert_array_equal(hetero.flip(x.reshape(10, 100)[:, ::7]).numpy(), np.flip(host.reshape(10, 100)[:, ::7]))
    out = np.empty(100)
    hetero.copyto(out, sparse)
    np.testing.assert_array_equal(out, host[::10])


def test_injected_faults_reach_the_copy_kernel(device: hetero.Device) -> None:
    from hetero.fault.injection import inject

    x = hetero.asarray(_data((8, 8)), device=device)
    x[::2, ::3].copy()  # compiled outside the drill
    with inject(f"{device.name}:launch:every=1:sticky"), pytest.raises(hetero.ContextCorruptedError):
        x[::2, ::3].copy()


def test_split_launches_refuse_strided_views() -> None:
    @hetero.kernel
    def double(x: hetero.Array[hetero.f32]) -> None:
        i = hetero.global_id(0)
        if i < x.shape[0]:
            x[i] = 2 * x[i]

    x = hetero.asarray(_data((4, 4)), device="cpu")
    with pytest.raises(hetero.KernelLaunchError, match="strided view"):
        double.split(["cpu"])[4](x[:, 1])


@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "int32", "float64"])
def test_strided_copies_are_bit_exact_for_every_width(device: hetero.Device, dtype: str) -> None:
    rng = np.random.default_rng(1)
    kind = np.dtype(dtype)
    host = rng.integers(0, 256, size=6 * 7 * kind.itemsize, dtype=np.uint8).view(kind).reshape(6, 7)
    if kind == np.bool_:
        host = host.view(np.uint8) % 2 == 1
    x = hetero.asarray(host, device=device)
    view = x[::-2, 1::3]
    assert view.copy().numpy().tobytes() == np.ascontiguousarray(host[::-2, 1::3]).tobytes()
    x[1::2, ::3] = x[::2, ::3].copy()  # a hetero source into a strided destination
    host[1::2, ::3] = host[::2, ::3].copy()
    assert x.numpy().tobytes() == host.tobytes()
    z = hetero.asarray(np.array(host[0, 0]), device=device)
    z[()] = host[1, 1]
    assert z.numpy().tobytes() == host[1, 1].tobytes()
