"""torch's own OpInfo samples (the torch wheel's op_db) through hetero's torch backend, on every
device: the operations small models are made of (benchmarks.torch_opinfo.QUICK) all pass against
torch eager, none wrong, and all but the listed forms stay on the device. The whole database runs
in ``make conformance`` (benchmarks/results/torch_opinfo.json)."""

from __future__ import annotations

import pytest

import hetero

pytest.importorskip("torch")
pytest.importorskip("expecttest", reason="torch's OpInfo database imports expecttest: pip install expecttest")

from benchmarks.torch_opinfo import QUICK, run, select_ops  # noqa: E402


def test_the_common_operations_samples_pass_on_the_device(device: hetero.Device) -> None:
    result = run(device, select_ops(QUICK), samples=2, progress=False)
    counts = result["counts"]
    failing = {name: e for name, e in result["ops"].items() if set(e["counts"]) - {"device", "host"}}
    assert not counts.get("wrong") and not counts.get("error"), failing
    assert result["pass_rate"] == 1.0 and result["device_rate"] >= 0.95, result["host_reasons"]
