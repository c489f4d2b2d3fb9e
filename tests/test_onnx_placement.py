"""Where ONNX Runtime put each node: ``Session.placement()`` says it, and a session whose nodes did not
go to the provider its device needs is an error naming the ops, or announced with ``fallback="cpu"``
or ``partial="allow"``; never ``provider=<the device's>`` while the CPU ran everything.

The partitioning here is ONNX Runtime's own. This machine has no accelerator provider that takes
nodes (OpenVINO's plugin sees no device on a non-Intel CPU), so the provider asked for is the
Azure execution provider that every onnxruntime wheel carries: ONNX Runtime binds it (it is in
``get_providers()``, first) and then gives it no node of an ordinary model, all of them to the
CPU provider. That is what happened on ``oneapi:0`` with OpenVINO and scikit-learn models: bound,
listed, and running nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.device import Device
from tests.fakes.fake_device import FakeRuntime
from tests.onnx_models import mlp, mlp_reference

ort = pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
from hetero.onnx import ProviderUnavailableError, Session, providers  # noqa: E402
from hetero.onnx import placement as _placement  # noqa: E402

AZURE = "AzureExecutionProvider"
TOLERANCE = {"rtol": 1e-5, "atol": 2e-5}


def _device() -> Device:
    runtime = FakeRuntime("oneapi", 0)
    return Device(runtime.info, runtime)


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> Device:
    """A device whose provider is the Azure EP: bound by ONNX Runtime, given no node."""
    if AZURE not in ort.get_available_providers():
        pytest.skip("this onnxruntime has no AzureExecutionProvider")
    if not _placement.supported(ort):
        pytest.skip("this onnxruntime cannot report node placement (needs >= 1.24)")
    choice = providers.ProviderChoice(AZURE, [AZURE, "CPUExecutionProvider"], [], {}, "a test's provider")
    monkeypatch.setattr(providers, "choose", lambda ort_, device: choice if device.backend == "oneapi" else
                        providers.ProviderChoice("CPUExecutionProvider", ["CPUExecutionProvider"], [], {}, "-"))
    return _device()


def test_onnxruntime_binds_the_provider_and_gives_it_nothing(azure: Device) -> None:
    """The premise, checked: get_providers() lists the provider first, the CPU ran every node."""
    options = ort.SessionOptions()
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    raw = ort.InferenceSession(mlp().data, options, providers=[AZURE, "CPUExecutionProvider"])
    assert raw.get_providers()[0] == AZURE
    assert {sub.ep_name for sub in raw.get_provider_graph_assignment_info()} == {"CPUExecutionProvider"}


def test_a_session_whose_nodes_all_went_to_the_cpu_is_an_error_naming_the_ops(azure: Device) -> None:
    with pytest.raises(ProviderUnavailableError) as info:
        Session(mlp().data, azure)
    error = info.value
    message = str(error)
    assert error.provider == AZURE and error.device == "oneapi:0"
    assert error.ops == {"Gemm": 2, "Relu": 1} and error.placed == 0
    assert "none of the model's 3 nodes" in message and "Gemm x2, Relu x1" in message
    assert "fallback='cpu'" in message and "\n" not in message


def test_partial_allow_does_not_cover_a_session_that_runs_nothing_on_the_device(azure: Device) -> None:
    with pytest.raises(ProviderUnavailableError, match="none of the model's 3 nodes"):
        Session(mlp().data, azure, partial="allow")


def test_fallback_cpu_says_it_ran_on_the_cpu(azure: Device) -> None:
    model = mlp()
    x = model.sample(3)
    with hetero.fault.events(kind="provider-fallback") as events, pytest.warns(hetero.PerformanceWarning,
                                                                               match="Gemm x2, Relu x1"):
        session = Session(model.data, azure, fallback="cpu")
        event = events.get(timeout=2)
    assert session.fell_back and session.device.name == "cpu" and session.provider == "CPUExecutionProvider"
    assert event["device"] == "oneapi:0" and event["provider"] == AZURE
    assert session.placement() == {"Gemm": {"CPUExecutionProvider": 2}, "Relu": {"CPUExecutionProvider": 1}}
    np.testing.assert_allclose(session.run({"x": x})["y"], mlp_reference(model, x), **TOLERANCE)


def test_placement_on_the_cpu() -> None:
    session = Session(mlp().data, "cpu")
    if not _placement.supported(ort):
        assert session.placement() is None
        pytest.skip("this onnxruntime cannot report node placement (needs >= 1.24)")
    assert session.placement() == {"Gemm": {"CPUExecutionProvider": 2}, "Relu": {"CPUExecutionProvider": 1}}
    assert not session.partial and "CPUExecutionProvider" in repr(session)


def test_the_split_policy_on_a_recorded_placement() -> None:
    """The decision alone, on a placement as ONNX Runtime records it (a partial split: this machine has
    no provider that takes some nodes and not others, so this part is not seen end to end here)."""
    split = _placement.Placement((("Conv", "OpenVINOExecutionProvider"), ("Relu", "OpenVINOExecutionProvider"),
                                  ("ZipMap", "CPUExecutionProvider"), ("Cast", "CPUExecutionProvider"),
                                  ("Cast", "CPUExecutionProvider")))
    assert split.by_op() == {"Conv": {"OpenVINOExecutionProvider": 1}, "Relu": {"OpenVINOExecutionProvider": 1},
                             "ZipMap": {"CPUExecutionProvider": 1}, "Cast": {"CPUExecutionProvider": 2}}
    assert split.off("OpenVINOExecutionProvider") == {"ZipMap": 1, "Cast": 2}
    assert split.count("OpenVINOExecutionProvider") == 2
    error = ProviderUnavailableError("OpenVINOExecutionProvider", "oneapi:0", ["OpenVINOExecutionProvider"],
                                     "remedy", ops=split.off("OpenVINOExecutionProvider"), placed=2)
    assert "3 of the model's 5 nodes" in str(error) and "Cast x2, ZipMap x1" in str(error)
    assert "partial='allow'" in str(error)
    assert pickle_round_trip(error).ops == {"ZipMap": 1, "Cast": 2}


def pickle_round_trip(error: Exception) -> ProviderUnavailableError:
    import pickle

    return pickle.loads(pickle.dumps(error))


@pytest.mark.parametrize("name", ["logistic", "svc", "knn"])
def test_scikit_learn_models_on_oneapi_run_on_openvino_or_say_which_ops_did_not(name: str) -> None:
    """Where OpenVINO's EP works (an Intel machine): every converted scikit-learn model either runs
    with its nodes on OpenVINO, or the session names the ops that went to the CPU."""
    device = next((d for d in hetero.devices() if d.backend == "oneapi"), None)
    if device is None or providers.choose(ort, device) is None:
        pytest.skip("no oneapi device with OpenVINO's execution provider here (its plugin sees no device on a "
                    "non-Intel CPU)")
    from tests.sklearn_models import converted

    data, x = converted(name)
    try:
        session = Session(data, device)
    except ProviderUnavailableError as error:
        assert error.ops and all(op in str(error) for op in error.ops)
        return
    placed = session.placement()
    assert placed is not None and all(set(where) == {providers.OPENVINO} for where in placed.values()), placed
    session.run({"X": x})
