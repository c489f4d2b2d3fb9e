"""Kernels and their launches (the public API floor): ``@hetero.kernel`` and :class:`Kernel`
(:mod:`.kernel`), what a launch passes (:mod:`.launch_args`, :mod:`.launch_values`), kernels the
array library generates as IR (:mod:`.generated`), split launches over several devices
(:mod:`.split`), streams (:mod:`.stream`) and the cost model's calibration (:mod:`.calibration`).

May import: every floor below (core, language, the compiler, backends through the registry, the
scheduler, fault) and the array room beside it. ``from hetero.kernels import Kernel`` keeps
working: the names of :mod:`.kernel`, the module this room grew from, are found here too.
"""

from __future__ import annotations

from hetero.core.facade import room_attributes

__getattr__ = room_attributes(__name__, "hetero.kernels.kernel")
