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
(an expired entry is released then: the probe is its health check; a GPU whose context a
sticky fault corrupted fails it, and stays out for the process's life, as it must); devices
quarantined by anyone else (the monitor, another process) leave routing too. Each benched device
has its own recovery thread, which probes as soon as the entry expires.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hetero.core.device import Device, HealthState
from hetero.core.device_list import parse_devices
from hetero.core.errors import HeteroError
from hetero.fault import event_bus, ort_errors, quarantine
from hetero.fault.classify import Classification, classify
from hetero.onnx import providers as _providers
from hetero.onnx.errors import Attempt, InferenceFailedError, InputError, ModelError, NoMemberError
from hetero.onnx.feeds import prepare
from hetero.onnx.model_file import ModelSource, read_model
from hetero.onnx.pool_stats import Latencies, PoolEvents
from hetero.onnx.session import Session, onnxruntime, probe_feeds
from hetero.onnx.spec import TensorSpec
from hetero.scheduler.routing import DEFAULT_ROUTING, Router

log = logging.getLogger("hetero.onnx")

#: How often the quarantine is re-read for devices someone else quarantined; the longest a recovery
#: thread sleeps between looks at its device's entry (it wakes at the expiry when the entry has one).
EXTERNAL_POLL = 0.25
RECOVERY_POLL = 0.25


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
    released), a comma-separated string (``"cpu,oneapi:0"``, as the command line takes) or a list of
    devices/names. ``replicas``: sessions per device. ``retries``: extra
    attempts per request. ``timeout``: seconds a request waits for a healthy member. ``fallback``,
    ``partial``, ``threads``: as for :class:`Session`. ``quarantine_ttl``: seconds a faulty device stays out
    (None: its fault class's TTL). ``name``: the model's name (for servers and metrics).
    """

    def __init__(self, model: ModelSource, devices: str | Sequence[str | Device] = "all", *,
                 policy: str = DEFAULT_ROUTING, replicas: int = 1, retries: int = 3, timeout: float = 30.0,
                 fallback: str | None = None, partial: str = "refuse", threads: int | None = None,
                 quarantine_ttl: float | None = None, name: str = "model") -> None:
        if replicas < 1 or retries < 0:
            raise ValueError(f"replicas must be >= 1 and retries >= 0, got replicas={replicas}, retries={retries}")
        model = read_model(model)  # read once: every member runs the same bytes
        self.name = name
        self.retries = retries
        self.timeout = timeout
        self.quarantine_ttl = quarantine_ttl
        self._members: dict[str, Member] = {}
        #: devices ``all`` found but whose provider could not run the model: device name -> why
        self.left_out: dict[str, str] = {}
        for device, found in self._targets(devices):
            try:
                sessions = [Session(model, device, fallback=fallback, partial=partial, threads=threads)
                            for _ in range(replicas)]
            except ModelError:
                raise  # the model itself: every device would refuse it
            except Exception as error:
                if not found or not (isinstance(error, HeteroError) or ort_errors.is_ort_error(error)):
                    raise  # a device named on purpose is strict; a bug is not a device's problem
                self._leave_out(device, error)
                continue
            for replica, session in enumerate(sessions):
                self._members[f"{device.name}#{replica}"] = Member(f"{device.name}#{replica}", session)
        if not self._members:
            raise NoMemberError(name, self.left_out)
        self._router = Router(list(self._members), policy)
        self._latencies = {name: Latencies() for name in self._members}
        self._events = PoolEvents()
        first = next(iter(self._members.values())).session
        self.inputs: tuple[TensorSpec, ...] = first.inputs
        self.outputs: tuple[TensorSpec, ...] = first.outputs
        self._benched: dict[str, Bench] = {}  # device name -> why it is out
        self._recovering: dict[str, threading.Thread] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._external_checked = 0.0
        self._check_external(force=True)

    # -- building -----------------------------------------------------------------------------
    def _targets(self, devices: str | Sequence[str | Device]) -> list[tuple[Device, bool]]:
        """The devices ``devices`` names (:func:`hetero.core.device_list.parse_devices`: ``"cpu,oneapi:0"``
        or a list; ``all``: every device with an installed provider), each with whether ``all`` found
        it (then a provider that cannot run the model leaves it out; a device named on purpose must work)."""
        import hetero

        chosen: list[tuple[Device, bool]] = []
        for entry in parse_devices(devices):
            # the pool's candidates: a quarantined one is benched by the pool, not refused here
            found = (self._with_providers() if entry == "all" else
                     [entry if isinstance(entry, Device) else hetero.device(entry, allow_quarantined=True)])
            chosen += [(d, entry == "all") for d in found if all(d.name != c.name for c, _ in chosen)]
        return chosen

    def _leave_out(self, device: Device, error: BaseException) -> None:
        """Keep a device ``all`` found out of the pool: its provider cannot run the model (said once, here)."""
        why = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        self.left_out[device.name] = why
        log.warning("pool %r: %s left out: %s", self.name, device.name, why)
        event_bus.publish("pool-member-out", pool=self.name, device=device.name, reason=why, members=[])

    def _with_providers(self) -> list[Device]:
        """Every device with an installed ONNX Runtime provider (the CPU when none has one)."""
        import hetero

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
            timeout: float | None = None) -> dict[str, Any]:
        """Answer one request on a healthy member (see the module docstring). Thread-safe."""
        if self._closed:
            raise RuntimeError(f"pool {self.name!r} is closed")
        ready = prepare(feeds, self.inputs)
        if outputs is not None:
            outputs = next(iter(self._members.values())).session._check_outputs(outputs)
        if time.monotonic() - self._external_checked >= EXTERNAL_POLL:
            self._check_external()
        router = self._router
        name = router.acquire()
        if name is not None:  # the fast path: the first attempt
            started = time.perf_counter()
            try:
                result = self._members[name].session.run_prepared(ready, outputs)
            except InputError:
                router.release(name)
                raise
            except Exception as error:  # noqa: BLE001 - classified; the request goes on elsewhere
                history: list[Attempt] = []
                self._failed(name, error, time.perf_counter() - started, history)
                return self._retry(ready, outputs, timeout, history, {name})
            seconds = time.perf_counter() - started
            router.release(name, seconds)
            self._latencies[name].add(seconds)
            return result
        return self._retry(ready, outputs, timeout, [], set())

    def _retry(self, ready: Any, outputs: Sequence[str] | None, timeout: float | None, history: list[Attempt],
               tried: set[str]) -> dict[str, Any]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            name = self._router.acquire(exclude=tried) or self._router.acquire()
            if name is None:
                self._wait_for_member(deadline, history)
                continue
            started = time.perf_counter()
            try:
                result = self._members[name].session.run_prepared(ready, outputs)
            except InputError:
                self._router.release(name)
                raise
            except Exception as error:  # noqa: BLE001 - classified; the request goes on elsewhere
                self._failed(name, error, time.perf_counter() - started, history)
                tried.add(name)
                continue
            seconds = time.perf_counter() - started
            self._router.release(name, seconds)
            self._latencies[name].add(seconds)
            return result

    def _failed(self, name: str, error: Exception, seconds: float, history: list[Attempt]) -> None:
        """Account a failed attempt: classify, bench the device when it is at fault, and raise when
        the request must stop (no device fault, or the retry budget spent)."""
        member = self._members[name]
        self._router.release(name)
        verdict = classify(error)
        history.append(Attempt(name, member.device.name, seconds, f"{type(error).__name__}: {error}",
                               str(verdict.fault_class), str(verdict.action)))
        if not verdict.is_fault:
            self._events.add("failures")
            raise InferenceFailedError(f"request to {self.name!r} failed with an error that is not a device "
                                       "fault (not retried: it would fail on every device)", history) from error
        self._bench(member.device, error, verdict)
        if len(history) > self.retries:
            self._events.add("failures")
            raise InferenceFailedError(f"request to {self.name!r} failed on {len(history)} attempts "
                                       f"(retry budget {self.retries})", history) from error
        self._events.add("retries")

    def _wait_for_member(self, deadline: float, history: list[Attempt]) -> None:
        with self._cond:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                self._events.add("failures")
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
        bench = Bench(reason, verdict, time.monotonic())
        with self._cond:
            if device.name in self._benched or self._closed:
                return
            self._benched[device.name] = bench
            for member in self._members_on(device.name):
                self._router.disable(member.name)
            thread = threading.Thread(target=self._recover, args=(device.name, bench), daemon=True,
                                      name=f"hetero-pool-{self.name}-recover-{device.name}")
            self._recovering[device.name] = thread
        thread.start()
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

    def _recover(self, device_name: str, bench: Bench) -> None:
        """One benched device's way back: once its quarantine entry is gone or expired, a probe
        inference on each of its members. The sessions are kept: a fault that corrupts a GPU's
        context (sticky) leaves it unusable for the whole process, new sessions included, so there
        the probe fails and the device stays out; a device whose fault has passed answers it."""
        members = self._members_on(device_name)
        device = members[0].device
        while not self._closed:
            entry = quarantine.entry(device)
            if entry is not None and not entry.expired():
                wait = RECOVERY_POLL if entry.expires is None else min(max(entry.expires - time.time(), 0.001), RECOVERY_POLL)
                with self._cond:
                    self._cond.wait(wait)
                continue
            if self._probe(members):
                if entry is not None:  # expired: the probe is the health check that releases it
                    quarantine.release(device, f"expired, and a probe inference answered (hetero.onnx pool {self.name!r})")
                with self._cond:
                    self._benched.pop(device_name, None)
                    self._recovering.pop(device_name, None)
                    for member in members:
                        self._router.enable(member.name)
                    self._cond.notify_all()
                self._events.add("rejoins")
                log.info("pool %r: %s rejoined after a probe inference", self.name, device_name)
                event_bus.publish("pool-member-rejoined", pool=self.name, device=device_name,
                                  members=[m.name for m in members])
                return

    def _probe(self, members: list[Member]) -> bool:
        """Whether every member on a released device answers a probe inference on zeros (a failed
        probe quarantines the device again, for its fault's TTL)."""
        device = members[0].device
        if device.health().state is not HealthState.OK:  # as the quarantine's own release asks
            with self._cond:
                self._cond.wait(RECOVERY_POLL)
            return False
        feeds = probe_feeds(self.inputs)
        for member in members:
            try:
                member.session.run(feeds)
            except Exception as error:  # noqa: BLE001 - the device stays out; the quarantine says why
                verdict = classify(error)
                self._events.add("probe_failures")
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
        """Totals: requests (finished), answered, failures (requests that failed for good), retries
        (attempts made again elsewhere), rejoins, probe_failures; per member: device, requests
        (answered there), failures (attempts failed there), p50/p90/p99 latency in ms, healthy,
        outstanding."""
        events = self._events.as_dict()
        members = {}
        for load in self._router.loads():
            members[load.name] = {"device": self._members[load.name].device.name, "requests": load.answered,
                                  "failures": load.failed, **self._latencies[load.name].percentiles_ms(),
                                  "healthy": load.enabled, "outstanding": load.outstanding}
        answered = sum(m["requests"] for m in members.values())
        return {"requests": answered + events["failures"], "answered": answered, **events, "members": members}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            threads = list(self._recovering.values())
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hetero.onnx.Pool {self.name!r}: {', '.join(self._members)}>"


__all__ = ["Member", "Pool"]
