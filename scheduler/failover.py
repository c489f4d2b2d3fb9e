"""``replacement``: the one answer to "where does this work go now" after a device failed.

The in-process guard (:func:`hetero.guard`) and the launcher (``hetero-run``) both ask it, each
with its own preference:

- ``"nearest"`` (the guard): a sibling device of the same vendor stack first, then another of
  the same vendor, then any other accelerator, the host CPU last; the same kind of device
  before another kind; then the order given. Moving in-process state is cheapest nearby.
- ``"spread"`` (the launcher's default): the device running the fewest workers now (``load``).
- ``"binpack"``: the device running the most, so that others stay free.

Candidates that are quarantined or named in ``avoid`` are never chosen; the failed device
itself only when nothing else is left and ``allow_failed`` says it may be. Health is asked
(``healthy``) of the best candidate first, then the next, so a health probe runs only on
devices that would be chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from hetero.core.device import Kind
from hetero.scheduler.inputs import quarantined

PREFERENCES = ("nearest", "spread", "binpack")


class Placeable(Protocol):
    """What replacement reads of a device: a :class:`hetero.Device` or a :class:`hetero.DeviceInfo`."""

    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def vendor(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def stable_id(self) -> str: ...


D = TypeVar("D", bound=Placeable)


def replacement(failed: Placeable, candidates: Sequence[D], *, prefer: str = "nearest",
                load: Mapping[str, int] | None = None, avoid: Iterable[str] = (),
                allow_failed: bool = False, healthy: Callable[[D], bool] | None = None,
                quarantine: frozenset[str] | None = None) -> D | None:
    """The device among ``candidates`` that work from ``failed`` moves to, or None when none is left.

    ``prefer``: ``"nearest"``, ``"spread"`` or ``"binpack"`` (see the module's text). ``load``:
    workers per device name now (``spread``/``binpack``). ``avoid``: names or stable ids never to
    choose. ``allow_failed``: the failed device may be chosen when no other qualifies (a
    restarted process gets a fresh context there). ``healthy``: asked of candidates in order of
    preference, the first that says yes is chosen (None: all are). ``quarantine``: stable ids in
    quarantine (None: asked of the fault floor now)."""
    if prefer not in PREFERENCES:
        raise ValueError(f"replacement: prefer must be one of {', '.join(PREFERENCES)}, got {prefer!r}")
    blocked = set(avoid) | set(quarantined() if quarantine is None else quarantine)
    usable = [(position, d) for position, d in enumerate(candidates)
              if d.name not in blocked and d.stable_id not in blocked]
    others = [(p, d) for p, d in usable if not _same(d, failed)]
    pool = others or ([(p, d) for p, d in usable if _same(d, failed)] if allow_failed else [])
    counts = load or {}
    vendor = failed.vendor.lower()

    def rank(pair: tuple[int, D]) -> tuple[int, ...]:
        position, d = pair
        if prefer == "spread":
            return counts.get(d.name, 0), position
        if prefer == "binpack":
            return -counts.get(d.name, 0), position
        if d.backend == failed.backend:
            tier = 0  # a sibling device of the same vendor stack
        elif d.backend != "cpu" and d.vendor.lower() == vendor:
            tier = 1
        elif d.backend != "cpu":
            tier = 2
        else:
            tier = 3  # the host CPU: always there, slowest
        return tier, int(d.kind != failed.kind), position

    for _, device in sorted(pool, key=rank):
        if healthy is None or healthy(device):
            return device
    return None


def _same(device: Placeable, failed: Placeable) -> bool:
    return device.name == failed.name
