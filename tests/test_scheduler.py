"""Placement policies on a synthetic table of 16 devices: pure scheduler code, no device and
no vendor library (a subprocess checks ``sys.modules``)."""

from __future__ import annotations

import dataclasses
import pickle
import textwrap

import pytest

from hetero.core.device import DeviceInfo, HealthState, Kind
from hetero.scheduler import Candidate, NoDeviceAvailable, Request, assign, decide, explain, get_policy, parse_size, static_speed
from tests.conftest import run_python

GiB = 1 << 30


def info(name: str, kind: Kind, vendor: str, memory_gib: float, units: int) -> DeviceInfo:
    backend, _, index = name.partition(":")
    return DeviceInfo(name=name, backend=backend, index=int(index or 0), vendor=vendor, kind=kind, model=f"model {name}",
                      memory=int(memory_gib * GiB), compute_units=units, max_work_group_size=1024, fp64=True,
                      driver_version="1", stable_id=f"uuid-{name.replace(':', '-')}")


def table() -> list[Candidate]:
    """16 devices in configured order: GPUs of three vendors, an accelerator, CPUs."""
    infos = [info(f"cuda:{i}", Kind.GPU, "NVIDIA", 80, 132) for i in range(6)]
    infos += [info(f"rocm:{i}", Kind.GPU, "AMD", 64, 104) for i in range(4)]
    infos += [info(f"oneapi:{i}", Kind.GPU, "Intel", 48, 64) for i in range(2)]
    infos += [info("opencl:0", Kind.ACCELERATOR, "Xilinx", 16, 20)]
    infos += [info("opencl:1", Kind.CPU, "PoCL", 32, 16), info("oneapi:2", Kind.CPU, "Intel", 256, 64)]
    infos += [info("cpu", Kind.CPU, "Intel", 512, 64)]
    assert len(infos) == 16
    return [Candidate(i, order=n) for n, i in enumerate(infos)]


def with_(candidates: list[Candidate], name: str, **changes: object) -> list[Candidate]:
    return [dataclasses.replace(c, **changes) if c.name == name else c for c in candidates]  # type: ignore[arg-type]


def winner(candidates: list[Candidate], policy: str, **request: object) -> str | None:
    found = decide(Request(**request), policy, candidates).winner  # type: ignore[arg-type]
    return found.name if found else None


# -- each policy ------------------------------------------------------------------------
def test_first_fit_takes_the_first_eligible_in_configured_order() -> None:
    devices = table()
    assert winner(devices, "first-fit") == "cuda:0"
    devices = with_(devices, "cuda:0", used=79 * GiB)
    assert winner(devices, "first-fit", memory="2GiB") == "cuda:1"
    assert winner(devices, "first-fit", kinds=("cpu",)) == "opencl:1"


def test_binpack_fills_the_most_used_device_that_fits() -> None:
    devices = with_(with_(table(), "cuda:3", used=40 * GiB, tasks=2), "rocm:1", used=60 * GiB, tasks=1)
    assert winner(devices, "binpack") == "rocm:1"  # 60/64 used beats 40/80
    assert winner(devices, "binpack", memory="8GiB") == "cuda:3"  # rocm:1 has only 4 GiB free
    assert winner(devices, "binpack", memory="50GiB") == "cuda:0"  # nothing used fits: ties go by order


def test_spread_takes_the_least_used_device() -> None:
    devices = [dataclasses.replace(c, used=GiB * (16 - c.order), tasks=1) for c in table()]
    assert winner(devices, "spread") == "cpu"  # 1 GiB of 512 is the lowest load
    devices = with_(devices, "cpu", used=500 * GiB)
    assert winner(devices, "spread") == "oneapi:2"
    even = [dataclasses.replace(c, tasks=1 if c.order < 3 else 0) for c in table()]
    assert winner(even, "spread", kinds=("gpu",)) == "cuda:3"  # no memory used: fewer tasks wins


class FakeCostModel:
    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.calls: list[tuple[str, str, int]] = []

    def predict(self, kernel_key: str, device_stable_id: str, n: int) -> float | None:
        self.calls.append((kernel_key, device_stable_id, n))
        return self.seconds.get(device_stable_id)


def test_fastest_uses_the_cost_model_times_the_queue() -> None:
    from hetero.scheduler.policies import rank

    devices = table()
    seconds = {c.info.stable_id: 1.0 for c in devices} | {"uuid-rocm-2": 0.2, "uuid-cuda-5": 0.3}
    model = FakeCostModel(seconds)
    ranking = rank(devices, Request(kernel="saxpy@abc", n=1 << 20), get_policy("fastest"), model)
    assert ranking.winner is not None and ranking.winner.name == "rocm:2"
    assert ("saxpy@abc", "uuid-rocm-2", 1 << 20) in model.calls
    busy = with_(devices, "rocm:2", tasks=1)  # 0.2 s x 2 waits longer than 0.3 s
    assert rank(busy, Request(kernel="saxpy@abc", n=1 << 20), get_policy("fastest"), model).winner.name == "cuda:5"  # type: ignore[union-attr]


def test_fastest_scores_made_with_its_predictions_are_those_score_gives_and_say_their_model() -> None:
    from hetero.scheduler.explanation import explanation
    from hetero.scheduler.policies import Predictions, rank

    devices = [dataclasses.replace(c, tasks=c.order % 3) for c in table()]
    model = FakeCostModel({c.info.stable_id: 1e-3 * (1 + c.order % 5) for c in devices})
    fastest, request = get_policy("fastest"), Request(kernel="saxpy@abc", n=1 << 20)
    context = fastest.prepare(devices, request, model)
    assert type(context) is Predictions
    assert fastest.scores(devices, request, context) == [fastest.score(c, request, context) for c in devices]
    others = devices[::-1]  # another list: scored afresh, not given the prepared list's scores
    assert fastest.scores(others, request, context) == [fastest.score(c, request, context) for c in others]
    assert rank(devices, request, fastest, model, full=False).winner == rank(devices, request, fastest, model).winner
    together, leads = fastest.context_and_leads(devices, request, model)  # a placement's one pass
    assert together.seconds == context.seconds and together.model == context.model
    assert leads == fastest.leads(devices, request, context) == [(s, c.order) for c, (s,) in
                                                                  zip(devices, fastest.scores(devices, request, context))]
    missing = FakeCostModel({c.info.stable_id: 1e-3 for c in devices[:-1]})  # no prediction for the last one
    fallback, leads = fastest.context_and_leads(devices, request, missing)
    assert type(fallback) is not Predictions and leads == fastest.leads(devices, request, fallback)
    assert explanation(rank(devices, request, fastest, model)).model.startswith("cost model: times measured for saxpy@abc")


def test_fastest_without_a_prediction_for_every_device_uses_static_speed() -> None:
    from hetero.scheduler.explanation import explanation
    from hetero.scheduler.policies import rank

    devices = table()
    model = FakeCostModel({"uuid-cpu": 1e-6})  # only the CPU was calibrated
    ranking = rank(devices, Request(kernel="k", n=10), get_policy("fastest"), model)
    assert ranking.winner is not None and ranking.winner.name == "cuda:0"  # 132 CU x gpu 8
    assert static_speed(devices[0]) == 132 * 8
    why = explanation(ranking).why
    assert why.endswith("(static speed estimate: the cost model has no prediction for cuda:0 (hetero calibrate))")
    assert "static 1056 (132 CU x gpu 8)" in why
    assert explain(Request(), "fastest", devices).why.endswith("(static speed estimate: the request names no kernel and size (kernel=, n=))")


def test_priority_high_takes_devices_low_ones_hold_and_low_ones_queue() -> None:
    devices = [dataclasses.replace(c, held_by="low", holders=(f"job{c.order}",), tasks=1) for c in table()]
    devices = with_(devices, "cuda:2", held_by="high", holders=("urgent",))
    assert winner(devices, "priority", priority="high") == "cuda:0"
    ranking = decide(Request(priority="low"), "priority", devices)
    assert ranking.winner is None and ranking.queued
    reasons = {c.name: why for c, why in ranking.rejected}
    assert "low requests queue" in reasons["cuda:0"]
    assert reasons["cuda:2"] == "held by high-priority urgent"
    free = with_(devices, "oneapi:1", held_by=None, holders=(), tasks=0)
    assert winner(free, "priority", priority="low") == "oneapi:1"
    assert winner(free, "priority", priority="high") == "oneapi:1"  # a free device before taking one


def test_priority_normal_shares_its_own_class_after_free_and_lower_ones() -> None:
    devices = [dataclasses.replace(c, held_by="normal", holders=("a",), tasks=1) for c in table()[:3]]
    devices = with_(devices, "cuda:1", held_by="low")
    assert winner(devices, "priority") == "cuda:1"  # takes from low before sharing with normal
    devices = with_(devices, "cuda:1", held_by="high")
    assert winner(devices, "priority") == "cuda:0"  # shares with normal; high-held is refused


# -- what no policy may choose ---------------------------------------------------------------
@pytest.mark.parametrize("policy", ["first-fit", "binpack", "spread", "fastest", "priority"])
def test_quarantined_unhealthy_and_excluded_devices_are_never_chosen(policy: str) -> None:
    devices = with_(with_(table(), "cuda:0", quarantined=True), "cuda:1", health=HealthState.UNHEALTHY)
    devices = [dataclasses.replace(c, quarantined=True) if c.info.kind is Kind.GPU and c.order > 1 else c for c in devices]
    chosen = [info.name for info in assign(8, policy, devices, exclude=("opencl:0", "uuid-cpu"))]
    assert chosen and not {"cuda:0", "cuda:1", "opencl:0", "cpu"} & set(chosen)
    assert all(name in ("opencl:1", "oneapi:2") for name in chosen)


def test_degraded_devices_are_a_last_resort() -> None:
    devices = with_(table(), "cuda:0", health=HealthState.DEGRADED)
    assert winner(devices, "first-fit") == "cuda:1"
    only = with_(table()[:1], "cuda:0", health=HealthState.DEGRADED)
    assert winner(only, "first-fit") == "cuda:0"


def test_preferences_order_the_accepted_kinds() -> None:
    devices = table()
    assert winner(devices, "first-fit", kinds=("cpu", "gpu")) == "opencl:1"
    assert winner(devices, "spread", vendors=("amd", "nvidia")) == "rocm:0"
    full = [dataclasses.replace(c, used=c.info.memory) if c.info.kind is Kind.CPU else c for c in devices]
    assert winner(full, "first-fit", kinds=("cpu", "accelerator"), memory=1) == "opencl:0"


def test_ties_are_broken_by_configured_order_whatever_the_input_order() -> None:
    devices = table()
    for policy in ("first-fit", "binpack", "spread", "fastest", "priority"):
        assert winner(devices, policy, backends=("rocm",)) == "rocm:0"
        assert winner(list(reversed(devices)), policy, backends=("rocm",)) == "rocm:0"


@pytest.mark.parametrize("policy", ["first-fit", "binpack", "spread", "fastest", "priority"])
def test_the_winner_alone_is_the_head_of_the_full_ranking_even_when_orders_tie(policy: str) -> None:
    """rank(full=False) decides on the key's head and builds the whole key only for the winner or
    for devices tied on the head: the same winner and key as the full ranking's first, also when
    candidates (built by hand) share an order and the name decides."""
    from hetero.scheduler import get_policy, rank

    class Model:
        def predict(self, kernel: str, stable_id: str, n: int) -> float:
            return 1.0

    same_order = [dataclasses.replace(c, order=3) for c in table()]  # "cpu", last in the list, wins by name
    loaded = with_(with_(table(), "cuda:2", used=40 * GiB, tasks=1), "rocm:1", health=HealthState.DEGRADED)
    for devices in (table(), same_order, list(reversed(same_order)), loaded, list(reversed(loaded))):
        request = Request(memory=GiB, kernel="k@0", n=1 << 20)
        alone = rank(devices, request, get_policy(policy), Model(), full=False)
        everything = rank(devices, request, get_policy(policy), Model())
        assert alone.ranked == everything.ranked[:1]
    assert rank(same_order, Request(), get_policy("first-fit"), full=False).winner.name == "cpu"  # type: ignore[union-attr]


def test_a_placement_picks_what_the_full_ranking_puts_first_on_random_tables() -> None:
    """rank(full=False) decides on each policy's leads and builds whole keys only for its winner
    (or, for a degraded leader, shared orders or preferences, for all): over random tables with
    ties, holds, degraded devices, custom policies and preferences it picks the full ranking's
    first, and its reasons for rejections are the full ranking's."""
    import random

    from hetero.scheduler import Policy, rank

    class Model:
        def __init__(self, seed: int) -> None:
            self.seed = seed

        def predict(self, kernel: str, stable_id: str, n: int) -> float:
            return float((hash(stable_id) + self.seed) % 3 + 1)  # few values: ties on the score

    class Custom(Policy):  # a user's policy: score tuples of two lengths, the default leads
        name = "custom"

        def score(self, candidate: Candidate, request: Request, context: object) -> tuple[int, ...]:
            return (candidate.tasks,) if candidate.tasks % 2 else (candidate.tasks, -candidate.order)

    rng = random.Random(19)
    policies = [get_policy(name) for name in ("first-fit", "binpack", "spread", "fastest", "priority")] + [Custom()]
    for trial in range(300):
        devices = [dataclasses.replace(c, used=rng.choice((0, 0, 1, 5, 30)) * GiB, tasks=rng.choice((0, 0, 1, 2)),
                                       order=rng.choice((c.order, c.order, rng.randrange(4))),
                                       health=rng.choice([HealthState.OK] * 4 + [HealthState.DEGRADED, HealthState.UNHEALTHY]),
                                       held_by=rng.choice((None, None, "low", "normal", "high")),
                                       quarantined=rng.random() < 0.1) for c in table()]
        rng.shuffle(devices)
        request = Request(memory=rng.choice((0, GiB, 20 * GiB)), priority=rng.choice(("low", "normal", "high")),
                          kernel="k@0" if trial % 3 else None, n=1 << 20,
                          kinds=rng.choice(((), (), ("cpu", "gpu"), ("gpu",))))
        for policy in policies:
            alone = rank(devices, request, policy, Model(trial), full=False)
            everything = rank(devices, request, policy, Model(trial))
            assert alone.ranked == everything.ranked[:1], (trial, policy.name)
            assert alone.rejected == everything.rejected and alone.queued == everything.queued


def test_priority_admits_what_its_reject_does_not_refuse() -> None:
    """Priority.admit, the placement's table of reject's rule, agrees with reject for every pair
    of classes (and for free devices)."""
    priority = get_policy("priority")
    for mine in ("low", "normal", "high"):
        held = [dataclasses.replace(c, held_by=theirs) for c, theirs in zip(table(), (None, "low", "normal", "high"))]
        request = Request(priority=mine)
        assert priority.admit(held, request) == [c for c in held if priority.reject(c, request) is None], mine


def test_no_device_error_lists_every_reason_and_pickles() -> None:
    devices = with_(table()[:2], "cuda:0", quarantined=True)
    with pytest.raises(NoDeviceAvailable) as caught:
        assign(1, "first-fit", devices, request=Request(memory="100GiB"))
    text = str(caught.value)
    assert "cuda:0 quarantined" in text and "cuda:1 needs 100 GiB, 80 GiB free of 80 GiB" in text
    assert not caught.value.queued
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, NoDeviceAvailable) and again.detail == caught.value.detail


# -- assign (the launcher's) ----------------------------------------------------------------
def test_assign_spread_deals_round_robin_and_binpack_fills_first() -> None:
    gpus = table()[:4]
    assert [i.name for i in assign(6, "spread", gpus)] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1"]
    assert [i.name for i in assign(3, "binpack", gpus)] == ["cuda:0"] * 3
    fitted = assign(5, "binpack", gpus, request=Request(memory="30GiB"))
    assert [i.name for i in fitted] == ["cuda:0", "cuda:0", "cuda:1", "cuda:1", "cuda:2"]  # 80 GiB holds two
    assert [i.name for i in assign(2, "first-fit", gpus, exclude=("cuda:0",))] == ["cuda:1", "cuda:1"]
    assert assign(0, "spread", gpus) == []


def test_assign_fastest_deals_in_proportion_to_speed() -> None:
    devices = [table()[0], table()[15]]  # 1056 vs 64: a GPU takes many workers before the CPU gets one
    names = [i.name for i in assign(20, "fastest", devices)]
    assert names.count("cpu") == 1 and names.index("cpu") == 16  # after 16 GPU workers: 17/1056 > 1/64


# -- explain -----------------------------------------------------------------------------
GOLDEN = textwrap.dedent("""\
    placement by binpack for memory=8 GiB, priority=normal
    rank  device    kind         health     memory  used    tasks  score                note
    1     cuda:2    gpu          ok         80 GiB  40 GiB  2      load 50.0%, 2 tasks  winner
    2     cuda:3    gpu          ok         80 GiB  40 GiB  1      load 50.0%, 1 task
    3     opencl:0  accelerator  ok         16 GiB  0 B     0      load 0.0%, 0 tasks
    4     cuda:4    gpu          degraded   80 GiB  70 GiB  3      load 87.5%, 3 tasks
    -     cuda:0    gpu          ok         80 GiB  0 B     0                           rejected: quarantined (see `hetero quarantine`)
    -     cuda:1    gpu          unhealthy  80 GiB  0 B     0                           rejected: unhealthy: Xid 79
    -     cuda:5    gpu          ok         80 GiB  76 GiB  1                           rejected: needs 8 GiB, 4 GiB free of 80 GiB
    cuda:2 won: binpack fills the most-used device that fits; load 50.0%, 2 tasks; ahead of cuda:3 (load 50.0%, 1 task) by a better score""")


def test_explain_is_a_stable_table() -> None:
    devices = table()
    devices = with_(devices, "cuda:0", quarantined=True)
    devices = with_(devices, "cuda:1", health=HealthState.UNHEALTHY, health_reason="Xid 79")
    devices = with_(devices, "cuda:2", used=40 * GiB, tasks=2)
    devices = with_(devices, "cuda:3", used=40 * GiB, tasks=1)
    devices = with_(devices, "cuda:4", used=70 * GiB, tasks=3, health=HealthState.DEGRADED)
    devices = with_(devices, "cuda:5", used=76 * GiB, tasks=1)
    pool = [c for c in devices if c.name.startswith("cuda")] + [c for c in devices if c.name == "opencl:0"]
    explanation = explain(Request(memory="8GiB"), "binpack", pool)
    assert str(explanation) == GOLDEN
    assert explanation.winner == "cuda:2"
    assert explanation.as_dict()["rows"][4]["note"].startswith("rejected: quarantined")


def test_explain_says_when_ties_fall_to_the_configured_order() -> None:
    text = explain(Request(), "spread", table()[:2]).why
    assert text.endswith("ahead of cuda:1 (load 0.0%, 0 tasks) by a tie on score, broken by the configured device order")
    assert explain(Request(), "first-fit", table()[:2]).why.endswith("by the configured device order")


def test_explain_of_a_queued_request() -> None:
    held = [dataclasses.replace(c, held_by="normal", holders=("train",), tasks=1) for c in table()[:2]]
    explanation = explain(Request(priority="low"), "priority", held)
    assert explanation.queued and explanation.winner is None
    assert explanation.why.startswith("queued: every device that fits is held by other tasks")


# -- requests ---------------------------------------------------------------------------------
def test_request_validation_names_the_field_and_the_choices() -> None:
    with pytest.raises(ValueError, match="priority 'urgent' is not one of low, normal, high"):
        Request(priority="urgent")
    with pytest.raises(ValueError, match="kinds has 'gpus'.*did you mean 'gpu'"):
        Request(kinds=("gpus",))
    with pytest.raises(ValueError, match="unknown placement policy 'bin-pack'.*did you mean 'binpack'"):
        get_policy("bin-pack")
    assert Request(kinds="GPU", memory="1.5 GiB").kinds == ("gpu",)
    assert parse_size("512MiB") == 512 << 20 and parse_size("1g") == GiB and parse_size(4096) == 4096
    with pytest.raises(ValueError, match="is not a size; write bytes or e.g."):
        parse_size("3 parsecs")


def test_policies_agree_with_the_config_choices() -> None:
    from hetero.core.config import POLICIES

    assert [get_policy(name).name for name in POLICIES] == list(POLICIES)


def test_scheduler_imports_no_vendor_library() -> None:
    import inspect

    setup = "from hetero.core.device import DeviceInfo, Kind\nfrom hetero.scheduler import Candidate\nGiB = 1 << 30\n"
    setup += inspect.getsource(info) + inspect.getsource(table)
    code = setup + textwrap.dedent("""
        import sys
        from hetero.scheduler import Request, assign, explain
        for policy in ("first-fit", "binpack", "spread", "fastest", "priority"):
            str(explain(Request(memory="1GiB", kernel="k", n=100), policy, table()))
            assign(4, policy, table())
        vendor = {"pyopencl", "cupy", "numba", "torch", "pynvml", "cuda", "amdsmi", "llvmlite"} & set(sys.modules)
        print(sorted(vendor))
        """)
    result = run_python(code)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
