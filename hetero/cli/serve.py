"""``hetero serve MODEL.onnx [--devices cpu,oneapi:0|all] [--port 8000] ...``: an ONNX model in a
:class:`hetero.onnx.Pool` behind the KServe v2 HTTP protocol (:mod:`hetero.serve`) until Ctrl-C or
SIGTERM, which finish the requests in flight first (within ``--drain-timeout``). Its limits
(timeouts, body and JSON caps, concurrency) are :class:`hetero.serve.limits.ServeLimits`.

:func:`add_commands` adds it to the ``hetero`` parser and returns the handler to register in
``hetero.cli.main.COMMANDS``. ONNX Runtime and aiohttp are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hetero.cli.inputs import existing_file
from hetero.core.device_list import parse_devices
from hetero.core.errors import DeviceSpecError, HeteroError
from hetero.core.exit_status import UsageError
from hetero.core.optional import require

MIB = 2**20

# The module docstring is reStructuredText for the docs; --help shows plain text.
DESCRIPTION = ("Serve an ONNX model over the KServe v2 HTTP protocol (as Triton Inference Server does, so "
               "tritonclient.http works unchanged), from a pool of ONNX Runtime sessions on the devices named, "
               "failing requests over to healthy devices. Slow, large or too many requests are refused (the limits "
               "below). Ctrl-C or SIGTERM stop it after answering the requests in flight (for at most "
               "--drain-timeout). Example: hetero serve model.onnx --devices cuda:0,cpu --port 8000")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 0 to 65535 (0: any free one), got {value}")
    return value


def _megabytes(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of MiB, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _seconds_or_zero(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value


def _devices(text: str) -> str | list[str]:
    """``all``, or the comma-separated device names as a list (:func:`~hetero.core.device_list.parse_devices`)."""
    try:
        names = [str(name) for name in parse_devices(text, what="")]  # argparse names the option
    except DeviceSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return "all" if names == ["all"] else names


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``serve`` to ``sub`` (from ``add_subparsers``); returns ``{"serve": handler}``."""
    parser = sub.add_parser("serve", help="serve an ONNX model over the KServe v2 HTTP protocol", description=DESCRIPTION)
    parser.add_argument("model", type=Path, metavar="MODEL.onnx", help="the ONNX model file")
    parser.add_argument("--devices", type=_devices, default="all",
                        help="comma-separated devices, e.g. cuda:0,cpu, or 'all' (default: every device with an "
                             "installed ONNX Runtime provider)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument("--port", type=_port, default=8000, help="TCP port (default: 8000)")
    parser.add_argument("--max-batch", type=_positive_int, default=None, metavar="N",
                        help="refuse requests whose batch (first) dimension is over N (default: no limit)")
    parser.add_argument("--max-body-mb", type=_megabytes, default=64.0, metavar="MB",
                        help="refuse request bodies over MB MiB with 413 (default: 64)")
    parser.add_argument("--max-json-mb", type=_megabytes, default=None, metavar="MB",
                        help="refuse a request whose JSON part is over MB MiB with 413, before parsing it: JSON "
                             "tensors take 8-16x their size while parsed; large tensors go binary (default: 8, at "
                             "most --max-body-mb)")
    parser.add_argument("--max-inflight-mb", type=_megabytes, default=None, metavar="MB",
                        help="request bodies held at once, all clients together; past it a request gets 503 with "
                             "Retry-After (default: 256, at least --max-body-mb)")
    parser.add_argument("--max-concurrent", type=_positive_int, default=64, metavar="N",
                        help="requests being received or run at once; past it a request gets 503 with Retry-After "
                             "(default: 64)")
    parser.add_argument("--header-timeout", type=_seconds, default=10.0, metavar="S",
                        help="close a connection that has not sent a whole request head S seconds after it opened "
                             "or was last answered, idle keep-alive connections included (default: 10)")
    parser.add_argument("--body-timeout", type=_seconds, default=30.0, metavar="S",
                        help="answer 408 to a request whose body has not arrived S seconds after its head "
                             "(default: 30)")
    parser.add_argument("--drain-timeout", type=_seconds_or_zero, default=5.0, metavar="S",
                        help="on SIGTERM or Ctrl-C, wait at most S seconds for the requests being run (default: 5)")
    parser.add_argument("--replicas", type=_positive_int, default=1, help="sessions per device (default: 1)")
    parser.add_argument("--policy", default="least-outstanding",
                        help="routing policy: least-outstanding (default), round-robin or fastest")
    parser.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                        help="threads running requests (default: twice the CPU count, at most 32)")
    parser.add_argument("--name", default=None, help="model name in the URLs (default: the file name without .onnx)")
    parser.add_argument("--fallback-cpu", action="store_true",
                        help="run on the CPU on purpose where a device's ONNX Runtime provider is missing or takes "
                             "none of the model's nodes (default: such a device is an error)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="run the model split where a device's provider takes only some of its nodes (default: "
                             "an error naming the ops that went to the CPU)")
    return {"serve": cmd_serve}


def open_pool(args: argparse.Namespace) -> Any:
    """The :class:`hetero.onnx.Pool` the arguments describe (imports ONNX Runtime)."""
    from hetero.onnx import Pool

    return Pool(str(args.model), devices=args.devices, policy=args.policy, replicas=args.replicas,
                fallback="cpu" if args.fallback_cpu else None, partial="allow" if args.allow_partial else "refuse",
                name=args.name or args.model.stem)


def _log_to_stderr() -> None:
    """The server's own lines (its URL, shutdown) at INFO on stderr; the rest of hetero keeps the level
    HETERO_LOG sets."""
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("hetero.serve").setLevel(logging.INFO)


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """The server's limits from the options (:class:`hetero.serve.limits.ServeLimits`), checked
    together: a usage error (exit 2) names the flags that do not fit."""
    from hetero.serve.limits import ServeLimits

    mib = {name: None if value is None else int(value * MIB)
           for name, value in (("max_json_bytes", args.max_json_mb), ("max_inflight_bytes", args.max_inflight_mb))}
    limits = {"max_body_bytes": int(args.max_body_mb * MIB), **mib, "max_concurrent": args.max_concurrent,
              "header_timeout": args.header_timeout, "body_timeout": args.body_timeout,
              "shutdown_timeout": args.drain_timeout}
    try:
        ServeLimits.build(limits["max_body_bytes"], mib["max_json_bytes"], mib["max_inflight_bytes"],
                          max_concurrent=args.max_concurrent, header_timeout=args.header_timeout,
                          body_timeout=args.body_timeout, drain_timeout=args.drain_timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return limits


def cmd_serve(args: argparse.Namespace) -> int:
    for module in ("aiohttp", "prometheus_client", "onnxruntime"):  # what the extra brings, said before any work
        require(module, extra="serve", feature="hetero serve")
    existing_file(args.model, "model file", "pass the path of an .onnx file")
    limits = _limits(args)  # checked before the model is loaded
    _log_to_stderr()
    pool = open_pool(args)
    from hetero.serve import runner

    try:
        runner.serve(pool, host=args.host, port=args.port, max_batch=args.max_batch, workers=args.workers, **limits)
    except OSError as exc:  # the port is taken, or the host is not an address of this machine
        raise HeteroError(str(exc)) from exc
    return 0


__all__ = ["add_commands", "cmd_serve", "open_pool"]
