"""CUDA's ``__match_any_sync`` and ``__match_all_sync`` (``cuda.match_any_sync``,
``cuda.match_all_sync``) as device functions in hetero's own language over the warp
shuffle, so that every device runs them (natively shuffled on CUDA and HIP, through
work-group memory elsewhere: :mod:`hetero.compiler.ir.warp_emulation`).

Only lanes that take part are reported: a lane past the block's end (lanes 10-31 of a block
of 10 threads) or one not running the call has no value to match, and CUDA leaves it out of
both answers (numba-cuda's own tests: ``match_any_sync`` in a block of 10 gives ``0x155``,
``match_all_sync`` of equal values gives ``0x3ff``). So each answer is taken within
``mask & activemask()``.

Values are integers, compared exactly; a float value is refused by the frontend (CUDA
compares the bit patterns, so NaN matches NaN and 0.0 does not match -0.0, which ``==``
would not give). Vocabulary: imports only the language.
"""

# The annotations are hetero kernel types (hetero.u32), which the compiler reads; mypy cannot.
# mypy: disable-error-code="valid-type,operator,no-untyped-def"

from __future__ import annotations

from hetero.language import func
from hetero.language.cuda import activemask, shfl_sync
from hetero.core.types import i32, u32


@func
def _matching(mask: u32, value):
    """The lanes of ``mask`` whose shuffled ``value`` equals this lane's (lanes that do not take
    part give the caller's own value, so they are in it too), a bit each."""
    found = u32(0)
    for lane in range(32):
        other = shfl_sync(mask, value, i32(lane))
        if ((mask >> u32(lane)) & 1) != 0 and other == value:
            found = found | (u32(1) << u32(lane))
    return found


@func
def match_any(mask: u32, value):
    """The lanes of ``mask`` taking part whose ``value`` equals this lane's, a bit each."""
    return _matching(mask, value) & activemask()


@func
def match_all(mask: u32, value):
    """The lanes of ``mask`` taking part when all of them hold this lane's ``value``, else 0."""
    present = mask & activemask()
    return present if (_matching(mask, value) & present) == present else u32(0)  # one return: no loop when inlined


__all__ = ["match_all", "match_any"]
