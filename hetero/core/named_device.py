"""``hetero.device(name)``: the device a user names, refused while it is quarantined.

Strict where the user named a device, lenient where hetero chooses. A device named explicitly
(``hetero.device("oneapi:0")``, a backend's name such as ``"oneapi"``, a ``torch.device``, and so
``device="oneapi:0"`` of array creation, ``.to``/``.to_device``, :func:`use_device`,
``hetero.Stream``, ``hetero.guard(device=...)``, ``hetero.checkpoint.load(device=...)``) that is in
the persistent quarantine (put there by a real fault, or by ``hetero quarantine add``) raises
:class:`~hetero.DeviceQuarantinedError`: the fault recorded, the time left, and the remedies.
``allow_quarantined=True`` on the call that names it, or ``HETERO_ALLOW_QUARANTINED=1`` (config
key ``allow_quarantined``), uses it anyway.

What is not refused:

- ``"auto"`` (and no spec where the default is ``auto``): placement never chooses a quarantined
  device in the first place;
- a :class:`~hetero.Device` object already held: it was checked when its name was resolved;
- a drill's quarantine (an injected fault's, kept in the drill's own layer: see
  :mod:`hetero.fault.quarantine`): it steers hetero's own choices for as long as the drill lasts,
  never a device the user names (a drill's fault-free comparison run names the drilled device);
- the configured default device (``HETERO_DEVICE=oneapi:0``) after its first resolution in a
  process: checked once, as ``hetero-run`` sets it for each worker it places on an unquarantined
  device, and a quarantine another process records during the run must not fail every array the
  worker makes (the worker's own faults move it, as ever).

hetero's own floors that choose among devices themselves (``hetero-run --devices``, ONNX pools, the
guard's candidates, the split launcher) look names up in the registry
(:func:`hetero.core.registry.device`), which finds quarantined devices too, and skip those.

The check is made where a name is resolved, never by a launch, and costs about a microsecond:
the store is looked at (one ``stat``) at most every half second, and read again only when it
changed; this process's own quarantines and releases are seen at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from hetero.core.config import Config, get_config
from hetero.core.device import Device
from hetero.core.hooks import Hook
from hetero.core.registry import CURRENT_DEVICE
from hetero.core.registry import device as lookup

#: Raises :class:`~hetero.DeviceQuarantinedError` when a device is in the persistent quarantine
#: (hetero.fault.quarantine answers it).
REFUSE_QUARANTINED: Hook[Callable[[Device], None]] = Hook(
    "refuse_quarantined", "refuses a named device that is in the persistent quarantine")

_default_checked: list[Config | None] = [None]  # the configuration whose default device was checked


def device(spec: str | Device | None = None, policy: str | None = None, *, allow_quarantined: bool | None = None,
           **request: Any) -> Device:
    """The device named by ``spec``: ``"auto"`` (the default: placed by the scheduler), a
    backend (``"oneapi"``: its first device), one device (``"cuda:1"``) or a ``torch.device``
    (``torch.device("cuda", 0)`` is ``cuda:0``; the rules: :mod:`hetero.core.torch_names`).
    ``None`` takes ``HETERO_DEVICE`` / the config's ``device``.

    ``"auto"`` asks :func:`hetero.scheduler.place` with ``policy`` (default ``HETERO_POLICY`` /
    the config's ``policy``, first-fit) and a request (``memory="2GiB"``, ``kinds=("gpu",)``,
    ``priority="high"``, ``kernel=k, n=...``: see :class:`hetero.scheduler.Request`); quarantined
    and unhealthy devices are never chosen. The decision is remembered until the quarantine,
    accounted usage or health may have changed, so calling this in a loop stays cheap.

    A device named explicitly that is quarantined raises :class:`~hetero.DeviceQuarantinedError`
    (saying why, for how long, and ``hetero quarantine release NAME``) unless ``allow_quarantined``
    is True, or None and ``HETERO_ALLOW_QUARANTINED=1`` (see the module docstring)."""
    if isinstance(spec, Device) and policy is None and not request:  # the hot path: arrays allocating
        return spec
    found = lookup(spec, policy, **request)
    if spec is None:  # the configured default: checked once per configuration (module docstring)
        config = get_config()
        if CURRENT_DEVICE.get() is not None or _default_checked[0] is config:
            return found
        if not (allow_quarantined if allow_quarantined is not None else config.allow_quarantined):
            REFUSE_QUARANTINED.call(found)  # passes for "auto": placement never chooses a quarantined device
        _default_checked[0] = config
        return found
    if not (allow_quarantined if allow_quarantined is not None else get_config().allow_quarantined):
        REFUSE_QUARANTINED.call(found)  # passes for "auto", as above
    return found


@contextlib.contextmanager
def use_device(spec: str | Device, *, allow_quarantined: bool | None = None) -> Iterator[Device]:
    """Within the block (this thread/task), ``hetero.device()`` with no spec returns this device
    (a quarantined one named explicitly is refused as :func:`device` refuses it)."""
    chosen = device(spec, allow_quarantined=allow_quarantined)
    token = CURRENT_DEVICE.set(chosen)
    try:
        yield chosen
    finally:
        CURRENT_DEVICE.reset(token)
