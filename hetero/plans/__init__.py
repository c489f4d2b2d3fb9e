"""``hetero.jit``: trace a function of hetero arrays once per signature into a launch plan and
replay it (see :mod:`hetero.plans.function`)."""

from __future__ import annotations

from hetero.plans.errors import ConcretizationError, JitError
from hetero.plans.function import JitFunction, jit

__all__ = ["ConcretizationError", "JitError", "JitFunction", "jit"]
