"""The ``hetero cache`` commands: ``hetero cache info [--json]`` and ``hetero cache clear``.

:func:`add_cache_commands` adds them to the ``hetero`` parser and returns the handler
to register in ``hetero.cli.main.COMMANDS``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from hetero.compiler.frontend import source_index
from hetero.compiler.build.cache import default_cache
from hetero.core.exit_status import usage_error


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def cmd_cache_info(args: argparse.Namespace) -> int:
    info = default_cache().info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"root:    {info['root']}")
    print(f"entries: {info['entries']} (kernels: {info['kernels']}, generated modules: {info['modules']})")
    print(f"size:    {_size(info['bytes'])}")
    disk, memory = info["bounds"]["disk"], info["bounds"]["memory"]
    # The least recently used entries go first past a bound (settings cache_max_size, cache_max_entries,
    # cache_memory_max_size, cache_memory_max_entries).
    print(f"bounds:  disk {_size(disk['max_bytes'])} / {disk['max_entries']} entries, "
          f"memory {_size(memory['max_bytes'])} / {memory['max_entries']} entries per process")
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    cache = default_cache()
    before = cache.info()
    removed = cache.clear()
    indexed = source_index.clear()
    print(f"removed {removed} cache entries (kernels: {before['kernels']}, generated modules: {before['modules']}; "
          f"{_size(before['bytes'])}) from {before['root']}, and {indexed} source index entries")
    return 0


def add_cache_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``cache info`` and ``cache clear`` to ``subparsers`` (from ``add_subparsers``).

    Returns ``{"cache": handler}``; the handler runs the subcommand the user named.
    """
    cache = subparsers.add_parser("cache", help="show or clear the compiled-kernel cache")
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    info = actions.add_parser("info", help="where the cache is, how many entries, how big, and its bounds")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    actions.add_parser("clear", help="remove every cached kernel and generated module")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {"info": cmd_cache_info, "clear": cmd_cache_clear}

    def cmd_cache(args: argparse.Namespace) -> int:
        if args.cache_command is None:
            return usage_error(cache.prog, f"name an action: {', '.join(handlers)}")
        return handlers[args.cache_command](args)

    return {"cache": cmd_cache}
