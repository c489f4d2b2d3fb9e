"""The ATen operations hetero runs itself: :data:`LOWERINGS` maps each (a ``torch._ops.OpOverload``)
to a function of hetero arrays and Python values that returns what the ATen operation returns.

A lowering raises :class:`NotLowered` for a case it does not take as torch defines it (a dtype
mix whose promotion differs from the array API's, a layout argument, a rounding mode); the
interpreter then runs that node in torch on the host, counted with the reason. Every lowering
gives torch's result dtype and shape, which the interpreter checks against the graph's own
record of them (a mismatch is an error, never a silent difference).

Rooms: :mod:`.promotion` (torch's type promotion where it matters), :mod:`.elementwise`,
:mod:`.reductions`, :mod:`.shapes`, :mod:`.layout` (empty, diagonal, repeat, slice_scatter), :mod:`.indexing` (gathers, scans), :mod:`.nn` (products, softmax, layer norm, convolution),
:mod:`.casts` (dtype casts, float to integer checked), :mod:`.spectral` (complex tensors, FFT).
"""

from __future__ import annotations

from hetero.torch.backend.lowerings import elementwise, indexing, layout, nn, reductions, shapes, spectral
from hetero.torch.backend.lowerings.registry import LOWERINGS, NotLowered

_ROOMS = (elementwise, indexing, layout, nn, reductions, shapes, spectral)  # imported for their registrations

__all__ = ["LOWERINGS", "NotLowered"]
