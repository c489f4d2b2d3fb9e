"""A short calibration of the cost model: copy bandwidth both ways and the kernels of
:mod:`hetero.kernels.calibration_kernels` at a few sizes, on each device (``hetero calibrate``).

Every timed step waits for its device before and after (``time.perf_counter`` around the
launch or copy and ``synchronize``); a kernel's first launch (its compile) is not timed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import asarray, empty, zeros
from hetero.core.device import Device, HealthState
from hetero.core.registry import device as resolve_device
from hetero.core.registry import devices as all_devices
from hetero.core.runtime_parts import runs_kernels
from hetero.scheduler.cost_model import CostModel

Progress = Callable[[int, int, str], None]  # (done, total, what is being measured)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Sizes and repeats of one calibration run."""

    stream_sizes: tuple[int, ...]  # elements of the 1-D kernels
    matmul_sizes: tuple[int, ...]  # n of the n x n product
    copy_sizes: tuple[int, ...]  # bytes
    repeats: int

    def steps(self, devices: int) -> int:
        return devices * (3 * len(self.stream_sizes) + len(self.matmul_sizes) + 2 * len(self.copy_sizes))


FULL = Plan(stream_sizes=(1 << 12, 1 << 16, 1 << 20, 1 << 22), matmul_sizes=(64, 128, 256),
            copy_sizes=(64 << 10, 1 << 20, 16 << 20, 64 << 20), repeats=7)
QUICK = Plan(stream_sizes=(1 << 12, 1 << 16, 1 << 20), matmul_sizes=(32, 96), copy_sizes=(64 << 10, 4 << 20),
             repeats=3)


def calibration_devices(specs: Sequence[str | Device] | None = None) -> list[Device]:
    """The devices named, or every healthy device that runs kernels."""
    if specs:
        return [resolve_device(spec) for spec in specs]
    return [d for d in all_devices() if runs_kernels(d.runtime)
            and d.health().state is not HealthState.UNHEALTHY]


def calibrate(devices: Sequence[Device], model: CostModel, quick: bool = False,
              progress: Progress | None = None) -> CostModel:
    """Measure ``devices`` into ``model`` (not saved here: call ``model.save()``)."""
    plan = QUICK if quick else FULL
    total = plan.steps(len(devices))
    done = 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, what)

    for device in devices:
        for nbytes in plan.copy_sizes:
            _copies(device, nbytes, plan.repeats, model)
            step(f"{device.name} copies {nbytes >> 10} KiB")
            step(f"{device.name} copies {nbytes >> 10} KiB back")
        for name in ("saxpy", "triad", "copy"):
            for n in plan.stream_sizes:
                _stream(device, name, n, plan.repeats, model)
                step(f"{device.name} {name} n={n}")
        for n in plan.matmul_sizes:
            _matmul(device, n, plan.repeats, model)
            step(f"{device.name} matmul {n}x{n}")
    return model


def _timed(device: Device, run: Callable[[], Any]) -> float:
    device.synchronize()
    start = time.perf_counter()
    run()
    device.synchronize()
    return time.perf_counter() - start


def _copies(device: Device, nbytes: int, repeats: int, model: CostModel) -> None:
    runtime = device.runtime
    host = np.ones(nbytes, np.uint8)
    buffer = empty(nbytes, np.uint8, device=device).buffer
    runtime.upload(buffer, host)  # first touch: page faults and lazy allocation are not bandwidth
    for _ in range(repeats):
        model.record_transfer(device.stable_id, "h2d", nbytes, _timed(device, lambda: runtime.upload(buffer, host)),
                              device_name=device.name)
        model.record_transfer(device.stable_id, "d2h", nbytes, _timed(device, lambda: runtime.download(host, buffer)),
                              device_name=device.name)


def _launch_and_time(kernel: Any, size: Any, args: Sequence[Any], device: Device, n: int, repeats: int,
                     model: CostModel) -> None:
    launcher = kernel[size]
    launcher(*args)  # compiles
    device.synchronize()
    signature = kernel.signature(kernel.arg_types(args))
    model.mark_calibration(kernel.cost_key())
    for _ in range(repeats):
        model.record(kernel.cost_key(), device.stable_id, n, _timed(device, lambda: launcher(*args)),
                     signature=signature, device_name=device.name)


def _stream(device: Device, name: str, n: int, repeats: int, model: CostModel) -> None:
    from hetero.kernels.calibration_kernels import STREAMS

    x = asarray(np.random.default_rng(0).random(n, dtype=np.float32), device=device)
    y = zeros(n, device=device)
    args: tuple[Any, ...] = {"saxpy": (np.float32(2.0), x, y), "triad": (y, x, x, np.float32(3.0)),
                             "copy": (x, y)}[name]
    _launch_and_time(STREAMS[name], n, args, device, n, repeats, model)


def _matmul(device: Device, n: int, repeats: int, model: CostModel) -> None:
    from hetero.kernels.calibration_kernels import matmul

    a = asarray(np.random.default_rng(1).random((n, n), dtype=np.float32), device=device)
    c = zeros((n, n), device=device)
    _launch_and_time(matmul, (n, n), (a, a, c), device, n * n, repeats, model)
