"""Pickling hetero arrays on every device: the values, dtype and shape come back (views as their
values), on the device of the same name, or on the host with a warning where that device is not
present in the loading process."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.array import host_values
from hetero.core import dtypes


def _round_trip(x: hetero.Array, protocol: int = pickle.HIGHEST_PROTOCOL) -> hetero.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the device is present here: no fallback, no warning
        back = pickle.loads(pickle.dumps(x, protocol=protocol))
    assert isinstance(back, hetero.Array)
    return back


def _check(back: hetero.Array, x: hetero.Array) -> None:
    want = x.numpy()
    assert back.device is x.device and back.dtype == x.dtype and back.shape == x.shape
    assert back.is_contiguous and back.base is None
    assert back.numpy().tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("dtype", dtypes.SUPPORTED, ids=str)
def test_round_trip_on_the_same_device_for_every_dtype(device: hetero.Device, dtype: np.dtype[Any]) -> None:
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=24 * dtype.itemsize, dtype=np.uint8)  # any bits: NaNs, infinities
    host = (raw % 2 if dtype == np.bool_ else raw).view(dtype).reshape(2, 3, 4)
    x = hetero.asarray(host, device=device)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        _check(_round_trip(x, protocol), x)


def test_views_zero_d_and_empty_arrays_pickle_their_values(device: hetero.Device) -> None:
    base = hetero.asarray(np.arange(60, dtype=np.float32).reshape(3, 4, 5), device=device)
    for x in (base[::-1, 1:, ::2], base.T, base[1, 2], base[2:, :, 1:2], base[:, :0],
              hetero.broadcast_to(base[0, 0], (3, 5)), hetero.asarray(np.array(True), device=device),
              hetero.asarray(np.array([1 + 2j, -3j], np.complex128), device=device),
              hetero.zeros((0,), dtype=hetero.complex64, device=device)):
        back = _round_trip(x)
        _check(back, x)
        assert len(pickle.dumps(x)) < 300 + x.nbytes  # the view's values, never its base's buffer


def test_the_copy_is_independent(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6, dtype=np.int32), device=device)
    for back in (_round_trip(x), copy.copy(x), copy.deepcopy(x)):
        back[0] = 100
        assert x.numpy()[0] == 0 and back.device is x.device


class _Renamed:
    """Pickles as ``array`` would, but naming another device (an array from another machine)."""

    def __init__(self, array: hetero.Array, name: str) -> None:
        self.array, self.name = array, name

    def __reduce__(self) -> tuple[Any, ...]:
        function, (data, dtype, shape, _) = self.array.__reduce__()
        return function, (data, dtype, shape, self.name)


def test_a_device_missing_here_gives_an_array_on_the_host_with_a_warning(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6, dtype=np.int16).reshape(2, 3), device=device)
    for name in ("cuda:7", "nosuchbackend:0"):
        with pytest.warns(RuntimeWarning, match=f"{name}.*not present here.*on cpu") as caught:
            back = pickle.loads(pickle.dumps(_Renamed(x, name)))
        assert len(caught) == 1
        assert back.device is hetero.device("cpu") and back.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_rebuild_takes_only_plain_data() -> None:
    good = (b"\x01\x00\x02\x00", "int16", (2,), "cpu")
    assert host_values.rebuild(*good).tolist() == [1, 2]
    bad: list[tuple[Any, ...]] = [
        ("not bytes", "int16", (2,), "cpu"),
        (b"\x01\x00\x02\x00", "object", (2,), "cpu"),
        (b"\x01\x00\x02\x00", "<i2", (2,), "cpu"),  # dtype names only, never a string NumPy parses
        (b"\x01\x00\x02\x00", "int16", (3,), "cpu"),  # the byte count must match
        (b"\x01\x00\x02\x00", "int16", (-2,), "cpu"),
        (b"\x01\x00\x02\x00", "int16", [2], "cpu"),
        (b"\x01\x00\x02\x00", "int16", (2,), 0),
    ]
    for args in bad:
        with pytest.raises((TypeError, ValueError)):
            host_values.rebuild(*args)


def test_in_a_process_without_the_device() -> None:
    """Pickled on every device here, loaded where only one backend is enabled: on that device when
    it is the one named, else on cpu, else (cpu excluded too) on hetero.device()."""
    names = [d.name for d in hetero.devices()]
    payload = pickle.dumps({name: hetero.asarray(np.arange(3.0, dtype=np.float32), device=name) for name in names})
    code = (
        "import json, pickle, re, sys, warnings, hetero\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    got = pickle.loads(sys.stdin.buffer.read())\n"
        "print(json.dumps({'where': {k: [v.device.name, v.tolist()] for k, v in got.items()},\n"
        "                  'default': hetero.device().name,\n"
        "                  'warned': sorted(re.search(r'pickled on (\\S+):', str(w.message)).group(1) for w in caught)}))\n"
    )

    def load(backends: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, timeout=300,
                              env={**os.environ, "HETERO_BACKENDS": backends}, check=True)
        return dict(json.loads(done.stdout))

    got = load("cpu")
    assert got["where"] == {name: ["cpu", [0.0, 1.0, 2.0]] for name in names}
    assert got["warned"] == sorted(n for n in names if n != "cpu")  # one warning per array moved
    others = [d for d in hetero.devices() if d.backend != "cpu"]
    if others:
        only = others[0].backend
        got = load(only)
        assert got["default"] != "cpu"
        for name, (where, values) in got["where"].items():
            assert where == (name if name.split(":")[0] == only else got["default"]) and values == [0.0, 1.0, 2.0]
