"""hetero.matmul, ``@``, ``@=``, vecdot, tensordot and explain_op on every device, against NumPy.

Float tolerance: each BLAS sums in its own order, so a float result may differ from NumPy's by
rounding in every one of its K products and sums: the tests allow ``4 * K * eps`` of the dtype
times ``|a| @ |b|`` per element (the bound of a length-K dot product's rounding error), plus
a few ulps. Integers are exact (they wrap as NumPy's do).

Cold compiles cost seconds (Numba on cpu, CLBlast's own kernels on PoCL): the tests reuse a
few dtypes and shapes so that few distinct kernels and CLBlast routines are built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.arraylib.linalg import blas as array_blas

RNG = np.random.default_rng(7)


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    k = a.shape[-1]
    eps = np.finfo(want.dtype).eps
    bound = 4 * max(k, 1) * eps * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)) + 4 * eps
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= bound)


def _on(device: hetero.Device, host: np.ndarray) -> hetero.Array:
    return hetero.asarray(host, device=device)


@pytest.fixture
def tiled_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """HETERO_BLAS=off: hetero's own tiled kernel on every device."""
    monkeypatch.setenv("HETERO_BLAS", "off")
    hetero.reload_config()
    yield
    monkeypatch.undo()
    hetero.reload_config()


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_shapes_vectors_batches_and_broadcasts(device: hetero.Device) -> None:
    cases = [((17, 9), (9, 13)), ((9,), (9, 13)), ((17, 9), (9,)), ((9,), (9,)), ((3, 17, 9), (9, 13)),
             ((2, 1, 17, 9), (3, 9, 13)), ((17, 9), (4, 9, 13))]
    for sa, sb in cases:
        a, b = _f32(*sa), _f32(*sb)
        got = hetero.matmul(_on(device, a), _on(device, b))
        assert got.device is device and got.shape == np.matmul(a, b).shape
        _close(got.numpy(), a, b)


def test_operator_and_inplace(device: hetero.Device) -> None:
    a, b = _f32(16, 16), _f32(16, 16)
    x, y = _on(device, a.copy()), _on(device, b)  # a copy: on cpu x shares the host array's memory
    _close((x @ y).numpy(), a, b)
    z = x
    z @= y
    assert z is x
    _close(x.numpy(), a, b)
    with pytest.raises(hetero.ArrayError, match="writes into x1"):
        v = _on(device, _f32(16, 4))
        v @= _on(device, _f32(4, 8))
    with pytest.raises(TypeError):
        _ = x @ 2.0
    with pytest.raises(TypeError, match="move the NumPy array to the device"):
        _ = x @ b


def test_transposed_sliced_and_offset_views(device: hetero.Device) -> None:
    a, b = _f32(40, 30), _f32(30, 50)
    x, y = _on(device, a), _on(device, b)
    _close((x.mT @ x).numpy(), a.T, a)  # a transposed operand (BLAS transpose flag)
    _close((x[3:20, 1:25] @ y[1:25, ::3]).numpy(), a[3:20, 1:25], b[1:25, ::3])  # offsets, gaps, a column stride
    _close((x[::-2] @ y).numpy(), a[::-2], b)  # negative strides (copied first for BLAS)
    batch = _f32(3, 42, 40)
    _close((_on(device, batch)[:, 2:, :].mT @ x[:, 5:12]).numpy(), batch[:, 2:, :].transpose(0, 2, 1), a[:, 5:12])


def test_zero_size_dims(device: hetero.Device) -> None:
    a, b = _f32(5, 0), _f32(0, 7)
    got = hetero.matmul(_on(device, a), _on(device, b))
    assert got.shape == (5, 7)
    np.testing.assert_array_equal(got.numpy(), np.zeros((5, 7), np.float32))  # K = 0: zeros
    assert hetero.matmul(_on(device, _f32(0, 3)), _on(device, _f32(3, 4))).shape == (0, 4)
    assert hetero.matmul(_on(device, _f32(2, 0, 3)), _on(device, _f32(3, 4))).shape == (2, 0, 4)


def test_integer_and_mixed_dtypes(device: hetero.Device) -> None:
    a = RNG.integers(-50, 50, (12, 20)).astype(np.int32)
    b = RNG.integers(-50, 50, (20, 9)).astype(np.int32)
    _close((_on(device, a) @ _on(device, b)).numpy(), a, b)
    wraps = np.full((2, 3), 100, np.int8)
    _close((_on(device, wraps) @ _on(device, wraps.T.copy())).numpy(), wraps, wraps.T)  # int8 wraps, as NumPy
    f = _f32(20, 9)
    if device.info.fp64:
        _close((_on(device, a) @ _on(device, f)).numpy(), a, f)  # int32 with float32 promotes to float64


def test_float64_and_float16(device: hetero.Device) -> None:
    if device.info.fp64:
        a, b = RNG.standard_normal((20, 30)), RNG.standard_normal((30, 10))
        _close((_on(device, a) @ _on(device, b)).numpy(), a, b)
    h1, h2 = _f32(8, 12).astype(np.float16), _f32(12, 6).astype(np.float16)
    got = (_on(device, h1) @ _on(device, h2)).numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), (h1.astype(np.float32) @ h2.astype(np.float32)), rtol=2e-2, atol=2e-2)


def test_errors_name_shapes_devices_and_dtypes(device: hetero.Device) -> None:
    x = _on(device, _f32(3, 4))
    with pytest.raises(hetero.ArrayError, match=r"\(3, 4\) and \(5, 2\) do not align"):
        hetero.matmul(x, _on(device, _f32(5, 2)))
    with pytest.raises(hetero.ArrayError, match=r"batch axes .* do not broadcast"):
        hetero.matmul(_on(device, _f32(2, 3, 4)), _on(device, _f32(3, 4, 2)))
    with pytest.raises(hetero.ArrayError, match="0-d"):
        hetero.matmul(x, _on(device, np.float32(1.0)))
    with pytest.raises(hetero.UnsupportedDtypeError, match="bool"):
        hetero.matmul(_on(device, np.ones((2, 2), bool)), _on(device, np.ones((2, 2), bool)))
    other = "cpu" if device.name != "cpu" else next((d.name for d in hetero.devices() if d.name != "cpu"), None)
    if other is not None:
        with pytest.raises(hetero.ArrayError, match=rf"different devices, {device.name} and {other}.*\.to\("):
            hetero.matmul(x, hetero.asarray(_f32(4, 2), device=other))


def test_float64_without_fp64_raises(device: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = device.runtime
    target = runtime.kernel_target()
    assert target is not None
    lacking = dataclasses.replace(target, features=frozenset(target.features - {"fp64"}))
    monkeypatch.setattr(runtime, "kernel_target", lambda: lacking)
    a = hetero.asarray(np.ones((2, 2)), dtype="float64", device=device)
    with pytest.raises(hetero.UnsupportedDtypeError, match=f"float64, which {device.name} lacks"):
        hetero.matmul(a, a)


def test_explain_op_names_the_library(device: hetero.Device) -> None:
    x, y = _on(device, _f32(8, 8)), _on(device, _f32(8, 8))
    told = hetero.explain_op("matmul", x, y)
    expected = {"cpu": "numpy", "cuda": "cuBLAS", "rocm": "rocBLAS"}.get(device.backend)
    if device.backend in ("oneapi", "opencl"):
        from hetero.backends.opencl import clblast

        expected = "CLBlast" if clblast.library() else "hetero"
        if told.choice.basis.startswith("hetero calibrate's figures"):  # a calibrated state dir may pick either
            expected = told.library
        assert ("sgemm" in told.routine) == (expected == "CLBlast")
    assert told.library == expected and device.name in str(told)
    ints = _on(device, np.ones((8, 8), np.int32))
    assert hetero.explain_op("@", ints, ints).library in ("numpy", "cupy", "hetero")
    before = array_blas.calls().get(device.name, {}).get(told.library, 0)
    hetero.matmul(x, y)
    assert array_blas.calls()[device.name][told.library] == before + 1


def test_tiled_kernel_forced_on(device: hetero.Device, tiled_only: None) -> None:
    a, b = _f32(2, 37, 21), _f32(21, 19)  # edges that are not multiples of the tile, a broadcast batch
    x, y = _on(device, a), _on(device, b)
    told = hetero.explain_op("matmul", x, y)
    assert told.library == "hetero" and "HETERO_BLAS" in told.choice.why
    _close((x @ y).numpy(), a, b)
    _close((x[1].mT[::2] @ x[0]).numpy(), a[1].T[::2], a[0])
    ints = RNG.integers(-9, 9, (5, 33)).astype(np.int32)
    _close((_on(device, ints) @ _on(device, ints.T.copy())).numpy(), ints, ints.T)


def test_fault_injection_sees_library_calls(device: hetero.Device) -> None:
    x = _on(device, _f32(8, 8))
    with hetero.fault.inject(f"{device.name}:launch:nth=1:lost") as injection:
        with pytest.raises(hetero.DeviceError):
            hetero.matmul(x, x)
    assert injection.count() == 1
    assert injection.fired[0].method in ("call_library", "launch")


def test_vecdot_tensordot_matrix_transpose(device: hetero.Device) -> None:
    a, b = _f32(4, 6, 5), _f32(6, 5)
    x, y = _on(device, a), _on(device, b)
    got = hetero.vecdot(x, y)
    np.testing.assert_allclose(got.numpy(), np.sum(a * b, axis=-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hetero.vecdot(x, y, axis=-2).numpy(), np.sum(a * b, axis=-2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hetero.tensordot(x, y).numpy(), np.tensordot(a, b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(hetero.tensordot(x, y, axes=([1], [0])).numpy(), np.tensordot(a, b, axes=([1], [0])),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(hetero.matrix_transpose(x).numpy(), np.swapaxes(a, -1, -2))
    with pytest.raises(hetero.ArrayError, match="differ along axis"):
        hetero.vecdot(x, _on(device, _f32(6, 4)))


def test_library_calls_count_as_launches(device: hetero.Device) -> None:
    from hetero.core.launch_counts import launch_counts

    x = _on(device, _f32(8, 8))
    hetero.matmul(x, x)  # made and compiled: only the call below is counted
    before = launch_counts().get(device.name, 0)
    hetero.matmul(x, x)
    assert launch_counts()[device.name] == before + 1


def test_an_opencl_status_from_clblast_is_a_device_error(opencl_device_fixture: hetero.Device,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.opencl import clblast

    if clblast.library() is None:
        pytest.skip(clblast.missing())

    def fails(*args: object, **kwargs: object) -> None:
        raise clblast.CLBlastError("CLBlast sgemm failed with status -5 (out of resources)", -5)

    monkeypatch.setattr(clblast, "gemm", fails)
    monkeypatch.setenv("HETERO_BLAS", "on")  # CLBlast whatever a calibration in the state dir chose
    hetero.reload_config()
    x = _on(opencl_device_fixture, _f32(8, 8))
    try:
        with pytest.raises(hetero.DeviceError, match="out of resources|OUT_OF_RESOURCES"):
            hetero.matmul(x, x)
    finally:
        monkeypatch.undo()
        hetero.reload_config()


def test_opencl_without_clblast_runs_the_tiled_kernel(opencl_device_fixture: hetero.Device,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.opencl import clblast

    monkeypatch.setattr(clblast, "_state", {"routines": None, "version": "", "path": "",
                                            "error": "libclblast.so.1: cannot open shared object file"})
    a, b = _f32(2, 37, 21), _f32(21, 19)  # the shapes and dtype of test_tiled_kernel_forced_on: its kernel
    x, y = _on(opencl_device_fixture, a), _on(opencl_device_fixture, b)
    told = hetero.explain_op("matmul", x, y)
    assert told.library == "hetero" and "apt-get install libclblast-dev" in told.choice.why
    _close((x @ y).numpy(), a, b)


def test_the_blas_switch_is_a_config_setting() -> None:
    load = hetero.core.config.load_config
    assert load({"HETERO_BLAS": "off"}).blas == load({"HETERO_BLAS": "0"}).blas == "off"
    assert load({"HETERO_BLAS": "on"}).blas == load({"HETERO_BLAS": "true"}).blas == "on"
    assert load({}).blas == load({"HETERO_BLAS": "AUTO"}).blas == "auto"
    with pytest.raises(hetero.ConfigError, match="'blas' is 'sometimes'; valid modes: auto, on, off"):
        load({"HETERO_BLAS": "sometimes"})


def _complex(shape: tuple[int, ...], seed: int, dtype: str = "complex64") -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize(("s1", "s2"), [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((4,), (4, 3)), ((4,), (4,))])
def test_complex_matmul_matches_numpy(device: hetero.Device, s1: tuple[int, ...], s2: tuple[int, ...]) -> None:
    a, b = _complex(s1, 1), _complex(s2, 2)
    got = hetero.matmul(hetero.asarray(a, device=device), hetero.asarray(b, device=device))
    assert got.dtype == np.complex64 and got.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(got.numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    real = np.arange(np.prod(s2), dtype=np.float32).reshape(s2)
    mixed = hetero.matmul(hetero.asarray(a, device=device), hetero.asarray(real, device=device))
    np.testing.assert_allclose(mixed.numpy(), np.matmul(a, real), rtol=1e-5, atol=1e-4)


def test_complex_vecdot_conjugates_the_first_operand(device: hetero.Device) -> None:
    a, b = _complex((3, 5), 3), _complex((5,), 4)
    got = hetero.vecdot(hetero.asarray(a, device=device), hetero.asarray(b, device=device))
    np.testing.assert_allclose(got.numpy(), np.sum(np.conj(a) * b, axis=-1), rtol=1e-5, atol=1e-5)


def test_tensordot_of_0d_arrays_is_their_product(device: hetero.Device) -> None:
    x1 = hetero.asarray(np.float32(3.0), device=device)
    x2 = hetero.asarray(np.arange(4, dtype=np.float32), device=device)
    assert hetero.tensordot(x1, x1, axes=0).numpy() == np.float32(9.0)
    np.testing.assert_array_equal(hetero.tensordot(x1, x2, axes=((), ())).numpy(), np.tensordot(3.0, np.arange(4.0), 0))
