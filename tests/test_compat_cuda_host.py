"""hetero.compat.cuda's host API, as a Numba-CUDA program uses it: the current device and context,
streams and events, device arrays' layout (strides, ``.T``, slices, Fortran order), pinned and mapped
host arrays, the type names, and ``numba.cuda.np``/``typing``/``kernels``/``cudadrv.devicearray``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import types
from hetero.compat.cuda.cudadrv import devicearray
from hetero.compat.cuda.kernels.transpose import transpose
from hetero.compat.cuda.np import numpy_support
from hetero.compat.cuda.typing import signature


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def scale(a, factor):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = a[i, j] * factor


@cuda.jit
def bump(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


# -- devices and contexts ------------------------------------------------------------------------------
def test_current_device_and_context_describe_hetero_device(on: hetero.Device) -> None:
    current = cuda.get_current_device()
    assert current.device is on and current.id == on.index
    assert isinstance(current.name, bytes) and current.name
    assert current.compute_capability >= (7, 0)
    assert current.WARP_SIZE == 32 and current.MAX_THREADS_PER_BLOCK == on.max_work_group_size
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    assert cuda.current_context().device == current
    cuda.current_context().synchronize()


def test_gpus_lists_devices_that_run_kernels() -> None:
    names = [g.device.name for g in cuda.gpus]
    assert len(cuda.gpus) == len(names) and "cpu" in names
    assert cuda.gpus[names.index("cpu")].device.name == "cpu"
    with pytest.raises(IndexError, match="devices that run kernels"):
        cuda.gpus[len(names)]


# -- streams and events ----------------------------------------------------------------------------------
def test_launches_and_copies_on_a_stream(on: hetero.Device) -> None:
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    stream = cuda.stream()
    with stream.auto_synchronize():
        d = cuda.to_device(host, stream)
        scale[(2, 2), (4, 4), stream](d, np.float32(2))
        out = d.copy_to_host(stream=stream)
    np.testing.assert_array_equal(out, host * 2)
    bump.forall(4, stream=stream)(d.ravel())
    stream.synchronize()
    assert d.copy_to_host()[0, 0] == 1


@pytest.mark.parametrize("make", [cuda.default_stream, cuda.legacy_default_stream, cuda.per_thread_default_stream])
def test_default_streams_order_work_on_the_device_queue(on: hetero.Device, make: object) -> None:
    stream = make()  # type: ignore[operator]
    d = cuda.to_device(np.zeros(16, np.int32), stream)
    bump[1, 16, stream](d)
    stream.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), np.ones(16, np.int32))
    assert stream.handle == 0


def test_a_launch_refuses_what_is_not_a_stream() -> None:
    with pytest.raises(TypeError, match="is not a stream"):
        bump[1, 16, "s"]
    with pytest.raises(NotImplementedError, match="external_stream"):
        cuda.external_stream(0x1234)


def test_events_time_the_work_between_them(on: hetero.Device) -> None:
    stream = cuda.stream()
    start, end = cuda.event(), cuda.event()
    start.record(stream)
    d = cuda.to_device(np.zeros(1024, np.int32), stream)
    bump[4, 256, stream](d)
    end.record(stream)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0 and cuda.event_elapsed_time(start, end) >= 0
    with pytest.raises(RuntimeError, match="never recorded"):
        cuda.event().elapsed_time(end)
    untimed = cuda.event(timing=False)
    untimed.record()
    with pytest.raises(RuntimeError, match="timing=False"):
        cuda.event_elapsed_time(untimed, end)


# -- device arrays' layout -------------------------------------------------------------------------------
def test_strides_transpose_and_slices_match_numpy(on: hetero.Device) -> None:
    host = np.arange(120, dtype=np.int64).reshape(10, 12)
    d = cuda.to_device(host)
    assert d.strides == host.strides and d.flags == {"C_CONTIGUOUS": True, "F_CONTIGUOUS": False}
    view = d[::2, ::2]
    assert view.strides == host[::2, ::2].strides and not view.is_c_contiguous()
    np.testing.assert_array_equal(view.copy_to_host(), host[::2, ::2])
    t = view.T  # Numba's .T copies into a new C-ordered array
    assert t.shape == (6, 5) and t.strides == (40, 8)
    np.testing.assert_array_equal(t.copy_to_host(), host[::2, ::2].T)
    with pytest.raises(NotImplementedError, match="2-D"):
        cuda.to_device(np.zeros((2, 2, 2))).transpose()


def test_fortran_ordered_and_strided_device_arrays_take_kernel_writes(on: hetero.Device) -> None:
    f = cuda.device_array((4, 6), np.float32, order="F")
    assert f.strides == np.empty((4, 6), np.float32, order="F").strides and f.is_f_contiguous()
    f.copy_to_device(np.ones((4, 6), np.float32))
    scale[(1, 2), (4, 4)](f, np.float32(3))
    np.testing.assert_array_equal(f.copy_to_host(), np.full((4, 6), 3, np.float32))
    like = cuda.device_array_like(np.zeros((3, 5), order="F"))
    assert like.strides == (8, 24)
    with pytest.raises(ValueError, match="gaps"):
        cuda.device_array((4, 4), strides=(64, 8))


def test_pinned_and_mapped_arrays_are_host_arrays_kernels_write(on: hetero.Device) -> None:
    d = cuda.device_array((3, 4), np.float32, order="F")
    for make in (cuda.pinned_array_like, cuda.mapped_array_like):
        like = make(d)
        assert isinstance(like, np.ndarray) and like.strides == d.strides and like.dtype == d.dtype
    mapped = cuda.mapped_array(32, np.int32)
    mapped[:] = 0
    bump[1, 32](mapped)
    np.testing.assert_array_equal(mapped, np.ones(32, np.int32))  # seen on the host once the launch returns


def test_transpose_kernel_and_devicearray_helpers(on: hetero.Device) -> None:
    host = np.arange(35, dtype=np.complex128).reshape(5, 7)
    d = cuda.to_device(host)
    out = devicearray.from_array_like(np.zeros((7, 5), np.complex128))
    assert transpose(d, out) is out
    np.testing.assert_array_equal(out.copy_to_host(), host.T)
    assert devicearray.is_cuda_ndarray(out) and devicearray.auto_device(out) == (out, False)
    with pytest.raises(ValueError, match="non-contiguous"):
        devicearray.auto_device(np.arange(10.0)[::2])


# -- names ---------------------------------------------------------------------------------------------
def test_type_names_and_numpy_support() -> None:
    assert cuda.double is types.float64 and cuda.complex64 is types.complex64 and cuda.complex128.dtype == np.complex128
    assert (cuda.f4, cuda.i8, cuda.u1, cuda.b1, cuda.c16) == (types.float32, types.int64, types.uint8, types.boolean,
                                                              types.complex128)
    assert numpy_support.from_dtype(np.dtype(np.int16)) is types.int16
    assert numpy_support.as_dtype(types.float32) == np.float32
    with pytest.raises(TypeError, match="record"):
        numpy_support.from_dtype(np.dtype([("x", np.int32)]))
    with pytest.raises(TypeError, match="raw pointers"):
        numpy_support.carray(0, (1,))
    sig = signature(types.void, types.float32[:], types.int32)
    assert sig == types.void(types.float32[:], types.int32)
    assert isinstance(cuda.HAS_NUMBA, bool)


def test_to_device_copies_even_where_the_device_shares_host_memory(on: hetero.Device) -> None:
    host = np.zeros(16, np.int32)
    d = cuda.to_device(host)
    bump[1, 16](d)
    np.testing.assert_array_equal(host, np.zeros(16, np.int32))  # Numba's to_device copies: the host is untouched
    np.testing.assert_array_equal(d.copy_to_host(), np.ones(16, np.int32))


def _maximum(a, b, c):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < c.size:
        c[i] = max(a[i], b[i])


def test_inspect_asm_gives_the_ptx_hetero_s_cuda_path_makes(device: hetero.Device) -> None:
    from hetero.backends.cupy import nvrtc_compile

    if not nvrtc_compile.available():
        pytest.skip("NVRTC (cuda-bindings, nvidia-cuda-nvrtc) is not installed")
    kernel = cuda.jit(_maximum)
    with pytest.raises(hetero.CompileError, match="no signature yet"):
        kernel.inspect_asm()
    a, b = np.arange(8.0), np.full(8, 3.0)
    c = np.zeros(8)
    with hetero.use_device(device):
        kernel[1, 8](a, b, c)
    (ptx,) = kernel.inspect_asm().values()
    assert ".visible .entry" in ptx and "max.f64" in ptx
    assert kernel.inspect_lto_ptx("void(float64[:], float64[:], float64[:])") == ptx
    typed = cuda.jit("void(float32[:], float32[:], float32[:])")(_maximum)
    assert "max.f32" in typed.inspect_asm("void(float32[:], float32[:], float32[:])")
    with pytest.raises(hetero.CompileError, match="no LLVM IR.*inspect_asm"):
        kernel.inspect_llvm()
    with pytest.raises(hetero.CompileError, match="cuobjdump"):
        kernel.inspect_sass()


def _broadcast_lane0(a, n):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < n:
        a[i] = cuda.shfl_sync(0xFFFFFFFF, a[i], 0)


def test_compile_ptx_compiles_a_kernel_for_a_compute_capability_without_launching_it() -> None:
    from hetero.backends.cupy import nvrtc_compile
    from hetero.compat.cuda.compiler import compile_ptx as from_compiler

    if not nvrtc_compile.available():
        pytest.skip("NVRTC (cuda-bindings, nvidia-cuda-nvrtc) is not installed")
    ptx, resty = cuda.compile_ptx(_broadcast_lane0, (types.int32[:], types.int32), cc=(9, 0))
    assert resty is types.void and ".target sm_90" in ptx and "shfl.sync" in ptx
    assert from_compiler is cuda.compile_ptx
    with pytest.raises(hetero.CompileError, match="device=True.*kernels that call it"):
        cuda.compile_ptx(_broadcast_lane0, (types.int32[:], types.int32), device=True)
    with pytest.raises(hetero.CompileError, match="LTO-IR"):
        cuda.compile_ptx(_broadcast_lane0, (types.int32[:], types.int32), output="ltoir")
