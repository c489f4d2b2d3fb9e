"""hetero's Gram kernel (split over K, partials merged in chunk order): NumPy's product to
float32 rounding on every device that runs hetero kernels, for odd shapes, K not a multiple of
the chunk, transposed operands read in place (and the transposed orientation), batches and
views with offsets; the same bits on every run and in both layouts; and, on OpenCL devices,
the choice (the default rule on a CPU device, explain_op's text) and hetero.matmul running it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.arraylib.linalg import blas, gram, routine_choice
from hetero.arraylib.linalg.routine_choice import ShapeClass
from hetero.backends.opencl import clblast
from hetero.compiler.array_kernels import gram as kernel
from hetero.core.runtime_parts import runs_kernels
from hetero.scheduler.cost_model import reset_default_model

RNG = np.random.default_rng(4605)
CHUNK = kernel.CHUNK


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Within a length-K dot product's rounding bound of NumPy's float64 product (as test_matmul_choice)."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4 * a.shape[-1] * np.finfo(got.dtype).eps * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-6
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)


def _kernels(device: hetero.Device) -> None:
    if not runs_kernels(device.runtime):
        pytest.skip(f"{device.name} runs no hetero kernels")


def _gram(a: hetero.Array, b: hetero.Array) -> np.ndarray:
    """``a @ b`` by the Gram kernel, forced (whatever the choice would run)."""
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    out = hetero.empty((*batch, a.shape[-2], b.shape[-1]), np.result_type(a.dtype, b.dtype), device=a.device)
    blas.multiply(out, a, b, blas.Choice("hetero", "", "gram", split_k=True))
    return out.numpy()


def _operand(device: hetero.Device, shape: tuple[int, ...], transposed: bool) -> tuple[hetero.Array, np.ndarray]:
    """A random float32 operand of ``shape`` and its host copy; ``transposed``: a ``.T`` view of
    a contiguous array (rows not contiguous)."""
    host = RNG.uniform(-1, 1, shape[:-2] + (shape[-1], shape[-2]) if transposed else shape).astype(np.float32)
    on = hetero.asarray(host, device=device)
    if transposed:
        return hetero.matrix_transpose(on), np.swapaxes(host, -1, -2)
    return on, host


# (M, K, N, a transposed, b transposed): PCA's x.T @ x; K past a whole number of chunks by 1
# (chunk_for(K): 4096 for the deep one, its last chunk one element) or short of one; odd M and N
# below and past a tile (64 columns, 64 rows); both operands transposed (the transposed
# orientation c.T = b.T @ a.T); b alone transposed with a contiguous (b copied)
SHAPES = [(64, 2 * CHUNK + 5, 64, True, False), (8, 16 * CHUNK + 1, 8, True, False), (7, CHUNK + 1, 13, False, False),
          (70, 2 * CHUNK - 1, 130, True, False),
          (33, CHUNK + 300, 65, True, True), (129, 1000, 3, False, True), (1, 3000, 1, False, False)]


@pytest.mark.parametrize("m,k,n,ta,tb", SHAPES)
def test_gram_matches_numpy(device: hetero.Device, m: int, k: int, n: int, ta: bool, tb: bool) -> None:
    _kernels(device)
    a, host_a = _operand(device, (m, k), ta)
    b, host_b = _operand(device, (k, n), tb)
    _close(_gram(a, b), host_a, host_b)


def test_gram_of_a_batch_and_of_views_with_offsets(device: hetero.Device) -> None:
    _kernels(device)
    k = CHUNK + 17
    a, host_a = _operand(device, (3, 20, k), True)  # a batch of transposed views
    b, host_b = _operand(device, (k, 9), False)  # broadcast over the batch
    _close(_gram(a, b), host_a, host_b)
    x = RNG.uniform(-1, 1, (k + 3, 40)).astype(np.float32)
    xd = hetero.asarray(x, device=device)
    view = xd[3:, 5:37]  # an offset and rows longer than the columns read: PCA's product of a slice
    _close(_gram(view.T, view), x[3:, 5:37].T, x[3:, 5:37])


def test_gram_of_other_float_dtypes(device: hetero.Device) -> None:
    _kernels(device)
    k = CHUNK + 9
    a, host_a = _operand(device, (5, k), True)
    b64 = RNG.uniform(-1, 1, (k, 6))
    target = device.runtime.kernel_target()
    if not ("fp64" in target.features if target is not None else device.info.fp64):
        pytest.skip(f"{device.name} has no fp64")
    got = _gram(a, hetero.asarray(b64, device=device))  # float32 @ float64: float64, loads converted
    assert got.dtype == np.float64
    want = host_a.astype(np.float64) @ b64
    bound = 4 * k * np.finfo(np.float64).eps * (np.abs(host_a).astype(np.float64) @ np.abs(b64)) + 1e-12
    assert np.all(np.abs(got - want) <= bound)


def test_gram_of_float16_sums_in_float32(device: hetero.Device) -> None:
    _kernels(device)
    target = device.runtime.kernel_target()
    if target is None or "fp16" not in target.features:
        pytest.skip(f"{device.name} has no fp16 kernels")
    host = RNG.uniform(-1, 1, (CHUNK + 5, 16)).astype(np.float16)
    x = hetero.asarray(host, device=device)
    got = _gram(x.T, x)
    assert got.dtype == np.float16
    # the sum in float32, rounded once to float16: half an ulp of float16 plus float32's bound
    want = host.T.astype(np.float64) @ host.astype(np.float64)
    scale = np.abs(host.T).astype(np.float64) @ np.abs(host)
    bound = np.abs(want) * np.finfo(np.float16).eps + 4 * host.shape[0] * np.finfo(np.float32).eps * scale + 1e-6
    assert np.all(np.abs(got - want) <= bound)


def test_gram_gives_the_same_bits_every_run_and_in_both_layouts(device: hetero.Device,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _kernels(device)
    a, host_a = _operand(device, (48, 3 * CHUNK + 11), True)
    first = _gram(a, hetero.matrix_transpose(a))
    again = _gram(a, hetero.matrix_transpose(a))
    assert first.tobytes() == again.tobytes()
    _close(first, host_a, host_a.T)
    other = "columns" if gram.layout_for(device) == "items" else "items"
    monkeypatch.setattr(gram, "layout_for", lambda device: other)
    # the layouts do the same operations on each element, in the same order: the same bits
    assert _gram(a, hetero.matrix_transpose(a)).tobytes() == first.tobytes()


def test_the_chunk_follows_from_k_alone() -> None:
    # about K / 16 in steps of 256 (work-groups for the cores at short depths), at most CHUNK
    assert [kernel.chunk_for(k) for k in (1, 257, 1000, 4096, 8195, 65536, 65537, 200_000)] == \
        [256, 256, 256, 256, 768, 4096, 4096, 4096]
    for k in (300, 5000, 40_000, 70_000):
        chunk = kernel.chunk_for(k)
        assert chunk % kernel.CHUNK_STEP == 0 and (chunk == CHUNK or chunk * kernel.CHUNK_TARGET >= k)


def test_the_kernel_refuses_an_unknown_layout() -> None:
    from hetero.core.types import f32

    with pytest.raises(ValueError, match="layout must be one of"):
        kernel.Gram(f32, f32, f32, "rows")


# -- the choice on OpenCL devices ------------------------------------------------------------


@pytest.fixture
def fresh_model(state_dir: Path) -> Iterator[Path]:
    reset_default_model()
    yield state_dir
    reset_default_model()


def test_the_gram_kernel_is_a_candidate_for_small_outputs_past_the_tiny_depths() -> None:
    small, tiny, large = 64 * 64, routine_choice.TINY_K, routine_choice.SMALL_OUTPUT + 1
    assert routine_choice.GRAM in routine_choice.candidates("CLBlast", 200_000, small)
    assert routine_choice.GRAM in routine_choice.candidates("CLBlast", tiny + 1, small)
    assert routine_choice.GRAM not in routine_choice.candidates("CLBlast", tiny, small)
    assert routine_choice.GRAM not in routine_choice.candidates("CLBlast", 200_000, large)
    klass = ShapeClass("small", "deep", True)
    keys = {r: routine_choice.record_key(r, "1.5.3", np.dtype(np.float32), klass) for r in ("hetero", routine_choice.GRAM)}
    assert keys[routine_choice.GRAM].startswith("matmul.hetero-gram.float32.out-small.k-deep.copied@")
    # each kernel its own fingerprint (its builder's source): an edited Gram kernel is measured afresh
    assert keys["hetero"].partition("@")[2] != keys[routine_choice.GRAM].partition("@")[2]


def test_pca_product_runs_the_gram_kernel_by_default_on_a_cpu_device(opencl_device_fixture: hetero.Device,
                                                                      fresh_model: Path) -> None:
    device = opencl_device_fixture
    if clblast.library() is None:
        pytest.skip(clblast.missing())
    k = kernel.CHUNK_TARGET * CHUNK + 3
    x, host = _operand(device, (k, 24), False)
    told = hetero.explain_op("matmul", x.T, x)
    if device.info.kind.value != "cpu":
        assert told.library == "CLBlast"
        return
    assert told.library == "hetero" and told.choice.split_k
    assert f"Gram kernel gram_f32_f32_f32_{gram.layout_for(device)}" in told.routine
    assert f"K = {k} in {kernel.CHUNK_TARGET + 1} chunks of {CHUNK}" in told.routine
    assert "same bits every run" in told.routine
    assert "on a CPU device, without a calibration: hetero's Gram kernel" in told.choice.basis
    before = blas.calls().get(device.name, {}).get("hetero", 0)
    product = (x.T @ x).numpy()
    assert blas.calls()[device.name]["hetero"] == before + 1  # it ran where explain_op said
    _close(product, host.T, host)
    assert (x.T @ x).numpy().tobytes() == product.tobytes()
    tiny = hetero.explain_op("matmul", x[:200].T, x[:200])  # K <= 256: not a candidate, CLBlast by default
    assert tiny.library == "CLBlast"


def test_a_calibration_measures_the_gram_kernel_where_it_is_a_candidate(opencl_device_fixture: hetero.Device,
                                                                        fresh_model: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.arraylib.linalg import routine_calibration
    from hetero.scheduler.cost_model import CostModel, default_path

    device = opencl_device_fixture
    if clblast.library() is None:
        pytest.skip(clblast.missing())
    klass = ShapeClass("small", "short", True)
    monkeypatch.setitem(routine_choice.REPRESENTATIVES, ShapeClass("small", "short"), (8, 8, 512))  # small: times nothing
    monkeypatch.setattr(routine_calibration, "QUICK_CLASSES", (klass,))
    model = CostModel(default_path())
    figures = routine_calibration.calibrate([device], model, quick=True)
    assert [f.routine for f in figures] == ["CLBlast", routine_choice.GRAM, "hetero"]
    assert routine_calibration.steps([device], quick=True) == 3
    model.save()
    reset_default_model()
    x = hetero.asarray(np.ones((512, 8), np.float32), device=device)
    told = hetero.explain_op("matmul", x.T, x)
    assert "hetero calibrate's figures" in told.choice.basis and "hetero's Gram kernel" in told.choice.basis
    times = {f.routine: f.seconds for f in figures}
    best = min(times, key=times.__getitem__)
    default = routine_choice.GRAM if device.info.kind.value == "cpu" else "CLBlast"
    chosen = best if times[best] * routine_choice.MARGIN <= times[default] else default
    assert told.choice.split_k == (chosen == routine_choice.GRAM)


def test_a_jit_replay_of_the_gram_product_gives_eagers_bits(opencl_device_fixture: hetero.Device,
                                                             fresh_model: Path) -> None:
    device = opencl_device_fixture
    if clblast.library() is None or device.info.kind.value != "cpu":
        pytest.skip("the Gram kernel is the default only on a CPU OpenCL device with CLBlast")

    def gram_of(x: hetero.Array) -> hetero.Array:
        return x.T @ x

    jitted = hetero.jit(gram_of)
    for call in range(3):  # a trace, then two replays with new inputs (the partials made anew)
        host = RNG.standard_normal((CHUNK + 77, 24)).astype(np.float32)
        x = hetero.asarray(host, device=device)
        assert hetero.explain_op("matmul", x.T, x).choice.split_k
        eager, replayed = gram_of(x).numpy(), jitted(hetero.asarray(host, device=device)).numpy()
        assert eager.tobytes() == replayed.tobytes(), f"call {call}"
    assert (jitted.traces, jitted.replays) == (1, 2)
