"""The fault event bus: publish, recent history, subscriptions (blocking iteration, close,
kind filters), thread safety and logging."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import hetero
from hetero.fault import event_bus
from hetero.fault.event_bus import EventBus


def test_publish_returns_the_event_with_timestamps_and_fields() -> None:
    bus = EventBus()
    before_wall, before_mono = time.time(), time.monotonic()
    event = bus.publish("xid", xid=79, device="cuda:0")
    assert event["kind"] == "xid" and event["xid"] == 79 and event["device"] == "cuda:0"
    assert before_wall <= event["time"] <= time.time()
    assert before_mono <= event["monotonic"] <= time.monotonic()
    assert bus.recent() == [event]


def test_a_backend_timestamp_is_kept_but_kind_cannot_be_overridden() -> None:
    bus = EventBus()
    event = bus.publish("xid", time=123.0, xid=48)
    assert event["time"] == 123.0 and event["kind"] == "xid"


def test_bad_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        EventBus().publish("")


def test_recent_filters_by_kind_since_and_within() -> None:
    bus = EventBus()
    bus.publish("health", state="ok")
    old = bus.publish("xid", xid=31)
    old["monotonic"] -= 100  # as if published 100 s ago
    old["time"] -= 100
    new = bus.publish("xid", xid=79)
    assert [e["xid"] for e in bus.recent("xid")] == [31, 79]
    assert [e["kind"] for e in bus.recent(("xid", "health"))] == ["health", "xid", "xid"]
    assert bus.recent("xid", within=10) == [new]
    assert bus.recent("xid", since=new["time"] - 1) == [new]
    assert old not in bus.recent(since=time.time() - 50)


def test_history_is_bounded_oldest_first_out() -> None:
    bus = EventBus(history=3)
    for n in range(5):
        bus.publish("tick", n=n)
    assert [e["n"] for e in bus.recent()] == [2, 3, 4]
    bus.clear()
    assert bus.recent() == []


def test_subscription_sees_only_later_events_of_its_kinds() -> None:
    bus = EventBus()
    bus.publish("health", state="ok")
    with bus.events(kind="xid", timeout=0.05) as sub:
        bus.publish("health", state="degraded")
        bus.publish("xid", xid=13)
        bus.publish("xid", xid=79)
        assert [e["xid"] for e in sub] == [13, 79]  # ends after 0.05 s without an event
    assert sub.closed


def test_get_returns_none_on_timeout() -> None:
    bus = EventBus()
    with bus.events() as sub:
        assert sub.get(timeout=0.01) is None
        bus.publish("a")
        got = sub.get(timeout=1)
        assert got is not None and got["kind"] == "a"


def test_close_from_another_thread_ends_a_blocking_iteration() -> None:
    bus = EventBus()
    sub = bus.events()  # no timeout: blocks until closed
    received: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: received.extend(sub))
    reader.start()
    bus.publish("one")
    time.sleep(0.05)
    sub.close()
    reader.join(5)
    assert not reader.is_alive()
    assert [e["kind"] for e in received] == ["one"]
    bus.publish("after-close")
    assert sub.get(timeout=0.01) is None  # a closed subscription receives nothing more


def test_closed_subscriptions_are_dropped_from_the_bus() -> None:
    bus = EventBus()
    with bus.events():
        assert len(bus._subscribers) == 1
    assert bus._subscribers == []


def test_publishers_in_many_threads_lose_nothing() -> None:
    bus = EventBus(history=10_000)
    threads, per_thread = 8, 250
    with bus.events(kind="n") as sub:
        workers = [threading.Thread(target=lambda t=t: [bus.publish("n", t=t, i=i) for i in range(per_thread)])
                   for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        got = sub.pending()
    assert len(got) == threads * per_thread == len(bus.recent("n"))
    for t in range(threads):  # each publisher's events arrive in its order
        assert [e["i"] for e in got if e["t"] == t] == list(range(per_thread))


def test_a_slow_subscriber_drops_its_oldest_events_not_the_publisher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_bus, "SUBSCRIBER_BACKLOG", 4)
    bus = EventBus()
    with bus.events() as sub:
        for n in range(10):
            bus.publish("n", n=n)
        assert [e["n"] for e in sub.pending()] == [6, 7, 8, 9]
        assert sub.dropped == 6


def test_every_event_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hetero.fault.events"):
        EventBus().publish("quarantined", device="cuda:1", reason="Xid 79")
    assert any("quarantined" in r.getMessage() and "cuda:1" in r.getMessage() and r.levelno == logging.INFO
               for r in caplog.records)


def test_module_functions_use_the_process_bus() -> None:
    with hetero.fault.events(kind="test-module-bus", timeout=1) as sub:
        event = hetero.fault.publish("test-module-bus", value=1)
        assert sub.get(timeout=1) is event
    assert event in hetero.fault.recent("test-module-bus")
