"""``hetero calibrate``'s matmul part: on each device with several matmul routines (CLBlast, in
one call and over K in chunks, hetero's Gram kernel for small outputs, and hetero's tiled kernel: :func:`hetero.arraylib.linalg.blas.routines`),
time each at each shape class's representative product (:data:`hetero.arraylib.linalg.routine_choice.REPRESENTATIVES`;
a transposed view of the first operand for the classes of transposed operands)
and record the times in the cost model, where :func:`~hetero.arraylib.linalg.routine_choice.decide`
finds them.

Each timed product waits for its device before and after (``synchronize``); the first run of
each routine and shape (its compile: CLBlast builds its kernels per device on first use) is not
timed. The operands are float32 matrices of uniform values in [-1, 1), as a plain
``x @ w`` passes them; the result is checked against NumPy once, so a routine that computes
wrongly is never recorded as the fast one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from hetero.array.ndarray import asarray, empty
from hetero.arraylib.linalg import blas, routine_choice
from hetero.arraylib.linalg.routine_choice import REPRESENTATIVES, ShapeClass
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.scheduler.cost_model import CostModel

Progress = Callable[[int, int, str], None]  # (done, total, what is being measured)
_DTYPE = np.dtype(np.float32)
#: The classes a ``--quick`` calibration measures: the small outputs, where the routines differ most.
QUICK_CLASSES = (ShapeClass("small", "tiny"), ShapeClass("small", "tiny", True), ShapeClass("small", "short"),
                 ShapeClass("small", "deep"), ShapeClass("small", "deep", True), ShapeClass("large", "short"))
#: Every class a full calibration measures: each size class with contiguous operands, and the
#: transposed first operand (PCA's ``x.T @ x``) where the tiled kernel's copy weighs most.
FULL_CLASSES = (*REPRESENTATIVES, ShapeClass("small", "tiny", True), ShapeClass("small", "long", True), ShapeClass("small", "deep", True),
                ShapeClass("large", "short", True))


@dataclasses.dataclass(frozen=True)
class Figure:
    """One routine's measured rate for one shape class on one device."""

    device: str
    klass: ShapeClass
    routine: str  # a name of routine_choice.candidates
    shape: tuple[int, int, int]
    seconds: float

    @property
    def gflops(self) -> float:
        m, n, k = self.shape
        return 2 * m * n * k / self.seconds / 1e9


def classes(quick: bool) -> tuple[ShapeClass, ...]:
    return QUICK_CLASSES if quick else FULL_CLASSES


def devices_with_a_choice(devices: Sequence[Device]) -> list[Device]:
    """The ``devices`` on which ``hetero.matmul`` chooses between routines."""
    probe = {d: asarray(np.zeros((1, 1), _DTYPE), device=d) for d in devices}
    return [d for d in devices if blas.routines(d, probe[d], probe[d], _DTYPE, ())]


def steps(devices: Sequence[Device], quick: bool) -> int:
    """Progress steps of :func:`calibrate` (one per device, class and routine)."""
    per_device = 0
    for klass in classes(quick):
        m, n, k = routine_choice.representative(klass)
        per_device += len(routine_choice.candidates("CLBlast", k, m * n))
    return len(devices) * per_device


def calibrate(devices: Sequence[Device], model: CostModel, quick: bool = False,
              progress: Progress | None = None, done: int = 0, total: int = 0) -> list[Figure]:
    """Time every routine for each class on each of ``devices`` (those with a choice) into
    ``model`` (not saved here); ``progress`` counts on from ``done`` of ``total``."""
    repeats = 3 if quick else 5
    figures: list[Figure] = []
    for device in devices:
        for klass in classes(quick):
            for figure in _measure(device, klass, repeats, model):
                figures.append(figure)
                done += 1
                if progress is not None:
                    progress(done, total, f"{device.name} matmul {'x'.join(map(str, figure.shape))} {figure.routine}")
    return figures


def _measure(device: Device, klass: ShapeClass, repeats: int, model: CostModel) -> list[Figure]:
    m, n, k = routine_choice.representative(klass)
    rng = np.random.default_rng(k)
    host_a = rng.uniform(-1, 1, (m, k)).astype(_DTYPE)
    host_b = rng.uniform(-1, 1, (k, n)).astype(_DTYPE)
    a, b = asarray(host_a, device=device), asarray(host_b, device=device)
    if klass.copied:  # the first operand a transposed view, as x.T in x.T @ x
        a = asarray(np.ascontiguousarray(host_a.T), device=device).T
    choices = blas.routines(device, a, b, _DTYPE, ())
    want = host_a.astype(np.float64) @ host_b.astype(np.float64)
    bound = 4 * k * np.finfo(_DTYPE).eps * (np.abs(host_a).astype(np.float64) @ np.abs(host_b)) + 1e-6
    out = empty((m, n), _DTYPE, device=device)
    figures = []
    version = choices["CLBlast"].version if "CLBlast" in choices else ""
    for name, choice in choices.items():
        blas.multiply(out, a, b, choice)  # compiles; checked once
        if not np.all(np.abs(out.numpy() - want) <= bound):
            raise ArrayError(f"hetero calibrate: {choice} gave a wrong {m}x{k} @ {k}x{n} product on {device.name}; "
                             "not recorded (report it, with `hetero devices` output)")
        key = routine_choice.record_key(name, version, _DTYPE, klass)
        seconds = [_timed(device, lambda choice=choice: blas.multiply(out, a, b, choice)) for _ in range(repeats)]
        for each in seconds:
            model.record(key, device.stable_id, m * n * k, each, signature=f"{m}x{n}x{k}", device_name=device.name)
        figures.append(Figure(device.name, klass, name, (m, n, k), sorted(seconds)[len(seconds) // 2]))
    return figures


def _timed(device: Device, run: Callable[[], object]) -> float:
    device.synchronize()
    start = time.perf_counter()
    run()
    device.synchronize()
    return time.perf_counter() - start


__all__ = ["QUICK_CLASSES", "Figure", "calibrate", "classes", "devices_with_a_choice", "steps"]
