"""The questions the real operations of the array library ask of the rooms built on them: fusion
(chains of elementwise operations recorded and run as one kernel, :mod:`.fusion`, made of
:mod:`.elementwise`'s plans) and complex numbers (composed from real operations on component
views, :mod:`.complex`). A real operation given a complex operand, or asked to record, hands the
work up; see :mod:`hetero.core.hooks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetero.core.hooks import Hook

#: ``fuse(plan, operands, shape, device, out)``: an elementwise operation recorded (``out`` None) or
#: fused with its recorded operands into ``out`` (:mod:`hetero.arraylib.fusion`).
FUSE: Hook[Callable[..., Any]] = Hook("fuse", "a fused elementwise operation")
#: ``apply_complex(op, *operands, out=None)``: an elementwise operation with a complex operand,
#: composed from real ones on the component views (:mod:`hetero.arraylib.complex.elementwise`).
COMPLEX_ELEMENTWISE: Hook[Callable[..., Any]] = Hook("complex_elementwise", "an elementwise operation on complex numbers")
#: ``astype_complex(x, dtype)``: ``x`` converted to a complex dtype (:mod:`hetero.arraylib.complex.elementwise`).
COMPLEX_CAST: Hook[Callable[..., Any]] = Hook("complex_astype", "a conversion to a complex dtype")
#: ``complex_reduction(name, x, *args, **kwargs)``: a reduction of a complex array
#: (:mod:`hetero.arraylib.complex.reductions`).
COMPLEX_REDUCTION: Hook[Callable[..., Any]] = Hook("complex_reduction", "a reduction of a complex array")
