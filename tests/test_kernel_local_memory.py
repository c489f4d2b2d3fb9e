"""Work-group (shared) memory past what a device allows is refused before anything runs: a
``KernelLaunchError`` naming the kernel, the size and the device's limit, for ``hetero.local_array``,
``cuda.shared.array`` and a launch's dynamic ``shared_mem``, on every device, and no quarantine.

Before, 8 GiB of ``local_array`` on oneapi:0 was a SIGSEGV, 256 MiB on PoCL an assertion abort,
256 MiB on oneapi:0 a ContextCorruptedError (under ``hetero.guard``: a healthy device quarantined
for an hour) and a huge array on cpu NumPy's "Allocation failed", naming neither array nor kernel.
Each device's cases run in a subprocess with a timeout, so a regression fails the test, not the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hetero
from hetero.core.errors import KernelLaunchError
from hetero.fault.classify import classify

CASES = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import hetero
    from hetero.compat import cuda
    from hetero.core.errors import KernelLaunchError
    from hetero.fault import quarantine

    dev = hetero.device(sys.argv[1])
    LIMIT = dev.info.local_memory
    FITS = LIMIT // 8  # f32 elements in half the limit: runs
    MIB256 = 1 << 26   # f32 elements in 256 MiB
    GIB8 = 1 << 31     # f32 elements in 8 GiB

    @hetero.kernel
    def fits(out: hetero.Array[hetero.f32]):
        tile = hetero.local_array((FITS,), hetero.f32)
        i = hetero.local_id(0)
        tile[i] = hetero.f32(i)
        tile[FITS - 1 - i] = hetero.f32(100 + i)  # both ends of the array
        hetero.barrier()
        out[i] = tile[i] + tile[FITS - 1 - i]

    @hetero.kernel
    def big_local(out: hetero.Array[hetero.f32]):
        tile = hetero.local_array((MIB256,), hetero.f32)
        i = hetero.global_id(0)
        tile[i] = 1.0
        hetero.barrier()
        out[i] = tile[i]

    @hetero.kernel
    def huge_local(out: hetero.Array[hetero.f32]):
        tile = hetero.local_array((GIB8,), hetero.f32)
        i = hetero.global_id(0)
        tile[i] = 1.0
        hetero.barrier()
        out[i] = tile[i]

    @cuda.jit
    def big_shared(out):
        s = cuda.shared.array(MIB256, np.float32)
        i = cuda.threadIdx.x
        s[i] = 1.0
        cuda.syncthreads()
        out[i] = s[i]

    @cuda.jit
    def dynamic(out):
        s = cuda.shared.array(0, np.float32)
        i = cuda.threadIdx.x
        s[i] = 1.0
        cuda.syncthreads()
        out[i] = s[i]

    def outcome(launch):
        try:
            launch()
            hetero.synchronize()
        except KernelLaunchError as exc:
            return {"error": "KernelLaunchError", "message": str(exc)}
        except Exception as exc:
            return {"error": type(exc).__name__, "message": str(exc)}
        return {"error": None}

    out = hetero.zeros(64, np.float32, device=dev)
    results = {"limit": LIMIT}
    results["fits"] = outcome(lambda: fits[(64,), (64,)](out))
    results["fits_value"] = out.numpy().tolist()
    results["big_local"] = outcome(lambda: big_local[(64,), (64,)](out))
    results["huge_local"] = outcome(lambda: huge_local[(64,), (64,)](out))
    with hetero.use_device(dev):
        results["big_shared"] = outcome(lambda: big_shared[1, 64](out))
        results["dynamic"] = outcome(lambda: dynamic[1, 64, 0, 256 << 20](out))
        results["dynamic_fits"] = outcome(lambda: dynamic[1, 64, 0, 256](out))
    state = {"out": out}
    def step():
        big_local[(64,), (64,)](state["out"])
    try:
        with hetero.guard(state, devices=[dev], standby=False) as g:
            g.run(step)
        results["guarded"] = {"error": None}
    except Exception as exc:
        results["guarded"] = {"error": type(exc).__name__, "message": str(exc)}
    results["quarantined"] = quarantine.is_quarantined(dev)
    results["healthy_after"] = outcome(lambda: fits[(64,), (64,)](out))
    print("RESULTS " + json.dumps(results))
''')


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Each device's cases, run once in a subprocess of their own (state dir private)."""
    found: dict[str, dict[str, object]] = {}
    script = tmp_path_factory.mktemp("cases") / "local_memory_cases.py"  # kernels are read from their file
    script.write_text(CASES)
    for name in (d.name for d in hetero.devices()):
        env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path_factory.mktemp("state"))}
        try:
            run = subprocess.run([sys.executable, str(script), name], check=False, capture_output=True, text=True, env=env,
                                 timeout=240, cwd=Path(__file__).resolve().parent.parent)
        except subprocess.TimeoutExpired:
            found[name] = {"crash": "timed out after 240 s"}
            continue
        lines = [line for line in run.stdout.splitlines() if line.startswith("RESULTS ")]
        found[name] = json.loads(lines[-1][8:]) if lines else \
            {"crash": f"exit status {run.returncode}: {run.stderr[-2000:]}"}
    return found


def _refused(result: dict[str, object], kernel: str, size: int, limit: int) -> None:
    assert result.get("error") == "KernelLaunchError", result
    message = str(result["message"])
    assert kernel in message and f"{size:,} bytes" in message and f"{limit:,} bytes" in message, message


def test_shared_memory_past_the_limit_is_refused_naming_kernel_size_and_limit(
        device: hetero.Device, outcomes: dict[str, dict[str, object]]) -> None:
    result = outcomes[device.name]
    assert "crash" not in result, result
    limit = int(result["limit"])  # type: ignore[call-overload]
    assert limit > 0
    _refused(result["big_local"], "big_local", 256 << 20, limit)  # type: ignore[arg-type]
    _refused(result["huge_local"], "huge_local", 8 << 30, limit)  # type: ignore[arg-type]
    _refused(result["big_shared"], "big_shared", 256 << 20, limit)  # type: ignore[arg-type]
    _refused(result["dynamic"], "dynamic", 256 << 20, limit)  # type: ignore[arg-type]


def test_shared_memory_within_the_limit_runs(device: hetero.Device, outcomes: dict[str, dict[str, object]]) -> None:
    result = outcomes[device.name]
    assert "crash" not in result, result
    assert result["fits"] == {"error": None} and result["dynamic_fits"] == {"error": None}, result
    assert result["fits_value"] == [100.0 + 2 * i for i in range(64)]


def test_under_the_guard_it_is_the_kernels_error_and_no_device_is_quarantined(
        device: hetero.Device, outcomes: dict[str, dict[str, object]]) -> None:
    result = outcomes[device.name]
    assert "crash" not in result, result
    assert result["guarded"]["error"] == "KernelLaunchError", result  # type: ignore[index]
    assert result["quarantined"] is False
    assert result["healthy_after"] == {"error": None}


def test_the_fault_classifier_calls_a_refused_launch_no_device_fault() -> None:
    verdict = classify(KernelLaunchError("k: its work-group memory is 268,435,456 bytes"))
    assert verdict.fault_class.value == "none" and not verdict.quarantine
