"""The ``hetero`` command: ``hetero devices [--all] [--json]``, ``hetero cache …``,
``hetero compile …``, ``hetero bundle inspect …``, ``hetero --version``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import hetero
from hetero.cli.cache import add_cache_commands
from hetero.cli.compile import add_compile_commands
from hetero.cli.table import table as _table
from hetero.core.errors import BackendUnavailableError, HeteroError
from hetero.core.registry import enabled_backends


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def cmd_devices(args: argparse.Namespace) -> int:
    statuses = hetero.backend_statuses()
    enabled = set(enabled_backends())
    try:
        found = hetero.devices()
    except BackendUnavailableError:
        if not args.all:
            raise
        found = [d for s in statuses if s.available and s.name in enabled for d in s.devices]
    from hetero.cli.quarantine import quarantine_entries

    held = quarantine_entries(found)  # by stable id; expired entries of healthy devices released first
    if args.json:
        payload: dict[str, Any] = {
            "version": hetero.__version__,
            "devices": [{**d.info.as_dict(), "health": str(d.health().state), "health_reason": d.health().reason,
                         "quarantined": d.stable_id in held,
                         "quarantine": held[d.stable_id].as_dict() if d.stable_id in held else None} for d in found],
        }
        if args.all:
            payload["backends"] = [{**s.as_dict(), "enabled": s.name in enabled} for s in statuses]
        print(json.dumps(payload, indent=2))
        return 0
    header = ["device", "vendor", "kind", "model", "memory", "units", "driver", "health"]
    rows = [[d.name, d.vendor, str(d.kind), d.model, _gib(d.memory), str(d.compute_units), d.driver_version,
             str(d.health()) + (", " + held[d.stable_id].describe() if d.stable_id in held else "")]
            for d in found]
    print(_table(rows, header) if rows else "no devices found (run 'hetero devices --all' to see why)")
    if args.all:
        missing = [s for s in statuses if not s.available or s.name not in enabled]
        if missing:
            print("\nunavailable backends:")
            for s in missing:
                reason = "excluded by HETERO_BACKENDS" if s.name not in enabled else s.reason
                remedy = f"\n      remedy: {s.remedy}" if s.remedy and s.name in enabled else ""
                print(f"  {s.name}: {reason}{remedy}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"devices": cmd_devices}
#: Modules with ``add_commands(subparsers) -> {name: handler}``: ``hetero quarantine …``, ``hetero calibrate``.
_OPTIONAL_COMMANDS = ("hetero.cli.quarantine", "hetero.cli.calibrate", "hetero.cli.serve", "hetero.cli.infer",
                      "hetero.cli.top")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetero", description="One device API over NVIDIA, AMD, Intel and CPU devices.")
    parser.add_argument("--version", action="version", version=f"hetero {hetero.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    devices = sub.add_parser("devices", help="list every device of every backend")
    devices.add_argument("--all", action="store_true", help="also show unavailable backends and why")
    devices.add_argument("--json", action="store_true", help="machine-readable output")
    COMMANDS.update(add_cache_commands(sub))
    COMMANDS.update(add_compile_commands(sub))
    for module in _OPTIONAL_COMMANDS:  # command groups of the fault and scheduler layers
        COMMANDS.update(importlib.import_module(module).add_commands(sub))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except HeteroError as exc:
        print(f"hetero: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
