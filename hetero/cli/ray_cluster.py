"""``hetero ray resources|labels|share``: this node's hetero devices as Ray sees them.

    ray start --head --resources "$(hetero ray resources)" --labels "$(hetero ray labels)"

Only devices that may take work are offered (not quarantined, not unhealthy); see
:mod:`hetero.ray.node_share`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from hetero.core.exit_status import usage_error


def cmd_ray(args: argparse.Namespace) -> int:
    from hetero.ray.node_share import healthy_devices, node_share

    share = node_share(healthy_devices())
    if args.ray_command is None:
        return usage_error("hetero ray", "name an action: resources, labels, share")
    if args.ray_command == "resources":
        print(share.resources_arg())
    elif args.ray_command == "labels":
        print(share.labels_arg())
    else:
        print(json.dumps({"devices": list(share.devices), "resources": share.resources, "labels": share.labels},
                         indent=2, sort_keys=True))
    return 0


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``ray resources|labels|share`` to ``sub``; returns ``{"ray": handler}``."""
    what = "this node's hetero devices as Ray resources and labels (for 'ray start')"
    parser = sub.add_parser("ray", help=what, description=what[0].upper() + what[1:] + ".")
    actions = parser.add_subparsers(dest="ray_command", metavar="ACTION")
    actions.add_parser("resources", help="JSON for 'ray start --resources'")
    actions.add_parser("labels", help="key=value pairs for 'ray start --labels'")
    share = actions.add_parser("share", help="devices, resources and labels as JSON")
    share.add_argument("--json", action="store_true", help="(the output is always JSON)")
    return {"ray": cmd_ray}
