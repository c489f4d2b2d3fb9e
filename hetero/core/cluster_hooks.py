"""The question ``hetero-run`` asks of the cluster floor (see :mod:`hetero.core.hooks`).

``hetero-run --ray`` runs its workers as Ray actors across a cluster; that lives in
:mod:`hetero.ray.train`, a floor above the launcher, so the command line asks through
:data:`RAY_RUN`, declared here on the ground floor (every floor, and ``hetero/__init__.py``, which
names its provider, may import it; the first call imports the provider).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetero.core.hooks import Hook

#: ``RAY_RUN.get()(config, address)``: run a :class:`~hetero.launcher.config.LaunchConfig` across the
#: Ray cluster at ``address`` (None: the one Ray finds, else a new local one); the exit status.
RAY_RUN: Hook[Callable[..., Any]] = Hook("ray_run", "run hetero-run's workers as Ray actors across a cluster")
