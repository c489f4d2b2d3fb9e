"""hetero.matmul's choice between a device's vendor GEMM and hetero's tiled kernel: both give
NumPy's product to rounding, the choice follows a calibration record (written here into a
private state dir, never timed) and the built-in rule before one, and explain_op says which
routine and why. The calibration itself is run at tiny shapes: it must record both routines'
figures where the choice reads them, whatever their speeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.arraylib.linalg import blas, routine_calibration, routine_choice
from hetero.arraylib.linalg.routine_choice import ShapeClass
from hetero.backends.opencl import clblast
from hetero.scheduler.cost_model import CostModel, default_path, reset_default_model

RNG = np.random.default_rng(46)
F32 = np.dtype(np.float32)


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Within a length-K dot product's rounding bound of NumPy's float64 product (as test_array_matmul)."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4 * a.shape[-1] * np.finfo(got.dtype).eps * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-6
    assert got.shape == want.shape and np.all(np.abs(got - want) <= bound)


@pytest.fixture
def blas_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    def use(mode: str) -> None:
        monkeypatch.setenv("HETERO_BLAS", mode)
        hetero.reload_config()

    yield use
    monkeypatch.undo()
    hetero.reload_config()


@pytest.fixture
def with_clblast() -> None:
    if clblast.library() is None:
        pytest.skip(clblast.missing())


@pytest.fixture
def fresh_model(state_dir: Path) -> Iterator[Path]:
    """An empty cost model in the private state dir, loaded afresh before and after the test."""
    reset_default_model()
    yield state_dir
    reset_default_model()


def test_both_routines_match_numpy_on_the_same_inputs(device: hetero.Device, blas_mode: object) -> None:
    # a deep product read through a transposed view (PCA's xc.T @ xc) and a plain one
    x = RNG.standard_normal((6000, 24)).astype(np.float32)
    w = RNG.standard_normal((24, 40)).astype(np.float32)
    xd, wd = hetero.asarray(x, device=device), hetero.asarray(w, device=device)
    results = {}
    for mode in ("on", "off"):
        blas_mode(mode)  # type: ignore[operator]
        told = hetero.explain_op("matmul", xd.T, xd)
        if mode == "off":
            assert told.library == "hetero"
        elif device.backend == "cpu" or clblast.library() is not None:
            assert told.library != "hetero"
        results[mode] = ((xd.T @ xd).numpy(), (xd @ wd).numpy())
        _close(results[mode][0], x.T, x)
        _close(results[mode][1], x, w)
    # the two routines differ from each other by rounding only: at most both bounds apart
    for on, off, (a, b) in zip(results["on"], results["off"], ((x.T, x), (x, w)), strict=True):
        bound = 8 * a.shape[-1] * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-6
        assert np.all(np.abs(on.astype(np.float64) - off) <= bound)


def test_every_routine_matches_numpy_on_a_deep_product(opencl_device_fixture: hetero.Device,
                                                        with_clblast: None) -> None:
    # past K_CHUNK: CLBlast in one call, CLBlast over K in chunks, the Gram kernel (small outputs) and
    # the tiled kernel; a transposed
    # view (PCA's x.T @ x) and a batch with a broadcast operand (the chunks of StridedBatched)
    device = opencl_device_fixture
    k = routine_choice.K_CHUNK + 1000
    x = RNG.standard_normal((k, 8)).astype(np.float32)
    batch = RNG.standard_normal((2, 5, k)).astype(np.float32)
    xd, bd = hetero.asarray(x, device=device), hetero.asarray(batch, device=device)
    cases = [((xd.T, xd), (x.T, x)), ((bd, xd), (batch, x))]
    for (a, b), (host_a, host_b) in cases:
        batch_shape = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        found = blas.routines(device, a, b, F32, batch_shape)
        assert list(found) == ["CLBlast", routine_choice.CHUNKED, routine_choice.GRAM, "hetero"]
        results = []
        for choice in found.values():
            out = hetero.empty((*batch_shape, a.shape[-2], b.shape[-1]), F32, device=device)
            blas.multiply(out, a, b, choice)
            results.append(out.numpy())
            _close(results[-1], host_a, host_b)
        bound = 8 * k * np.finfo(np.float32).eps * (np.abs(host_a).astype(np.float64) @ np.abs(host_b)) + 1e-6
        assert all(np.all(np.abs(r.astype(np.float64) - results[0]) <= bound) for r in results[1:])


def _record(device: hetero.Device, klass: ShapeClass, **seconds: float) -> None:
    """A calibration record: the routines' times for ``klass`` on ``device`` (``CLBlast=...``,
    ``chunks=...``, ``gram=...``, ``hetero=...``), as hetero calibrate saves them."""
    model = CostModel(default_path())
    n = routine_choice.multiply_adds(klass)
    version = (clblast.library() or "CLBlast ").partition(" ")[2]
    for name, time in seconds.items():
        routine = {"chunks": routine_choice.CHUNKED, "gram": routine_choice.GRAM}.get(name, name)
        model.record(routine_choice.record_key(routine, version, F32, klass), device.stable_id, n, time,
                     device_name=device.name)
    model.save()
    reset_default_model()


def test_the_choice_follows_the_calibration_record(opencl_device_fixture: hetero.Device, with_clblast: None,
                                                   fresh_model: Path) -> None:
    device = opencl_device_fixture
    short, deep = ShapeClass("small", "short"), ShapeClass("small", "deep")
    # (the Gram kernel, the default on a CPU device for small outputs, measured slowest but where it wins)
    _record(device, short, CLBlast=0.010, gram=0.030, hetero=0.020)  # CLBlast the fastest on short products
    _record(device, ShapeClass("large", "short"), CLBlast=0.100, hetero=0.095)  # within the margin: CLBlast stays
    _record(device, deep, CLBlast=0.300, chunks=0.200, gram=0.400, hetero=0.100)  # the tiled kernel fastest on deep ones
    a = hetero.asarray(RNG.standard_normal((8, 40000)).astype(np.float32), device=device)
    b = hetero.asarray(RNG.standard_normal((40000, 8)).astype(np.float32), device=device)
    told_deep = hetero.explain_op("matmul", a, b)
    assert told_deep.library == "hetero" and "hetero calibrate's figures" in told_deep.choice.basis
    rate = 2 * routine_choice.multiply_adds(deep) / 0.300 / 1e9
    assert "K > 32768" in str(told_deep) and f"CLBlast {rate:.1f} GFLOP/s" in str(told_deep)
    assert "hetero's tiled kernel" in told_deep.choice.basis and "CLBlast over K in chunks" in told_deep.choice.basis
    assert str(hetero.explain_op("matmul", a, b)) == str(told_deep)  # deterministic
    square = hetero.asarray(np.ones((512, 512), np.float32), device=device)
    assert hetero.explain_op("matmul", square, square).library == "CLBlast"  # 5% faster is not enough to switch
    told_short = hetero.explain_op("matmul", a[:, :512], b[:512])
    assert told_short.library == "CLBlast" and told_short.choice.basis.startswith("hetero calibrate's figures")
    # a transposed operand is its own class (the tiled kernel copies it first): CLBlast measured faster there
    _record(device, ShapeClass("small", "deep", copied=True), CLBlast=0.100, chunks=0.200, gram=0.200, hetero=0.300)
    told_transposed = hetero.explain_op("matmul", b.T, b)
    assert told_transposed.library == "CLBlast" and "an operand transposed" in told_transposed.choice.basis
    # K <= 256 is a class of its own (each call's fixed cost decides): measured, it follows its own figures
    _record(device, ShapeClass("small", "tiny"), CLBlast=0.050, hetero=0.010)
    told_tiny = hetero.explain_op("matmul", a[:, :64], b[:64])
    assert told_tiny.library == "hetero" and "K <= 256" in told_tiny.choice.basis
    before = blas.calls().get(device.name, {}).get("hetero", 0)
    _close((a @ b).numpy(), a.numpy(), b.numpy())
    assert blas.calls()[device.name]["hetero"] == before + 1  # the product ran where explain_op said
    (fresh_model / "costs.json").unlink()  # a new calibration (samples otherwise merge, medians of the recent)
    _record(device, deep, CLBlast=0.300, chunks=0.050, gram=0.400, hetero=0.100)  # the chunks fastest
    told = hetero.explain_op("matmul", a, b)
    assert told.library == "CLBlast" and told.choice.k_chunk == routine_choice.K_CHUNK
    assert "over K in 2 calls" in told.routine
    (fresh_model / "costs.json").unlink()
    _record(device, deep, CLBlast=0.300, chunks=0.200, gram=0.020, hetero=0.100)  # the Gram kernel fastest
    told = hetero.explain_op("matmul", a, b)
    assert told.library == "hetero" and told.choice.split_k and "Gram kernel gram_f32_f32_f32_" in told.routine
    gram_rate = 2 * routine_choice.multiply_adds(deep) / 0.020 / 1e9
    assert f"hetero's Gram kernel {gram_rate:.1f} GFLOP/s" in told.choice.basis
    before = blas.calls()[device.name]["hetero"]
    _close((a @ b).numpy(), a.numpy(), b.numpy())
    assert blas.calls()[device.name]["hetero"] == before + 1


def test_default_rule_before_a_calibration(opencl_device_fixture: hetero.Device, with_clblast: None,
                                           fresh_model: Path, blas_mode: object) -> None:
    device = opencl_device_fixture
    a = hetero.asarray(np.ones((4, 40000), np.float32), device=device)
    deep, short = hetero.explain_op("matmul", a, a.T), hetero.explain_op("matmul", a[:, :100], a[:, :100].T)
    # a small output past K = 256: hetero's Gram kernel on a CPU device, CLBlast in one call elsewhere
    if device.info.kind.value == "cpu":
        assert deep.library == "hetero" and deep.choice.split_k and "on a CPU device" in deep.choice.basis
    else:
        assert deep.library == "CLBlast" and deep.choice.k_chunk == 0
    assert short.library == "CLBlast" and short.choice.k_chunk == 0  # K <= 256
    assert all("without a calibration" in told.choice.basis for told in (deep, short))
    blas_mode("on")  # type: ignore[operator]
    forced = hetero.explain_op("matmul", a, a.T)
    assert forced.library == "CLBlast" and forced.choice.k_chunk == 0 and "blas is on" in forced.choice.basis


def test_a_calibration_records_both_routines_for_the_choice(opencl_device_fixture: hetero.Device, with_clblast: None,
                                                            fresh_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = opencl_device_fixture
    klass = ShapeClass("small", "tiny")
    monkeypatch.setitem(routine_choice.REPRESENTATIVES, klass, (8, 8, 64))  # tiny: this test measures nothing
    monkeypatch.setattr(routine_calibration, "QUICK_CLASSES", (klass,))
    assert routine_calibration.devices_with_a_choice([hetero.device("cpu"), device]) == [device]
    model = CostModel(default_path())
    figures = routine_calibration.calibrate([device], model, quick=True)
    assert [f.routine for f in figures] == ["CLBlast", "hetero"] and all(f.gflops > 0 for f in figures)
    model.save()
    reset_default_model()
    told = hetero.explain_op("matmul", *(hetero.asarray(np.ones((8, 8), np.float32), device=device),) * 2)
    assert "hetero calibrate's figures" in told.choice.basis
    clblast, tiled_kernel = figures  # the default (CLBlast) stays unless the tiled kernel measured MARGIN times faster
    assert told.library == ("hetero" if tiled_kernel.seconds * routine_choice.MARGIN <= clblast.seconds else "CLBlast")
