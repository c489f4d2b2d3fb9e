"""Which matmul routine runs a product on a device that has several: the vendor's GEMM in one
call (CLBlast on OpenCL devices), CLBlast's GEMM over K in chunks (:data:`CHUNKED`, for deep
products), hetero's Gram kernel (:data:`GRAM`, split over K: small outputs past the tiny
depths, :mod:`hetero.compiler.array_kernels.gram`) or hetero's tiled kernel; chosen per *shape
class* from the figures ``hetero calibrate`` measured on that device, and by a built-in rule
before any calibration.

A shape class buckets a product by its output (``batch * M * N`` elements: few, or many) and its
depth (``K``: short, long, or deep), what the routines' speeds turn on: CLBlast's GEMM is tuned
for large outputs, and one call was seen to fall off a cliff on PoCL for deep products (35
GFLOP/s at K = 40k, 3 at K = 50k for a 64 x 64 output, issue 46), which calls of at most
:data:`K_CHUNK` each, summing into the result (beta = 1), would stay clear of; whether it is
there on a device is for the calibration to say (:func:`default_rule`).

``hetero calibrate`` (:mod:`hetero.arraylib.linalg.routine_calibration`) times every candidate
(:func:`candidates`) at each class's representative shape (:data:`REPRESENTATIVES`) and records
the times in the cost model (:mod:`hetero.scheduler.cost_model`, ``<state_dir>/costs.json``) under
:func:`record_key`: one key per routine, dtype and class, fingerprinted with the routine's
version (CLBlast's version and the chunk; hetero's kernels' source), so a new CLBlast or an
edited kernel is measured afresh rather than judged by old figures. :func:`decide` compares the
routines' predicted times at the class's representative size (the median of the recent samples)
and keeps the default routine unless another measured :data:`MARGIN` times faster, so the choice is the same for every product of a class and deterministic for a given cost
model; where a class lacks a figure it takes :func:`default_rule`. Decisions are kept per
process for each cost model loaded (``hetero.scheduler.cost_model.reset_default_model()``
forgets them, as a change of state dir does).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import threading
from typing import Any

import numpy as np

from hetero._version import __version__
from hetero.compiler.array_kernels import gram
from hetero.compiler.array_kernels import matmul as tiled
from hetero.core.device import Device
from hetero.scheduler.cost_model import CostModel, default_model, default_path

#: Output elements (batch * M * N) up to which a product's output is "small".
SMALL_OUTPUT = 1 << 14
#: Depths (K) up to which a product is "tiny" (a training step's small layers, where a routine's
#: fixed cost per call decides: the digits MLP's five products, K <= 64, took CLBlast 54 us each
#: on oneapi:0), "short", then "long"; deeper is "deep" (CLBlast's cliff on PoCL lies between 40k and 50k).
TINY_K, SHORT_K, LONG_K = 256, 4096, 32768
#: The chunk of K each CLBlast call takes in the chunked routine (below the cliff).
K_CHUNK = LONG_K
#: The name of the chunked CLBlast routine.
CHUNKED = "CLBlast-chunks"
#: The name of hetero's split-K Gram kernel (small outputs, K past TINY_K).
GRAM = "hetero-gram"
#: How much faster than the default routine another must have measured to be chosen instead
#: (timings on a shared machine vary by several percent between runs).
MARGIN = 1.1


@dataclasses.dataclass(frozen=True)
class ShapeClass:
    """A bucket of products: ``output`` is ``small`` or ``large``, ``depth`` ``short``, ``long`` or
    ``deep``, and ``copied`` says that an operand's rows are not contiguous (a transposed view,
    as PCA's ``x.T @ x``), which hetero's tiled kernel copies first and CLBlast reads in place."""

    output: str
    depth: str
    copied: bool = False

    @property
    def key(self) -> str:
        return f"out-{self.output}.k-{self.depth}" + (".copied" if self.copied else "")

    def __str__(self) -> str:
        outputs = f"<= {SMALL_OUTPUT}" if self.output == "small" else f"> {SMALL_OUTPUT}"
        depth = {"tiny": f"K <= {TINY_K}", "short": f"{TINY_K} < K <= {SHORT_K}", "long": f"{SHORT_K} < K <= {LONG_K}", "deep": f"K > {LONG_K}"}[self.depth]
        layout = ", an operand transposed" if self.copied else ""
        return f"{self.output} output ({outputs} elements), {self.depth} ({depth}){layout}"


def shape_class(outputs: int, k: int, copied: bool = False) -> ShapeClass:
    """The class of a product with ``outputs`` result elements (batch * M * N) and depth ``k``
    (``copied``: an operand's rows are not contiguous)."""
    depth = "tiny" if k <= TINY_K else "short" if k <= SHORT_K else "long" if k <= LONG_K else "deep"
    return ShapeClass("small" if outputs <= SMALL_OUTPUT else "large", depth, copied)


#: The (M, N, K) that stands for each class in a calibration: about 0.03 to 1 GFLOP each (the
#: tiny classes less: their figure is mostly each call's fixed cost).
REPRESENTATIVES: dict[ShapeClass, tuple[int, int, int]] = {
    ShapeClass("small", "tiny"): (64, 64, 64),
    ShapeClass("large", "tiny"): (512, 512, 64),
    ShapeClass("small", "short"): (64, 64, 4096),
    ShapeClass("small", "long"): (64, 64, 32768),
    ShapeClass("small", "deep"): (64, 64, 131072),
    ShapeClass("large", "short"): (512, 512, 512),
    ShapeClass("large", "long"): (256, 256, 8192),
    ShapeClass("large", "deep"): (160, 160, 40960),
}


@functools.lru_cache(maxsize=2)
def _kernel_fingerprint(routine: str) -> str:
    """A hetero kernel's identity: its builder's source (an edited kernel is measured afresh; the
    Gram kernel's holds its chunk of K)."""
    try:
        source = inspect.getsource(gram if routine == GRAM else tiled)
    except (OSError, TypeError):  # no source shipped: the release stands for it
        source = __version__
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def record_key(routine: str, version: str, dtype: np.dtype[Any], klass: ShapeClass) -> str:
    """The cost model key of a routine's figures for ``dtype`` products of ``klass``:
    ``matmul.CLBlast.float32.out-small.k-deep@<version>`` (routine ``hetero``: the tiled kernel;
    ``CLBlast-chunks``: CLBlast's GEMM over K in chunks of :data:`K_CHUNK`, which its key names;
    ``hetero-gram``: the Gram kernel)."""
    if routine in ("hetero", GRAM):
        fingerprint = _kernel_fingerprint(routine)
    else:
        fingerprint = (version or "unknown") + (f"-{K_CHUNK}" if routine == CHUNKED else "")
    return f"matmul.{routine}.{np.dtype(dtype).name}.{klass.key}@{fingerprint}"


def representative(klass: ShapeClass) -> tuple[int, int, int]:
    """The (M, N, K) a calibration measures ``klass`` at (a transposed ``(K, M)`` array's view
    for the first operand where ``klass.copied``)."""
    return REPRESENTATIVES[ShapeClass(klass.output, klass.depth)]


def multiply_adds(klass: ShapeClass) -> int:
    """M * N * K of the class's representative (what the cost model's ``n`` counts)."""
    m, n, k = representative(klass)
    return m * n * k


def candidates(vendor: str, k: int, outputs: int) -> tuple[str, ...]:
    """The routines a product of depth ``k`` and ``outputs`` result elements can run on a device
    whose vendor GEMM is ``vendor`` (``CLBlast``), in the order ties go: the vendor's one call;
    past :data:`K_CHUNK`, the vendor's GEMM over K in chunks (CLBlast only); hetero's Gram
    kernel for a small output past the tiny depths (its class, :func:`shape_class`); hetero's
    tiled kernel."""
    chunked = (CHUNKED,) if vendor == "CLBlast" and k > K_CHUNK else ()
    split = (GRAM,) if outputs <= SMALL_OUTPUT and k > TINY_K else ()
    return (vendor, *chunked, *split, "hetero")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The ``routine`` that runs (a name of :func:`candidates`) and the ``basis``: the measured
    figures or the default rule; ``measured`` says which."""

    routine: str
    basis: str
    measured: bool


def default_rule(vendor: str, klass: ShapeClass, cpu: bool = False) -> Decision:
    """The choice before a calibration. On a CPU device (``cpu``), hetero's Gram kernel for a
    small output past the tiny depths: on 2026-12-07 (the 2-core VM, load 3 to 4, CLBlast 1.5.3)
    it ran 64 x 64 outputs at K = 4096, 32768, 131072 and PCA's 200k (``x.T @ x``) 2.4 to 16 times
    faster than CLBlast's one call on PoCL 3.1 and Intel's CPU runtime (``python -m
    benchmarks.matmul_choice``). Else the vendor routine in one call (tuned, and hetero's choice
    before calibration existed; the Gram kernel is unmeasured on GPUs, where CLBlast's tuned
    kernels are the safer guess).
    Not the chunks for deep products: on the same day one CLBlast call of a 64 x 64 x 200k product
    ran at 9 and 27 GFLOP/s, over K in chunks of 32768 at 5 and 6: the cliff the issue saw was not
    there to avoid, and only a calibration on the device can say where it is."""
    if cpu and klass.output == "small" and klass.depth != "tiny":  # the classes whose candidates hold GRAM
        return Decision(GRAM, f"the default rule for {klass}, on a CPU device, without a calibration: hetero's Gram "
                              "kernel (split over K); run hetero calibrate to measure this device", False)
    return Decision(vendor, f"the default rule for {klass}, without a calibration: the vendor routine in one call; "
                            "run hetero calibrate to measure this device", False)


_lock = threading.Lock()
_decisions: dict[tuple[int, str, str, str, ShapeClass], Decision] = {}
_model_seen: list[CostModel] = []  # the model the decisions were made from (kept alive, so its id is not reused)


def _model() -> CostModel:
    model = default_model()
    if model.path != default_path():  # the state dir changed since it was loaded
        from hetero.scheduler.cost_model import reset_default_model

        reset_default_model()
        model = default_model()
    return model


def decide(device: Device, vendor: str, version: str, dtype: np.dtype[Any], outputs: int, k: int,
           copied: bool = False) -> Decision:
    """The routine for a ``dtype`` product of ``outputs`` result elements and depth ``k`` on
    ``device``, whose vendor GEMM is ``vendor`` ``version`` (``copied``: an operand the tiled
    kernel copies first; see the module docstring)."""
    klass = shape_class(outputs, k, copied)
    model = _model()
    key = (id(model), device.stable_id, f"{vendor} {version}", np.dtype(dtype).name, klass)
    found = _decisions.get(key)
    if found is None:
        with _lock:
            if not _model_seen or _model_seen[0] is not model:
                _decisions.clear()
                _model_seen[:] = [model]
            found = _decisions[key] = _measured(model, device, vendor, version, dtype, klass, k, outputs)
    return found


_NAMES = {"hetero": "hetero's tiled kernel", CHUNKED: "CLBlast over K in chunks", GRAM: "hetero's Gram kernel"}


def _measured(model: CostModel, device: Device, vendor: str, version: str, dtype: np.dtype[Any],
              klass: ShapeClass, k: int, outputs: int) -> Decision:
    n = multiply_adds(klass)
    cpu = device.info.kind.value == "cpu"
    routines = candidates(vendor, k, outputs)  # the same for every product of the class: deep is past K_CHUNK
    predicted = {r: model.predict(record_key(r, version, dtype, klass), device.stable_id, n) for r in routines}
    times = {r: t for r, t in predicted.items() if t is not None}
    if len(times) < len(routines):
        return default_rule(vendor, klass, cpu)
    best = min(routines, key=times.__getitem__)  # ties: the earlier
    default = default_rule(vendor, klass, cpu).routine
    if times[best] * MARGIN > times[default]:  # within the noise: keep the default
        best = default
    rates = ", ".join(f"{_NAMES.get(r, r)} {2 * n / times[r] / 1e9:.1f} GFLOP/s" for r in routines)
    return Decision(best, f"hetero calibrate's figures for {klass} on {device.name}: {rates}", True)


__all__ = ["CHUNKED", "GRAM", "K_CHUNK", "REPRESENTATIVES", "Decision", "ShapeClass", "candidates", "decide", "default_rule",
           "multiply_adds", "record_key", "representative", "shape_class"]
