"""A missing optional library is one line naming the feature, the library and the extra to install,
in the library (``import hetero.serve``, ``hetero.onnx.Session``) and at the commands (``hetero serve``,
``hetero infer``, ``hetero-run --metrics-port``). Each library is made unimportable in a subprocess
(``sys.modules[name] = None``), as if it were not installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hetero.core.errors import HeteroError, MissingDependencyError
from hetero.core.optional import require


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HETERO_STATE_DIR": str(cwd / "state")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


def _without(modules: str, call: str) -> str:
    """Code that hides ``modules`` (comma-separated) and then runs ``call``."""
    hide = "".join(f"sys.modules[{m!r}] = None\n" for m in modules.split(","))
    return f"import sys\n{hide}{call}\n"


def test_require_names_the_feature_the_library_and_the_extra() -> None:
    with pytest.raises(MissingDependencyError) as info:
        require("hetero_no_such_library", extra="serve", feature="hetero serve")
    error = info.value
    assert isinstance(error, ImportError) and isinstance(error, HeteroError)
    assert str(error) == "hetero serve needs hetero_no_such_library: pip install 'hetero[serve]'"
    assert require("json", extra="x", feature="y").__name__ == "json"


def test_import_hetero_serve_without_aiohttp(tmp_path: Path) -> None:
    done = _python(_without("aiohttp", "import hetero.serve"), tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "hetero.core.errors.MissingDependencyError: hetero.serve needs aiohttp: pip install 'hetero[serve]'")


def test_onnx_session_without_onnxruntime(tmp_path: Path) -> None:
    done = _python(_without("onnxruntime", "import hetero.onnx; hetero.onnx.Session(b'x', 'cpu')"), tmp_path)
    assert "hetero.onnx needs onnxruntime: pip install 'hetero[onnx]'" in done.stderr.strip().splitlines()[-1]


def test_array_torch_without_torch(tmp_path: Path) -> None:
    done = _python(_without("torch", "import hetero; hetero.ones(2, device='cpu').torch()"), tmp_path)
    assert "needs torch: pip install 'hetero[torch]'" in done.stderr.strip().splitlines()[-1]


CLI = "from hetero.cli.main import main; raise SystemExit(main({argv!r}))"
RUN = "from hetero.launcher.cli import main; raise SystemExit(main({argv!r}))"


@pytest.mark.parametrize(("hidden", "code", "said"), [
    ("aiohttp", CLI.format(argv=["serve", "model.onnx"]), "hetero serve needs aiohttp: pip install 'hetero[serve]'"),
    ("onnxruntime", CLI.format(argv=["serve", "model.onnx"]),
     "hetero serve needs onnxruntime: pip install 'hetero[serve]'"),
    ("onnxruntime", CLI.format(argv=["infer", "model.onnx"]),
     "hetero infer needs onnxruntime: pip install 'hetero[onnx]'"),
    ("prometheus_client", RUN.format(argv=["--metrics-port", "9", "--devices", "cpu", "train.py"]),
     "hetero-run --metrics-port needs prometheus_client: pip install 'hetero[metrics]'"),
], ids=["serve-aiohttp", "serve-onnxruntime", "infer-onnxruntime", "run-metrics"])
def test_a_command_without_its_library_says_one_line_and_exits_1(tmp_path: Path, hidden: str, code: str,
                                                                 said: str) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not read")
    (tmp_path / "train.py").write_text("open('ran', 'w')\n")
    done = _python(_without(hidden, code), tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [f"{'hetero-run' if 'launcher' in code else 'hetero'}: error: {said}"]
    assert not (tmp_path / "ran").exists()
