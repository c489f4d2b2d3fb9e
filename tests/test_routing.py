"""hetero.scheduler.Router: which pool member takes the next request, by policy."""

from __future__ import annotations

import threading

import pytest

from hetero.core.errors import ConfigError
from hetero.scheduler.routing import Router


def test_least_outstanding_spreads_and_prefers_the_idle() -> None:
    router = Router(["a", "b", "c"])
    assert [router.acquire() for _ in range(3)] == ["a", "b", "c"]
    router.release("b", 0.01)
    assert router.acquire() == "b"


def test_round_robin_takes_turns_and_skips_disabled() -> None:
    router = Router(["a", "b", "c"], "round-robin")
    picks = []
    for _ in range(4):
        name = router.acquire()
        picks.append(name)
        router.release(name, 0.001)
    assert picks == ["a", "b", "c", "a"]
    router.disable("b")
    picks = [router.acquire() for _ in range(3)]
    assert picks == ["c", "a", "c"]


def test_fastest_measures_each_then_prefers_the_quick_one() -> None:
    router = Router(["slow", "quick"], "fastest")
    for name, seconds in (("slow", 0.1), ("quick", 0.001)):
        assert router.acquire() == name
        router.release(name, seconds)
    assert router.acquire() == "quick"
    assert router.acquire() == "quick"  # (2 x 0.001) still beats (0 + 1) x 0.1


def test_exclude_disable_enable_and_none_left() -> None:
    router = Router(["a", "b"])
    assert router.acquire(exclude=["a"]) == "b"
    router.disable("a")
    router.disable("b")
    assert router.acquire() is None
    router.enable("a")
    assert router.acquire() == "a" and router.enabled() == ["a"]


def test_unknown_policy_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="least-outstanding, round-robin, fastest.*did you mean 'round-robin'"):
        Router(["a"], "round-robbin")


def test_counts_stay_exact_under_threads() -> None:
    router = Router(["a", "b", "c"])

    def work() -> None:
        for _ in range(2000):
            router.release(router.acquire() or "a", 0.0)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert all(load.outstanding == 0 for load in router.loads())
