"""The questions :mod:`hetero.kernels.kernel` asks of the modules built on it, kept light so that the
package's ``__init__`` can name their providers without loading the compiler (see :mod:`hetero.core.hooks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetero.core.hooks import Hook

#: ``kernel.split(devices, combine, model, adaptive)``: the launcher split across devices
#: (:func:`hetero.kernels.split.launch.split_kernel`, which builds on :mod:`hetero.kernels.kernel`).
SPLIT_KERNEL: Hook[Callable[..., Any]] = Hook("split_kernel", "a kernel's launcher split across devices")
