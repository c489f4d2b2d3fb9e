"""``hetero.guard``: keep a training loop running when its device fails, inside the process.

    with hetero.guard(state={"model": model, "optimizer": optimizer, "scheduler": scheduler}) as g:
        for epoch in range(1, epochs + 1):
            model.train()
            for data, target in train_loader:           # DataLoader(shuffle=True)
                g.run(train_step, data, target)         # retried on a healthy device on fault
            scheduler.step()                            # between steps: seen, see below

or, the same, with the step decorated inside the ``with`` block (``functools.wraps`` keeps its
name)::

        @g.step
        def train_step(data, target): ...
        ...
                train_step(data, target)

The guard owns ``state`` and snapshots it to host memory at the first step, every
``snapshot_every`` steps, at a step whose state changed since the last step ended (below), and
when ``g.snapshot()`` asks. Snapshots after the first do not wait for the device: on a device
whose copies queue (OpenCL) they are queued behind the steps before them
(``snapshot.take(..., wait=False)``) and arrive while the next steps run, so a snapshot never
drains the queue. Each becomes the restore point once its copies have arrived (asked at the next
snapshot, at a recovery and by ``g.last_snapshot``; at most :data:`MAX_PENDING` on their way,
the oldest waited for beyond that); copies that fail leave the restore point at the snapshot
before, and the replay runs every step since it (a failed boundary snapshot is refused, below). What ``state`` (a dict) may hold
(:mod:`hetero.recovery.snapshot`): hetero arrays, NumPy arrays, torch tensors, modules and
optimizers, anything else with ``state_dict()``/``load_state_dict()`` (LR schedulers,
``torch.amp.GradScaler``, EMA helpers, a class of yours),
generator objects (``numpy.random.Generator``, ``RandomState``, ``random.Random``,
``torch.Generator``), data loaders (kept, never restored: below), and plain values that
``copy.deepcopy`` can copy (numbers, strings, lists,
dicts, dataclasses). A value that is none of these (an open file, a generator function's
iterator, a lock, a socket) is refused when the guard is made, with an
:class:`~hetero.recovery.snapshot.UnsnapshottableError` naming its key and type: give it
``state_dict``/``load_state_dict``, or keep it out of ``state``.

Each snapshot also keeps the process-wide random generators, and restoring it restores them, so
a replayed step draws the numbers its first run drew (dropout, augmentation) without reseeding:
Python's ``random``, NumPy's global ``np.random``, torch's CPU generator, and the generators of
the accelerators torch has initialised (CUDA/ROCm, XPU; MPS where available), never initialising
one to read it and never touching a device the guard left after a fault. When the work moves from
one GPU to another, the new one's generator takes the old one's state. ``rng=False`` leaves the
process-wide generators alone; generator objects in ``state`` are restored either way.

Work between two ``g.run`` calls is never replayed, so the guard makes it impossible to miss:

- *random draws between steps* (a ``DataLoader``'s base seed and shuffle at each epoch start,
  augmentation in a loader without workers): each recorded call also keeps the process-wide
  generators as they were at its entry (:class:`~hetero.recovery.snapshot_rng.EntryCapture`, a few
  microseconds), and the replay sets them before each call, and before the failed step runs again,
  so what was drawn between steps stays drawn, and the generators end where a fault-free run has
  them;
- *state changed between steps* (``scheduler.step()`` at an epoch end, an EMA or metric object's
  update, weights edited in place under ``torch.no_grad()``): the guard fingerprints ``state``
  when a step ends and when the next one starts (:mod:`hetero.recovery.fingerprint`: tensor versions
  and pointers, hyper-parameters, scalar attributes, CRC-32 of NumPy arrays, launch and write
  counts of hetero arrays' devices; no device sync, no ``state_dict()``) and, when they differ,
  takes a snapshot there, before the step: the restore point includes the change and no replay
  needs to redo it (``g.boundary_snapshots`` counts them,
  and a recovery event's ``snapshot_reason`` says ``"boundary"``). Should the device fail while that
  snapshot is taken, the guard gives up (``RecoveryFailedError``) rather than restore an older one
  without the change. What the fingerprint cannot see (``p.data.mul_(...)``, whose ``.data`` has a
  version counter of its own: edit ``p`` itself under ``torch.no_grad()``; writes through a NumPy or
  DLPack view; attributes that are objects) needs ``g.snapshot()`` after it;
- *data loaders in state* (``torch.utils.data.DataLoader``, torchdata's ``StatefulDataLoader``)
  are never rewound and never fingerprinted: the replay reuses the batches its calls recorded, and
  a loader rewound to the snapshot would hand out batches already trained on. A
  ``StatefulDataLoader``'s ``state_dict()`` belongs in a checkpoint, for a run resumed in a new process.

The per-step cost is the two fingerprints and the entry generators. Measured on a 2-core AMD EPYC
VM (2026-12-04): 140 us a ``g.run`` timed alone for the MNIST example's Net, Adadelta and StepLR
(a 4.2 ms CPU step), 19-32 us for the digits MLP's four hetero arrays, and two to three times that
inside the loop, right after a step, when little of it is in the cache (benchmarks/guard_overhead.py,
benchmarks/torch_guard.py); a GPU step of tens of milliseconds hardly sees it. NumPy arrays in
``state`` add a CRC-32 pass over them twice a step.

``g.run`` remembers the calls made since the last snapshot. When
one raises a :class:`~hetero.DeviceError`, or torch's or CuPy's own device error (``torch.OutOfMemoryError``,
``torch.AcceleratorError``, a ``RuntimeError`` "CUDA error: ...", CuPy's ``CUDARuntimeError``: read as
the hetero error for the same fault, :mod:`hetero.fault.foreign_errors`), the guard classifies it
(:func:`hetero.fault.classify`):

- *recoverable* (out of memory): restore the snapshot on the same device, replay the calls
  since it, and run the failed step again; a second recoverable fault in the same step moves on
  as below, without quarantining the device;
- *context-corrupting*, *device lost*, *degraded*: quarantine the device when the classifier
  says so, pick the next healthy device (same backend, then the same vendor, then any other
  vendor's device, then the host CPU; never a quarantined, unhealthy or already-failed one),
  restore the snapshot there (``state`` is updated in place), replay, run the failed step.

On entering the ``with`` block a background thread prepares the failover device (``standby``:
discovery, a health check, one tiny kernel there), so a recovery need not import a backend
or open a device, and then builds there each kernel the guarded steps compile, so a recovery's
first steps on it need not build them, and holds memory there for the state's arrays (up to a
quarter of that device's memory), so a restore copies into mapped memory instead of allocating
(:mod:`hetero.recovery.standby`, :mod:`hetero.recovery.reserve`); and the health monitor runs (:mod:`hetero.recovery.monitor`: started by the
first guard entered unless already running, stopped by the last one out), so health and Xid
events reach the classifier. Inside the ``with`` block ``hetero.device()`` is the guard's current device (``g.device``), so
arrays and kernels a step creates follow it. Each recovery is published as a ``recovery`` event
(:func:`hetero.fault.publish`) and listed in ``g.recoveries``: the step, the failed and chosen
devices, the fault class, ``snapshot_step`` and ``snapshot_reason`` (``"first"``, ``"every"``,
``"boundary"``, ``"user"``), ``steps_replayed``, ``boundary_snapshots`` so far, and the time taken.

Where torch runs: each recovery names the hetero device and torch's (:func:`hetero.torch_device`):
``torch_device``/``failed_torch_device`` in the event (``None`` while the process has not imported
torch), and the log line says "resumed on oneapi:0 (torch device cpu...)". A move between two
devices that are one torch device (``oneapi:0`` to ``opencl:0``: both ``cpu`` for torch) moves
nothing for torch, and says so ("torch state stays on cpu"). A move to a GPU this torch has no
backend for (an Intel GPU without XPU) logs a warning (``logging``, logger ``hetero.recovery.guard``),
once per guard: hetero arrays go there, torch state stays on the CPU. When no device is left or
``max_recoveries`` is spent, :class:`~hetero.RecoveryFailedError` is raised with the history of
every fault (the last device error as its ``__cause__``). Errors that are not device errors
propagate unchanged.

torch and CuPy errors name no hetero device: the guard takes them to have happened on its current
device (``g.device``; during a replay, the device replayed on), so keep torch's device and the
guard's the same (:func:`hetero.torch_device` of ``g.device``). A context-corrupting, lost or degraded one
is also noted by that device's backend (``note_error``), as the backend notes its own, so its
health reads ``unhealthy`` for the rest of the process.

Steps must be deterministic functions of their arguments, of ``state`` and of the random
generators a snapshot keeps (a stream the guard does not see, such as a data loader's worker
processes, must be drawn from the step number instead), and must keep what they change in
``state``: the replay re-runs them and discards their return values. ``g.step_number`` is the
number of the next step.

The limit: the guard recovers the device errors ``g.run`` sees, i.e. those raised in the thread
that calls it. A device error raised in another thread (a prefetching or logging thread the
step started) is not recovered here; under ``hetero-run`` the worker bootstrap treats it like
one on the main thread (fault report, exit 86, restart on another device), and outside it
``threading`` prints it and the thread's work is lost. Do device work on the guarded thread,
or hand a worker thread's errors back to it (``concurrent.futures``: ``future.result()``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import gc
import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, ParamSpec, TypeVar

from hetero.array.ndarray import Array
from hetero.core.device import Device, HealthState
from hetero.core.errors import DeviceError, HeteroError, RecoveryFailedError
from hetero.fault import event_bus, foreign_errors, heartbeat, monitor, quarantine
from hetero.recovery import fingerprint, monitor as guard_monitor, snapshot, snapshot_rng
from hetero.fault.classify import classify as full_classify
from hetero.recovery.torch_devices import torch_move, unusable_warning
from hetero.core.registry import CURRENT_DEVICE
from hetero.core.named_device import device as named_device
from hetero.core.registry import device as find_device
from hetero.core.registry import devices as all_devices
from hetero.scheduler.failover import replacement
from hetero.core.torch_devices import loaded_torch_device

if TYPE_CHECKING:
    from hetero.recovery.standby import Standby

log = logging.getLogger("hetero.recovery.guard")
#: The longest a recovery (or leaving the guard) waits for the standby preparation to finish.
STANDBY_JOIN_SECONDS = 30.0
#: Snapshots whose device copies may be on their way at once: taking one more waits for the oldest
#: (a device far behind the host; each keeps its host copies and the calls since it).
MAX_PENDING = 3
#: The longest a recovery, or leaving the guard, waits for those copies (a failed device may never
#: finish them): then the guard restores the last snapshot that arrived, and keeps the others'
#: copies referenced for the rest of the process (PyOpenCL would wait for them when freed).
PENDING_WAIT_SECONDS = 10.0
_ABANDONED: list[snapshot.Snapshot] = []  # snapshots whose copies were given up on
T = TypeVar("T")
P = ParamSpec("P")


class Record(NamedTuple):
    """A guarded call since the last snapshot, as a replay runs it again."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: snapshot_rng.ProcessRng | None  # the process-wide generators at its entry (None: rng=False)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a device error calls for, as the guard acts on it."""

    fault_class: str
    action: str
    quarantine: bool
    ttl: float | None
    reason: str


def classify(error: DeviceError) -> Verdict:
    """The classifier's verdict (:func:`hetero.fault.classify`), as the guard acts on it."""
    found = full_classify(error)
    return Verdict(str(found.fault_class), str(found.action), bool(found.quarantine), found.ttl, str(found.reason))


class Guard:
    """In-process recovery for a training loop; make one with :func:`guard`."""

    def __init__(self, state: MutableMapping[str, Any], *, snapshot_every: int = 10,
                 devices: Sequence[str | Device] | None = None, max_recoveries: int = 3,
                 device: str | Device | None = None, start_step: int = 0, standby: bool = True,
                 rng: bool = True) -> None:
        if not isinstance(state, MutableMapping):
            raise TypeError(f"hetero.guard: state must be a dict of the values to protect, got {type(state).__name__}")
        snapshot.check(state)  # a value no snapshot can copy is refused now, not at the first fault
        if int(snapshot_every) < 1:
            raise ValueError(f"hetero.guard: snapshot_every must be >= 1, got {snapshot_every}")
        if int(max_recoveries) < 0:
            raise ValueError(f"hetero.guard: max_recoveries must be >= 0, got {max_recoveries}")
        self.state = state
        self.snapshot_every = int(snapshot_every)
        self.max_recoveries = int(max_recoveries)
        self.rng = bool(rng)  # whether snapshots keep and restore the process-wide random generators
        self._candidates = None if devices is None else [find_device(d) for d in devices]
        self._device = self._starting_device(device)
        self.step_number = int(start_step)  # the step the next g.run call is
        self.recoveries: list[dict[str, Any]] = []  # one event per recovery
        self.history: list[dict[str, Any]] = []  # one entry per fault seen
        self.snapshots_taken = 0
        self.boundary_snapshots = 0  # snapshots taken because the state changed between two steps
        self._snapshot: snapshot.Snapshot | None = None  # the newest complete snapshot: where a recovery starts
        self._records: list[Record] = []  # the calls since _snapshot
        #: newer snapshots whose device copies may still be on their way, oldest first, each with
        #: len(_records) when it was taken
        self._pending: list[tuple[snapshot.Snapshot, int]] = []
        self._newest_step: int | None = None  # the step of the newest snapshot taken, pending or not
        self._failed: set[str] = set()  # devices this guard left because of a fault
        self._left: dict[str, Device] = {}  # the same devices, by name (not looked up again: one may be gone)
        self._attempts = 0  # recovery attempts so far
        self._in_place_step: int | None = None  # the step last retried in place
        self._token: contextvars.Token[Device | None] | None = None
        self._heartbeat: Callable[[int], None] | None = heartbeat.heartbeat
        self._standby_wanted = bool(standby)
        self._standby: Standby | None = None
        self._monitoring = False  # whether this guard counts as a user of the health monitor
        self._warned_unusable = False  # a move to a GPU torch cannot use was warned about
        self._ended: tuple[Any, ...] | None = None  # the state's fingerprint when the last step ended
        self._depth = 0  # g.run calls in progress (a step may call g.run itself)
        self._lost_change = False  # a boundary snapshot failed: the change between steps is lost
        self._read_rng = snapshot_rng.EntryCapture()  # the generators at each step's entry, read cheaply
        #: what _capture_rng last passed it (the work's torch device, the left ones), and for what
        self._rng_where: tuple[Any, tuple[str, set[str]]] | None = None

    # -- public ------------------------------------------------------------------------------
    @property
    def device(self) -> Device:
        """The device the guarded work runs on now."""
        return self._device

    def __enter__(self) -> Guard:  # noqa: PYI034
        self._token = CURRENT_DEVICE.set(self._device)
        if self._standby_wanted and self._standby is None:
            self._standby = self._new_standby()
        guard_monitor.acquire()  # health/Xid events reach the classifier while guarded (hetero/recovery/monitor.py)
        self._monitoring = True
        return self

    def _new_standby(self) -> Standby:
        from hetero.recovery.standby import Standby

        return Standby(lambda: self._next_device(self._device), on=lambda: self._device)

    def wait_standby(self, timeout: float | None = None) -> Device | None:
        """Wait until the failover device is prepared (see ``standby``); returns it, or None when
        there is none (standby off, no other device, or its preparation failed)."""
        return self._standby.wait(timeout) if self._standby is not None else None

    def __exit__(self, *exc: object) -> None:
        token, self._token = self._token, None
        if token is not None:
            try:
                CURRENT_DEVICE.reset(token)
            except ValueError:  # left in another context than it was entered: nothing of ours to undo there
                pass
        try:
            self._settle_pending()
        except Exception as exc:  # copies that failed: the loop is over, there is nothing to restore
            if _device_error(exc, self._device) is None:
                raise
        self._records, self._pending = [], []  # host memory the finished loop no longer needs
        self._snapshot, self._newest_step = None, None
        if self._standby is not None:  # let a preparation still loading a compiler finish before exit
            self._standby.stop()
            self._standby.wait(STANDBY_JOIN_SECONDS)
        if self._monitoring:
            self._monitoring = False
            guard_monitor.release()

    def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` as guarded step ``g.step_number``; on a device fault, recover (see
        the module docs) and run it again. Returns what the successful call returned."""
        if self._heartbeat is not None:
            self._heartbeat(self.step_number)
        entry_rng = self._capture_rng()
        due = self._snapshot_due()
        self._depth += 1
        try:
            while True:
                token = CURRENT_DEVICE.set(self._device) if CURRENT_DEVICE.get() is not self._device else None
                try:
                    if due is not None:
                        reason, due = due, None
                        self._snapshot_at_entry(reason, entry_rng)
                    result = fn(*args, **kwargs)
                    _make_pending(self.state)  # a lazy result's kernels are the step's: a fault in them is recovered
                    break
                except Exception as raised:
                    error = _device_error(raised, self._device)
                    if error is None:  # not a device error: the caller's
                        raise
                    args, kwargs = self._recover(error, args, kwargs, raised, entry_rng)
                finally:
                    if token is not None:
                        CURRENT_DEVICE.reset(token)
        finally:
            self._depth -= 1
        self._records.append(Record(fn, args, kwargs, entry_rng))
        self.step_number += 1
        if self._standby is not None:
            self._standby.learn()  # kernels this step compiled: built for the failover device in the background
        if not self._depth:
            self._ended = fingerprint.of(self.state)
        return result

    @property
    def last_snapshot(self) -> snapshot.Snapshot | None:
        """The newest snapshot, complete: one whose device copies are still on their way is waited
        for first; should they fail, the one before it (the guard then replays from there)."""
        try:
            self._promote(block=True)
        except Exception as exc:
            if _device_error(exc, self._device) is None:
                raise
        return self._snapshot

    def step(self, fn: Callable[P, T]) -> Callable[P, T]:
        """``fn`` as a guarded step: the function returned calls ``g.run(fn, ...)``. For use as a
        decorator inside the ``with`` block::

            @g.step
            def train_step(data, target): ...
        """
        @functools.wraps(fn)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
            return self.run(fn, *args, **kwargs)

        return guarded

    def snapshot(self) -> snapshot.Snapshot:
        """Take a snapshot now, between two steps: for a change to ``state`` made outside ``g.run``
        that the guard cannot see (:mod:`hetero.recovery.fingerprint` lists them). A device error
        reading the state propagates."""
        if self._depth:
            raise RuntimeError("hetero.guard: g.snapshot() takes a snapshot between steps; it was called inside "
                               "g.run, where the state is half-way through a step. Call it outside the step")
        self._take_snapshot("user", self._capture_rng())
        self._ended = fingerprint.of(self.state)
        assert self._snapshot is not None
        return self._snapshot

    # -- snapshots ---------------------------------------------------------------------------
    def _snapshot_due(self) -> str | None:
        """Why this step takes a snapshot at its entry, or None."""
        if self._snapshot is None:
            return "first"
        if self.step_number % self.snapshot_every == 0 and self._newest_step != self.step_number:
            return "every"
        if self._depth == 0 and self._ended is not None and fingerprint.of(self.state) != self._ended:
            return "boundary"  # changed outside g.run: the restore point must include the change
        return None

    def _snapshot_at_entry(self, reason: str, rng: snapshot_rng.ProcessRng | None) -> None:
        try:
            self._take_snapshot(reason, rng)
        except Exception as exc:
            if _device_error(exc, self._device) is not None and self._ended is not None and (
                    reason == "boundary" or fingerprint.of(self.state) != self._ended):
                self._lost_change = True  # restoring the previous snapshot would drop the change
            raise
        if reason == "boundary":
            self.boundary_snapshots += 1

    def _take_snapshot(self, reason: str, rng: snapshot_rng.ProcessRng | None) -> None:
        # The first snapshot, and one the user asks for, are complete when taken; the others' device
        # copies queue behind the steps before them and arrive while the next steps run, so a
        # snapshot never drains the device's queue (what a blocking copy costs on OpenCL). Those of
        # earlier snapshots that arrived make them the restore point; copies that failed are a
        # device error at this step (the restore point stays the last snapshot that arrived).
        wait = reason in ("first", "user") or self._snapshot is None
        self._promote(block=wait, keep=MAX_PENDING - 1)
        taken = snapshot.take(self.state, self.step_number, wait=wait)  # a device error here keeps the previous one
        taken.rng, taken.reason = rng, reason
        self._pending.append((taken, len(self._records)))
        self._newest_step = taken.step
        self.snapshots_taken += 1
        # Complete at once (host memory, waited for): the restore point now. Copies just queued
        # behind the step's kernels have not arrived, and asking the device (an event query, which
        # contends with the kernels running) cost a small model's snapshot a fifth of its time:
        # they are asked about at the next snapshot, or when the restore point is needed.
        if not taken.pending:
            self._promote(block=False, keep=MAX_PENDING)
        if self._standby is not None:  # memory for these arrays, held on the failover device
            self._standby.reserve_for(taken)

    def _promote(self, block: bool, keep: int = 0) -> None:
        """Make each pending snapshot whose copies have arrived (all of them, waiting, with ``block``;
        the oldest, waiting, while more than ``keep`` are on their way) the restore point, in
        order. When one's copies failed: it and those after it are dropped (the restore point stays
        the one before) and the device's error is raised."""
        while self._pending:
            taken, at = self._pending[0]
            try:
                if not taken.complete(block or len(self._pending) > keep):
                    return
            except Exception as exc:
                if _device_error(exc, self._device) is not None:
                    dropped, self._pending = self._pending, []
                    if any(each.reason == "boundary" for each, _ in dropped):
                        self._lost_change = True  # the restore point lacks a change made between steps
                raise
            del self._pending[0]
            self._snapshot, self._records = taken, self._records[at:]
            self._pending = [(each, count - at) for each, count in self._pending]

    def _settle_pending(self) -> None:
        """:meth:`_promote` every pending snapshot, waiting at most :data:`PENDING_WAIT_SECONDS` for
        their copies (never blocked on a device that may hang): those still on their way then are
        given up on, like copies that failed."""
        deadline = time.monotonic() + PENDING_WAIT_SECONDS
        while self._pending:
            self._promote(block=False, keep=len(self._pending))
            if not self._pending or time.monotonic() > deadline:
                break
            time.sleep(0.0005)
        if self._pending:
            log.warning("hetero.guard: the copies of %d snapshot(s) on %s did not arrive in %.0f s; restoring the "
                        "snapshot of step %s", len(self._pending), self._device.name, PENDING_WAIT_SECONDS,
                        None if self._snapshot is None else self._snapshot.step)
            dropped, self._pending = self._pending, []
            _ABANDONED.extend(each for each, _ in dropped)
            if any(each.reason == "boundary" for each, _ in dropped):
                self._lost_change = True

    def _capture_rng(self) -> snapshot_rng.ProcessRng | None:
        """The process-wide generators now (None with ``rng=False``): each step keeps them at its
        entry, so a replay draws what the step drew, whatever was drawn between steps."""
        if not self.rng:
            return None
        # Which torch devices those are changes with the device, the devices left and torch's import.
        torch = sys.modules.get("torch")
        key = (self._device, len(self._left), torch)
        where = self._rng_where
        if where is None or where[0] != key:
            where = (key, (_rng_device(self._device), self._left_torch_devices()))
            if torch is None or hasattr(torch, "cuda"):  # not while torch is half-way through its import
                self._rng_where = where
        return self._read_rng(*where[1])

    # -- recovery ----------------------------------------------------------------------------
    def _recover(self, error: DeviceError, args: tuple[Any, ...], kwargs: dict[str, Any],
                 raised: BaseException, entry_rng: snapshot_rng.ProcessRng | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Bring the state back to where the failed step started, on a usable device; returns the
        step's arguments moved there. Raises RecoveryFailedError when that cannot be done.
        ``raised`` is what the step raised: ``error`` itself, or the torch/CuPy error read as it
        (re-raised unchanged when it is no device fault). ``entry_rng``: the process-wide
        generators at the failed step's entry, set back before it runs again."""
        detected_wall, detected = time.time(), time.monotonic()
        first_failed = failed = self._device_of(error)
        while True:
            verdict = classify(error)
            entry: dict[str, Any] = {
                "step": self.step_number, "device": failed.name, "error_type": type(raised).__name__, "message": str(error),
                "fault_class": verdict.fault_class, "action": verdict.action, "injected": error.injected,
                "time": time.time(),
            }
            self.history.append(entry)
            if verdict.fault_class == "none":
                raise raised
            if raised is not error:  # torch's/CuPy's error: the device learns what its own would have taught it
                failed.runtime.note_error(error)
            if self._attempts >= self.max_recoveries:
                self._give_up(error, f"{self._attempts} recoveries already made (max_recoveries={self.max_recoveries})")
            try:
                self._settle_pending()  # the newest snapshot whose copies arrive is the restore point
            except Exception as exc:
                if _device_error(exc, self._device) is None:
                    raise
            if self._snapshot is None:
                self._give_up(error, "the fault came before the first snapshot could be taken")
            if self._lost_change:
                self._give_up(error, "the state changed outside g.run since the last step, and the device failed "
                                     "while the snapshot that keeps that change was taken: restoring an older one "
                                     "would lose the change. Resume from a checkpoint")
            self._attempts += 1
            target = self._choose(failed, verdict, error, raised)
            entry["chosen"] = target.name
            reserve = self._standby.take_reserve(target) if self._standby is not None else None
            try:
                self._move_to(target)
                assert self._snapshot is not None
                snapshot.restore(self._snapshot, self.state, target, spare=reserve.take if reserve is not None else None)
                if self._snapshot.rng is not None:  # so the replayed steps draw what they drew before
                    snapshot_rng.restore(self._snapshot.rng, _rng_device(target),
                                         self._left_torch_devices())
                args, kwargs = _rehome(args, target), {k: _rehome(v, target) for k, v in kwargs.items()}
                self._replay(target)
                if entry_rng is not None:  # what was drawn between the last step and this one stays drawn
                    snapshot_rng.restore(entry_rng, _rng_device(target), self._left_torch_devices())
            except Exception as exc:
                again = _device_error(exc, target)
                if again is None:
                    raise
                error, raised, failed = again, exc, self._device_of(again)
                continue
            break
        assert self._snapshot is not None
        torch = torch_move(first_failed, target)
        event = {
            "step": self.step_number, "detected_at": detected_wall, "detected_monotonic": detected,
            "failed_device": first_failed.name,
            "device": target.name, "fault_class": verdict.fault_class, "action": verdict.action,
            "in_place": target is first_failed, "error": f"{type(error).__name__}: {error}",
            "injected": error.injected, "snapshot_step": self._snapshot.step,
            "snapshot_reason": self._snapshot.reason, "boundary_snapshots": self.boundary_snapshots,
            "steps_replayed": len(self._records), "recovery_seconds": time.monotonic() - detected,
            "torch_device": torch.torch_device, "failed_torch_device": torch.failed_torch_device, "torch": torch.note,
        }
        self.recoveries.append(event)
        _publish("recovery", **event)
        log.warning("hetero.guard: step %d: %s on %s; %s, replayed %d step(s) in %.3f s", self.step_number,
                    type(error).__name__, first_failed.name, f"resumed on {target.name} ({torch.note})",
                    event["steps_replayed"], event["recovery_seconds"])
        if torch.unusable and not self._warned_unusable:
            self._warned_unusable = True
            log.warning("%s", unusable_warning(target))
        return args, kwargs

    def _choose(self, failed: Device, verdict: Verdict, error: DeviceError, raised: BaseException) -> Device:
        """Where to resume: the same device for a first recoverable fault in this step, else the
        next usable one (quarantining ``failed`` first when the verdict says so)."""
        if verdict.action == "retry" and self._in_place_step != self.step_number and failed.name not in self._failed:
            self._in_place_step = self.step_number
            _free_frames(raised, error)  # the failed step's locals (its activations) are the memory the retry needs
            gc.collect(1)  # and what they leave in cycles: young objects (a full collection costs 100+ ms with torch)
            return failed
        self._failed.add(failed.name)
        self._left[failed.name] = failed
        if verdict.quarantine:
            _quarantine(failed, error, verdict)
        if self._standby is not None and self._standby.running:
            self._standby.wait(STANDBY_JOIN_SECONDS)  # it has done part of the work a move needs
        target = self._next_device(failed)
        if target is None:
            self._give_up(error, "no healthy device is left to move the work to")
        return target

    def _next_device(self, failed: Device) -> Device | None:
        # The scheduler's one answer to "where now": nearest first, never failed or quarantined ones;
        # health is asked of the best candidates only (a health query may run a probe kernel).
        candidates = self._candidates if self._candidates is not None else all_devices()
        return replacement(failed, candidates, prefer="nearest", avoid=self._failed, healthy=_healthy)

    def _move_to(self, target: Device) -> None:
        if target is self._device:
            return
        self._device = target
        if self._token is not None:  # inside the `with`: hetero.device() follows the guard
            CURRENT_DEVICE.set(target)
        if self._standby is not None:  # the next failover device is another one now: prepare it
            self._standby.stop()
            self._standby = self._new_standby()

    def _replay(self, target: Device) -> None:
        token = CURRENT_DEVICE.set(target)
        try:
            moved: list[Record] = []
            work, avoid = _rng_device(target), self._left_torch_devices()
            for record in self._records:
                args, kwargs = _rehome(record.args, target), {k: _rehome(v, target) for k, v in record.kwargs.items()}
                if record.rng is not None:  # the draws made between steps are not replayed: skip them
                    snapshot_rng.restore(record.rng, work, avoid)
                record.fn(*args, **kwargs)
                moved.append(record._replace(args=args, kwargs=kwargs))
            self._records = moved
        finally:
            CURRENT_DEVICE.reset(token)

    def _left_torch_devices(self) -> set[str]:
        """The torch devices of the devices this guard left after a fault (never ``cpu``): their
        random generators are neither read nor set again."""
        names = {_rng_device(device) for device in self._left.values()}
        names.discard("cpu")
        return names

    def _device_of(self, error: DeviceError) -> Device:
        if error.device and error.device != self._device.name:
            try:
                return find_device(error.device)
            except HeteroError:
                pass
        return self._device

    def _give_up(self, error: DeviceError, why: str) -> NoReturn:
        _publish("recovery-failed", step=self.step_number, device=self._device.name, reason=why,
                 error=f"{type(error).__name__}: {error}")
        lines = "; ".join(f"step {h['step']} on {h['device']}: {h['error_type']} ({h['fault_class']})"
                          + (f" -> {h['chosen']}" if "chosen" in h else "") for h in self.history)
        raise RecoveryFailedError(
            f"hetero.guard could not recover step {self.step_number}: {why}. Faults: {lines}. Free or add a device, "
            "release quarantined ones (hetero quarantine list / release DEVICE), or raise max_recoveries",
            self.history,
        ) from error

    def _starting_device(self, device: str | Device | None) -> Device:
        if device is not None:  # named by the user: refused while quarantined (hetero.device)
            return named_device(device)
        for value in self.state.values():  # where the state already lives
            if isinstance(value, Array):
                return value.device
        if self._candidates:
            return self._candidates[0]
        return find_device()


def guard(state: MutableMapping[str, Any], snapshot_every: int = 10, devices: Sequence[str | Device] | None = None,
          max_recoveries: int = 3, device: str | Device | None = None, start_step: int = 0,
          standby: bool = True, rng: bool = True) -> Guard:
    """Protect a training loop's ``state`` against device faults (see the module docs).

    ``snapshot_every``: steps between host snapshots (the first ``g.run`` always takes one, and so
    does a step whose state changed since the last step ended: see the module docs).
    ``devices``: where the work may go (default: every device, ``hetero.devices()``).
    ``max_recoveries``: recovery attempts allowed over the guard's life. ``device``: where to
    start (default: the device of the state's first hetero array, else ``hetero.device()``).
    ``start_step``: the number of the first step (a run resumed from a checkpoint).
    ``standby``: on entering the ``with``, prepare the failover device on a background thread
    (discover the devices, check the candidate's health, open it and run one tiny kernel there,
    which loads its backend's libraries; then build there each kernel the steps compile, and
    hold memory there for the state's arrays, up to a quarter of its memory), so that a recovery
    pays only for copying the snapshot and replaying; ``False`` touches no other device before a fault.
    ``rng``: keep the process-wide random generators in each snapshot and restore them with it
    (Python's ``random``, NumPy's global one, torch's CPU generator and those of the accelerators
    torch has initialised), so replayed steps draw the same numbers; ``False`` leaves them alone
    (generator objects in ``state`` are state, and are kept either way).

    Raises :class:`~hetero.recovery.snapshot.UnsnapshottableError` (a ``TypeError``) for a value of
    ``state`` no snapshot can copy, naming its key and type."""
    return Guard(state, snapshot_every=snapshot_every, devices=devices, max_recoveries=max_recoveries,
                 device=device, start_step=start_step, standby=standby, rng=rng)


# -- helpers -----------------------------------------------------------------------------------
def _rehome(value: Any, target: Device) -> Any:
    """A hetero array argument on another device, copied to ``target``; anything else as is."""
    if isinstance(value, Array) and value.device is not target:
        try:
            return value.to(target)
        except DeviceError as exc:
            raise RecoveryFailedError(
                f"hetero.guard: a step argument ({value!r}) lives on {value.device.name}, which cannot be read "
                f"any more ({exc}); pass host data (NumPy) or keep device data in the guard's state", []) from exc
    if isinstance(value, tuple):
        return tuple(_rehome(v, target) for v in value)
    if isinstance(value, list):
        return [_rehome(v, target) for v in value]
    return value


def _make_pending(state: Mapping[str, Any]) -> None:
    """Make the state's arrays that are fused expressions not run yet (``x = x * 2`` in a step), so that
    their kernels run inside the step, where a device fault is recovered, and not when the guard
    reads the state after it."""
    for value in state.values():
        if type(value) is Array and value._pending is not None:
            value.buffer  # noqa: B018 - reading it runs the expression's kernels


def _device_error(raised: BaseException, device: Device) -> DeviceError | None:
    """What ``raised`` is as a hetero device error: itself, or a torch/CuPy device error read as
    one on ``device`` (the guard's current device: theirs name none); None for any other error."""
    if isinstance(raised, DeviceError):
        return raised
    found = foreign_errors.recognise(raised, device)
    return found.error if found is not None else None


def _free_frames(*errors: BaseException) -> None:
    """Drop the local variables of the frames the errors' tracebacks hold (the failed step's
    tensors and arrays), keeping the tracebacks' lines for a later report; their causes too."""
    seen: set[int] = set()
    todo = list(errors)
    while todo and len(seen) < 32:
        error = todo.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)  # type: ignore[arg-type]  # None is accepted
        todo.extend(e for e in (error.__cause__, error.__context__) if e is not None)


def _rng_device(device: Device) -> str:
    """The torch device whose generator the snapshot keeps for ``device`` (``cpu`` while torch is not
    imported: no accelerator generator exists then)."""
    return loaded_torch_device(device) or "cpu"


def _healthy(device: Device) -> bool:
    """Not UNHEALTHY: as the running health monitor last saw it, else as the device answers now."""
    watching = monitor.current()
    seen = watching.state(device) if watching is not None else None
    if seen is not None:
        return seen is not HealthState.UNHEALTHY
    try:
        return monitor.device_health(device).state is not HealthState.UNHEALTHY
    except Exception as exc:  # noqa: BLE001 - a health query that fails says enough
        log.info("hetero.guard: skipping %s: its health query raised %s", device.name, exc)
        return False


def _quarantine(device: Device, error: DeviceError, verdict: Verdict) -> None:
    try:
        quarantine.add(device, f"{type(error).__name__}: {error}", verdict.fault_class, ttl=verdict.ttl,
                       name=device.name, injected=bool(getattr(error, "injected", False)))
    except OSError as exc:  # the work must move on even when the state dir cannot be written
        log.warning("hetero.guard: could not quarantine %s: %s", device.name, exc)


def _publish(kind: str, **fields: Any) -> None:
    event_bus.publish(kind, **fields)
