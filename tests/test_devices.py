"""Listing and choosing devices: names, descriptors, specs and their errors."""

from __future__ import annotations

import json

import pytest

import hetero
from conftest import run_python


def test_cpu_device_is_always_there() -> None:
    cpu = hetero.device("cpu")
    assert cpu.name == "cpu" and cpu.kind is hetero.Kind.CPU and cpu.memory > 0
    assert hetero.device("cpu:0") is cpu
    assert cpu in hetero.devices()


def test_descriptor_fields(device: hetero.Device) -> None:
    assert device.name.startswith(device.backend)
    assert device.kind in tuple(hetero.Kind)
    assert device.memory > 0 and device.compute_units > 0 and device.max_work_group_size > 0
    assert device.model and device.vendor and device.driver_version and device.stable_id
    assert isinstance(device.fp64, bool)
    assert device.health().state is hetero.HealthState.OK
    device.synchronize()
    assert hetero.device(device.name) is device


def test_stable_ids_differ_between_devices() -> None:
    ids = [d.stable_id for d in hetero.devices()]
    assert len(set(ids)) == len(ids)


def test_backend_spec_gives_its_first_device(device: hetero.Device) -> None:
    assert hetero.device(device.backend) is hetero.devices()[[d.backend for d in hetero.devices()].index(device.backend)]


def test_auto_prefers_gpus_then_follows_priority() -> None:
    chosen = hetero.device("auto")
    ordered = hetero.devices()
    assert chosen is ordered[0]
    if any(d.kind is hetero.Kind.GPU for d in ordered):
        assert chosen.kind is hetero.Kind.GPU
    else:
        assert chosen.name == "cpu"


def test_misspelled_backend_suggests_the_close_name() -> None:
    with pytest.raises(hetero.DeviceNotFoundError) as info:
        hetero.device("cpux")
    assert "did you mean 'cpu'" in str(info.value)
    assert "valid devices" in str(info.value)


def test_index_out_of_range_lists_the_backend_devices() -> None:
    with pytest.raises(hetero.DeviceNotFoundError) as info:
        hetero.device("cpu:3")
    assert "'cpu'" in str(info.value) or "cpu" in info.value.valid


def test_non_numeric_index_is_refused() -> None:
    with pytest.raises(hetero.DeviceNotFoundError, match="index must be a number"):
        hetero.device("cpu:first")


def test_unavailable_backend_asked_by_name_says_what_is_missing() -> None:
    unavailable = [s for s in hetero.backend_statuses() if not s.available]
    if not unavailable:
        pytest.skip("every installed backend is available on this machine")
    status = unavailable[0]
    with pytest.raises(hetero.BackendUnavailableError) as info:
        hetero.device(f"{status.name}:0")
    assert status.reason in str(info.value)
    assert info.value.remedy  # how to install it


def test_every_unavailable_backend_has_a_reason_and_remedy() -> None:
    for status in hetero.backend_statuses():
        if not status.available:
            assert status.reason, status.name
            assert status.remedy, status.name


def test_hetero_backends_restricts_what_loads() -> None:
    out = run_python("import json, hetero; print(json.dumps([d.name for d in hetero.devices()]))",
                     {"HETERO_BACKENDS": "cpu"}).stdout
    assert json.loads(out) == ["cpu"]


def test_hetero_backends_naming_an_unavailable_backend_is_an_error() -> None:
    unavailable = [s.name for s in hetero.backend_statuses() if not s.available]
    if not unavailable:
        pytest.skip("every installed backend is available on this machine")
    code = "import hetero\ntry:\n    hetero.devices()\nexcept hetero.BackendUnavailableError as e:\n    print('ERR', e)"
    out = run_python(code, {"HETERO_BACKENDS": f"cpu,{unavailable[0]}"}).stdout
    assert out.startswith("ERR") and unavailable[0] in out


def test_hetero_backends_naming_an_unknown_backend_lists_the_installed_ones() -> None:
    code = "import hetero\ntry:\n    hetero.devices()\nexcept hetero.ConfigError as e:\n    print('ERR', e)"
    out = run_python(code, {"HETERO_BACKENDS": "cpu,cdua"}).stdout
    assert "ERR" in out and "did you mean 'cuda'" in out and "installed backends" in out


def test_hetero_device_sets_the_default(device: hetero.Device) -> None:
    out = run_python("import hetero; print(hetero.device().name)", {"HETERO_DEVICE": device.name}).stdout
    assert out.strip() == device.name


def test_device_pickles_by_name() -> None:
    import pickle

    cpu = hetero.device("cpu")
    assert pickle.loads(pickle.dumps(cpu)) is cpu


def test_errors_pickle_with_their_fields() -> None:
    import pickle

    error = hetero.DeviceError("launch failed", backend="cuda", device="cuda:0", code=700, code_name="cudaErrorIllegalAddress")
    again = pickle.loads(pickle.dumps(error))
    assert (again.backend, again.device, again.code, again.code_name) == ("cuda", "cuda:0", 700, "cudaErrorIllegalAddress")
    assert str(again) == str(error) == "cuda:0: launch failed [cudaErrorIllegalAddress code 700]"
    unavailable = pickle.loads(pickle.dumps(hetero.BackendUnavailableError("cuda", "no driver", "install it")))
    assert unavailable.remedy == "install it"


def test_synchronize_opens_no_backend_it_was_not_using() -> None:
    code = ("import sys, json, hetero; hetero.device('cpu'); hetero.synchronize(); "
            "print(json.dumps([m for m in ('pyopencl', 'cupy') if m in sys.modules]))")
    assert json.loads(run_python(code, {"HETERO_DEVICE": "cpu"}).stdout) == []
