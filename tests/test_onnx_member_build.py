"""A device whose provider cannot build the model: its session raises one line naming the device, or
falls back to the CPU when asked; a pool over ``all`` devices leaves it out with a warning and
serves from the rest; ``hetero serve`` starts, or, when no device can build the model, says so in
one line.

OpenVINO's EP fails this way on KNN and PCA + SVC models (``EPFail`` while the session is made; so
does ONNX Runtime's OpenVINO build). No provider on this machine fails to compile a model (OpenVINO's
plugin sees no device on a non-Intel CPU), so the failure is simulated: ONNX Runtime's own
``EPFail`` class, raised where ONNX Runtime raises it, when the session is made for the device's
provider, with OpenVINO's message.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core.device import Device
from tests.fakes.fake_device import FakeRuntime
from tests.onnx_models import mlp, mlp_reference

ort = pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
from onnxruntime.capi.onnxruntime_pybind11_state import EPFail  # noqa: E402

from hetero.onnx import Pool, ProviderUnavailableError, Session, providers  # noqa: E402
from hetero.onnx import session as session_module  # noqa: E402
from hetero.onnx.errors import NoMemberError, ProviderFailedError  # noqa: E402

FAKE = "FakeVINOExecutionProvider"
MESSAGE = ("[ONNXRuntimeError] : 11 : EP_FAIL : Exception during initialization: Exception from "
           "src/inference/src/cpp/core.cpp:112: [CPU] Unsupported operation of type: TopK name: knn_topk")
TOLERANCE = {"rtol": 1e-5, "atol": 2e-5}


def _oneapi() -> Device:
    runtime = FakeRuntime("oneapi", 0)
    return Device(runtime.info, runtime)


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Device:
    """oneapi:0 gets a provider whose session cannot be made (EPFail); the CPU works as ever."""
    device = _oneapi()
    real_open = session_module.open_session

    def open_session(ort_: Any, data: bytes, source: str, **options: Any) -> Any:
        if any(FAKE in str(p) for p in options.get("providers", [])):
            raise EPFail(MESSAGE)
        return real_open(ort_, data, source, **options)

    def choose(ort_: Any, target: Device) -> providers.ProviderChoice | None:
        if target.backend == "oneapi":
            return providers.ProviderChoice(FAKE, [FAKE, "CPUExecutionProvider"], [], {}, "a test's provider")
        if target.backend == "cpu":
            return providers.ProviderChoice("CPUExecutionProvider", ["CPUExecutionProvider"], [], {}, "-")
        return None

    monkeypatch.setattr(session_module, "open_session", open_session)
    monkeypatch.setattr(providers, "choose", choose)
    monkeypatch.setattr(hetero, "devices", lambda *a, **k: [hetero.device("cpu"), device])
    real_device = hetero.device
    monkeypatch.setattr(hetero, "device", lambda name, **options: device if str(name) == "oneapi:0"
                        else real_device(name, **options))
    return device


def test_a_provider_that_cannot_build_the_model_is_one_line_naming_device_and_reason(failing: Device) -> None:
    with pytest.raises(ProviderFailedError) as info:
        Session(mlp().data, failing)
    message = str(info.value)
    assert isinstance(info.value, ProviderUnavailableError)
    assert "oneapi:0" in message and FAKE in message and "Unsupported operation of type: TopK" in message
    assert "fallback='cpu'" in message and "\n" not in message
    assert isinstance(info.value.__cause__, EPFail)


def test_fallback_cpu_catches_it(failing: Device) -> None:
    model = mlp()
    x = model.sample(2)
    with hetero.fault.events(kind="provider-fallback") as events, pytest.warns(hetero.PerformanceWarning, match="TopK"):
        session = Session(model.data, failing, fallback="cpu")
        event = events.get(timeout=2)
    assert session.fell_back and session.device.name == "cpu" and event["device"] == "oneapi:0"
    np.testing.assert_allclose(session.run({"x": x})["y"], mlp_reference(model, x), **TOLERANCE)


def test_a_pool_over_all_devices_leaves_the_member_out_with_a_warning(failing: Device,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    model = mlp()
    x = model.sample(2)
    with caplog.at_level("WARNING", logger="hetero.onnx"), Pool(model.data, devices="all", replicas=2) as pool:
        assert [m.name for m in pool.members] == ["cpu#0", "cpu#1"]
        np.testing.assert_allclose(pool.run({"x": x})["y"], mlp_reference(model, x), **TOLERANCE)
        assert pool.left_out == {"oneapi:0": f"ProviderFailedError: {pool.left_out['oneapi:0'].split(': ', 1)[1]}"}
    warned = [r.getMessage() for r in caplog.records if "oneapi:0" in r.getMessage()]
    assert warned and "left out" in warned[0] and "TopK" in warned[0]


def test_a_device_named_on_purpose_stays_strict(failing: Device) -> None:
    with pytest.raises(ProviderFailedError, match="oneapi:0"):
        Pool(mlp().data, devices="cpu,oneapi:0")


def test_no_member_that_can_build_the_model_is_one_line(failing: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hetero, "devices", lambda *a, **k: [failing])
    with pytest.raises(NoMemberError) as info:
        Pool(mlp().data, devices="all", name="knn")
    message = str(info.value)
    assert "no device can run model 'knn'" in message and "oneapi:0" in message and "TopK" in message
    assert "\n" not in message


def test_hetero_serve_starts_without_the_member_or_fails_in_one_line(failing: Device, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import hetero.serve.runner
    from hetero.cli import serve as cli_serve
    from hetero.cli.main import main

    model_file = tmp_path / "knn.onnx"
    model_file.write_bytes(mlp().data)
    served: dict[str, Any] = {}

    def fake_serve(pool: Pool, **kwargs: Any) -> None:
        served["members"] = [m.name for m in pool.members]
        pool.close()

    monkeypatch.setattr(hetero.serve.runner, "serve", fake_serve)
    parser = argparse.ArgumentParser(prog="hetero")
    handlers = cli_serve.add_commands(parser.add_subparsers(dest="command"))
    assert handlers["serve"](parser.parse_args(["serve", str(model_file), "--devices", "all"])) == 0
    assert served["members"] == ["cpu#0"]
    monkeypatch.setattr(hetero, "devices", lambda *a, **k: [failing])
    assert main(["serve", str(model_file), "--devices", "all"]) == 1
    err = capsys.readouterr().err
    assert "hetero: error: no device can run model 'knn'" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("hetero: error:")]) == 1
