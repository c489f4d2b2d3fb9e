"""Placement on this process's devices: ``place`` (a device for a request), ``explain``
(why), ``assign`` (devices for N launcher workers) and the cached ``"auto"`` decision
behind ``hetero.device("auto", policy=...)``.

The adapter here turns live :class:`hetero.Device` objects into :class:`Candidate` views
(descriptor, health, quarantine, accounted usage); everything after that is the pure
policy code in :mod:`hetero.scheduler.policies`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from hetero.core.config import get_config
from hetero.core.device import Device, DeviceInfo, HealthState
from hetero.core.registry import AUTO_DEVICE, backend_status
from hetero.core.registry import devices as registry_devices
from hetero.scheduler.context import current_task
from hetero.scheduler.explanation import Explanation, NoDeviceAvailable, explanation
from hetero.scheduler.inputs import SUBSCRIBE, quarantined
from hetero.scheduler.policies import Policy, Ranking, get_policy, rank
from hetero.scheduler.request import PRIORITY_RANK, Candidate, CostModel, Request, check_fields
from hetero.scheduler.usage import LEDGER

_NO_IDS: frozenset[str] = frozenset()
_cost_model: CostModel | None = None
_cost_model_chosen = False
DEFAULT: Any = object()  # use_cost_model(DEFAULT): back to the default model


# -- inputs ----------------------------------------------------------------------------
def use_cost_model(model: CostModel | None) -> None:
    """Make ``model`` the one the ``fastest`` policy asks (None: static speed estimates only;
    ``use_cost_model(DEFAULT)`` goes back to the process's default model)."""
    global _cost_model, _cost_model_chosen
    _cost_model, _cost_model_chosen = model, model is not DEFAULT


def get_cost_model() -> CostModel | None:
    """The cost model in use: the one given to :func:`use_cost_model`, else the process's
    default, ``hetero.scheduler.cost_model.default_model()`` (asked each time: it may be reset)."""
    if _cost_model_chosen:
        return _cost_model
    from hetero.scheduler.cost_model import default_model  # its persisted state is read on first use

    return default_model()


def candidate(device: Device | DeviceInfo, order: int = 0, quarantine: frozenset[str] = _NO_IDS) -> Candidate:
    """The view of one device a policy reads: health (asked now, live devices only), quarantine,
    usage (holds of the current task left out: a task is not in its own way)."""
    info = device.info if isinstance(device, Device) else device
    load = LEDGER.load(info.name, current_task())
    used = load.used + LEDGER.outside(info.name)
    if isinstance(device, Device):
        try:
            health = device.health()
            state, reason = health.state, health.reason
        except Exception as exc:  # noqa: BLE001  (a device that cannot say it is healthy is not chosen)
            state, reason = HealthState.UNHEALTHY, f"health query raised {type(exc).__name__}: {exc}"
        used = max(used, _reported_use(device))
    else:
        state, reason = HealthState.OK, ""
    return Candidate(info, state, reason, used, load.tasks, info.stable_id in quarantine,
                     load.held_by, load.holders, order)


def _reported_use(device: Device) -> int:
    """What the device says is in use (every process's memory: NVML/CuPy on CUDA, the host's
    on CPU devices), 0 when its backend cannot tell; hetero's own count is the floor."""
    try:
        reported = device.runtime.memory_used()
    except Exception:  # noqa: BLE001  (a query that fails tells nothing: hetero's own count stands)
        return 0
    return int(reported) if reported else 0


def live_candidates(devices: Sequence[Device] | None = None) -> tuple[list[Candidate], list[Device]]:
    """Candidates for the devices of ``hetero.devices()`` (or ``devices``), in that order, and the devices."""
    found = registry_devices() if devices is None else list(devices)
    quarantine = quarantined()
    return [candidate(d, order, quarantine) for order, d in enumerate(found)], found


def _as_candidates(items: Sequence[Candidate | DeviceInfo | Device]) -> list[Candidate]:
    quarantine: frozenset[str] | None = None
    out: list[Candidate] = []
    for order, item in enumerate(items):
        if isinstance(item, Candidate):
            out.append(item)
            continue
        if quarantine is None:
            quarantine = quarantined()
        out.append(candidate(item, order, quarantine))
    return out


def make_request(request: Request | None = None, **fields: Any) -> Request:
    """``request`` as given, or one built from keyword fields (``memory=``, ``kinds=``, ...);
    a built one takes the current task's priority unless ``priority=`` says otherwise."""
    check_fields(fields)
    if request is None:
        task = current_task()
        if task is not None and "priority" not in fields:
            fields["priority"] = task.priority
        return Request(**fields)
    if fields:
        return dataclasses.replace(request, **fields)
    return request


def _policy(policy: str | Policy | None) -> Policy:
    return get_policy(get_config().policy if policy is None else policy)


# -- decisions ---------------------------------------------------------------------------
def decide(request: Request | None = None, policy: str | Policy | None = None,
           candidates: Sequence[Candidate | DeviceInfo | Device] | None = None, **fields: Any) -> Ranking:
    """The full ranking for ``request`` under ``policy`` (default: the configured one)."""
    chosen = _policy(policy)
    wanted = make_request(request, **fields)
    pool = live_candidates()[0] if candidates is None else _as_candidates(candidates)
    return rank(pool, wanted, chosen, get_cost_model() if chosen.name == "fastest" else None)


def explain(request: Request | None = None, policy: str | Policy | None = None,
            candidates: Sequence[Candidate | DeviceInfo | Device] | None = None, **fields: Any) -> Explanation:
    """Why ``request`` would go where it goes: every candidate, its score or rejection, and the winner.
    ``print(hetero.scheduler.explain(memory="2GiB", policy="binpack"))`` shows a table."""
    return explanation(decide(request, policy, candidates, **fields))


def place(request: Request | None = None, policy: str | Policy | None = None, *,
          wait: float | None = 0.0, **fields: Any) -> Device:
    """The device for ``request`` (or keyword fields: ``memory="2GiB"``, ``kinds=("gpu",)``, ...)
    under ``policy`` (default: ``HETERO_POLICY`` / the config's ``policy``).

    Inside a :func:`hetero.scheduler.task`, the request has the task's priority (unless
    ``priority=`` says otherwise) and the task then holds the device (it counts in the device's
    task load and, for the ``priority`` policy, in who holds it; never against the task itself). Raises
    :class:`NoDeviceAvailable` (a ``DeviceNotFoundError``) with every rejection's reason when
    nothing qualifies. A request that is *queued* (priority policy: every fitting device is
    held by others) waits up to ``wait`` seconds (None: until one frees) for a task to end,
    then raises with ``queued=True``.
    """
    chosen = _policy(policy)
    wanted = make_request(request, **fields)
    model = get_cost_model() if chosen.name == "fastest" else None
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        generation = LEDGER.generation
        candidates, found = live_candidates()
        ranking = rank(candidates, wanted, chosen, model, full=False)
        winner = ranking.winner
        if winner is not None:
            device = found[winner.order]
            _take(device, winner, wanted, chosen)
            return device
        left = None if deadline is None else deadline - time.monotonic()
        if not ranking.queued or (left is not None and left <= 0):
            raise NoDeviceAvailable.from_explanation(explanation(ranking))
        LEDGER.wait(generation, left)


def _take(device: Device, winner: Candidate, request: Request, policy: Policy) -> None:
    task = current_task()
    if task is not None:
        LEDGER.hold(task, device.info.name)
    if policy.name == "priority" and winner.held_by is not None:
        mine = PRIORITY_RANK[request.priority]
        for holder in LEDGER.holders(device.info.name):
            if PRIORITY_RANK[holder.priority] < mine:
                holder.preempted.set()


def assign(count: int, policy: str | Policy | None = None,
           candidates: Sequence[Candidate | DeviceInfo | Device] | None = None,
           exclude: Sequence[str] = (), request: Request | None = None) -> list[DeviceInfo]:
    """Devices for ``count`` workers (the launcher's ``--nproc``), one per worker, chosen one
    after another as if each earlier worker already ran there: ``spread`` deals them round
    robin by load, ``binpack`` fills one device first (as far as ``request.memory`` fits),
    ``first-fit`` puts all on the first, ``fastest`` in proportion to speed. ``exclude``
    names devices (names or stable ids) never to use. Raises NoDeviceAvailable naming the
    worker that found no device."""
    if count < 0:
        raise ValueError(f"assign: count must be >= 0, got {count}")
    chosen = _policy(policy)
    wanted = make_request(request, exclude=(*(request.exclude if request else ()), *exclude))
    pool = live_candidates()[0] if candidates is None else _as_candidates(candidates)
    model = get_cost_model() if chosen.name == "fastest" else None
    out: list[DeviceInfo] = []
    for worker in range(count):
        ranking = rank(pool, wanted, chosen, model, full=False)
        winner = ranking.winner
        if winner is None:
            error = NoDeviceAvailable.from_explanation(explanation(ranking))
            error.args = (f"worker {worker} of {count}: {error.args[0]}",)
            raise error
        out.append(winner.info)
        holder = winner.held_by if winner.held_by is not None and PRIORITY_RANK[winner.held_by] > PRIORITY_RANK[wanted.priority] \
            else wanted.priority
        pool = [dataclasses.replace(c, used=c.used + wanted.memory, tasks=c.tasks + 1, held_by=holder,
                                    holders=(*c.holders, f"worker {worker}")) if c is winner else c for c in pool]
    return out


# -- hetero.device("auto") ---------------------------------------------------------------
#: Seconds between re-reads of the quarantine file by the ``"auto"`` cache (other processes'
#: changes; this process's are seen at once through the fault layer's events).
QUARANTINE_RECHECK = 0.5
_WATCHED_EVENTS = ("quarantined", "released", "quarantine-store-reset", "health")


class _QuarantineWatch:
    """The quarantine set for the ``"auto"`` cache, re-read (~40 us: a stat and a copy) only
    when it may have changed: an event of this process said so, or QUARANTINE_RECHECK passed."""

    def __init__(self) -> None:
        self.ids: frozenset[str] | None = None
        self.read_at = 0.0
        self.subscription: Any = None
        self.subscribed = False
        self.lock = threading.Lock()

    @staticmethod
    def _subscribe() -> Any:
        # Subscribed before the quarantine is read, so no change falls between the two.
        return SUBSCRIBE.call(_WATCHED_EVENTS)

    def current(self) -> frozenset[str]:
        now = time.monotonic()
        changed = self.subscription is not None and self.subscription.pending()
        if self.ids is None or changed or now - self.read_at >= QUARANTINE_RECHECK:
            if not self.subscribed:
                with self.lock:
                    if not self.subscribed:
                        self.subscription = self._subscribe()
                        self.subscribed = True
            self.ids, self.read_at = quarantined(), now
        return self.ids


_WATCH = _QuarantineWatch()


@dataclasses.dataclass(frozen=True)
class _Decision:
    device: Device
    status: object  # the backend's status when decided: a registry reset makes a new one
    quarantine: frozenset[str]
    generation: int | None  # the ledger's, for decisions that depend on usage
    expires: float


_AUTO: dict[tuple[str, Request], _Decision] = {}


def auto_device(policy: str | None = None, **fields: Any) -> Device:
    """``hetero.device("auto", policy=..., **request)``: :func:`place`, remembered.

    The decision is reused until it may be stale: the quarantine changed (this process's
    changes and health events at once, through the fault layer's event bus; other
    processes' within QUARANTINE_RECHECK seconds), accounted usage changed (for policies
    that read it, or a memory request), the registry was reset, or ``health_interval``
    seconds passed (health is asked again then). A reuse costs a few microseconds.
    """
    config = get_config()
    chosen = get_policy(config.policy if policy is None else policy)
    wanted = make_request(None, **fields) if fields or current_task() is not None else _DEFAULT_REQUEST
    key = (chosen.name, wanted)
    quarantine = _WATCH.current()
    hit = _AUTO.get(key)
    if (hit is not None and hit.quarantine == quarantine and time.monotonic() < hit.expires
            and (hit.generation is None or hit.generation == LEDGER.generation)
            and backend_status(hit.device.info.backend) is hit.status):
        device = hit.device
        task = current_task()
        if task is not None:
            LEDGER.hold(task, device.info.name)
        return device
    device = place(wanted, chosen)
    # Read after placing: the hold place() records inside a task must not make the next call miss.
    generation = LEDGER.generation if chosen.uses_load or wanted.memory else None
    _AUTO[key] = _Decision(device, backend_status(device.info.backend), quarantine, generation,
                           time.monotonic() + config.health_interval)
    return device


def forget_decisions() -> None:
    """Drop every remembered ``"auto"`` decision and the quarantine read with them (tests;
    after changing the state dir or devices by hand)."""
    _AUTO.clear()
    _WATCH.ids = None


_DEFAULT_REQUEST = Request()


AUTO_DEVICE.register(auto_device)  # hetero.device("auto") asks it (see hetero.core.hooks)
