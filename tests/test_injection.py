"""Fault-injection rules: parsing (every bad part named), triggers (nth, every, p with a seed,
times), the inject() block restoring runtimes, and rules from the configuration at backend open."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import hetero
from hetero.core.config import reload_config
from hetero.core.errors import ConfigError, DeviceOutOfMemoryError
from hetero.fault.injection import configured, inject, wrapped_methods
from hetero.fault.injection_rules import RuleState, Trigger, What, parse_duration, parse_rule, parse_rules
from hetero.core.registry import Registry


# -- parsing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, pattern, op, trigger, what", [
    ("oneapi:0:launch:nth=300:lost", "oneapi:0", "launch", Trigger(nth=300), What("lost")),
    ("cpu:alloc:every=5:oom", "cpu", "alloc", Trigger(every=5), What("oom")),
    ("*:copy:p=0.01,seed=7:cuda:700", "*", "copy", Trigger(p=0.01, seed=7), What("code", vendor="cuda", code=700)),
    ("opencl:*:launch:nth=2:crash", "opencl:*", "launch", Trigger(nth=2), What("crash")),
    ("cpu:launch:nth=40:hang:2s", "cpu", "launch", Trigger(nth=40), What("hang", seconds=2.0)),
    ("cpu:sync:every=3,times=2:hang", "cpu", "sync", Trigger(every=3, times=2), What("hang")),
    ("cuda:1:sync:nth=1:xid:79", "cuda:1", "sync", Trigger(nth=1), What("xid", xid=79)),
    ("rocm:0:launch:nth=1:hip:700", "rocm:0", "launch", Trigger(nth=1), What("code", vendor="hip", code=700)),
    ("oneapi:*:launch:p=1:opencl:-5", "oneapi:*", "launch", Trigger(p=1.0), What("code", vendor="opencl", code=-5)),
    ("cuda:0:alloc:nth=2:cuda:2", "cuda:0", "alloc", Trigger(nth=2), What("code", vendor="cuda", code=2)),
    ("  cpu:health:nth=3:degraded  ", "cpu", "health", Trigger(nth=3), What("degraded")),
])
def test_good_rules_parse(text: str, pattern: str, op: str, trigger: Trigger, what: What) -> None:
    rule = parse_rule(text)
    assert (rule.device, rule.op, rule.trigger, rule.what) == (pattern, op, trigger, what)
    assert rule.text == text.strip()


@pytest.mark.parametrize("text, expected", [
    ("cpu:launch:nth=3", "expected DEVICE:OP:TRIGGER:WHAT"),
    ("cpu:lanch:nth=3:lost", "did you mean 'launch'"),
    ("cpu:allocate:nth=3:lost:x", "valid operations: launch, copy, alloc, sync, health"),
    ("cpu:launch:nht=3:lost", "did you mean 'nth'"),
    ("cpu:launch:nth=0:lost", "nth='0'"),
    ("cpu:launch:nth=x:lost", "whole number"),
    ("cpu:launch:every=-2:lost", "whole number"),
    ("cpu:launch:p=1.5:lost", "between 0 and 1"),
    ("cpu:launch:nth=3,seed=4:lost", "only p=P uses"),
    ("cpu:launch:p=0.5,seed=x:lost", "must be an integer"),
    ("cpu:launch:nth=3,every=2:lost", "exactly one of"),
    ("cpu:launch:times=2:lost", "exactly one of"),
    ("cpu:launch:nth=3,nth=4:lost", "twice"),
    ("cpu:launch:nth=3:lose", "did you mean 'lost'"),
    ("cpu:launch:nth=3:explode", "valid: lost, sticky, oom, degraded"),
    ("cpu:launch:nth=3:hang:soon", "bad duration"),
    ("cpu:launch:nth=3:xid:abc", "'xid:79'"),
    ("cpu:launch:nth=3:xid:0", "positive Xid"),
    ("cpu:launch:nth=3:cuda:x", "'cuda:700'"),
    ("cpu:launch:nth=3:cuda:700", "the CPU has no vendor error codes"),
    ("oneapi:0:launch:nth=3:cuda:700", "cuda codes apply to cuda devices"),
    ("cuda:0:launch:nth=3:opencl:-5", "opencl codes apply to oneapi, opencl devices"),
    ("cpu:health:nth=3:oom", "cannot apply to op 'health'"),
])
def test_bad_rules_name_the_rule_and_the_bad_part(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rule(text)
    assert repr(text.strip()) in str(info.value)
    assert expected in str(info.value)


def test_rule_lists_and_strings() -> None:
    assert [r.op for r in parse_rules("cpu:launch:nth=1:lost; cpu:copy:nth=2:oom")] == ["launch", "copy"]
    assert len(parse_rules(["cpu:launch:nth=1:lost", parse_rule("cpu:sync:nth=1:lost")])) == 2
    with pytest.raises(ConfigError, match="no fault rule"):
        parse_rules(" ; ")


def test_durations() -> None:
    assert [parse_duration(t) for t in ("2s", "500ms", "1.5m", "3", "1h")] == [2.0, 0.5, 90.0, 3.0, 3600.0]
    with pytest.raises(ValueError):
        parse_duration("2 days")


def test_unknown_backend_is_refused_with_the_close_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'oneapi'"):
        inject("oneap:0:launch:nth=1:lost")


def test_a_device_its_open_backend_lacks_is_refused() -> None:
    hetero.device("cpu")  # the cpu backend is open
    with pytest.raises(ConfigError, match="there is no device 'cpu:3'; cpu devices here: cpu"):
        inject("cpu:3:launch:nth=1:lost")
    inject("cpu:launch:nth=1:lost")  # the bare backend name is fine


# -- triggers ---------------------------------------------------------------------------------
def fires(text: str, calls: int, device: str = "cpu") -> list[int]:
    state = RuleState(parse_rule(text), device)
    return [n for n in range(1, calls + 1) if state.hit() is not None]


def test_nth_fires_exactly_once() -> None:
    assert fires("cpu:launch:nth=7:lost", 50) == [7]


def test_every_fires_on_multiples_and_times_limits_it() -> None:
    assert fires("cpu:launch:every=5:lost", 23) == [5, 10, 15, 20]
    assert fires("cpu:launch:every=5,times=2:lost", 23) == [5, 10]


def test_probability_with_a_seed_is_reproducible() -> None:
    first = fires("cpu:copy:p=0.2,seed=7:oom", 500)
    assert first == fires("cpu:copy:p=0.2,seed=7:oom", 500)  # same seed, same faults
    assert first != fires("cpu:copy:p=0.2,seed=8:oom", 500)
    assert 50 < len(first) < 150  # it is a probability of 0.2, not always/never
    assert fires("cpu:copy:p=0.2,seed=7,times=3:oom", 500) == first[:3]
    assert fires("cpu:copy:p=0:oom", 200) == [] and fires("cpu:copy:p=1:oom", 5) == [1, 2, 3, 4, 5]


def test_counting_is_exact_across_threads() -> None:
    import threading

    for text, expected in (("cpu:launch:nth=777:lost", [777]), ("cpu:launch:every=10:lost", list(range(10, 4001, 10)))):
        state = RuleState(parse_rule(text), "cpu")
        fired: list[int] = []

        def worker(state: RuleState = state, fired: list[int] = fired) -> None:
            for _ in range(1000):
                call = state.hit()
                if call is not None:
                    fired.append(call)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(fired) == expected, text  # each call numbered once: no lost or doubled counts


def test_health_faults_latch_once_fired() -> None:
    assert fires("cpu:health:nth=3:lost", 6) == [3, 4, 5, 6]  # a lost device does not come back
    assert fires("cpu:health:nth=3,times=2:lost", 6) == [3, 4]


def test_seeded_injection_fires_on_the_same_calls_in_two_runs() -> None:
    runtime = hetero.device("cpu").runtime
    patterns = []
    for _ in range(2):
        failed = []
        with inject("cpu:alloc:p=0.25,seed=11:oom") as inj:
            for call in range(1, 101):
                try:
                    runtime.allocate(8)
                except DeviceOutOfMemoryError as error:
                    assert error.injected
                    failed.append(call)
        assert [r.call for r in inj.fired] == failed
        patterns.append(failed)
    assert patterns[0] == patterns[1] and patterns[0]


# -- applying and restoring -------------------------------------------------------------------
@pytest.fixture
def cpu_runtime() -> hetero.core.plugin.DeviceRuntime:
    return hetero.device("cpu").runtime


def test_nothing_is_wrapped_when_injection_is_off(device: hetero.Device) -> None:
    assert wrapped_methods(device.runtime) == []
    assert "launch" not in vars(device.runtime) and "allocate" not in vars(device.runtime)


def test_inject_wraps_only_the_covered_methods_and_restores_them(cpu_runtime: hetero.core.plugin.DeviceRuntime) -> None:
    others = [d.runtime for d in hetero.devices() if d.name != "cpu"]
    with inject(["cpu:copy:nth=1:lost", "cpu:launch:nth=9:sticky"]) as inj:
        assert set(wrapped_methods(cpu_runtime)) == {"upload", "download", "copy", "launch", "call_library"}  # library calls count as launches
        assert all(wrapped_methods(r) == [] for r in others)  # devices no rule matches: untouched
        with inject("cpu:alloc:nth=1:oom"):  # nested blocks stack and unstack
            assert "allocate" in vars(cpu_runtime)
        assert "allocate" not in vars(cpu_runtime) and "launch" in vars(cpu_runtime)
    assert wrapped_methods(cpu_runtime) == [] and "launch" not in vars(cpu_runtime)
    assert inj.fired == [] and not inj.active


def test_one_block_cannot_be_entered_twice(cpu_runtime: hetero.core.plugin.DeviceRuntime) -> None:
    block = inject("cpu:alloc:nth=1:oom")
    with block, pytest.raises(RuntimeError, match="already active"), block:
        pass
    assert wrapped_methods(cpu_runtime) == []


def test_inject_reaches_devices_opened_inside_the_block() -> None:
    registry = Registry()  # a private registry: its backends open inside the block
    with inject("cpu:alloc:nth=1:oom") as inj:
        runtime = registry.device("cpu").runtime
        with pytest.raises(DeviceOutOfMemoryError):
            runtime.allocate(8)
    assert len(inj.fired) == 1 and "allocate" not in vars(runtime)
    assert wrapped_methods(Registry().device("cpu").runtime) == []  # opened after: nothing


def test_injected_faults_are_logged(cpu_runtime: hetero.core.plugin.DeviceRuntime, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hetero.fault.injection"), inject("cpu:alloc:nth=2:oom"):
        cpu_runtime.allocate(8)
        with pytest.raises(DeviceOutOfMemoryError, match="injected"):
            cpu_runtime.allocate(8)
    records = [r for r in caplog.records if r.name == "hetero.fault.injection"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert "injected" in records[0].getMessage() and "cpu:alloc:nth=2:oom" in records[0].getMessage()


def test_injected_faults_are_published_on_the_event_bus(cpu_runtime: hetero.core.plugin.DeviceRuntime) -> None:
    from hetero.fault import event_bus

    with event_bus.events(kind="fault-injected", timeout=5) as sub, inject("cpu:alloc:nth=1:oom"):
        with pytest.raises(DeviceOutOfMemoryError):
            cpu_runtime.allocate(8)
        event = sub.get(timeout=5)
    assert event is not None
    assert (event["device"], event["rule"], event["op"], event["call"], event["what"]) == \
        ("cpu", "cpu:alloc:nth=1:oom", "alloc", 1, "oom")


# -- configured rules (HETERO_FAULTS, the config file) -----------------------------------------
@pytest.fixture
def config_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """monkeypatch for the environment, and the configuration read again once it is restored."""
    yield monkeypatch
    monkeypatch.undo()
    reload_config()


def test_hetero_faults_apply_as_a_backend_opens(config_env: pytest.MonkeyPatch) -> None:
    config_env.setenv("HETERO_FAULTS", "cpu:alloc:every=2:oom; opencl:*:launch:nth=1:lost")
    reload_config()
    runtime = Registry().device("cpu").runtime
    assert wrapped_methods(runtime) == ["allocate"]
    runtime.allocate(8)
    with pytest.raises(DeviceOutOfMemoryError) as info:
        runtime.allocate(8)
    assert info.value.injected and info.value.code_name == "CPU_OUT_OF_MEMORY"
    injection = configured()
    assert injection is not None and [r.rule for r in injection.fired] == ["cpu:alloc:every=2:oom"]


def test_faults_from_the_config_file(tmp_path: Path, config_env: pytest.MonkeyPatch) -> None:
    path = tmp_path / "hetero.yaml"
    path.write_text("faults:\n  - 'cpu:sync:nth=1:lost'\n")
    config_env.delenv("HETERO_FAULTS", raising=False)
    config_env.setenv("HETERO_CONFIG", str(path))
    config_env.chdir(tmp_path)
    assert reload_config().faults == ("cpu:sync:nth=1:lost",)
    runtime = Registry().device("cpu").runtime
    with pytest.raises(hetero.core.errors.DeviceLostError, match="injected"):
        runtime.synchronize()
    runtime.synchronize()  # nth=1: only the first call


@pytest.mark.parametrize("rule, problem", [("cpu:launch:nth=1:explode", "is not a fault"),
                                           ("cpu:1:launch:nth=1:lost", "no device 'cpu:1'")])
def test_a_bad_configured_rule_stops_discovery_with_its_name(rule: str, problem: str,
                                                               config_env: pytest.MonkeyPatch) -> None:
    config_env.setenv("HETERO_FAULTS", rule)
    reload_config()
    with pytest.raises(ConfigError, match=f"'{rule}'") as info:
        Registry().device("cpu")
    assert problem in str(info.value)


def test_opening_without_rules_leaves_runtimes_bare(config_env: pytest.MonkeyPatch) -> None:
    config_env.delenv("HETERO_FAULTS", raising=False)
    reload_config()
    registry = Registry()
    assert all(wrapped_methods(d.runtime) == [] for d in registry.devices())


def test_configuration_is_back_to_normal_after_these_tests() -> None:
    from hetero.core.config import get_config

    cached = get_config()
    assert cached == reload_config()  # the tests above restored the environment before re-reading it
