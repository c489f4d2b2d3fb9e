"""Hooks: how a floor asks a question that a floor above it answers, without importing it.

hetero is built in floors (docs/architecture.md): the ground floor (devices, registry, config),
then backends and the compiler, the scheduler, fault handling, the public API, the launcher.
A floor imports only floors below it. Where a lower floor needs an answer from above (the
registry asks the scheduler which device ``"auto"`` is; the scheduler asks the fault floor
which devices are quarantined), it declares a :class:`Hook` and calls it; the module above
registers its function into the hook when it is imported, as JAX backends call
``register_backend_factory``::

    # hetero/core/registry.py (ground floor): the question
    AUTO_DEVICE: Hook[Callable[..., Device]] = Hook("auto_device", "the device 'auto' names")
    ...  AUTO_DEVICE.call(policy, **request)

    # scheduler/placement.py (a floor above): the answer, registered on import
    AUTO_DEVICE.register(auto_device)

So that a hook is answered even before anything imported its provider (and ``import hetero``
stays light), the package's ``__init__`` (the roof, which may know every floor) names each
hook's provider module with :meth:`Hook.provided_by`; the first call imports it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class HookError(RuntimeError):
    """A hook was called that no module answers (a floor of hetero is missing or failed to register)."""


class Hook(Generic[F]):
    """One question a lower floor asks and a floor above answers (one function registered)."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc
        self._function: F | None = None
        self._provider: str | None = None
        self._lock = threading.Lock()

    def register(self, function: F) -> F:
        """Answer this hook with ``function`` (the module above calls this when imported); returns it."""
        self._function = function
        return function

    @property
    def answer(self) -> F | None:
        """The registered function, or None before its provider registers it (a hot path reads
        this, then calls :meth:`get` only when it is None)."""
        return self._function

    def provided_by(self, module: str) -> None:
        """Name the module that registers this hook when imported (loaded on the first call)."""
        self._provider = module

    @property
    def loaded(self) -> bool:
        """Whether the answer is registered already (checking this imports nothing)."""
        return self._function is not None

    def get(self) -> F:
        """The registered function, importing the provider module first if it has not registered yet."""
        function = self._function
        if function is not None:
            return function
        with self._lock:
            if self._function is None and self._provider is not None:
                importlib.import_module(self._provider)
        if self._function is None:
            where = f"importing {self._provider} did not register it" if self._provider else "no provider is named"
            raise HookError(f"hetero hook {self.name!r} ({self.__doc__}) has no answer: {where}; "
                            "import hetero (its __init__ names every hook's provider), or reinstall hetero if "
                            "that does not help")
        return self._function

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Call the registered function."""
        return self.get()(*args, **kwargs)

    def __repr__(self) -> str:
        state = "registered" if self._function is not None else f"provided by {self._provider}" if self._provider else "unanswered"
        return f"<Hook {self.name}: {state}>"
