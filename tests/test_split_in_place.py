"""Issue 19, item 5: a split whose rows all go to an OpenCL CPU device runs on the cpu arrays'
memory in place (no copy in or out), as fast as that device on its own buffers; the launcher
picks among the ways by measurements that interference cannot bend."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.kernels import calibration_kernels as ck
from hetero.kernels.split import launch as split_module
from hetero.core.device import Kind
from hetero.scheduler import split_plan
from hetero.scheduler.cost_model import CostModel
from hetero.scheduler.split_plan import HOME_MARGIN, MEASURED_IN_A_ROW, Outcomes
from tests.conftest import DEVICE_NAMES

HOST_SHARING = [name for name in DEVICE_NAMES
                if name != "cpu" and hetero.device(name).backend in ("opencl", "oneapi")
                and hetero.device(name).kind is Kind.CPU]
needs_host_sharing = pytest.mark.skipif(not HOST_SHARING, reason="needs an OpenCL CPU device "
                                        "(apt-get install pocl-opencl-icd, or pip install intel-opencl-rt)")


def test_cpu_buffers_from_64_kib_start_on_a_page() -> None:
    big = hetero.empty(1 << 16, dtype=np.uint8, device="cpu")
    assert big.buffer.ctypes.data % 4096 == 0 and big.buffer.nbytes == 1 << 16
    small = hetero.zeros(3, device="cpu")
    assert small.numpy().tolist() == [0.0, 0.0, 0.0]


@needs_host_sharing
@pytest.mark.parametrize("name", HOST_SHARING)
def test_alias_host_works_on_host_memory_in_place_and_end_alias_shows_the_writes(name: str) -> None:
    device = hetero.device(name)
    x = hetero.asarray(np.arange(1 << 16, dtype=np.float32), device="cpu", copy=True)
    alias = device.runtime.alias_host(x.buffer)
    assert alias is not None and alias.nbytes == x.nbytes
    on_device = hetero.Array(alias, device, x.shape, x.dtype)
    ck.saxpy[x.shape[0]](np.float32(2.0), hetero.ones(x.shape[0], device=device), on_device)
    device.runtime.end_alias(alias)
    assert np.array_equal(x.numpy(), np.arange(1 << 16, dtype=np.float32) + 2.0)
    # memory a device cannot use without a copy gets no alias: the split copies instead
    odd = np.empty(4096 + 64, np.uint8)[1:4097]
    assert device.runtime.alias_host(odd) is None
    assert hetero.device("cpu").runtime.alias_host(x.buffer) is None  # the default: none


def _forced_alone(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every launch measured fastest alone on ``name`` (what the launcher's walls would say)."""
    monkeypatch.setattr(Outcomes, "next_launch", lambda self, devices, launch=None: (name, False))  # peek, choose, timed


@needs_host_sharing
@pytest.mark.parametrize("name", HOST_SHARING)
def test_a_split_all_on_an_opencl_cpu_device_copies_nothing_and_sees_each_calls_data(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The arrays stay on cpu; the rows all go to ``name``: its kernel reads and writes the cpu
    memory itself, the short way (no plan, no timing) after the first calls, and data the caller
    writes between calls is what the next call reads."""
    _forced_alone(monkeypatch, name)

    def no_copy(*args: object, **kwargs: object) -> None:
        raise AssertionError("a copy to or from the part's device")

    monkeypatch.setattr(split_module.SplitLauncher, "_copy", no_copy)
    n = 1 << 16
    launcher = ck.saxpy.split(["cpu", name], model=CostModel())[n]
    x = hetero.asarray(np.arange(n, dtype=np.float32), device="cpu", copy=True)
    y = hetero.zeros(n, device="cpu")
    want = np.zeros(n, np.float32)
    ran = []
    original = split_module.split_in_place.run

    def counted(*args: object) -> bool:
        ran.append(True)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(split_module.split_in_place, "run", counted)
    for i in range(12):
        x.numpy()[:] = np.float32(i)  # the caller writes the host memory between calls
        plan = launcher(np.float32(2.0), x, y)
        want += np.float32(2.0) * np.float32(i)
        assert np.array_equal(y.numpy(), want), i
        assert plan.bounds[plan.devices.index(name)] == (0, n)
    assert ran  # the short way ran


@needs_host_sharing
def test_arrays_a_device_cannot_alias_are_copied_and_the_result_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    name = HOST_SHARING[0]
    _forced_alone(monkeypatch, name)
    monkeypatch.setattr(type(hetero.device(name).runtime), "alias_host", lambda self, host: None)
    n = 10_007
    launcher = ck.saxpy.split(["cpu", name], model=CostModel())[n]
    x = hetero.asarray(np.linspace(0, 1, n, dtype=np.float32), device="cpu")
    y = hetero.ones(n, device="cpu")
    for _ in range(3):
        launcher(np.float32(3.0), x, y)
    want = np.ones(n, np.float32)
    for _ in range(3):
        want += np.float32(3.0) * np.linspace(0, 1, n, dtype=np.float32)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)


def test_the_arrays_device_stays_unless_another_way_measured_home_margin_faster() -> None:
    def settled(other: float) -> str | None:
        walls = Outcomes(home="cpu")
        walls.add(None, 10.0)
        for way, seconds in (("cpu", 1.0), ("opencl:0", other)):
            for _ in range(MEASURED_IN_A_ROW):
                walls.add(way, seconds)
        return walls.best()

    assert settled(1.0 / (1.0 + HOME_MARGIN) * 1.001) == "cpu"  # within the margin: stay
    assert settled(0.9) == "opencl:0"  # 10% faster: go


def test_a_way_costs_the_least_of_its_last_runs_in_a_row() -> None:
    """The first run after a switch pays for it (the other runtime's threads still spinning):
    ways are compared by the least of as many recent runs each, so the one run most does not
    win for having had more chances, nor the one just switched to lose for the switch."""
    walls = Outcomes()
    walls.add(None, 5.0)
    for seconds in (9.0, 2.0, 2.1):  # the switch, then two clean runs
        walls.add("opencl:0", seconds)
    for seconds in (1.5, 2.4, 2.5, 2.4):  # cpu's lucky run is older than its last three
        walls.add("cpu", seconds)
    assert walls.best() == "opencl:0"
