"""Kernel launches on a CuPy device, on a runtime whose kernel is a stand-in (no GPU here): on the
only GPU of a machine a launch does not enter CuPy's device context; a thread that has no CUDA
context yet gets one and launches again; a failed launch is a hetero error that marks the device."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.backends.cupy.runtime import CUDA_ERROR_INVALID_CONTEXT

pytest.importorskip("cupy")


class Kernel:
    """CuPy's Function as far as a launch sees it, failing with the driver codes it is given."""

    name = "k"

    def __init__(self, *failures: int) -> None:
        self.failures = list(failures)
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, grid: Any, block: Any, args: Any, stream: Any = None) -> None:
        from test_cuda_errors import driver_error

        if self.failures:
            raise driver_error(self.failures.pop(0))
        self.calls.append((grid, block, args))


class Device:
    """CuPy's Device context, counting how often a launch entered it."""

    def __init__(self) -> None:
        self.entered = 0

    def __enter__(self) -> None:
        self.entered += 1

    def __exit__(self, *exc: object) -> None:
        pass


def _runtime(single: bool = True) -> tuple[Any, Device, list[int]]:
    from test_cuda_errors import make_runtime

    runtime = make_runtime()
    device, set_device = Device(), []
    runtime._device, runtime.single = device, single
    runtime.cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
        setDevice=set_device.append)))
    return runtime, device, set_device


@pytest.mark.parametrize("single", [True, False])
def test_a_launch_enters_the_device_context_only_where_there_are_several_gpus(single: bool) -> None:
    runtime, device, _ = _runtime(single)
    kernel = Kernel()
    runtime.launch(kernel, (512,), None, [np.uint64(0x1000), np.float32(2.0)])
    assert kernel.calls == [((2,), (256,), (np.uint64(0x1000), np.float32(2.0)))]
    assert device.entered == (0 if single else 1)


def test_a_thread_without_a_context_makes_the_gpu_current_and_launches_again() -> None:
    runtime, _, set_device = _runtime()
    kernel = Kernel(CUDA_ERROR_INVALID_CONTEXT)
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000)])
    assert set_device == [0] and len(kernel.calls) == 1


def test_a_failed_launch_is_a_hetero_error_that_marks_the_device() -> None:
    runtime, _, _ = _runtime()
    with pytest.raises(hetero.ContextCorruptedError) as caught:
        runtime.launch(Kernel(700), (256,), None, [np.uint64(0x1000)])
    assert caught.value.code == 700 and "launching k (grid (1,), block (256,))" in str(caught.value)
    assert runtime.health().state is hetero.HealthState.UNHEALTHY


def test_a_retry_that_fails_again_is_a_hetero_error() -> None:
    runtime, _, _ = _runtime()
    with pytest.raises(hetero.DeviceError):
        runtime.launch(Kernel(CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT), (256,), None, [np.uint64(1)])
