"""The errors of :func:`hetero.jit`: a function it cannot record, and a value read while tracing."""

from __future__ import annotations

from hetero.core.errors import HeteroError


class JitError(HeteroError, RuntimeError):
    """:func:`hetero.jit` cannot record or replay this function (an operation it cannot replay,
    an argument it cannot take); the message names it and what to do instead."""


class ConcretizationError(JitError, TypeError):
    """A jitted function read an array's value on the host while it was being traced
    (``bool(x)``, ``float(x)``, ``x.item()``, ``x.numpy()``, ``np.asarray(x)``, or a library
    function whose result depends on values, such as ``unique`` or ``nonzero``). A launch plan
    replays the same launches whatever the values are, so it cannot hold a choice made from
    one. As JAX's concretization error, it names the line that read the value."""


__all__ = ["ConcretizationError", "JitError"]
