"""A kernel served from the compile cache in a new process parses nothing: where its block ends and
its free names come from the source index (:mod:`hetero.compiler.frontend.source_index`), keyed by the
text they were computed from, so an edited kernel is never keyed as the old one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import DEVICE_NAMES

KERNEL = '''
from __future__ import annotations
import hetero
from hetero import f32

SCALE = 2.0


@hetero.kernel
def scaled(x: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * SCALE + BODY
'''

CHILD = '''
import ast, inspect, json, sys
import numpy as np
import hetero
sys.path.insert(0, sys.argv[1])
import kernelmod
x = hetero.asarray(np.arange(8, dtype=np.float32), device=sys.argv[2])
out = hetero.empty(8, dtype=np.float32, device=sys.argv[2])
parses = []
real_parse, real_lines = ast.parse, inspect.getsourcelines
def parse(text, *a, **k):  # the kernel's own source (not hetero's generated code, e.g. cpu's count function)
    if "def scaled(x" in (text.decode() if isinstance(text, bytes) else str(text)):
        parses.append("ast.parse")
    return real_parse(text, *a, **k)
ast.parse = parse
inspect.getsourcelines = lambda *a, **k: parses.append("getsourcelines") or real_lines(*a, **k)
kernelmod.scaled[8](x, out)
print(json.dumps({"out": out.numpy().tolist(), "parses": parses}))
'''


def _run(folder: Path, cache: Path, device: str) -> dict:
    env = dict(os.environ, HETERO_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder), device], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _write(folder: Path, body: str) -> None:
    (folder / "kernelmod.py").write_text(textwrap.dedent(KERNEL).replace("BODY", body))


@pytest.mark.parametrize("name", DEVICE_NAMES)
def test_a_cache_hit_in_a_new_process_parses_nothing(name: str, tmp_path: Path) -> None:
    cache, folder = tmp_path / "cache", tmp_path / "src"
    folder.mkdir()
    _write(folder, "1.0")
    first = _run(folder, cache, name)
    assert first["out"] == [v * 2.0 + 1.0 for v in range(8)] and first["parses"]
    again = _run(folder, cache, name)
    assert again["out"] == first["out"]
    assert again["parses"] == []  # neither the block's end nor the free names were computed again


@pytest.mark.parametrize("name", DEVICE_NAMES[:1])
def test_an_edited_kernel_is_read_and_keyed_afresh(name: str, tmp_path: Path) -> None:
    cache, folder = tmp_path / "cache", tmp_path / "src"
    folder.mkdir()
    _write(folder, "1.0")
    assert _run(folder, cache, name)["out"] == [v * 2.0 + 1.0 for v in range(8)]
    _write(folder, "x[i] * 0.0 + 5.0")  # same first line, longer body: the old block end would cut it
    edited = _run(folder, cache, name)
    assert edited["out"] == [v * 2.0 + 5.0 for v in range(8)]


@pytest.mark.parametrize("name", DEVICE_NAMES[:1])
def test_a_damaged_index_entry_is_computed_again(name: str, tmp_path: Path) -> None:
    cache, folder = tmp_path / "cache", tmp_path / "src"
    folder.mkdir()
    _write(folder, "1.0")
    _run(folder, cache, name)
    entries = sorted((cache / "source-index").glob("*.json"))
    assert entries
    for entry in entries:  # the right key, values that cannot be a block or chains
        data = json.loads(entry.read_text())
        entry.write_text(json.dumps({"key": data["key"], "value": [[-5, 99999]] if isinstance(data["value"][0], list)
                                     else [0, -1]}))
    again = _run(folder, cache, name)
    assert again["out"] == [v * 2.0 + 1.0 for v in range(8)] and again["parses"]
