"""hetero.onnx.Session: the model's answer on every device that has an ONNX Runtime provider, a clear
error (or an announced CPU fallback) where it has none, checked feeds, and infer fault rules."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.device import Device
from hetero.core.errors import ConfigError, DeviceLostError, DeviceSpecError
from hetero.fault.injection_rules import parse_rule
from tests.fakes.fake_device import FakeRuntime
from tests.onnx_models import cnn, cnn_reference, mlp, mlp_reference

ort = pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
from hetero.onnx import InputError, ProviderUnavailableError, Session  # noqa: E402
from hetero.onnx import providers  # noqa: E402

# The CPU provider agrees with float64 NumPy to float32 rounding; OpenVINO runs f32 (hetero asks it to).
TOLERANCE = {"rtol": 1e-5, "atol": 2e-5}


def _has_provider(device: hetero.Device) -> bool:
    return providers.choose(ort, device) is not None


@pytest.mark.parametrize("build, reference", [(mlp, mlp_reference), (cnn, cnn_reference)], ids=["mlp", "cnn"])
def test_session_matches_numpy_on_every_device(device: hetero.Device, build, reference) -> None:
    model = build()
    x = model.sample(7)
    if not _has_provider(device):
        with pytest.raises(ProviderUnavailableError) as info:
            Session(model.data, device)
        assert device.name in str(info.value) and "fallback='cpu'" in str(info.value)
        assert providers.remedy(device.backend) in str(info.value)
        pytest.skip(f"ONNX Runtime has no provider for {device.name} here: {providers.remedy(device.backend)}")
    session = Session(model.data, device)
    assert session.provider == providers.wanted(device)
    np.testing.assert_allclose(session.run({"x": x})["y"], reference(model, x), **TOLERANCE)


def _fake_device(backend: str) -> Device:
    return Device(FakeRuntime(backend, 0).info, FakeRuntime(backend, 0))


def test_absent_provider_raises_naming_provider_device_and_remedy() -> None:
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    with pytest.raises(ProviderUnavailableError) as info:
        Session(mlp().data, _fake_device("cuda"))
    error = info.value
    assert error.provider == "CUDAExecutionProvider" and error.device == "cuda:0"
    assert "onnxruntime-gpu" in str(error)


def test_fallback_cpu_runs_on_the_cpu_and_publishes_the_event() -> None:
    model = mlp()
    x = model.sample(3)
    with hetero.fault.events(kind="provider-fallback") as events:
        session = Session(model.data, _fake_device("rocm"), fallback="cpu")
        event = events.get(timeout=2)
    assert session.fell_back and session.device.name == "cpu" and session.provider == "CPUExecutionProvider"
    assert event["device"] == "rocm:0" and event["provider"] == "MIGraphXExecutionProvider"
    np.testing.assert_allclose(session.run({"x": x})["y"], mlp_reference(model, x), **TOLERANCE)


def test_a_provider_onnxruntime_drops_silently_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime, asked for a provider it lists but cannot bind this way (a plugin EP by name),
    runs on the CPU without a word; the session checks what was bound."""
    model = mlp()
    fake = providers.ProviderChoice("OpenVINOExecutionProvider", ["OpenVINOExecutionProvider", "CPUExecutionProvider"],
                                    [], {}, "pip install onnxruntime-ep-openvino")
    monkeypatch.setattr(providers, "choose", lambda ort_, device: fake)
    raw = ort.InferenceSession(model.data, providers=fake.providers)
    assert raw.get_providers() == ["CPUExecutionProvider"]  # ONNX Runtime's silent fallback
    with pytest.raises(ProviderUnavailableError, match="did not bind OpenVINOExecutionProvider"):
        Session(model.data, "cpu")


def test_onnxruntimes_run_time_fallback_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's wrapper, on an EPFail in run(), moves the session to its fallback providers (the
    CPU) with only a print, and answers from there. hetero's session raises the error instead."""
    from onnxruntime.capi.onnxruntime_pybind11_state import EPFail

    model = mlp()
    session = Session(model.data, "cpu")
    raw = session.ort_session
    assert raw._enable_fallback is False
    calls = []

    class FailingOnce:
        def __init__(self, inner) -> None:
            self.inner = inner

        def run(self, *args):
            calls.append(args)
            if len(calls) == 1:
                raise EPFail("CUDA failure 700: an illegal memory access was encountered ; GPU=0 ; hostname=h ; expr=x;")
            return self.inner.run(*args)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(raw, "_sess", FailingOnce(raw._sess))
    with pytest.raises(hetero.DeviceError, match="illegal memory access"):
        session.run({"x": model.sample(1)})
    assert len(calls) == 1  # not retried behind the caller's back


def test_inputs_numpy_hetero_torch_and_lists() -> None:
    model = mlp()
    x = model.sample(4)
    session = Session(model.data, "cpu")
    want = mlp_reference(model, x)
    np.testing.assert_allclose(session.run({"x": hetero.asarray(x)})["y"], want, **TOLERANCE)
    np.testing.assert_allclose(session.run({"x": x.tolist()})["y"], want, **TOLERANCE)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(session.run({"x": torch.from_numpy(x)})["y"], want, **TOLERANCE)


@pytest.mark.parametrize("feeds, match", [
    ({"x": np.zeros((2, 16), np.float64)}, "must be float32, got float64"),
    ({"x": np.zeros((2, 15), np.float32)}, r"has shape \[2, 15\]"),
    ({"x": np.zeros((16,), np.float32)}, r"has shape \[16\]"),
    ({"z": np.zeros((2, 16), np.float32)}, "has no input 'z'"),
    ({}, "input 'x' is missing"),
    ({"x": "abc"}, "cannot make a float32 array|is a str"),
])
def test_bad_feeds_are_input_errors(feeds: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        Session(mlp().data, "cpu").run(feeds)


def test_unknown_output_and_missing_model_file(tmp_path) -> None:
    session = Session(mlp().data, "cpu")
    with pytest.raises(InputError, match="has no output 'q'"):
        session.run({"x": np.zeros((1, 16), np.float32)}, outputs=["q"])
    with pytest.raises(FileNotFoundError, match="no ONNX model at"):
        Session(tmp_path / "missing.onnx", "cpu")


def test_infer_rule_fires_the_devices_own_error_marked_injected() -> None:
    model = mlp()
    session = Session(model.data, "cpu")
    x = model.sample(1)
    with hetero.fault.inject("cpu:infer:nth=2:lost") as injection:
        session.run({"x": x})
        with pytest.raises(DeviceLostError, match="injected by fault rule") as info:
            session.run({"x": x})
        session.run({"x": x})
    assert info.value.injected is True
    assert [record.op for record in injection.fired] == ["infer"]
    assert hetero.fault.classify(info.value).quarantine


@pytest.mark.parametrize("rule, ok", [("cpu:infer:p=0.01,seed=3:sticky", True), ("cpu:infer:nth=1:oom", True),
                                      ("cpu:infer:nth=1:hang:1ms", True), ("cpu:infer:nth=1:xid:79", False)])
def test_infer_rules_parse(rule: str, ok: bool) -> None:
    if ok:
        assert parse_rule(rule).op == "infer"
    else:
        with pytest.raises(ConfigError, match="cannot apply to op 'infer'"):
            parse_rule(rule)


@pytest.mark.parametrize("content", [b"this is a text file, not a model\n", bytes(range(256)) * 3, b""],
                         ids=["text", "random-bytes", "empty"])
def test_a_file_that_is_not_onnx_is_named_with_the_reason_in_one_line(tmp_path, content: bytes) -> None:
    from hetero.onnx import ModelError, Pool

    path = tmp_path / "not-a-model.onnx"
    path.write_bytes(content)
    for make in (lambda: Session(path, "cpu"), lambda: Pool(str(path), devices="cpu")):
        with pytest.raises(ModelError) as info:
            make()
        message = str(info.value)
        assert message.startswith(f"{path} is not an ONNX model") and "\n" not in message, message
    with pytest.raises(ModelError, match="the model's bytes is not an ONNX model"):
        Session(content, "cpu")


def test_pool_takes_the_comma_separated_device_list_the_command_line_takes() -> None:
    from hetero.onnx import Pool

    pool = Pool(mlp().data, devices="cpu, cpu")
    assert [m.session.device.name for m in pool._members.values()] == ["cpu"]
    pool.close()
    with pytest.raises(DeviceSpecError, match="'cpu;oneapi:0' is not a device name"):
        Pool(mlp().data, devices="cpu;oneapi:0")
