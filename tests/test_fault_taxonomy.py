"""The taxonomy tables: every row classifies as its table says, the rows the fault-handling
issue names have the class it gives them, and the CUDA backend's own error table agrees."""

from __future__ import annotations

import pytest

from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.fault import classify
from hetero.fault.taxonomy import (
    CODE_TABLES, CUDA_CODES, DEFAULT_ACTION, DEFAULT_TTL, HIP_CODES, OPENCL_CODES, XIDS, Action, FaultClass, ttl_for,
)

BACKEND_OF_FAMILY = {"cuda": "cuda", "hip": "rocm", "opencl": "opencl"}
NAME_PREFIX = {"cuda": "cudaError", "hip": "hipError", "opencl": "CL_"}
ROWS = [(family, code) for family, table in CODE_TABLES.items() for code in table]
R, C, L, D, N = ("recoverable", "context-corrupting", "device-lost", "degraded", "none")

#: What the fault-handling issue (and the CUDA/HIP/OpenCL docs) say these codes are: written out
#: here so that a table edit that changes them fails a test.
EXPECTED = {
    ("cuda", 2): R, ("cuda", 9): R, ("cuda", 701): R, ("cuda", 214): D, ("cuda", 700): C, ("cuda", 710): C,
    **{("cuda", code): C for code in range(714, 720)}, ("cuda", 999): C, ("cuda", 46): L, ("cuda", 100): L,
    ("hip", 2): R, ("hip", 9): R, ("hip", 701): R, ("hip", 214): D, ("hip", 700): C, ("hip", 710): C,
    ("hip", 719): C, ("hip", 100): L, ("opencl", -4): R, ("opencl", -5): C, ("opencl", -2): L,
    ("opencl", -6): R, ("opencl", -54): R, ("cuda", 1): N, ("opencl", -11): N,
}


def _error(family: str, code: int, with_name: bool = True) -> DeviceError:
    row = CODE_TABLES[family][code]
    backend = BACKEND_OF_FAMILY[family]
    return DeviceError("failed", backend=backend, device=f"{backend}:0", code=code,
                       code_name=row.name if with_name else None)


@pytest.mark.parametrize(("family", "code"), ROWS, ids=[f"{f}:{c}" for f, c in ROWS])
def test_every_code_row_classifies_as_its_table_says(family: str, code: int) -> None:
    row = CODE_TABLES[family][code]
    for with_name in (True, False):  # by the code's name, and by the backend alone
        result = classify(_error(family, code, with_name), events=[])
        assert result.fault_class is row.fault_class, (family, code, with_name)
        assert result.action is (row.action or DEFAULT_ACTION[row.fault_class])
        assert result.quarantine == (result.ttl is not None)
        assert result.sticky == (row.fault_class in (FaultClass.CONTEXT_CORRUPTING, FaultClass.DEGRADED,
                                                     FaultClass.DEVICE_LOST))
        if row.fault_class is not FaultClass.NONE:
            assert row.name in result.reason


@pytest.mark.parametrize(("family", "code"), ROWS, ids=[f"{f}:{c}" for f, c in ROWS])
def test_code_rows_are_well_formed(family: str, code: int) -> None:
    row = CODE_TABLES[family][code]
    assert row.name.startswith(NAME_PREFIX[family]) or (family, code) == ("opencl", -9999)
    assert row.note, "every row says what the code means"
    assert (code < 0) == (family == "opencl")


@pytest.mark.parametrize(("key", "expected"), sorted(EXPECTED.items()), ids=[f"{f}:{c}" for f, c in sorted(EXPECTED)])
def test_codes_named_by_the_issue_have_its_class(key: tuple[str, int], expected: str) -> None:
    family, code = key
    assert str(CODE_TABLES[family][code].fault_class) == expected


def test_hip_codes_mean_what_the_same_cuda_codes_mean() -> None:
    shared = set(HIP_CODES) & set(CUDA_CODES)
    assert {2, 9, 214, 700, 701, 710, 719, 999} <= shared
    for code in shared:
        assert HIP_CODES[code].fault_class is CUDA_CODES[code].fault_class, code


@pytest.mark.parametrize("xid", sorted(XIDS))
def test_every_xid_row_classifies_as_its_table_says(xid: int) -> None:
    row = XIDS[xid]
    assert row.nvidia_action in {"RESTART_APP", "RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR",
                                 "IGNORE", "CONTACT_SUPPORT"}
    # an error with no code: the Xid alone decides (as the error's attribute, and as an event)
    bare = DeviceError("failed", backend="cuda", device="cuda:0", xid=xid)
    by_event = DeviceError("failed", backend="cuda", device="cuda:0")
    for result in (classify(bare, events=[]), classify(by_event, events=[{"kind": "xid", "xid": xid, "device": "cuda:0"}])):
        assert result.fault_class is row.fault_class
        assert xid in result.xids
        assert result.application_bug == (row.app_bug and row.fault_class is FaultClass.CONTEXT_CORRUPTING)


def test_xid_catalog_has_the_rows_the_issue_names() -> None:
    expected = {13: C, 31: C, 43: C, 45: N, 48: D, 63: D, 64: D, 68: C, 74: D, 79: L, 92: D, 94: D, 95: D,
                119: L, 120: L}
    assert {xid: str(XIDS[xid].fault_class) for xid in expected} == expected
    assert {xid for xid, row in XIDS.items() if row.app_bug} == {13, 31, 43}


def test_default_ttls_and_config_overrides() -> None:
    assert ttl_for("device-lost") == 24 * 3600 and ttl_for("degraded") == 6 * 3600
    assert ttl_for("application-bug") == 60 and ttl_for("context-corrupting") == 3600
    assert ttl_for("recoverable") is None and ttl_for("none") is None
    assert ttl_for("device-lost", {"device-lost": 5}) == 5
    assert ttl_for("degraded", {"degraded": 0}) is None  # 0 in the config: do not quarantine
    assert set(DEFAULT_TTL) == {str(c) for c in FaultClass} | {"application-bug"}


def test_enum_values_are_the_public_strings() -> None:
    assert [str(c) for c in FaultClass] == [R, C, L, D, N]
    assert {str(a) for a in Action} == {"retry", "migrate", "restart-process", "quarantine", "none"}
    assert FaultClass("device-lost") is FaultClass.DEVICE_LOST and FaultClass.DEGRADED == "degraded"


# -- the CUDA backend's error table (backends/cupy/cuda_errors.py) agrees with the taxonomy -------------
class CUDARuntimeError(Exception):
    """Stands in for cupy_backends.cuda.api.runtime.CUDARuntimeError: a status code and a text."""

    def __init__(self, status: int, name: str) -> None:
        self.status = status
        super().__init__(f"{name}: simulated")


def _cuda_backend_table() -> dict[int, tuple[str, type[DeviceError]]]:
    from hetero.backends.cupy.cuda_errors import CUDA_RUNTIME_ERRORS

    return dict(CUDA_RUNTIME_ERRORS)


def test_cuda_backend_names_the_shared_codes_as_the_taxonomy_does() -> None:
    backend_table = _cuda_backend_table()
    shared = set(backend_table) & set(CUDA_CODES)
    assert {2, 214, 700, 719, 999} <= shared
    for code in shared:
        assert backend_table[code][0] == CUDA_CODES[code].name, code


def test_cuda_backend_errors_classify_as_the_taxonomy_says() -> None:
    from hetero.backends.cupy.cuda_errors import translate

    for code, (name, _) in _cuda_backend_table().items():
        error = translate(CUDARuntimeError(code, name), "cuda", "cuda:0", "launch")
        row = CUDA_CODES.get(code)
        if row is not None:
            assert classify(error, events=[]).fault_class is row.fault_class, (code, type(error).__name__)


def test_cuda_backend_raises_the_fault_classes_for_sticky_lost_and_ecc_codes() -> None:
    error_class = {FaultClass.CONTEXT_CORRUPTING: ContextCorruptedError, FaultClass.DEGRADED: DeviceDegradedError,
                   FaultClass.RECOVERABLE: DeviceError, FaultClass.DEVICE_LOST: DeviceError}
    table = _cuda_backend_table()
    for code in (2, 214, 700, 710, 714, 715, 716, 717, 718, 719):
        assert issubclass(table[code][1], error_class[CUDA_CODES[code].fault_class]), code
    assert issubclass(table[2][1], DeviceOutOfMemoryError)
    for code, (_, cls) in table.items():  # a fault class the backend chose never contradicts the table
        if cls is DeviceLostError:
            assert CUDA_CODES[code].fault_class in (FaultClass.DEVICE_LOST, FaultClass.CONTEXT_CORRUPTING), code


class CUDADriverError(CUDARuntimeError):
    """Stands in for CuPy's driver-API error (CUDA_ERROR_* names, same codes)."""


def test_cuda_driver_api_errors_classify_as_the_runtime_codes_do() -> None:
    from hetero.backends.cupy.cuda_errors import CUDA_DRIVER_ERRORS, translate

    for code, (name, _) in CUDA_DRIVER_ERRORS.items():
        error = translate(CUDADriverError(code, name), "cuda", "cuda:0", "copy")
        row = CUDA_CODES.get(code)
        if row is not None:
            assert classify(error, events=[]).fault_class is row.fault_class, (code, name)


def test_rocm_backend_errors_agree_with_the_hip_table() -> None:
    from hetero.backends.cupy.cuda_errors import translate
    from hetero.backends.cupy.hip_errors import HIP_ERRORS

    assert {2, 214, 700, 719, 999} <= set(HIP_ERRORS) & set(HIP_CODES)
    for code, (name, _) in HIP_ERRORS.items():
        row = HIP_CODES.get(code)
        if row is None:
            continue
        assert name == row.name, code
        error = translate(CUDARuntimeError(code, name), "rocm", "rocm:0", "launch")
        assert classify(error, events=[]).fault_class is row.fault_class, (code, name)


def test_opencl_backend_errors_agree_with_the_opencl_table() -> None:
    from hetero.backends.opencl.errors import OPENCL_ERRORS, error_class

    fault_of = {DeviceLostError: FaultClass.DEVICE_LOST, DeviceOutOfMemoryError: FaultClass.RECOVERABLE,
                ContextCorruptedError: FaultClass.CONTEXT_CORRUPTING, DeviceDegradedError: FaultClass.DEGRADED}
    for code, cls in OPENCL_ERRORS.items():
        assert OPENCL_CODES[code].fault_class is fault_of[cls], code
    # -5 is the ambiguous one: sticky after a kernel (as the table says), out of memory otherwise
    assert fault_of[error_class(-5, after_kernel=True)] is OPENCL_CODES[-5].fault_class
    assert error_class(-5, after_kernel=False) is DeviceOutOfMemoryError


def test_hetero_fault_public_names_and_a_light_import() -> None:
    from tests.conftest import run_python

    code = """
import sys, hetero
fault = hetero.fault
names = ["classify", "Classification", "FaultClass", "Action", "publish", "events", "recent"]
assert all(hasattr(fault, n) for n in names), [n for n in names if not hasattr(fault, n)]
assert fault.quarantine.__name__ == "hetero.fault.quarantine" and fault.monitor.__name__ == "hetero.fault.monitor"
vendor = sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "pyopencl", "numba", "torch", "pynvml", "amdsmi"))
print("vendor:", vendor)
print("inject:", fault.inject.__module__)
"""
    out = run_python(code).stdout
    assert "vendor: []" in out and "inject: hetero.fault.injection" in out
