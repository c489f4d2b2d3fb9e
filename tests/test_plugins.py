"""Backends are plugins: an out-of-tree package registered through entry-point metadata
is found and used, and a plugin that breaks is reported, never fatal."""

from __future__ import annotations

import json
import os

import numpy as np

import hetero
from conftest import PLUGINS, run_python

PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}


def test_out_of_tree_plugin_devices_are_listed_and_usable() -> None:
    code = """
import json, numpy as np, hetero
names = [d.name for d in hetero.devices()]
data = np.arange(1000, dtype=np.int32)
on_fake = hetero.asarray(data, device="fake:1")
back = on_fake.to("cpu").numpy()
print(json.dumps({"names": names, "ok": bool((back == data).all()), "kind": str(hetero.device("fake").kind)}))
"""
    out = json.loads(run_python(code, PLUGIN_ENV).stdout)
    assert "fake:0" in out["names"] and "fake:1" in out["names"]
    assert "cpu" in out["names"]
    assert out["ok"] and out["kind"] == "accelerator"


def test_broken_plugins_are_reported_with_the_reason() -> None:
    result = run_python("import hetero.cli.main, sys; sys.exit(hetero.cli.main.main(['devices', '--all', '--json']))", PLUGIN_ENV)
    backends = {b["backend"]: b for b in json.loads(result.stdout)["backends"]}
    assert backends["fake"]["available"]
    assert not backends["fakebroken"]["available"]
    assert "simulated driver crash" in backends["fakebroken"]["reason"]
    assert "RuntimeError" in backends["fakebroken"]["plugin_error"]
    assert not backends["fakemissing"]["available"]
    assert "hetero_fakedev_not_installed" in backends["fakemissing"]["reason"]


def test_asking_for_a_broken_plugin_by_name_raises_its_reason() -> None:
    code = """
import hetero
try:
    hetero.device("fakebroken")
except hetero.BackendUnavailableError as exc:
    print("raised:", exc)
"""
    out = run_python(code, PLUGIN_ENV).stdout
    assert "raised:" in out and "simulated driver crash" in out


def test_register_backend_from_code_without_entry_points() -> None:
    code = f"""
import sys; sys.path.insert(0, {str(PLUGINS)!r})
import dataclasses, hetero, hetero_fakedev
hetero.register_backend(dataclasses.replace(hetero_fakedev.registration, name="fake2"))
print(hetero.device("fake2").name)
"""
    # The fake runtime names its devices fake:N; what matters is that the registration was opened.
    assert run_python(code).stdout.strip() == "fake:0"


def test_fake_device_round_trip_through_staging() -> None:
    # Same process: register the test double and copy between it and every real device.
    import sys

    sys.path.insert(0, str(PLUGINS))
    try:
        import hetero_fakedev

        hetero.register_backend(hetero_fakedev.registration)
        fake = hetero.device("fake:0")
        data = np.linspace(-1, 1, 777, dtype=np.float64)
        for other in [d.name for d in hetero.devices() if d.backend != "fake"]:
            moved = hetero.asarray(data, device=fake).to(other).to(fake)
            assert moved.numpy().tobytes() == data.tobytes(), other
    finally:
        sys.path.remove(str(PLUGINS))
        hetero.core.registry.reset()
