"""Launches straight through ``cuLaunchKernel`` (hetero.backends.cuda_launch), checked without a GPU.

The packing is checked against a real C compiler: a stand-in ``libcuda`` built here from C
declares the kernel's parameters as a struct, reports their offsets with ``offsetof`` (as the
driver's ``cuFuncGetParamInfo`` would) and reads back each value hetero packed. The runtime's
choices (driver or CuPy, retries, errors) are checked on a stand-in driver.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import types
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.backends import cuda_launch
from hetero.compiler.emit_base import AbiArg
from hetero.types import scalar_type

pytest.importorskip("cupy")

# (kind, dtype name, C declaration of the parameter, a value that survives a round trip through double)
PARAMS = [("array", "f32", "void*", 0x7F00_1234_5678), ("scalar", "bool", "unsigned char", True),
          ("scalar", "f64", "double", -2.5e300), ("scalar", "i8", "signed char", -7),
          ("scalar", "f16", "_Float16", 1.5), ("scalar", "i32", "int", -123456),
          ("shape", "i64", "long long", 1 << 40), ("scalar", "u8", "unsigned char", 250),
          ("scalar", "f32", "float", 0.1), ("scalar", "u16", "unsigned short", 65000),
          ("scalar", "i64", "long long", -(1 << 50)), ("scalar", "u32", "unsigned int", 4_000_000_000),
          ("scalar", "u64", "unsigned long long", 1 << 53), ("scalar", "i16", "short", -32000),
          ("array", "u8", "void*", 0x10)]


def _c_source() -> str:
    fields = "".join(f"    {decl} p{i};\n" for i, (_, _, decl, _) in enumerate(PARAMS))
    offsets = ", ".join(f"offsetof(struct P, p{i})" for i in range(len(PARAMS)))
    sizes = ", ".join(f"sizeof(((struct P*)0)->p{i})" for i in range(len(PARAMS)))
    reads = "".join(f"    case {i}: return (double)last.p{i};\n" for i, (kind, *_) in enumerate(PARAMS)
                    if kind != "array")
    pointers = "".join(f"    case {i}: return (unsigned long long)last.p{i};\n" for i, (kind, *_) in enumerate(PARAMS)
                       if kind == "array")
    return f"""#include <stddef.h>
#include <string.h>
struct P {{
{fields}}};
static const size_t offsets[] = {{{offsets}}};
static const size_t sizes[] = {{{sizes}}};
static struct P last;
unsigned dims[6]; void* stream; int protocol_ok; size_t buffer_size;
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {{
    if (index >= {len(PARAMS)}) return 1;
    *offset = offsets[index]; *size = sizes[index]; return 0;
}}
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* s, void** params, void** extra) {{
    dims[0] = gx; dims[1] = gy; dims[2] = gz; dims[3] = bx; dims[4] = by; dims[5] = bz; stream = s;
    protocol_ok = params == NULL && extra != NULL && extra[0] == (void*)1 && extra[2] == (void*)2
                  && extra[4] == NULL && shared == 0;
    buffer_size = *(size_t*)extra[3];
    memset(&last, 0, sizeof last);
    memcpy(&last, extra[1], buffer_size < sizeof last ? buffer_size : sizeof last);
    return 0;
}}
double value(int i) {{
    switch (i) {{
{reads}    }}
    return -1;
}}
unsigned long long pointer(int i) {{
    switch (i) {{
{pointers}    }}
    return 0;
}}
"""


@pytest.fixture(scope="module")
def c_driver(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (cc) to build the stand-in libcuda")
    folder = tmp_path_factory.mktemp("fake_libcuda")
    source = folder / "fake_libcuda.c"
    source.write_text(_c_source())
    library = folder / "libcuda_fake.so"
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def _abi() -> tuple[AbiArg, ...]:
    return tuple(AbiArg(kind, f"p{i}", scalar_type(dtype)) for i, (kind, dtype, _, _) in enumerate(PARAMS))


NUMPY = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32,
         "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64}


def _values() -> list[Any]:
    """The launch values as hetero makes them: a pointer as np.uint64 (CuPyRuntime.kernel_arg), an
    extent as a Python int, a scalar as its NumPy type (hetero.launch_args.scalar_converter)."""
    return [np.uint64(value) if kind == "array" else value if kind == "shape" else NUMPY[dtype](value)
            for kind, dtype, _, value in PARAMS]


def test_packing_puts_every_parameter_where_the_c_compiler_does(c_driver: ctypes.CDLL) -> None:
    packing = cuda_launch.layout(_abi())
    assert packing is not None
    driver = cuda_launch.Driver(c_driver)
    assert driver.confirms(0x1234, packing)  # offsets and sizes as offsetof/sizeof give them, and no more
    fast = cuda_launch.driver_launch(driver, types.SimpleNamespace(ptr=0x1234), _abi())
    assert fast is not None
    assert fast((3, 2, 1, 64, 4, 1), 0xBEEF, _values()) == 0
    assert ctypes.c_int.in_dll(c_driver, "protocol_ok").value == 1
    assert list((ctypes.c_uint * 6).in_dll(c_driver, "dims")) == [3, 2, 1, 64, 4, 1]
    assert ctypes.c_void_p.in_dll(c_driver, "stream").value == 0xBEEF
    c_driver.value.restype, c_driver.pointer.restype = ctypes.c_double, ctypes.c_ulonglong
    for index, (kind, dtype, _, value) in enumerate(PARAMS):
        if kind == "array":
            assert c_driver.pointer(index) == value
        else:
            expected = float(np.float32(value)) if dtype == "f32" else float(value)
            assert c_driver.value(index) == expected, f"parameter {index} ({dtype})"


def test_a_layout_the_driver_does_not_confirm_launches_through_cupy(c_driver: ctypes.CDLL) -> None:
    driver = cuda_launch.Driver(c_driver)
    fewer = _abi()[:-1]  # the driver knows one parameter more than this packing
    assert cuda_launch.driver_launch(driver, types.SimpleNamespace(ptr=1), fewer) is None
    shifted = (AbiArg("scalar", "x", scalar_type("i8")), *_abi()[1:])  # offsets differ from the second on
    assert cuda_launch.driver_launch(driver, types.SimpleNamespace(ptr=1), shifted) is None
    assert cuda_launch.layout([AbiArg("scalar", "z", scalar_type("c64"))]) is None  # a type it does not pack


def test_the_switch_and_a_missing_library_mean_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_CUDA_DRIVER_LAUNCH", "0")
    assert cuda_launch.open_driver() is None
    monkeypatch.delenv("HETERO_CUDA_DRIVER_LAUNCH")
    assert cuda_launch.open_driver("libcuda-that-is-not-here.so.1") is None


class FakeDriver:
    """A driver whose launches answer the statuses scripted for them (then success)."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.calls = 0

    def launch(self, *args: Any) -> int:
        self.calls += 1
        return self.statuses.pop(0) if self.statuses else 0


class CupyKernel:
    """CuPy's Function as far as a launch sees it."""

    name = "k"
    ptr = 0x1234

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, grid: Any, block: Any, args: Any, stream: Any = None) -> None:
        self.calls.append((grid, block, args))


def _runtime(driver: FakeDriver) -> tuple[Any, CupyKernel, list[int]]:
    from test_cuda_errors import driver_error, make_runtime

    runtime = make_runtime()
    set_device: list[int] = []
    runtime.cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(CUDADriverError=driver_error), runtime=types.SimpleNamespace(setDevice=set_device.append),
        get_current_stream=lambda: types.SimpleNamespace(ptr=0)))
    kernel = CupyKernel()
    packing = cuda_launch.layout([AbiArg("array", "x", scalar_type("f32")), AbiArg("scalar", "a", scalar_type("f32"))])
    assert packing is not None
    runtime._driver_launches[kernel] = cuda_launch.DriverLaunch(driver, kernel, packing)  # type: ignore[arg-type]
    return runtime, kernel, set_device


def test_a_launch_goes_to_the_driver_and_not_to_cupy() -> None:
    driver = FakeDriver()
    runtime, kernel, _ = _runtime(driver)
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    assert driver.calls == 1 and kernel.calls == [] and runtime.driver_launched() == 1


def test_a_buffer_the_driver_refuses_at_the_first_launch_sends_the_kernel_to_cupy() -> None:
    driver = FakeDriver(cuda_launch.CUDA_ERROR_INVALID_VALUE)
    runtime, kernel, _ = _runtime(driver)
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    assert driver.calls == 1 and len(kernel.calls) == 2  # not asked again


def test_a_value_that_does_not_fit_launches_through_cupy() -> None:
    driver = FakeDriver()
    runtime, kernel, _ = _runtime(driver)
    runtime.launch(kernel, (256,), None, [None, np.float32(2.0)])  # an empty array's stand-in
    assert driver.calls == 0 and len(kernel.calls) == 1


def test_a_thread_without_a_context_makes_it_current_and_launches_again() -> None:
    driver = FakeDriver(cuda_launch.CUDA_ERROR_INVALID_CONTEXT)
    runtime, kernel, set_device = _runtime(driver)
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    assert set_device == [0] and driver.calls == 2 and kernel.calls == []


def test_a_failed_launch_is_a_hetero_error_and_marks_the_device() -> None:
    driver = FakeDriver(0, 700)
    runtime, kernel, _ = _runtime(driver)
    runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    with pytest.raises(hetero.ContextCorruptedError) as caught:
        runtime.launch(kernel, (256,), None, [np.uint64(0x1000), np.float32(2.0)])
    assert caught.value.code == 700 and "launching k" in str(caught.value)
    assert runtime.health().state is hetero.HealthState.UNHEALTHY



def test_on_an_nvidia_gpu_kernels_launch_through_the_driver_and_compute_the_same(device: hetero.Device) -> None:
    if device.backend != "cuda":
        pytest.skip(f"{device.name} is not an NVIDIA GPU (launches through cuLaunchKernel are CUDA's)")
    from kernels import corpus

    before = device.runtime.driver_launched()
    n = 1000
    x = hetero.asarray(np.arange(n, dtype=np.float32), device=device)
    y = hetero.asarray(np.ones(n, dtype=np.float32), device=device)
    corpus.saxpy[n](np.float32(2.5), x, y)  # f32 scalar, two arrays and their extents
    assert np.array_equal(y.numpy(), np.float32(2.5) * np.arange(n, dtype=np.float32) + 1)
    assert device.runtime.driver_launched() > before  # it went through the driver, not CuPy
