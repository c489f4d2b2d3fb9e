"""``HETERO_COST_SAMPLING=k`` (config ``cost_sampling``): importing :mod:`hetero.kernels.kernel` turns
sampling of every k-th launch on (the launch method is swapped), a launch records a timing sample
in the cost model, and the samples are saved to the state dir at exit. Without it nothing is
swapped. Fresh interpreters, since the setting applies at first import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CODE = '''
import json, sys
import numpy as np
import hetero
from hetero.kernels import kernel as kernels
from hetero.scheduler import cost_model

@hetero.kernel
def twice(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = 2.0 * x[i]

x = hetero.asarray(np.arange(64, dtype=np.float32), device="cpu")
y = hetero.zeros(64, device="cpu")
for _ in range(3):  # the first launch compiles (never a sample); the next ones are sampled
    twice[64](x, y)
assert np.array_equal(y.numpy(), 2 * np.arange(64, dtype=np.float32))
model = cost_model.default_model()
print(json.dumps({
    "sampled": kernels.Launcher.__call__ is kernels.Launcher._sampled_call,
    "plain": kernels.Launcher.__call__ is kernels.Launcher._plain_call,
    "interval": cost_model.sampling_interval(),
    "key": twice.cost_key(),
    "kernels": model.kernels(),
    "predicted": model.predict(twice.cost_key(), hetero.device("cpu").stable_id, 64),
}))
'''


def _run(tmp_path: Path, sampling: str | None) -> dict[str, object]:
    script = tmp_path / "sample.py"  # a file: kernels need their source
    script.write_text(CODE)
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state"), "HETERO_COST_SAMPLING": sampling or ""}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_sampling_from_the_environment_records_a_launch_and_saves_it(tmp_path: Path) -> None:
    seen = _run(tmp_path, "1")
    assert seen["sampled"] and seen["interval"] == 1
    assert seen["key"] in seen["kernels"] and isinstance(seen["predicted"], float) and seen["predicted"] > 0
    saved = (tmp_path / "state" / "costs.json").read_text()  # written at exit
    assert seen["key"] in saved


def test_without_the_setting_nothing_is_swapped_or_recorded(tmp_path: Path) -> None:
    seen = _run(tmp_path, None)
    assert seen["plain"] and not seen["sampled"] and seen["interval"] is None
    assert seen["kernels"] == [] and seen["predicted"] is None
    assert not (tmp_path / "state" / "costs.json").exists()


def test_zero_means_off(tmp_path: Path) -> None:
    seen = _run(tmp_path, "0")
    assert seen["plain"] and seen["interval"] is None and seen["kernels"] == []
