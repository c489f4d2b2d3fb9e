"""``@hetero.ray.remote(backend=...)``: a Ray task or actor that runs on a hetero device.

    @hetero.ray.remote(backend="oneapi")
    def step(x):
        return float(hetero.asarray(x).sum())   # hetero.device() is the oneapi device Ray gave it

    ray.get(step.remote([1.0, 2.0]))

Each ``.remote()`` asks :mod:`hetero.ray.placement` where the request may go (resources, and a node
affinity when some nodes' matching devices are quarantined), then, on the node, :mod:`hetero.ray.lease`
picks the device: a task holds it for the call (``hetero.device()`` is that device, as
``CUDA_VISIBLE_DEVICES`` makes ``cuda:0`` Ray's GPU), an actor for its life (``HETERO_DEVICE``).
Both add the cluster's quarantine to the process (:mod:`hetero.ray.cluster_quarantine`). Other
keywords go to Ray (``num_cpus``, ``max_retries``, ``max_restarts``...).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from hetero.ray.placement import Request, ray_options


def _on_device(function: Callable[..., Any], request: Request, *args: Any, **kwargs: Any) -> Any:
    import hetero
    from hetero.ray import cluster_quarantine, lease

    cluster_quarantine.attach()
    held = lease.acquire(request)
    try:
        with hetero.use_device(held.device, allow_quarantined=True):
            return function(*args, **kwargs)
    finally:
        held.release()


class _Placed:
    """A Ray task or actor class whose every ``.remote()`` is placed by :func:`ray_options` first."""

    _request: Request
    _options: dict[str, Any]
    _ray: Any  # the ray.remote object

    def options(self, **options: Any) -> Any:
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._options = {**self._options, **options}
        return copy

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        placed = ray_options(self._request)
        return self._ray.options(**{**placed, **self._options}).remote(*args, **kwargs)


class RemoteFunction(_Placed):
    """A function as a Ray task on a hetero device: ``.remote(...)``, ``.options(...)``."""

    def __init__(self, function: Callable[..., Any], request: Request, options: dict[str, Any]) -> None:
        import ray

        self._function = function
        self._request = request
        self._options = options

        def task(*args: Any, **kwargs: Any) -> Any:
            return _on_device(function, request, *args, **kwargs)

        functools.update_wrapper(task, function)
        self._ray = ray.remote(task)
        functools.update_wrapper(self, function)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self._function.__name__
        raise TypeError(f"{name} is a Ray task on a hetero device: call {name}.remote(...) (and ray.get its result)")


def actor_class(cls: type, request: Request) -> type:
    """``cls`` as an actor class on a hetero device: its ``__init__`` first joins the cluster's quarantine,
    leases a device of ``request`` on its node (held for the actor's life) and sets ``HETERO_DEVICE``;
    ``hetero_device_name()`` says which. Give it to ``ray.remote`` (:class:`RemoteClass` does)."""
    class OnDevice(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            import hetero
            from hetero.ray import cluster_quarantine, lease

            cluster_quarantine.attach()
            self.__hetero_lease = lease.acquire(request)  # held for the actor's life (its process's)
            os.environ["HETERO_DEVICE"] = self.__hetero_lease.device.name
            hetero.reload_config()
            super().__init__(*args, **kwargs)

        def hetero_device_name(self) -> str:
            """The hetero device this actor holds."""
            return str(self.__hetero_lease.device.name)

    OnDevice.__name__ = cls.__name__
    OnDevice.__qualname__ = cls.__qualname__
    OnDevice.__module__ = cls.__module__
    OnDevice.__doc__ = cls.__doc__
    return OnDevice


class RemoteClass(_Placed):
    """A class as a Ray actor on a hetero device: ``.remote(...)`` starts one, ``.options(...)``."""

    def __init__(self, cls: type, request: Request, options: dict[str, Any]) -> None:
        import ray

        self._cls = cls
        self._request = request
        self._options = options
        self._ray = ray.remote(actor_class(cls, request))


def remote(target: Any = None, *, backend: str | None = None, kind: str | None = None, vendor: str | None = None,
           **options: Any) -> Any:
    """``@hetero.ray.remote`` or ``@hetero.ray.remote(backend=..., kind=..., vendor=..., **ray_options)``
    on a function (a task) or a class (an actor) that runs on one hetero device."""
    request = Request(backend, kind, vendor)

    def wrap(item: Any) -> Any:
        if isinstance(item, type):
            return RemoteClass(item, request, options)
        if callable(item):
            return RemoteFunction(item, request, options)
        raise TypeError(f"hetero.ray.remote takes a function or a class, not {type(item).__name__}")

    return wrap if target is None else wrap(target)
