"""Fault rules for torch ops (``cpu:torch:nth=20:oom``): a pure torch loop is drilled at torch's op
boundary, with the exceptions torch itself raises, classified and recovered as real ones; the
boundary is on torch's mode stack only while such a rule is active."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import pytest

import hetero
from hetero.core.errors import ConfigError
from hetero.fault import classify
from hetero.fault.foreign_errors import recognise
from hetero.fault.taxonomy import FaultClass

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store


def mode_stack() -> int:
    return int(torch._C._len_torch_function_stack())


def model_and_data() -> tuple[Any, Any, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    return model, optimizer, x, y


def train(rules: list[str] | None, steps: int = 12) -> tuple[Any, Any]:
    """A plain torch loop (no hetero array anywhere) under hetero.guard, with ``rules`` injected."""
    model, optimizer, x, y = model_and_data()

    def step() -> None:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

    with hetero.guard({"model": model, "optimizer": optimizer}, snapshot_every=4, device="cpu", standby=False) as g:
        block = hetero.fault.inject(rules) if rules else None
        if block is not None:
            block.__enter__()
        try:
            for _ in range(steps):
                g.run(step)
        finally:
            if block is not None:
                block.__exit__(None, None, None)
    return model, g


def test_an_injected_torch_oom_is_retried_in_place_and_matches_the_fault_free_run() -> None:
    clean, clean_guard = train(None)
    faulty, guard = train(["cpu:torch:nth=20:oom"])
    assert clean_guard.recoveries == []
    (event,) = guard.recoveries
    assert event["injected"] and event["in_place"] and event["fault_class"] == "recoverable"
    for name, value in clean.state_dict().items():
        assert torch.equal(faulty.state_dict()[name], value), name


def test_a_cpu_oom_is_what_torch_cpu_allocator_raises() -> None:
    x = torch.ones(3)
    with hetero.fault.inject("cpu:torch:nth=2:oom") as inj, pytest.raises(RuntimeError) as raised:
        for _ in range(3):
            x = x + 1
    error = raised.value
    assert "DefaultCPUAllocator: can't allocate memory" in str(error) and error.injected is True
    assert "injected by fault rule 'cpu:torch:nth=2:oom'" in str(error)
    verdict = classify(error)
    assert verdict.fault_class is FaultClass.RECOVERABLE and verdict.injected
    (record,) = inj.fired
    assert (record.device, record.op, record.call) == ("cpu", "torch", 2)


def test_sticky_raises_torchs_illegal_address_error_read_as_context_corrupting_and_injected() -> None:
    model, _, x, _ = model_and_data()
    with hetero.fault.inject("cpu:torch:nth=3:sticky"), pytest.raises(torch.AcceleratorError) as raised:
        for _ in range(5):
            model(x).sum()
    error = raised.value
    assert str(error).startswith("CUDA error: an illegal memory access was encountered") and error.error_code == 700
    verdict = classify(error)
    assert verdict.fault_class is FaultClass.CONTEXT_CORRUPTING and verdict.sticky and verdict.injected
    found = recognise(error, hetero.device("cpu"))
    assert found is not None and found.error.injected and found.error.code == 700


@pytest.mark.parametrize(("kind", "fault_class", "code"), [("lost", FaultClass.DEVICE_LOST, 100),
                                                            ("degraded", FaultClass.DEGRADED, 214)])
def test_lost_and_degraded_are_torchs_spellings_of_those_faults(kind: str, fault_class: FaultClass, code: int) -> None:
    with hetero.fault.inject(f"cpu:torch:nth=1:{kind}"), pytest.raises(torch.AcceleratorError) as raised:
        torch.ones(2).sum()
    assert raised.value.error_code == code and classify(raised.value).fault_class is fault_class


def test_only_torch_ops_on_the_rules_device_count() -> None:
    on_cpu, on_meta = torch.ones(4), torch.ones(4, device="meta")  # meta: a torch device no hetero device maps to
    with hetero.fault.inject("cpu:torch:every=1000:oom") as inj:
        rule = inj.rules[0]
        for _ in range(5):
            on_cpu.add(1)  # counts
            on_meta.add(1)  # another torch device: does not
            _ = on_cpu.shape, on_cpu.grad  # property reads are no ops
        torch.manual_seed(3)  # no tensor: no device
        torch.add(on_cpu, on_cpu)  # counts
        torch.zeros(2, device="cpu")  # its device= names cpu: counts
        counted = inj.calls(rule)
    assert counted == {"cpu": 7}


def test_every_counts_per_device_and_fires_each_time() -> None:
    x = torch.ones(2)
    fired = 0
    with hetero.fault.inject("cpu:torch:every=3:degraded") as inj:
        for _ in range(9):
            try:
                x.mul(2)
            except torch.AcceleratorError:
                fired += 1
    assert fired == 3 and [r.call for r in inj.fired] == [3, 6, 9]


def test_no_mode_without_a_torch_rule() -> None:
    assert mode_stack() == 0
    with hetero.fault.inject("cpu:launch:nth=999999:lost"):
        assert mode_stack() == 0  # a block without torch rules leaves torch untouched
        torch.ones(3).sum()
    with hetero.fault.inject("cpu:torch:nth=999999:lost; cpu:launch:nth=999999:lost"):
        assert mode_stack() == 1
    assert mode_stack() == 0


def test_leaving_a_block_keeps_a_mode_the_program_pushed_inside_it() -> None:
    class Theirs(torch.overrides.TorchFunctionMode):
        pass

    theirs = Theirs()
    with hetero.fault.inject("cpu:torch:nth=999999:lost"):
        theirs.__enter__()
    try:
        assert mode_stack() == 1 and torch._C._get_function_stack_at(0) is theirs
    finally:
        theirs.__exit__(None, None, None)
    assert mode_stack() == 0


def test_a_torch_rule_that_never_fired_warns_with_the_calls_it_saw(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "hetero.fault.injection"), hetero.fault.inject("cpu:torch:nth=100000:oom"):
        for _ in range(4):
            torch.ones(2).add(1)  # the factory (no tensor, no device=) is no op on a device; add is
    (told,) = [r.getMessage() for r in caplog.records if "never fired" in r.getMessage()]
    assert "'cpu:torch:nth=100000:oom'" in told and "torch calls seen: 4 on cpu" in told


def test_a_torch_rule_for_an_absent_gpu_is_taken_as_a_launch_rule_is_and_warns(
        caplog: pytest.LogCaptureFixture) -> None:
    if any(d.backend == "cuda" for d in hetero.devices()):
        pytest.skip("this machine has a CUDA device")
    with caplog.at_level(logging.WARNING, "hetero.fault.injection"):
        with hetero.fault.inject("cuda:0:launch:nth=1:lost"):
            pass
        with hetero.fault.inject("cuda:0:torch:nth=1:lost"):
            torch.ones(2).sum()  # a cpu tensor: not cuda:0's
    told = [r.getMessage() for r in caplog.records if "never fired" in r.getMessage()]
    assert len(told) == 2 and "no device it names was opened" in told[1] and "cuda:0:torch" in told[1]


@pytest.mark.parametrize("what", ["cuda:700", "xid:79"])
def test_a_torch_rule_takes_no_vendor_code_or_xid(what: str) -> None:
    with pytest.raises(ConfigError, match="cannot apply to op 'torch'"):
        hetero.fault.inject(f"cuda:0:torch:nth=1:{what}")


@pytest.mark.parametrize("order", ["import hetero, torch", "import torch, hetero"])
def test_configured_torch_rules_fire_in_a_pure_torch_program(order: str) -> None:
    code = (f"{order}\n"
            "x = torch.ones(3)\n"
            "try:\n"
            "    for _ in range(10): x = x + 1\n"
            "except RuntimeError as e:\n"
            "    print('raised', e.injected, hetero.fault.classify(e).fault_class)\n")
    env = {**os.environ, "HETERO_FAULTS": "cpu:torch:nth=5:oom"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "raised True recoverable" in result.stdout, result.stdout + result.stderr


def test_import_hetero_without_torch_rules_installs_nothing() -> None:
    code = ("import sys, hetero, torch\n"
            "with hetero.fault.inject('cpu:alloc:nth=999999:oom'): torch.ones(2).sum()\n"
            "assert torch._C._len_torch_function_stack() == 0\n"
            "assert 'hetero.torch.injection' not in sys.modules\n")
    env = {**os.environ, "HETERO_FAULTS": "cpu:launch:nth=999999:lost"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr


def test_a_backend_opening_in_another_thread_leaves_the_mode_where_it_was() -> None:
    import threading

    from hetero.fault.injection import torch_injections
    from hetero.core.injection_hooks import TORCH_RULES_CHANGED

    with hetero.fault.inject("cpu:torch:nth=999999:lost"):
        worker = threading.Thread(target=lambda: TORCH_RULES_CHANGED.call(torch_injections()))  # as apply_at_open
        worker.start()
        worker.join(30)
        assert mode_stack() == 1
    assert mode_stack() == 0  # removed from this thread's stack, not lost to the other thread's
