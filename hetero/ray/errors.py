"""The errors of hetero on Ray."""

from __future__ import annotations

from hetero.core.errors import HeteroError


class NoDeviceError(HeteroError, LookupError):
    """No node of the cluster (or no device of this node) can take what a task asks for: none has a
    matching device, or every matching one is quarantined or held. The message says which."""

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)


class ReplicaUnavailableError(HeteroError, RuntimeError):
    """A serving replica (:mod:`hetero.ray.serve`) has no device that may answer: every device of its
    pool is quarantined (on this node or by the cluster) or unhealthy. The ingress sends the request
    to another replica; Ray Serve replaces this one (its health check raises the same error)."""

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)
