"""What fault injection (the fault floor) asks of the floor above it: put torch's op boundary in
place while fault rules target torch ops (``cpu:torch:nth=20:oom``), and take it away when none
does. :mod:`hetero.torch.injection` answers both hooks (it maps hetero devices to torch's,
which the fault floor cannot see); the package's ``__init__`` names it as their provider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.config import get_config
from hetero.core.errors import ConfigError
from hetero.core.hooks import Hook

#: Called with the active injections that have torch rules (empty: none is left) whenever that set
#: changes or a backend opens: installs, refreshes or removes the torch op boundary.
TORCH_RULES_CHANGED: Hook[Callable[[Sequence[Any]], None]] = Hook(
    "torch_rules_changed", "installs or removes torch's op boundary for the active torch fault rules")
#: Called with the configured rules (HETERO_FAULTS, the config's ``faults``) when one targets torch:
#: arms them now, or right after the program imports torch.
TORCH_RULES_CONFIGURED: Hook[Callable[[tuple[str, ...]], None]] = Hook(
    "torch_rules_configured", "arms the configured fault rules that target torch ops")

#: The rule keyword of the torch op (``DEVICE:torch:TRIGGER:WHAT``): rules are split on it.
_TORCH_OP = ":torch:"


def arm_configured_torch_rules() -> None:
    """At ``import hetero``: arm the configured rules that target torch ops, which no hetero backend
    opening would apply (a pure torch loop opens none). Asks nothing above when no rule does."""
    try:
        faults = get_config().faults
    except ConfigError:
        return  # a broken configuration is reported, with its remedy, where hetero first uses it
    if any(_TORCH_OP in rule for rule in faults):
        TORCH_RULES_CONFIGURED.call(faults)
