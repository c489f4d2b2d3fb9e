"""CUDA runtime errors raised inside the cuda/rocm backends become hetero DeviceErrors that
carry backend, device, vendor code and name (checked without a GPU: CuPy's error classes
and the CUDA runtime's own names are available on a machine with no driver)."""

from __future__ import annotations

import contextlib

import pytest

import hetero
from hetero.backends import cuda_errors
from hetero.backends.cupy_runtime import CuPyRuntime
from hetero.device import DeviceInfo, Kind

runtime_api = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed (pip install 'hetero[cuda]')")


@pytest.mark.parametrize("code", sorted(cuda_errors.CUDA_RUNTIME_ERRORS))
def test_table_names_match_the_cuda_runtime(code: int) -> None:
    name, _ = cuda_errors.CUDA_RUNTIME_ERRORS[code]
    assert str(runtime_api.CUDARuntimeError(code)).split(":")[0] == name


@pytest.mark.parametrize("code,kind", [(2, hetero.DeviceOutOfMemoryError), (700, hetero.DeviceError),
                                       (214, hetero.DeviceError), (719, hetero.DeviceError), (12345, hetero.DeviceError)])
def test_translate_keeps_code_name_and_class(code: int, kind: type) -> None:
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(code), "cuda", "cuda:1", "launching k")
    assert type(error) is kind
    assert (error.backend, error.device, error.code) == ("cuda", "cuda:1", code)
    assert error.code_name and str(error).startswith("cuda:1: launching k failed")


def test_cupy_pool_out_of_memory_is_a_device_out_of_memory_error() -> None:
    import cupy

    error = cuda_errors.translate(cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 0), "cuda", "cuda:0", "allocating")
    assert isinstance(error, hetero.DeviceOutOfMemoryError) and error.code == 2


def test_runtime_calls_raise_hetero_errors() -> None:
    # A CuPyRuntime whose device is a stand-in context (no GPU here): what matters is the translation.
    import cupy

    info = DeviceInfo("cuda:0", "cuda", 0, "NVIDIA", Kind.GPU, "test", 1, 1, 1, True, "0", "id")
    runtime = CuPyRuntime.__new__(CuPyRuntime)
    runtime.info = info
    runtime._device = contextlib.nullcontext()
    runtime._errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError, cupy.cuda.memory.OutOfMemoryError)
    with pytest.raises(hetero.DeviceError) as caught:
        with runtime._on_device("copying 4 bytes host->device"):
            raise runtime_api.CUDARuntimeError(700)
    assert caught.value.code == 700 and caught.value.code_name == "cudaErrorIllegalAddress"
    assert caught.value.device == "cuda:0"
