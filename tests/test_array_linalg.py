"""The linalg extension (hetero.arraylib.linalg.namespace) on every device, against NumPy, and its host fallback.

LAPACK results match NumPy's to rounding only (different LAPACK builds, float32 in PoCL's and
Intel's hands): float32 comparisons allow a few hundred eps relative to the matrices' size.
Eigenvectors and singular vectors are unique up to sign, so they are checked through
reconstruction (``V diag(w) V^T``, ``U diag(S) Vh``, ``Q R``) and orthonormality.
"""

from __future__ import annotations

import logging
import math
import types
from collections.abc import Iterator

import numpy as np
import pytest
from warnings import catch_warnings as recorded_warnings

import hetero
from hetero.arraylib import host_fallback as array_host_fallback
from hetero.arraylib.linalg import lapack as array_lapack
from hetero.arraylib.linalg import namespace as linalg

RNG = np.random.default_rng(11)
TOL = dict(rtol=2e-4, atol=2e-4)


def _on(device: hetero.Device, host: np.ndarray) -> hetero.Array:
    return hetero.asarray(host, device=device)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _spd(*shape: int) -> np.ndarray:
    a = _f32(*shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1], dtype=np.float32)).astype(np.float32)


@pytest.fixture
def fallback_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Set ``host_fallback`` (HETERO_HOST_FALLBACK) for one test; counts and warnings start afresh."""

    def use(mode: str) -> None:
        monkeypatch.setenv("HETERO_HOST_FALLBACK", mode)
        hetero.reload_config()

    array_host_fallback.reset()
    yield use
    monkeypatch.undo()
    hetero.reload_config()
    array_host_fallback.reset()


@pytest.fixture
def quiet(fallback_mode: object) -> None:
    fallback_mode("allow")  # type: ignore[operator]


def test_inverse_determinant_and_solve_match_numpy(device: hetero.Device, quiet: None) -> None:
    for shape in ((4, 4), (3, 5, 5), (0, 3, 3), (2, 0, 0)):
        a = _f32(*shape) + 3 * np.eye(shape[-1], dtype=np.float32)
        x = _on(device, a)
        got = linalg.inv(x)
        assert got.shape == a.shape and got.dtype == np.float32 and got.device is device
        np.testing.assert_allclose(got.numpy(), np.linalg.inv(a), **TOL)
        determinant = linalg.det(x)
        assert determinant.shape == shape[:-2]
        np.testing.assert_allclose(determinant.numpy(), np.linalg.det(a), rtol=1e-4)
        sign, logabsdet = linalg.slogdet(x)
        want = np.linalg.slogdet(a)
        assert sign.shape == logabsdet.shape == shape[:-2]
        np.testing.assert_array_equal(sign.numpy(), want.sign)
        np.testing.assert_allclose(logabsdet.numpy(), want.logabsdet, **TOL)
        assert type(linalg.slogdet(x))._fields == ("sign", "logabsdet")
    a = _f32(3, 4, 4) + 3 * np.eye(4, dtype=np.float32)
    for b in (_f32(4), _f32(3, 4, 2), _f32(4, 5), _f32(2, 1, 4, 3)):
        want = np.linalg.solve(a if b.ndim < 4 else a[None], b)
        got = linalg.solve(_on(device, a), _on(device, b))
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, **TOL)
    assert linalg.solve(_on(device, a), _on(device, _f32(4, 0))).shape == (3, 4, 0)


def test_views_are_read_in_place(device: hetero.Device, quiet: None) -> None:
    a = _f32(6, 6) + 4 * np.eye(6, dtype=np.float32)
    x = _on(device, a)
    view = x.mT[1:5, ::-1][:, :4]
    np.testing.assert_allclose(linalg.inv(view).numpy(), np.linalg.inv(a.T[1:5, ::-1][:, :4]), **TOL)


def test_cholesky_eigh_qr_svd(device: hetero.Device, quiet: None) -> None:
    s = _spd(2, 5, 5)
    x = _on(device, s)
    lower = linalg.cholesky(x).numpy()
    np.testing.assert_allclose(lower, np.linalg.cholesky(s), **TOL)
    np.testing.assert_allclose(linalg.cholesky(x, upper=True).numpy(), np.swapaxes(lower, -1, -2), **TOL)
    values, vectors = linalg.eigh(x)
    assert type(linalg.eigh(x))._fields == ("eigenvalues", "eigenvectors")
    np.testing.assert_allclose(values.numpy(), np.linalg.eigvalsh(s), rtol=1e-4)
    np.testing.assert_allclose(linalg.eigvalsh(x).numpy(), np.linalg.eigvalsh(s), rtol=1e-4)
    v, w = vectors.numpy(), values.numpy()
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), s, rtol=1e-4, atol=1e-3)
    for shape in ((2, 6, 4), (4, 6), (3, 3)):
        a = _f32(*shape)
        for mode in ("reduced", "complete"):
            q, r = linalg.qr(_on(device, a), mode=mode)
            want_q, want_r = np.linalg.qr(a, mode=mode)
            assert (q.shape, r.shape) == (want_q.shape, want_r.shape)
            np.testing.assert_allclose(q.numpy() @ r.numpy(), a, **TOL)
            np.testing.assert_allclose(np.triu(r.numpy()), r.numpy())
        for full in (True, False):
            u, sv, vh = linalg.svd(_on(device, a), full_matrices=full)
            want = np.linalg.svd(a, full_matrices=full)
            assert (u.shape, sv.shape, vh.shape) == (want.U.shape, want.S.shape, want.Vh.shape)
            np.testing.assert_allclose(sv.numpy(), want.S, **TOL)
            k = sv.shape[-1]
            np.testing.assert_allclose((u.numpy()[..., :k] * sv.numpy()[..., None, :]) @ vh.numpy()[..., :k, :], a, **TOL)
        assert type(linalg.svd(_on(device, a)))._fields == ("U", "S", "Vh")
        np.testing.assert_allclose(linalg.svdvals(_on(device, a)).numpy(), np.linalg.svdvals(a), **TOL)
    assert linalg.svdvals(_on(device, np.zeros((0, 3, 2), np.float32))).shape == (0, 2)


def test_pinv_and_matrix_rank(device: hetero.Device, quiet: None) -> None:
    a = _f32(3, 5, 4)
    a[1, :, 3] = a[1, :, 0]  # rank 3
    x = _on(device, a)
    np.testing.assert_allclose(linalg.pinv(x).numpy(), np.linalg.pinv(a), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(linalg.matrix_rank(x).numpy(), [4, 3, 4])
    assert linalg.matrix_rank(x).dtype == np.int64
    np.testing.assert_array_equal(linalg.matrix_rank(x, rtol=10.0).numpy(), [0, 0, 0])
    rtol = _on(device, np.array([0.0, 0.0, 10.0], np.float32))
    np.testing.assert_array_equal(linalg.matrix_rank(x, rtol=rtol).numpy(), np.linalg.matrix_rank(a, rtol=[0, 0, 10]))
    np.testing.assert_allclose(linalg.pinv(x, rtol=0.5).numpy(), np.linalg.pinv(a, rtol=0.5), rtol=1e-3, atol=1e-3)
    assert linalg.pinv(_on(device, np.zeros((2, 0, 3), np.float32))).shape == (2, 3, 0)
    np.testing.assert_array_equal(linalg.matrix_rank(_on(device, np.zeros((2, 0, 3), np.float32))).numpy(), [0, 0])


def test_float16_is_computed_in_float32_and_rounded(device: hetero.Device, quiet: None) -> None:
    a = (_f32(4, 4) + 3 * np.eye(4, dtype=np.float32)).astype(np.float16)
    got = linalg.inv(_on(device, a))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.numpy(), np.linalg.inv(a.astype(np.float32)).astype(np.float16))


def test_norms_trace_diagonal_on_the_device(device: hetero.Device) -> None:
    array_host_fallback.reset()
    a = _f32(2, 3, 4)
    x = _on(device, a)
    for ord in (2, 1, 0, -1, -2, 3, 0.5, math.inf, -math.inf):
        for axis, keepdims in ((None, False), (-1, True), ((0, 2), False)):
            got = linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
            want = np.linalg.vector_norm(a, axis=axis, keepdims=keepdims, ord=ord)
            assert got.shape == want.shape and got.dtype == np.float32
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    for ord in ("fro", 1, -1, math.inf, -math.inf):
        for keepdims in (False, True):
            got = linalg.matrix_norm(x, ord=ord, keepdims=keepdims)
            np.testing.assert_allclose(got.numpy(), np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims), rtol=1e-5)
    for offset in (0, 1, -2, 7, -5):
        view = linalg.diagonal(x, offset=offset)
        assert view.base is x  # a view, no copy
        np.testing.assert_array_equal(view.numpy(), np.diagonal(a, offset, -2, -1))
        np.testing.assert_allclose(linalg.trace(x, offset=offset).numpy(), np.trace(a, offset, -2, -1), rtol=1e-5)
    ints = _on(device, np.arange(12, dtype=np.int32).reshape(3, 4))
    assert linalg.trace(ints).dtype == np.int64 and int(linalg.trace(ints).numpy()) == 15
    assert linalg.trace(ints, dtype=hetero.float32).dtype == np.float32
    assert array_host_fallback.counts() == {}  # none of these needs LAPACK


def test_singular_value_norms(device: hetero.Device, quiet: None) -> None:
    a = _f32(2, 3, 4)
    for ord in (2, -2, "nuc"):
        for keepdims in (False, True):
            got = linalg.matrix_norm(_on(device, a), ord=ord, keepdims=keepdims)
            assert got.shape == ((2, 1, 1) if keepdims else (2,))
            assert linalg.matrix_norm(_on(device, a[0]), ord=ord).shape == ()
            np.testing.assert_allclose(got.numpy(), np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims), **TOL)


def test_cross_outer_and_matrix_power(device: hetero.Device, quiet: None) -> None:
    a, b = _f32(2, 3, 4), _f32(3, 1)
    np.testing.assert_allclose(linalg.cross(_on(device, a), _on(device, b), axis=-2).numpy(),
                               np.linalg.cross(a, b, axis=-2), rtol=1e-5, atol=1e-6)
    ints = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    np.testing.assert_array_equal(linalg.cross(_on(device, ints), _on(device, ints[::-1])).numpy(),
                                  np.linalg.cross(ints, ints[::-1]))
    u, v = _f32(5), _f32(3)
    np.testing.assert_allclose(linalg.outer(_on(device, u), _on(device, v)).numpy(), np.outer(u, v), rtol=1e-6)
    m = _f32(2, 3, 3) / 2 + np.eye(3, dtype=np.float32)
    for n in (0, 1, 2, 5, 6, -1, -3):
        got = linalg.matrix_power(_on(device, m), n)
        np.testing.assert_allclose(got.numpy(), np.linalg.matrix_power(m, n), rtol=1e-3, atol=1e-4)
    k = np.array([[1, 1], [1, 0]], np.int64)
    np.testing.assert_array_equal(linalg.matrix_power(_on(device, k), 10).numpy(), np.linalg.matrix_power(k, 10))
    # the names re-exported from hetero.arraylib.linalg.matmul
    np.testing.assert_allclose(linalg.matmul(_on(device, m), _on(device, m)).numpy(), m @ m, rtol=1e-5)
    assert linalg.matrix_transpose(_on(device, m)).shape == (2, 3, 3)
    assert linalg.vecdot is hetero.arraylib.linalg.matmul.vecdot and linalg.tensordot is hetero.arraylib.linalg.matmul.tensordot


def test_bad_input_says_what_is_wrong(device: hetero.Device, quiet: None) -> None:
    square = _on(device, _f32(3, 3))
    with pytest.raises(hetero.ArrayError, match="square"):
        linalg.inv(_on(device, _f32(3, 4)))
    with pytest.raises(hetero.ArrayError, match="square"):
        linalg.det(_on(device, _f32(2, 3, 4)))
    with pytest.raises(hetero.ArrayError, match="matrices"):
        linalg.svd(_on(device, _f32(4)))
    with pytest.raises(hetero.UnsupportedDtypeError, match="floating-point.*astype"):
        linalg.inv(_on(device, np.eye(3, dtype=np.int32)))
    with pytest.raises(hetero.UnsupportedDtypeError, match="floating-point"):
        linalg.vector_norm(_on(device, np.arange(3)))
    with pytest.raises(hetero.ArrayError, match="singular"):
        linalg.inv(_on(device, np.zeros((3, 3), np.float32)))
    with pytest.raises(hetero.ArrayError, match="positive-definite"):
        linalg.cholesky(_on(device, -np.eye(3, dtype=np.float32)))
    with pytest.raises(hetero.ArrayError, match=r"takes x2 of shape \(3,\)"):
        linalg.solve(square, _on(device, _f32(4)))
    with pytest.raises(hetero.ArrayError, match="broadcast"):
        linalg.solve(_on(device, _f32(2, 3, 3)), _on(device, _f32(4, 3, 1)))
    with pytest.raises(hetero.ArrayError, match="'reduced' or 'complete'"):
        linalg.qr(square, mode="r")
    with pytest.raises(hetero.ArrayError, match="3 elements"):
        linalg.cross(_on(device, _f32(4)), _on(device, _f32(4)))
    with pytest.raises(hetero.ArrayError, match="ord must be one of"):
        linalg.matrix_norm(square, ord=3)
    with pytest.raises(hetero.ArrayError, match="out of range"):
        linalg.vector_norm(square, axis=2)
    with pytest.raises(hetero.ArrayError, match="1-D"):
        linalg.outer(square, square)
    with pytest.raises(hetero.ArrayError, match="n must be an int"):
        linalg.matrix_power(square, 1.5)  # type: ignore[arg-type]


def test_float64_without_fp64_is_refused(device: hetero.Device, quiet: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _on(device, np.eye(3))
    monkeypatch.setattr(array_lapack, "_has_fp64", lambda device: False)
    with pytest.raises(hetero.UnsupportedDtypeError, match="fp64.*float32"):
        linalg.inv(x)


def test_host_fallback_warns_once_per_function_and_device(device: hetero.Device, fallback_mode: object,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    x = _on(device, _f32(3, 3) + 3 * np.eye(3, dtype=np.float32))
    with caplog.at_level(logging.INFO, logger="hetero.array.ndarray"), recorded_warnings(record=True) as caught:
        for _ in range(3):
            linalg.inv(x)
        linalg.det(x)
    warnings = [r.getMessage() for r in caplog.records if r.name == "hetero.array.ndarray"]
    assert [str(w.message) for w in caught if issubclass(w.category, hetero.PerformanceWarning)] == warnings
    from hetero.core.launch_counts import host_fallbacks

    if device.backend in ("cpu", "cuda", "rocm"):  # the device's own LAPACK: no fallback
        assert warnings == [] and array_host_fallback.counts() == {} and host_fallbacks() == {}
        assert linalg.host_functions(device) == ()
        return
    assert len(warnings) == 2, warnings
    assert "linalg.inv" in warnings[0] and device.name in warnings[0] and "HETERO_HOST_FALLBACK=allow" in warnings[0]
    assert "linalg.det" in warnings[1]
    assert array_host_fallback.counts() == {("linalg.inv", device.name): 3, ("linalg.det", device.name): 1}
    assert host_fallbacks() == {device.name: 4}  # the telemetry heartbeats carry to hetero-run's metrics
    assert {"linalg.inv", "linalg.svd", "linalg.solve"} <= set(linalg.host_functions(device))
    assert "linalg.trace" not in linalg.host_functions(device)
    assert linalg.host_functions(device.name) == linalg.host_functions(device)


def test_host_fallback_allow_and_error(opencl_device_fixture: hetero.Device, fallback_mode: object,
                                       caplog: pytest.LogCaptureFixture) -> None:
    device = opencl_device_fixture
    x = _on(device, _spd(3, 3))
    fallback_mode("allow")  # type: ignore[operator]
    with caplog.at_level(logging.INFO, logger="hetero.array.ndarray"), recorded_warnings(record=True) as caught:
        np.testing.assert_allclose(linalg.eigvalsh(x).numpy(), np.linalg.eigvalsh(x.numpy()), rtol=1e-4)
    assert not [r for r in caplog.records if r.name == "hetero.array.ndarray"]
    assert array_host_fallback.counts() == {("linalg.eigvalsh", device.name): 1}
    fallback_mode("error")  # type: ignore[operator]
    with pytest.raises(hetero.ArrayError, match=rf"linalg\.eigvalsh.*{device.name}.*host_fallback.*HETERO_HOST_FALLBACK"):
        linalg.eigvalsh(x)
    assert array_host_fallback.counts() == {("linalg.eigvalsh", device.name): 1}
    assert linalg.trace(x).shape == ()  # functions that need no LAPACK run under "error" too


def test_a_bad_mode_is_a_config_error(fallback_mode: object) -> None:
    with pytest.raises(hetero.ConfigError, match="host_fallback.*warn, allow, error"):
        fallback_mode("sometimes")  # type: ignore[operator]


@pytest.mark.parametrize(("backend", "library", "on_device"), [
    ("cpu", "numpy", True), ("cuda", "cuSOLVER", True), ("rocm", "rocSOLVER", True),
    ("oneapi", "numpy (host fallback)", False), ("opencl", "numpy (host fallback)", False)])
def test_which_library_runs_lapack(backend: str, library: str, on_device: bool) -> None:
    fake = types.SimpleNamespace(backend=backend, name=f"{backend}:0")
    choice = linalg.lapack_library(fake)  # type: ignore[arg-type]
    assert (choice.library, choice.on_device) == (library, on_device)
    assert bool(linalg.host_functions(fake)) is not on_device  # type: ignore[arg-type]


class _Pointer:
    """A fake CuPy memory pointer: host bytes at an offset (``pointer + nbytes`` as CuPy's)."""

    def __init__(self, memory: np.ndarray, offset: int = 0) -> None:
        self.memory, self.offset = memory, offset

    def __add__(self, nbytes: int) -> _Pointer:
        return _Pointer(self.memory, self.offset + nbytes)


def _fake_cupy_device(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A ``cuda`` device whose runtime's ``cupy`` is NumPy over host bytes: the CuPy path of
    hetero.arraylib.linalg.lapack (views of device buffers, results copied into new arrays) without a GPU."""

    def ndarray(shape: tuple[int, ...], dtype: np.dtype, memptr: _Pointer, strides: tuple[int, ...]) -> np.ndarray:
        return np.ndarray(shape, dtype, buffer=memptr.memory, offset=memptr.offset, strides=strides)

    names = ("asarray", "ascontiguousarray", "broadcast_to", "linalg", "matmul", "swapaxes", "where", "zeros")
    cupy = types.SimpleNamespace(ndarray=ndarray, **{name: getattr(np, name) for name in names})
    calls: list[str] = []
    runtime = types.SimpleNamespace(host_memory=False, cupy=cupy,
                                    call_library=lambda name, run: (calls.append(name), run())[1])
    device = types.SimpleNamespace(backend="cuda", name="cuda:fake", runtime=runtime, calls=calls)

    def empty(shape: tuple[int, ...], dtype: np.dtype, device: types.SimpleNamespace) -> hetero.Array:
        return hetero.Array(_Pointer(np.zeros(math.prod(shape) * dtype.itemsize, np.uint8)), device, shape, dtype)

    monkeypatch.setattr(array_lapack, "empty", empty)
    return device


def _on_fake(device: types.SimpleNamespace, host: np.ndarray) -> hetero.Array:
    data = np.ascontiguousarray(host)
    return hetero.Array(_Pointer(data.reshape(-1).view(np.uint8)), device, data.shape, data.dtype)  # type: ignore[arg-type]


def _read(x: hetero.Array) -> np.ndarray:
    return np.ndarray(x.shape, x.dtype, buffer=x.buffer.memory, offset=x.buffer.offset + x.offset * x.dtype.itemsize,
                      strides=x.byte_strides)


def test_the_cupy_path_reads_device_buffers_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    device = _fake_cupy_device(monkeypatch)
    a = _f32(2, 5, 5) + 4 * np.eye(5, dtype=np.float32)
    x = _on_fake(device, a)
    np.testing.assert_allclose(_read(linalg.inv(x)), np.linalg.inv(a), **TOL)
    view = x.mT[:, 1:, 1:]  # a strided view at an offset: read through its strides
    np.testing.assert_allclose(_read(linalg.det(view)), np.linalg.det(np.swapaxes(a, -1, -2)[:, 1:, 1:]), rtol=1e-4)
    b = _f32(5)
    np.testing.assert_allclose(_read(linalg.solve(x, _on_fake(device, b))), np.linalg.solve(a, b), **TOL)
    s = _spd(5, 5)
    np.testing.assert_allclose(_read(linalg.cholesky(_on_fake(device, s), upper=True)),
                               np.linalg.cholesky(s, upper=True), **TOL)
    u, sv, vh = linalg.svd(_on_fake(device, a[0, :, :3]), full_matrices=False)
    np.testing.assert_allclose((_read(u) * _read(sv)) @ _read(vh), a[0, :, :3], **TOL)
    np.testing.assert_allclose(_read(linalg.pinv(x)), np.linalg.pinv(a), rtol=1e-3, atol=1e-3)
    assert _read(linalg.matrix_rank(x)).tolist() == [5, 5]
    assert device.calls[0] == "cuSOLVER linalg.inv" and len(device.calls) == 7


@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3])
def test_vector_norm_of_complex_is_real_valued(device: hetero.Device, ord: float) -> None:
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    got = linalg.vector_norm(hetero.asarray(z, device=device), axis=1, ord=ord)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.linalg.norm(z, axis=1, ord=ord), rtol=1e-5)


@pytest.mark.parametrize("ord", ["fro", 1, math.inf, -1])
def test_matrix_norm_of_complex_is_real_valued(device: hetero.Device, ord: object) -> None:
    rng = np.random.default_rng(6)
    z = (rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))).astype(np.complex64)
    got = linalg.matrix_norm(hetero.asarray(z, device=device), ord=ord)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.linalg.norm(z, axis=(-2, -1), ord=ord), rtol=1e-5)


def _complex(*shape: int, seed: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def test_lapack_functions_take_complex_and_return_the_standards_real_values(device: hetero.Device, quiet: None) -> None:
    """Complex input (it was refused): complex results, except what the standard defines as real
    (eigenvalues of a Hermitian matrix, singular values, logabsdet, the singular-value norms)."""
    a = _complex(2, 4, 4)
    h = (a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)).astype(np.complex64)  # Hermitian positive definite
    x, hx = _on(device, a), _on(device, h)
    cases = {
        "inv": (linalg.inv(x), np.linalg.inv(a)), "det": (linalg.det(x), np.linalg.det(a)),
        "pinv": (linalg.pinv(x), np.linalg.pinv(a)), "solve": (linalg.solve(x, hx), np.linalg.solve(a, h)),
        "cholesky": (linalg.cholesky(hx), np.linalg.cholesky(h)), "eigvalsh": (linalg.eigvalsh(hx), np.linalg.eigvalsh(h)),
        "svdvals": (linalg.svdvals(x), np.linalg.svd(a, compute_uv=False)),
        "logabsdet": (linalg.slogdet(x).logabsdet, np.linalg.slogdet(a)[1]),
        "sign": (linalg.slogdet(x).sign, np.linalg.slogdet(a)[0]),
        "norm 2": (linalg.matrix_norm(x, ord=2), np.linalg.norm(a, ord=2, axis=(-2, -1))),
        "norm nuc": (linalg.matrix_norm(x, ord="nuc"), np.linalg.norm(a, ord="nuc", axis=(-2, -1))),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-4, err_msg=name)
    assert linalg.matrix_rank(x).numpy().tolist() == [4, 4]
    values, vectors = linalg.eigh(hx)
    assert (values.dtype, vectors.dtype) == (np.float32, np.complex64)
    v = vectors.numpy()
    np.testing.assert_allclose(h @ v, v * values.numpy()[..., None, :], rtol=1e-3, atol=1e-3)
    u, s, vh = linalg.svd(x, full_matrices=False)
    assert (u.dtype, s.dtype, vh.dtype) == (np.complex64, np.float32, np.complex64)
    np.testing.assert_allclose((u.numpy() * s.numpy()[..., None, :]) @ vh.numpy(), a, rtol=1e-3, atol=1e-4)
    q, r = linalg.qr(x)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, rtol=1e-3, atol=1e-4)


def test_lapack_functions_refuse_integers_and_complex128_without_fp64(device: hetero.Device) -> None:
    ints = hetero.asarray(np.eye(3, dtype=np.int32), device=device)
    with pytest.raises(hetero.UnsupportedDtypeError, match="floating-point or complex"):
        linalg.inv(ints)
    if not device.info.fp64:
        with pytest.raises(hetero.UnsupportedDtypeError, match="complex128 needs fp64.*complex64"):
            linalg.inv(hetero.asarray(np.eye(3, dtype=np.complex128), device=device))
