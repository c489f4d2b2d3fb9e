"""The ``hetero`` command: ``hetero devices [--all] [--json]``, ``hetero cache …``,
``hetero compile …``, ``hetero bundle inspect …``, ``hetero --version``; ``python -m hetero`` too.

A subcommand's handler returns its exit status or raises; :func:`main` turns what it raises into
one line on stderr and the exit status of :mod:`hetero.core.exit_status` (2: bad arguments, 1: a
failure), with the traceback under ``--debug`` (accepted before or after the subcommand) or
``HETERO_LOG=DEBUG``."""

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
from hetero.cli.completion import add_commands as add_completion_commands
from hetero.cli.table import table as _table
from hetero.core.errors import BackendUnavailableError
from hetero.core.exit_status import USAGE, Parser, debug_wanted, report
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


DEBUG_HELP = "on an error, print the traceback too (as HETERO_LOG=DEBUG does)"
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"devices": cmd_devices}
#: Modules with ``add_commands(subparsers) -> {name: handler}``: ``hetero quarantine …``, ``hetero calibrate``.
_OPTIONAL_COMMANDS = ("hetero.cli.quarantine", "hetero.cli.calibrate", "hetero.cli.serve", "hetero.cli.infer",
                      "hetero.cli.top", "hetero.cli.ray_cluster")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="hetero", description="One device API over NVIDIA, AMD, Intel and CPU devices.",
                    epilog="Exit status: 0 done, 1 failed, 2 bad arguments. Docs: docs/cli.md")
    parser.add_argument("--version", action="version", version=f"hetero {hetero.__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    devices = sub.add_parser("devices", help="list every device of every backend")
    devices.add_argument("--all", action="store_true", help="also show unavailable backends and why")
    devices.add_argument("--json", action="store_true", help="machine-readable output")
    COMMANDS.update(add_cache_commands(sub))
    COMMANDS.update(add_compile_commands(sub))
    for module in _OPTIONAL_COMMANDS:  # command groups of the fault and scheduler layers
        COMMANDS.update(importlib.import_module(module).add_commands(sub))
    COMMANDS.update(add_completion_commands(sub, build_parser))
    _accept_debug_anywhere(parser)
    return parser


def _accept_debug_anywhere(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the subcommand too (``hetero serve m.onnx --debug``), at every depth; shown
    once, in ``hetero --help``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if not any("--debug" in a.option_strings for a in child._actions):
                    child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
                _accept_debug_anywhere(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    try:
        return COMMANDS[args.command](args)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - every failure is one line (and a status)
        return report("hetero", exc, debug_wanted(args.debug))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
