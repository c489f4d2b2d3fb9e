"""CUDA's ``__match_any_sync`` and ``__match_all_sync`` (``cuda.match_any_sync``,
``cuda.match_all_sync``) as a device function in hetero's own language over the warp
shuffle, so that every device runs them (natively shuffled on CUDA and HIP, through
work-group memory elsewhere: :mod:`hetero.compiler.ir.warp_emulation`).

Values are integers, compared exactly; a float value is refused by the frontend (CUDA
compares the bit patterns, so NaN matches NaN and 0.0 does not match -0.0, which ``==``
would not give). Vocabulary: imports only the language.
"""

# The annotations are hetero kernel types (hetero.u32), which the compiler reads; mypy cannot.
# mypy: disable-error-code="valid-type,operator,no-untyped-def"

from __future__ import annotations

from hetero.language import func
from hetero.language.cuda import shfl_sync
from hetero.core.types import i32, u32


@func
def match_any(mask: u32, value):
    """The lanes of ``mask`` whose ``value`` equals this lane's, a bit each."""
    found = u32(0)
    for lane in range(32):
        other = shfl_sync(mask, value, i32(lane))
        if ((mask >> u32(lane)) & 1) != 0 and other == value:
            found = found | (u32(1) << u32(lane))
    return found


__all__ = ["match_any"]
