"""The compile cache keys every value a kernel's code resolves, so two kernels never share code by accident.

Two kernels with the same source text whose free names resolve to different objects (a factory's
closure, a "template" type, a module global edited between runs) must each run their own code, in
one process and across processes sharing a cache directory.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hetero
from conftest import run_python
from hetero.compiler.frontend.source import fingerprint


def _unary(op):  # type: ignore[no-untyped-def]
    @hetero.kernel
    def apply(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
        i = hetero.global_id(0)
        if i < x.shape[0]:
            y[i] = op(x[i])

    return apply


def _template(T):  # type: ignore[no-untyped-def]
    @hetero.kernel
    def convert(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
        i = hetero.global_id(0)
        if i < x.shape[0]:
            y[i] = T(x[i])  # f32: keeps the fraction; i32: truncates it

    return convert


def test_factory_kernels_closing_over_different_functions_each_run_their_own(device: hetero.Device) -> None:
    data = np.array([0.25, 1.0, 2.0, 4.0], np.float32)
    for op in (math.sqrt, math.exp, math.log):
        x = hetero.asarray(data, device=device)
        y = hetero.zeros(4, device=device)
        _unary(op)[4](x, y)
        np.testing.assert_allclose(y.numpy(), [op(float(v)) for v in data], rtol=1e-5, err_msg=op.__name__)


def test_template_kernels_closing_over_different_types_each_run_their_own(device: hetero.Device) -> None:
    x = hetero.asarray(np.array([1.5, -2.75, 3.25], np.float32), device=device)
    for T, want in ((hetero.f32, [1.5, -2.75, 3.25]), (hetero.i32, [1.0, -2.0, 3.0])):
        y = hetero.zeros(3, device=device)
        _template(T)[3](x, y)
        np.testing.assert_array_equal(y.numpy(), want, err_msg=str(T))


def test_fingerprint_keys_resolved_values_by_identity() -> None:
    from hetero.compiler.frontend.source import source_fingerprint

    assert len({fingerprint(_unary(op).py_func) for op in (math.sqrt, math.exp, math.log)}) == 3
    assert fingerprint(_template(hetero.f32).py_func) != fingerprint(_template(hetero.i32).py_func)
    assert fingerprint(_unary(math.sqrt).py_func) == fingerprint(_unary(math.sqrt).py_func)  # stable: records reused
    assert source_fingerprint(_unary(math.sqrt).py_func).keyed


def test_a_value_that_cannot_be_keyed_disables_the_record_path() -> None:
    from hetero.compiler.frontend.source import source_fingerprint

    class Opaque:
        pass

    first, second = Opaque(), Opaque()
    fp = source_fingerprint(_unary(first).py_func)
    assert not fp.keyed and "op" in fp.unkeyed
    assert fp.digest != source_fingerprint(_unary(second).py_func).digest  # never guessed equal


MODULE = """
import math
import hetero
OP = math.{op}

@hetero.kernel
def apply_op(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = OP(x[i])
"""

RUN = """
import json, sys
sys.path.insert(0, {folder!r})
import numpy as np, hetero
import opmod
results = {{}}
for dev in hetero.devices():
    x = hetero.asarray(np.array([1.0, 4.0], np.float32), device=dev)
    y = hetero.zeros(2, device=dev)
    opmod.apply_op[2](x, y)
    results[dev.name] = y.numpy().tolist()
print(json.dumps(results))
"""


def test_module_global_changed_between_runs_is_not_served_from_the_cache(tmp_path: Path) -> None:
    env = {"HETERO_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    module = tmp_path / "opmod.py"
    results = {}
    for op in ("sqrt", "exp"):
        module.write_text(textwrap.dedent(MODULE.format(op=op)))
        out = run_python(RUN.format(folder=str(tmp_path)), env).stdout.strip().splitlines()[-1]
        results[op] = json.loads(out)
    for op, by_device in results.items():
        want = [getattr(math, op)(1.0), getattr(math, op)(4.0)]
        for name, got in by_device.items():
            assert got == pytest.approx(want, rel=1e-5), f"{name} ran the wrong OP for math.{op}"


FACTORY = """
import math
import hetero

def make(op):
    @hetero.kernel
    def apply(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
        i = hetero.global_id(0)
        if i < x.shape[0]:
            y[i] = op(x[i])
    return apply
"""

RUN_FACTORY = """
import json, math, sys
sys.path.insert(0, {folder!r})
import numpy as np, hetero
import factorymod
results = {{}}
for dev in hetero.devices():
    x = hetero.asarray(np.array([1.0, 4.0], np.float32), device=dev)
    y = hetero.zeros(2, device=dev)
    factorymod.make(math.{op})[2](x, y)
    results[dev.name] = y.numpy().tolist()
print(json.dumps(results))
"""


def test_factory_kernels_in_separate_processes_share_a_cache_but_not_code(tmp_path: Path) -> None:
    env = {"HETERO_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    (tmp_path / "factorymod.py").write_text(textwrap.dedent(FACTORY))
    for op in ("sqrt", "exp", "log"):
        out = run_python(RUN_FACTORY.format(folder=str(tmp_path), op=op), env).stdout.strip().splitlines()[-1]
        want = [getattr(math, op)(1.0), getattr(math, op)(4.0)]
        for name, got in json.loads(out).items():
            assert got == pytest.approx(want, rel=1e-5, abs=1e-6), f"{name} ran another kernel's code for math.{op}"


def test_a_record_from_another_code_generator_is_emitted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one hetero version (a development build), a changed emitter must not reuse the
    source an older one recorded: the record key carries a digest of the compiler's own code."""
    from hetero.compiler.ir import nodes as ir
    from hetero.compiler.build import pipeline
    from hetero.compiler.array_kernels import strided_copy
    from hetero.compiler.build.cache import Cache, DiskStorage
    from hetero.compiler.build.stats import stats

    device = hetero.device("cpu")
    function: ir.Function = strided_copy.build(1, strided_copy.ELEMENT_BY_WIDTH[4])
    cache = Cache(DiskStorage(tmp_path))
    target = device.runtime.kernel_target()
    pipeline.compile_function(function, device.runtime, target, cache=cache)
    before = stats.emitted
    pipeline.compile_function(function, device.runtime, target, cache=cache)
    assert stats.emitted == before, "the same code generator reuses its record"
    monkeypatch.setattr(pipeline, "codegen_digest", lambda: "0" * 16)
    pipeline.compile_function(function, device.runtime, target, cache=cache)
    assert stats.emitted == before + 1, "another code generator's record is not reused"


def test_every_module_of_the_compiler_and_the_kernel_language_enters_the_code_generator_digest() -> None:
    """A fix in the frontend, an IR pass or an emitter changes the kernels made from one source: a
    record written before it must not be reused (it was: only compiler/build/ was hashed, so a checkout
    with another emitter reused the old one's kernels, silently)."""
    from hetero.compiler.build import pipeline

    root = Path(pipeline.__file__).resolve().parents[1]
    language = Path(hetero.__file__).resolve().parent / "language"
    wanted = {p.resolve() for p in [*root.rglob("*.py"), *language.rglob("*.py")] if "__pycache__" not in p.parts}
    hashed = set(pipeline.codegen_files())
    assert {root / "emit", root / "ir", root / "frontend"} <= {p.parent for p in hashed}
    assert wanted <= hashed, sorted(str(p) for p in wanted - hashed)[:5]
