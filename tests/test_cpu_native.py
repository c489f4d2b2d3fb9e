"""Cached native code for ``cpu`` kernels (hetero.backends.cpu.native): a process whose cache
holds a kernel runs it without importing Numba first, with the very results Numba's path gives,
and a damaged, foreign or unloadable native file is never more than a fallback to Numba's path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hetero.backends.cpu import kernels as cpu_kernels, native as cpu_native

REPO = Path(__file__).resolve().parent.parent

#: Runs corpus kernels on cpu and prints, as JSON: each output's bytes (hex), how many native
#: entries loaded, and whether the launching thread had imported Numba when the first launch
#: returned (a background thread imports it after a native launch, see cpu_kernels).
CHILD = r"""
import json, sys, threading

class WhoImportsNumba:  # records the thread that imports Numba; finds nothing itself
    threads = []
    def find_spec(self, name, path=None, target=None):
        if name == "numba":
            self.threads.append(threading.current_thread().name)
        return None

sys.meta_path.insert(0, WhoImportsNumba())
import numpy as np
import hetero
from hetero.backends.cpu import native as cpu_native
from tests.kernels import corpus

rng = np.random.default_rng(7)
on = lambda data: hetero.asarray(data, device="cpu", copy=True)
zeros = lambda shape, dtype="float32": hetero.zeros(shape, dtype=dtype, device="cpu")
x, y = on(rng.standard_normal(5000, dtype=np.float32)), on(rng.standard_normal(5000, dtype=np.float32))
corpus.saxpy[5000](2.5, x, y)
numba_after_first = threading.main_thread().name in WhoImportsNumba.threads
outs = {"saxpy": y}
x64, y64 = on(np.linspace(0, 1, 333)), on(np.linspace(1, 2, 333))
corpus.daxpy[333](np.float64(1 / 3), x64, y64); outs["daxpy"] = y64
ma, mb, mc = on(rng.standard_normal((32, 48), dtype=np.float32)), on(rng.standard_normal((48, 24), dtype=np.float32)), zeros((32, 24))
corpus.matmul_tiled[(24, 32), (corpus.TILE, corpus.TILE)](ma, mb, mc); outs["matmul_tiled"] = mc
rx, total = on(np.arange(1000, dtype=np.float32) % 7), zeros(1)
corpus.reduce_sum[(1024,), (64,)](rx, total); outs["reduce_sum"] = total
ix, itotal = on(np.arange(50000, dtype=np.int64)), zeros(1, "int64")
corpus.reduce_sum_i64[50000](ix, itotal); outs["reduce_sum_i64"] = itotal
values, counts = on(rng.integers(0, 1000, 5000, dtype=np.int32)), zeros(16, "int32")
corpus.histogram[5000](values, 16, counts); outs["histogram"] = counts
sx, sout = on(rng.integers(-50, 50, 320, dtype=np.int32)), zeros(320, "int32")
corpus.scan_blocks[(160,), (32,)](sx, sout); outs["scan_blocks"] = sout
smx, smout = on(rng.standard_normal((37, 19), dtype=np.float32)), zeros((37, 19))
corpus.softmax_rows[40](smx, smout); outs["softmax_rows"] = smout
mout = zeros((24, 32), "int32")
corpus.mandelbrot[(32, 24)](mout, 50); outs["mandelbrot"] = mout
fa, fb = on(np.array([-7, 7, -7, 7, 0, -1, 9, -9], np.int32)), on(np.array([2, -2, -2, 2, 3, 4, -4, 4], np.int32))
fq, fr = zeros(8, "int32"), zeros(8, "int32")
corpus.floor_ops[8](fa, fb, fq, fr); outs["floor_ops"] = fq
ta, tb, tc = zeros(1 << 18), on(np.ones(1 << 18, np.float32)), on(np.arange(1 << 18, dtype=np.float32))
corpus.triad[1 << 18](ta, tb, tc, 3.0); outs["triad"] = ta
for how in ("sin", "exp", "atan2"):
    a = on(rng.standard_normal(777).astype(np.float32))
    outs[how] = getattr(hetero, how)(a, a) if how == "atan2" else getattr(hetero, how)(a)
print(json.dumps({"outs": {k: v.numpy().tobytes().hex() for k, v in outs.items()},
                  "native": cpu_native.loaded, "numba_after_first": numba_after_first}))
"""


def _child(cache: Path, **env: str) -> dict:
    environment = {**os.environ, "HETERO_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO), **env}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600,
                          env=environment, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    cache = tmp_path_factory.mktemp("native-cache")
    cold = _child(cache)
    return cache, cold, _child(cache)


def test_a_warm_process_runs_cached_kernels_without_numba_and_gets_numbas_results(runs: tuple[Path, dict, dict]) -> None:
    cache, cold, warm = runs
    assert cold["native"] == 0  # nothing cached yet: Numba compiled everything
    assert list(cache.rglob(f"*{cpu_native.SUFFIX}")), "the cold run wrote no native file"
    assert warm["native"] >= 10, warm["native"]
    assert not warm["numba_after_first"], "the first cached kernel imported Numba on the launching thread"
    assert cold["numba_after_first"]  # the check sees an import where there is one
    for name, data in cold["outs"].items():
        assert warm["outs"][name] == data, f"{name}: the native path's result differs from Numba's"


def test_damaged_or_foreign_native_files_fall_back_to_numba(runs: tuple[Path, dict, dict], tmp_path: Path) -> None:
    cache, cold, _ = runs
    foreign = _child(cache, NUMBA_OPT="2")  # another Numba setting: another file name, not these files
    assert foreign["native"] == 0 and foreign["outs"] == cold["outs"]
    copy = tmp_path / "cache"
    assert _child(copy)["native"] == 0  # its own cache (one holds the paths it was made at)
    files = sorted(copy.rglob(f"*{cpu_native.SUFFIX}"))
    assert files
    for i, path in enumerate(files):
        data = bytearray(path.read_bytes())
        if i % 2:
            data[-100] ^= 0xFF  # the object code: its checksum no longer matches
        else:
            data = data[: len(data) // 2]  # truncated
        path.write_bytes(bytes(data))
    damaged = _child(copy)
    assert damaged["native"] == 0
    assert damaged["outs"] == cold["outs"]


def test_an_object_calling_a_symbol_this_process_lacks_is_refused_before_llvm_sees_it(tmp_path: Path) -> None:
    import llvmlite.binding as ll

    cpu_native.build_settings()  # initialises llvmlite for the host
    ir_text = """
declare void @hetero_no_such_symbol_anywhere()
declare float @expf(float)
define i32 @entry(float %x) {
  call void @hetero_no_such_symbol_anywhere()
  %y = call float @expf(float %x)
  ret i32 0
}
"""
    machine = ll.Target.from_default_triple().create_target_machine(jit=True)
    code = machine.emit_object(ll.parse_assembly(ir_text))
    assert cpu_native.undefined_symbols(code) == ["expf", "hetero_no_such_symbol_anywhere"]
    path = tmp_path / f"k.native-x{cpu_native.SUFFIX}"
    path.write_bytes(cpu_native.encode({"symbol": "entry", "params": ["f32"], "layout": [], "externals": []}, code))
    assert cpu_native.load(path) is None  # LLVM would have aborted the process on the unresolved symbol
    assert cpu_native.undefined_symbols(b"not an object") is None


def test_only_plain_contiguous_arguments_take_the_native_path() -> None:
    a = np.zeros((4, 6), np.float32)
    assert cpu_native.launch_signature([a, np.float32(1), 3, 2.0, True]) == (("<f4", 2), "<f4", "int", "float", "bool")
    assert cpu_native.launch_signature([a[:, ::2]]) is None
    read_only = np.zeros(3)
    read_only.flags.writeable = False
    assert cpu_native.launch_signature([read_only]) is None
    assert cpu_native.launch_signature([object()]) is None


MOVES = r"""
import json, sys
import numpy as np
import hetero
from hetero.backends.cpu import kernels as cpu_kernels
from tests.kernels import corpus

x = hetero.asarray(np.ones(5000, np.float32), device="cpu", copy=True)
y = hetero.zeros(5000, device="cpu")
for _ in range(cpu_kernels.MOVE_AFTER - 1):
    corpus.saxpy[5000](1.0, x, y)
early = "numba" in sys.modules
for _ in range(10):
    corpus.saxpy[5000](1.0, x, y)
moved = cpu_kernels.wait_for_numba(120)
[entry] = [e for e in corpus.saxpy._dispatch.values() if hasattr(e, "loaded")]
corpus.saxpy[5000](1.0, x, y)  # on Numba's path now
print(json.dumps({"early": early, "moved": moved, "dispatcher": entry.loaded.dispatcher is not None,
                  "y": float(y.numpy()[0]), "numba": "numba" in sys.modules}))
"""


def test_a_kernel_launched_often_moves_to_numbas_dispatcher(runs: tuple[Path, dict, dict]) -> None:
    cache, _, _ = runs
    environment = {**os.environ, "HETERO_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", MOVES], capture_output=True, text=True, timeout=600,
                          env=environment, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["early"], "Numba was loaded before the kernel had been launched often"
    assert report["moved"] and report["dispatcher"] and report["numba"]
    assert report["y"] == cpu_kernels.MOVE_AFTER - 1 + 10 + 1  # every launch ran once, on whichever path
