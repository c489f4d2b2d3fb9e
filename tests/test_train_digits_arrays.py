"""examples/train_digits_arrays.py: the digits MLP in array expressions trains as the kernel version
does (the same losses to rounding, the same accuracy), and a guard recovery or a hetero-run
restart ends bit-identical to a fault-free run through the same devices."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

import hetero

EXAMPLES = ROOT / "examples"
NAMES = [d.name for d in hetero.devices()]
OPENCL = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]


@pytest.fixture(autouse=True)
def private_dirs(state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.delenv("HETERO_RESUME_STEP", raising=False)


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("train_digits_arrays")
    finally:
        sys.path.remove(str(EXAMPLES))


def train(example: Any, *argv: str, kernels: bool = False) -> dict[str, Any]:
    loop = example.train_digits
    return loop.train(loop.parse_args(list(argv)), loop.Trainer if kernels else example.ArrayTrainer)


def losses(trainer_class: Any, device: hetero.Device, steps: int) -> tuple[list[float], dict[str, np.ndarray]]:
    """The mean loss of each of ``steps`` steps from seed 0's weights, and the final weights."""
    from digits_model import initial_weights, load_digits, to_device

    state = to_device(initial_weights(0), device)
    trainer = trainer_class(load_digits(0), state, seed=0, lr=0.2, batch=64)
    curve = [float(np.mean(trainer.step(step).numpy())) for step in range(steps)]
    return curve, {k: v.numpy().copy() for k, v in state.items()}


def test_the_example_has_no_kernel_of_its_own(example: Any) -> None:
    tree = ast.parse((EXAMPLES / "train_digits_arrays.py").read_text())
    decorators = [ast.unparse(d) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for d in node.decorator_list]
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not [d for d in decorators if "kernel" in d]
    kernels = importlib.import_module("digits_kernels")
    assert not [name for name in imported if isinstance(getattr(kernels, name, None), type(kernels.matmul))]


def test_arrays_train_as_the_kernels_do(example: Any, device: hetero.Device) -> None:
    from digits_model import Trainer

    arrays, array_weights = losses(example.ArrayTrainer, device, 60)
    kernels, kernel_weights = losses(Trainer, device, 60)
    assert arrays[0] > 2.0 and arrays[-1] < 0.4 * arrays[0]  # from about ln(10) to about 0.6
    np.testing.assert_allclose(arrays, kernels, rtol=1e-3)  # the same steps: BLAS and reduction order apart
    for name, value in array_weights.items():
        np.testing.assert_allclose(value, kernel_weights[name], rtol=1e-3, atol=1e-5)


def test_same_accuracy_as_the_kernel_version(example: Any) -> None:
    device = (OPENCL or NAMES)[0]  # OpenCL builds faster than Numba
    arrays = train(example, "--device", device, "--steps", "200", "--no-guard")
    kernels = train(example, "--device", device, "--steps", "200", "--no-guard", kernels=True)
    assert arrays["accuracy"] > 0.9
    assert abs(arrays["accuracy"] - kernels["accuracy"]) <= 0.01


def through(example: Any, monkeypatch: pytest.MonkeyPatch, first: str, second: str, switch: int, steps: int) -> dict[str, Any]:
    """A fault-free run of steps [0, switch) on ``first`` and [switch, steps) on ``second``, through
    a checkpoint: what a recovery from the snapshot (or checkpoint) of step ``switch`` must give."""
    train(example, "--device", first, "--steps", str(switch), "--checkpoint-every", str(switch), "--no-guard")
    monkeypatch.setenv("HETERO_RESUME_STEP", str(switch))
    try:
        return train(example, "--device", second, "--steps", str(steps), "--no-guard")
    finally:
        monkeypatch.delenv("HETERO_RESUME_STEP")


def launches_a_step(example: Any, device: str) -> int:
    """Kernel launches one step makes on ``device``, counted: 22 where hetero.matmul runs on CLBlast,
    more where it runs hetero's own kernels (a machine without libclblast)."""
    from digits_model import initial_weights, load_digits, to_device

    from hetero.core.launch_counts import launches

    trainer = example.ArrayTrainer(load_digits(0), to_device(initial_weights(0), hetero.device(device)), seed=0,
                                   lr=0.2, batch=64)
    trainer.step(0)  # compiles what it launches: counted alike, but out of the way
    before = launches(device)
    trainer.step(1).numpy()
    return launches(device) - before


def test_guard_recovery_ends_as_the_fault_free_run(example: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if "oneapi:0" not in NAMES or len(NAMES) < 2:
        pytest.skip("needs oneapi:0 and another device")
    per_step = launches_a_step(example, "oneapi:0")
    clean = train(example, "--device", "oneapi:0", "--steps", "40")
    faulty = train(example, "--inject", f"oneapi:0:launch:nth={18 * per_step + per_step // 2}:lost", "--steps", "40")
    (event,) = faulty["recoveries"]
    assert event["injected"] and event["failed_device"] == "oneapi:0" and event["fault_class"] == "device-lost"
    assert event["step"] == 18, per_step  # the launch injected is the middle one of step 18
    assert hetero.device(faulty["final_device"]).backend != "oneapi"
    assert abs(faulty["accuracy"] - clean["accuracy"]) <= 0.005
    reference = through(example, monkeypatch, "oneapi:0", faulty["final_device"], event["snapshot_step"], 40)
    assert faulty["weights"] == reference["weights"]  # bit for bit: the replay is deterministic
    assert faulty["accuracy"] == reference["accuracy"]


def test_hetero_run_restarts_a_crashed_worker_from_its_checkpoint(example: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if len(OPENCL) < 2:
        pytest.skip("needs two OpenCL devices (faster to start than Numba's cpu)")
    first, second = OPENCL[:2]
    per_step = launches_a_step(example, first)
    crash = 45 * per_step + per_step // 2  # in the middle of step 45: resumes from the checkpoint of step 40
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    for name in ("HETERO_FAULTS", "HETERO_CHECKPOINT_DIR"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--devices", f"{first},{second}", "--run-dir",
            str(tmp_path / "run"), "--inject", f"{first}:launch:nth={crash}:crash",
            str(EXAMPLES / "train_digits_arrays.py"), "--steps", "60", "--checkpoint-every", "20", "--json"]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarts     1" in done.stderr and "crash: 1" in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["first_step"] == 40 and summary["start_device"] == second
    reference = through(example, monkeypatch, first, second, 40, 60)
    assert summary["weights"] == reference["weights"]
    assert summary["accuracy"] == reference["accuracy"]
