"""The backend plugin interface: what a backend package implements and registers.

A backend is found through the entry-point group ``hetero.backends``. The entry
point names a :class:`BackendRegistration` (a record: name, factory, priority).
hetero calls the factory only when devices are listed; the factory imports the
vendor library, and raises :class:`~hetero.core.errors.BackendUnavailableError` (with
a reason and a remedy) when the library, driver or device is missing. The
built-in backends register exactly this way (see ``pyproject.toml``)::

    [project.entry-points."hetero.backends"]
    mydev = "mypackage.hetero_backend:registration"

Each device is a :class:`DeviceRuntime`, made of the parts in :mod:`hetero.core.runtime_parts`
(allocator, kernel loader, kernel runner, health, interop; streams where a device has them).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.device import DeviceInfo
from hetero.core.runtime_parts import Allocator, HealthSource, Interop, KernelLoader, KernelRunner, StreamRuntime


class DeviceRuntime(Allocator, KernelLoader, KernelRunner, HealthSource, Interop):
    """One device's runtime, implemented by a backend: the five parts of :mod:`hetero.core.runtime_parts`
    together (memory, kernel loading, kernel running, health, interop).

    A backend subclasses this and writes :meth:`allocate`, :meth:`upload`, :meth:`download` and
    :meth:`copy`; every other method has a default meaning "this device does not do that", so a
    memory-only device is those four methods and ``info``. A runtime with streams also subclasses
    :class:`~hetero.core.runtime_parts.StreamRuntime`.
    """

    info: DeviceInfo


class Backend(abc.ABC):
    """A vendor stack, opened: the devices it found."""

    name: str

    @abc.abstractmethod
    def devices(self) -> Sequence[DeviceRuntime]:
        """The devices of this backend, in index order (may be empty)."""

    def diagnostics(self) -> dict[str, Any]:
        """Details for ``hetero devices --all --json`` (versions, libraries found…)."""
        return {}


@dataclasses.dataclass(frozen=True)
class BackendRegistration:
    """How a plugin announces a backend.

    ``factory`` opens the backend (importing its vendor library); it raises
    :class:`~hetero.core.errors.BackendUnavailableError` when the backend cannot be used.
    ``priority`` orders devices of the same kind when picking one automatically
    (higher first). ``install_hint`` says how to get the backend's requirements.
    """

    name: str
    factory: Callable[[], Backend]
    priority: int = 0
    description: str = ""
    install_hint: str = ""


__all__ = ["Allocator", "Backend", "BackendRegistration", "DeviceRuntime", "HealthSource", "Interop", "KernelLoader",
           "KernelRunner", "StreamRuntime"]
