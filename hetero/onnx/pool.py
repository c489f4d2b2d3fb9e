"""``hetero.onnx.Pool``: one model on many devices; a request that meets a bad device is answered
by another.

    >>> pool = hetero.onnx.Pool("model.onnx", devices="all", replicas=2)
    >>> pool.run({"x": x})["y"]          # thread-safe; routed by hetero.scheduler.Router
    >>> pool.stats()                      # requests, failures, retries, latency percentiles per member

A member is a :class:`~hetero.onnx.Session` on a device (``replicas`` per device). Each request
goes to an enabled member by the routing policy (least outstanding requests by default). When an
attempt fails, the error is classified (:func:`hetero.fault.classify`); a device fault puts the
device in quarantine (its class's TTL, or ``quarantine_ttl``; an injected fault stays within the
drill), takes all its members out of routing, and the request is tried again on another member,
up to ``retries`` more times. A request that cannot complete raises
:class:`~hetero.onnx.errors.InferenceFailedError` with each attempt in ``history``; an error that
is not a device fault (a model bug) is not retried. Nothing is answered twice: an attempt that
raised produced no answer. A device leaves quarantine (released by hand: ``hetero quarantine release``) or its
entry expires, and once a probe inference on zeros answers on each of its members it rejoins
(an expired entry is released then: the probe is its health check); devices
quarantined by anyone else (the monitor, another process) leave routing too.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.device import Device, HealthState
from hetero.fault import event_bus, quarantine
from hetero.fault.classify import Classification, classify
from hetero.onnx import providers as _providers
from hetero.onnx.errors import Attempt, InferenceFailedError, InputError
from hetero.onnx.feeds import prepare
from hetero.onnx.pool_stats import MemberStats, PoolStats
from hetero.onnx.session import ModelSource, Session, model_bytes, onnxruntime, probe_feeds
from hetero.onnx.spec import TensorSpec
from hetero.scheduler.routing import DEFAULT_ROUTING, Router

log = logging.getLogger("hetero.onnx")

#: How often the rejoin watcher looks at benched devices, and how often quarantine is re-read.
REJOIN_POLL = 0.02
EXTERNAL_POLL = 0.25


@dataclasses.dataclass
class Member:
    name: str
    session: Session

    @property
    def device(self) -> Device:
        return self.session.device


@dataclasses.dataclass
class Bench:
    """Why a device is out of routing: its classification (None: quarantined by someone else)."""

    reason: str
    classification: Classification | None
    since: float


class Pool:
    """Sessions of one model on several devices, with routing, failover and rejoin.

    ``devices``: ``"all"`` (every device with an installed provider, quarantined ones benched until
    released) or a list of devices/names. ``replicas``: sessions per device. ``retries``: extra
    attempts per request. ``timeout``: seconds a request waits for a healthy member. ``fallback``,
    ``threads``: as for :class:`Session`. ``quarantine_ttl``: seconds a faulty device stays out
    (None: its fault class's TTL). ``name``: the model's name (for servers and metrics).
    """

    def __init__(self, model: ModelSource, devices: str | Sequence[str | Device] = "all", *,
                 policy: str = DEFAULT_ROUTING, replicas: int = 1, retries: int = 3, timeout: float = 30.0,
                 fallback: str | None = None, threads: int | None = None, quarantine_ttl: float | None = None,
                 name: str = "model") -> None:
        if replicas < 1 or retries < 0:
            raise ValueError(f"replicas must be >= 1 and retries >= 0, got replicas={replicas}, retries={retries}")
        data = model_bytes(model)
        self.name = name
        self.retries = retries
        self.timeout = timeout
        self.quarantine_ttl = quarantine_ttl
        self._data, self._fallback, self._threads = data, fallback, threads
        self._members: dict[str, Member] = {}
        for device in self._targets(devices):
            for replica in range(replicas):
                session = Session(data, device, fallback=fallback, threads=threads)
                member = Member(f"{device.name}#{replica}", session)
                self._members[member.name] = member
        self._router = Router(list(self._members), policy)
        self._member_stats = {n: MemberStats(n, m.device.name) for n, m in self._members.items()}
        self._stats = PoolStats()
        first = next(iter(self._members.values())).session
        self.inputs: tuple[TensorSpec, ...] = first.inputs
        self.outputs: tuple[TensorSpec, ...] = first.outputs
        self._benched: dict[str, Bench] = {}  # device name -> why it is out
        self._cond = threading.Condition()
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._external_checked = 0.0
        self._check_external(force=True)

    # -- building -----------------------------------------------------------------------------
    def _targets(self, devices: str | Sequence[str | Device]) -> list[Device]:
        import hetero

        if devices != "all":
            if isinstance(devices, (str, Device)):
                devices = [devices]
            chosen = [d if isinstance(d, Device) else hetero.device(d) for d in devices]
            if not chosen:
                raise ValueError("a pool needs at least one device")
            return chosen
        ort = onnxruntime()
        found = []
        for device in hetero.devices():
            if _providers.choose(ort, device) is None:
                log.info("pool: %s left out: %s", device.name, _providers.remedy(device.backend))
                continue
            found.append(device)
        return found or [hetero.device("cpu")]

    # -- serving ------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any], outputs: Sequence[str] | None = None, *,
            timeout: float | None = None) -> dict[str, np.ndarray]:
        """Answer one request on a healthy member (see the module docstring). Thread-safe."""
        if self._closed:
            raise RuntimeError(f"pool {self.name!r} is closed")
        ready = prepare(feeds, self.inputs)
        if outputs is not None:
            outputs = next(iter(self._members.values())).session._check_outputs(outputs)
        self._stats.add("requests")
        self._check_external()
        history: list[Attempt] = []
        tried: set[str] = set()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            name = self._router.acquire(exclude=tried) or self._router.acquire()
            if name is None:
                self._wait_for_member(deadline, history)
                continue
            member = self._members[name]
            started = time.perf_counter()
            try:
                result = member.session.run_prepared(ready, outputs)
            except InputError:
                self._router.release(name)
                raise
            except Exception as error:  # noqa: BLE001 - classified below; the request goes on elsewhere
                seconds = time.perf_counter() - started
                self._router.release(name)
                self._member_stats[name].failed()
                verdict = classify(error)
                history.append(Attempt(name, member.device.name, seconds, f"{type(error).__name__}: {error}",
                                       str(verdict.fault_class), str(verdict.action)))
                if not verdict.is_fault:
                    self._stats.add("failures")
                    raise InferenceFailedError(f"request to {self.name!r} failed with an error that is not a device "
                                               "fault (not retried: it would fail on every device)", history) from error
                self._bench(member.device, error, verdict)
                if len(history) > self.retries:
                    self._stats.add("failures")
                    raise InferenceFailedError(f"request to {self.name!r} failed on {len(history)} attempts "
                                               f"(retry budget {self.retries})", history) from error
                self._stats.add("retries")
                tried.add(name)
                continue
            seconds = time.perf_counter() - started
            self._router.release(name, seconds)
            self._member_stats[name].answered(seconds)
            self._stats.add("answered")
            return result

    def _wait_for_member(self, deadline: float, history: list[Attempt]) -> None:
        with self._cond:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                self._stats.add("failures")
                out = ", ".join(f"{d} ({b.reason})" for d, b in self._benched.items()) or "none"
                raise InferenceFailedError(f"no healthy member of pool {self.name!r} within the timeout; out of "
                                           f"routing: {out}", history)
            self._cond.wait(min(remaining, 0.05))

    # -- benching and rejoining ---------------------------------------------------------------
    def _members_on(self, device_name: str) -> list[Member]:
        return [m for m in self._members.values() if m.device.name == device_name]

    def _bench(self, device: Device, error: BaseException, verdict: Classification | None) -> None:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if verdict is not None and verdict.quarantine:
            ttl = self.quarantine_ttl if self.quarantine_ttl is not None else verdict.ttl
            quarantine.add(device, f"hetero.onnx pool {self.name!r}: {reason}", verdict.fault_class, ttl=ttl,
                           injected=verdict.injected or getattr(error, "injected", False) is True)
        elif verdict is not None:
            return  # recoverable (out of memory): this request moves on, the device keeps serving
        with self._cond:
            if device.name in self._benched:
                return
            self._benched[device.name] = Bench(reason, verdict, time.monotonic())
            for member in self._members_on(device.name):
                self._router.disable(member.name)
            self._start_watcher()
        log.warning("pool %r: %s out of routing: %s", self.name, device.name, reason)
        event_bus.publish("pool-member-out", pool=self.name, device=device.name, reason=reason,
                          members=[m.name for m in self._members_on(device.name)])

    def _check_external(self, force: bool = False) -> None:
        """Bench devices someone else quarantined (read at most every EXTERNAL_POLL seconds)."""
        now = time.monotonic()
        if not force and now - self._external_checked < EXTERNAL_POLL:
            return
        self._external_checked = now
        ids = quarantine.quarantined_ids()
        for member in list(self._members.values()):
            if member.device.stable_id in ids and member.device.name not in self._benched:
                self._bench(member.device, RuntimeError("quarantined"), None)

    def _start_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name=f"hetero-pool-rejoin-{self.name}", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        while True:
            with self._cond:
                if self._closed or not self._benched:
                    self._watcher = None
                    return
                waiting = list(self._benched.items())
            for device_name, bench in waiting:
                members = self._members_on(device_name)
                entry = quarantine.entry(members[0].device) if members else None
                if not members or (entry is not None and not entry.expired()):
                    continue
                if self._probe(members, bench):
                    if entry is not None:  # expired: the probe is the health check that releases it
                        quarantine.release(members[0].device, f"expired, and a probe inference answered (hetero.onnx "
                                                              f"pool {self.name!r})")
                    with self._cond:
                        self._benched.pop(device_name, None)
                        for member in members:
                            self._router.enable(member.name)
                        self._cond.notify_all()
                    self._stats.add("rejoins")
                    log.info("pool %r: %s rejoined after a probe inference", self.name, device_name)
                    event_bus.publish("pool-member-rejoined", pool=self.name, device=device_name,
                                      members=[m.name for m in members])
            time.sleep(REJOIN_POLL)

    def _probe(self, members: list[Member], bench: Bench) -> bool:
        """Whether every member on a released device answers a probe inference (sessions rebuilt
        first when the fault left the device's context unusable)."""
        device = members[0].device
        if device.health().state is HealthState.UNHEALTHY:
            return False
        feeds = probe_feeds(self.inputs)
        for member in members:
            try:
                if bench.classification is not None and bench.classification.sticky:
                    member.session = Session(self._data, device, fallback=self._fallback, threads=self._threads)
                member.session.run(feeds)
            except Exception as error:  # noqa: BLE001 - the device stays out; the quarantine says why
                verdict = classify(error)
                self._stats.add("probe_failures")
                log.warning("pool %r: probe on %s failed: %s", self.name, device.name, error)
                ttl = self.quarantine_ttl if self.quarantine_ttl is not None else verdict.ttl
                quarantine.add(device, f"hetero.onnx pool {self.name!r}: probe failed: {error}",
                               verdict.fault_class if verdict.is_fault else "degraded", ttl=ttl,
                               injected=verdict.injected or getattr(error, "injected", False) is True)
                return False
        return True

    # -- looking in ---------------------------------------------------------------------------
    @property
    def members(self) -> list[Member]:
        return list(self._members.values())

    def ready(self) -> bool:
        """Whether some member takes requests now."""
        return bool(self._router.enabled())

    def health(self) -> list[dict[str, Any]]:
        enabled = set(self._router.enabled())
        return [{"member": m.name, "device": m.device.name, "healthy": m.name in enabled} for m in self._members.values()]

    def stats(self) -> dict[str, Any]:
        """Totals (requests, answered, failures, retries, rejoins, probe_failures) and per member: device, requests,
        failures, p50/p90/p99 latency in ms, healthy, outstanding."""
        loads = {load.name: load for load in self._router.loads()}
        members = {}
        for name, stats in self._member_stats.items():
            members[name] = {**stats.as_dict(), "healthy": loads[name].enabled, "outstanding": loads[name].outstanding}
        return {**self._stats.as_dict(), "members": members}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=5)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hetero.onnx.Pool {self.name!r}: {', '.join(self._members)}>"


__all__ = ["Member", "Pool"]
