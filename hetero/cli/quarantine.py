"""``hetero quarantine list [--json]``, ``hetero quarantine release DEVICE|STABLE_ID|--all`` and
``hetero quarantine add DEVICE --reason TEXT [--class CLASS] [--ttl SECONDS]``: the persistent
device quarantine from the shell."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.errors import HeteroError
from hetero.core.exit_status import usage_error


#: What ``quarantine add --class`` takes: the fault classes that quarantine a device.
FAULT_CLASSES = ("recoverable", "context-corrupting", "device-lost", "degraded")


def _ttl(text: str) -> float:
    """``--ttl``: seconds >= 0 (0: until released by hand)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0 (0 keeps the device "
                                         "quarantined until 'hetero quarantine release')")
    return seconds


def _when(seconds: float | None) -> str:
    return "never" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _cluster_entries(address: str | None) -> dict[tuple[str, str], Any]:
    """The Ray cluster's quarantine (``--cluster``): connect to ``address`` (default: ``RAY_ADDRESS``, else
    the cluster started on this machine) and read its store."""
    from hetero.core.optional import require

    ray = require("ray", extra="ray", feature="hetero quarantine --cluster")
    from hetero.ray.cluster_quarantine import cluster_entries

    if not ray.is_initialized():
        ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    return cluster_entries()


def _cmd_list_cluster(args: argparse.Namespace) -> int:
    found = sorted(_cluster_entries(args.address).items(), key=lambda kv: kv[1].time)
    if args.json:
        now = time.time()
        print(json.dumps({"store": "ray", "entries": [{**e.as_dict(), "machine": machine, "expired": e.expired(now)}
                                                      for (machine, _), e in found]}, indent=2))
        return 0
    if not found:
        print("no device is quarantined in the cluster")
        return 0
    from hetero.cli.table import table as _table

    rows = [[e.name, machine, e.host, e.fault_class + (" (drill)" if e.drill else ""), _when(e.time),
             _when(e.expires), e.reason] for (machine, _), e in found]
    print(_table(rows, ["device", "machine", "recorded on", "class", "since", "expires", "reason"]))
    return 0


def _cmd_release_cluster(args: argparse.Namespace) -> int:
    from hetero.ray.cluster_quarantine import release

    found = _cluster_entries(args.address)
    chosen = [key for key, e in found.items() if args.all or args.device in (e.name, e.stable_id)]
    if not args.all and not args.device:
        return usage_error("hetero quarantine release --cluster", "name a DEVICE or STABLE_ID, or pass --all")
    if not chosen:
        listed = ", ".join(f"{e.name} ({e.stable_id}) on {m}" for (m, _), e in found.items()) or "none"
        print(f"hetero: error: {args.device!r} is not quarantined in the cluster; quarantined: {listed}", file=sys.stderr)
        return 1
    for machine, stable_id in chosen:
        release(machine, stable_id)
    print(f"released {len(chosen)} device(s) in the cluster: " + ", ".join(found[k].name or k[1] for k in chosen))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from hetero.fault import quarantine

    if getattr(args, "cluster", False):
        return _cmd_list_cluster(args)
    entries = quarantine.entries()
    if args.json:
        now = time.time()
        print(json.dumps({"store": str(quarantine.store_path()),
                          "entries": [{**e.as_dict(), "expired": e.expired(now)} for e in entries]}, indent=2))
        return 0
    if not entries:
        print(f"no device is quarantined (store: {quarantine.store_path()})")
        return 0
    from hetero.cli.table import table as _table

    rows = [[e.name, e.stable_id, e.fault_class, _when(e.time),
             _when(e.expires) + (" (expired: released once healthy)" if e.expired() else ""), e.reason]
            for e in entries]
    print(_table(rows, ["device", "stable id", "class", "since", "expires", "reason"]))
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from hetero.fault import quarantine

    if getattr(args, "cluster", False):
        return _cmd_release_cluster(args)
    if args.all:
        gone = quarantine.release_all()
        print(f"released {len(gone)} device(s)" + (": " + ", ".join(e.name or e.stable_id for e in gone) if gone else ""))
        return 0
    if not args.device:
        return usage_error("hetero quarantine release", "name a DEVICE (cuda:0) or STABLE_ID to release, or pass --all")
    released = quarantine.release(args.device)
    if not released:  # a device spec whose entry was recorded under another name: match by stable id
        try:
            import hetero

            released = quarantine.release(hetero.device(args.device, allow_quarantined=True).stable_id)
        except (HeteroError, TypeError):
            pass
    if not released:
        listed = ", ".join(f"{e.name} ({e.stable_id})" for e in quarantine.entries()) or "none"
        print(f"hetero: error: {args.device!r} is not quarantined; quarantined devices: {listed}", file=sys.stderr)
        return 1
    print(f"released {args.device}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    import hetero
    from hetero.fault import quarantine

    device = hetero.device(args.device, allow_quarantined=True)  # the command names quarantined devices by design
    ttl = float("inf") if args.ttl is not None and args.ttl <= 0 else args.ttl
    entry = quarantine.add(device, args.reason, args.fault_class, ttl=ttl)
    print(f"{entry.name} ({entry.stable_id}) {entry.describe()}")
    return 0


def quarantine_entries(devices: Sequence[Any]) -> dict[str, Any]:
    """For ``hetero devices``: release expired entries of ``devices`` that read healthy now, then
    the entries by stable id. A broken store is reported on stderr, never fatal to the listing."""
    from hetero.fault import quarantine

    try:
        quarantine.auto_release(devices)
        return {e.stable_id: e for e in quarantine.entries()}
    except HeteroError as exc:
        print(f"hetero: warning: quarantine not shown: {exc}", file=sys.stderr)
        return {}


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``quarantine list|release|add`` to ``sub`` (from ``add_subparsers``); returns
    ``{"quarantine": handler}``."""
    what = "list, release or add (by hand) quarantined devices"
    parser = sub.add_parser("quarantine", help=what, description=what[0].upper() + what[1:] + ".")
    actions = parser.add_subparsers(dest="quarantine_command", metavar="ACTION")
    listing = actions.add_parser("list", help="devices in quarantine, why, and until when")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    release = actions.add_parser("release", help="take a device out of quarantine")
    release.add_argument("device", nargs="?", metavar="DEVICE|STABLE_ID", help="device name (cuda:0) or stable id")
    release.add_argument("--all", action="store_true", help="release every device")
    for action in (listing, release):
        action.add_argument("--cluster", action="store_true",
                            help="the Ray cluster's quarantine (every machine's), not this machine's (hetero[ray])")
        action.add_argument("--address", default=None,
                            help="the Ray cluster with --cluster (default: RAY_ADDRESS, else the one on this machine)")
    add = actions.add_parser("add", help="quarantine a device by hand (drain it for maintenance)")
    add.add_argument("device", metavar="DEVICE", help="device name, e.g. cuda:0")
    add.add_argument("--reason", required=True, help="why (shown by 'hetero devices' and 'quarantine list')")
    add.add_argument("--class", dest="fault_class", default="degraded", choices=FAULT_CLASSES,
                     help="fault class: " + ", ".join(FAULT_CLASSES) + " (default: degraded)")
    add.add_argument("--ttl", type=_ttl, default=None,
                     help="seconds to keep it quarantined (default: the class's TTL; 0: until released)")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {"list": cmd_list, "release": cmd_release, "add": cmd_add}

    def cmd_quarantine(args: argparse.Namespace) -> int:
        if args.quarantine_command is None:
            return usage_error(parser.prog, f"name an action: {', '.join(handlers)}")
        return handlers[args.quarantine_command](args)

    return {"quarantine": cmd_quarantine}
