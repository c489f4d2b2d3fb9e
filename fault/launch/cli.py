"""``hetero-run``: run a training script as supervised workers, one per device, restarting
failed workers on healthy devices from their newest checkpoint.

    hetero-run train.py --epochs 3
    hetero-run --nproc 2 --devices cpu,oneapi --inject 'cpu:launch:nth=2000:crash' train.py
    hetero-run --nnodes 2 --node-rank 0 --rdzv-endpoint host0:29400 --nproc 4 -m my.train

Exit status: 0 when every worker finished; 1 when the run gave up (``--max-restarts``
used up, no usable device left); 2 for bad arguments; 128+N when stopped by signal N
(130 for Ctrl-C, 143 for SIGTERM). The summary table goes to stderr in every case.
See docs/launcher.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hetero.fault.launch.assign import MAX_WORKERS_PER_DEVICE, POLICIES, LaunchError, OptionError

DEFAULT_MAX_RESTARTS = 3
DEFAULT_HEARTBEAT_TIMEOUT = 300.0
DEFAULT_GRACE = 5.0
DEFAULT_METRICS_ADDR = "127.0.0.1"
#: Bounds of the options (each checked before anything starts; see :func:`_check`).
MAX_NPROC = 1024
MAX_RESTARTS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_NODES = 10_000
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetero-run",
        usage="hetero-run [options] (script.py | -m module) [args ...]",
        description="Run a script as supervised workers, one per device; restart failed workers on "
                    "healthy devices from their newest checkpoint.",
        epilog="Exit status: 0 done, 1 gave up, 2 bad arguments, 128+N stopped by signal N. "
               "Docs: docs/launcher.md",
    )
    add = parser.add_argument
    add("--nproc", "--nproc-per-node", type=int, default=1, metavar="N", help="workers on this node (default 1)")
    add("--devices", metavar="SPEC",
        help="devices to use, comma-separated: auto (default: every healthy device), a backend "
             "(cuda, oneapi…) or a device (cuda:1); quarantined devices are always left out")
    add("--policy", choices=POLICIES, default="spread",
        help="spread: one worker per device, round robin (default); binpack: fill the first device")
    add("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS, metavar="K",
        help=f"restarts allowed over the whole run before giving up (default {DEFAULT_MAX_RESTARTS})")
    add("--heartbeat-timeout", type=float, default=DEFAULT_HEARTBEAT_TIMEOUT, metavar="S",
        help="a worker silent this long after its first hetero.heartbeat() is hung: killed and "
             f"restarted (default {DEFAULT_HEARTBEAT_TIMEOUT:g}; 0 turns hang detection off)")
    add("--restart", choices=("worker", "group"), default="worker",
        help="restart only the failed worker (default) or every worker (collective training)")
    add("--run-dir", type=Path, metavar="DIR",
        help="where heartbeats, fault reports and (by default) events and checkpoints go "
             "(default: $HETERO_STATE_DIR/runs/<time>-<pid>)")
    add("--checkpoint-dir", type=Path, metavar="DIR",
        help="checkpoints, one subfolder per worker (default: RUN_DIR/checkpoints); give an existing "
             "one to resume a previous run")
    add("--events", type=Path, metavar="FILE.jsonl", help="event log (default: RUN_DIR/events.jsonl)")
    add("--metrics-port", type=int, metavar="P", help="serve Prometheus metrics on this port")
    add("--metrics-addr", default=DEFAULT_METRICS_ADDR, metavar="ADDR",
        help=f"address the metrics server binds (default {DEFAULT_METRICS_ADDR}, this machine only; "
             "0.0.0.0 serves every network the machine is on)")
    add("--inject", action="append", default=[], metavar="RULE",
        help="fault-injection rule for the workers (repeatable), e.g. 'cpu:launch:nth=2000:crash'")
    add("--quota", metavar="SIZE",
        help="memory quota of each worker on each device, e.g. 2GiB, or cuda=8GiB,cpu=2GiB (sets HETERO_QUOTA "
             "for the workers; an allocation past it raises hetero.QuotaExceeded)")
    add("--grace", type=float, default=DEFAULT_GRACE, metavar="S",
        help=f"seconds between SIGTERM and SIGKILL when stopping workers (default {DEFAULT_GRACE:g})")
    add("--no-standby", dest="standby", action="store_false",
        help="start each worker's interpreter only when needed (default: started ahead, overlapping "
             "device discovery, and one kept in reserve for the next restart)")
    add("--preload", metavar="MODULES", default="",
        help="comma-separated modules the reserve worker interpreter imports ahead of a restart "
             "(e.g. torch), so a restarted worker skips them")
    add("--master-addr", default="127.0.0.1", help="MASTER_ADDR for single-node runs (default 127.0.0.1)")
    add("--master-port", type=int, help="MASTER_PORT for single-node runs (default: a free port)")
    add("--nnodes", type=int, default=1, help="nodes in the job; >1 uses torch elastic rendezvous")
    add("--node-rank", type=int, default=0, help="this node's rank; node 0 hosts the rendezvous store")
    add("--rdzv-endpoint", metavar="HOST:PORT", help="rendezvous endpoint (c10d), required with --nnodes > 1")
    add("--rdzv-id", default="hetero", help="rendezvous (job) id shared by every node (default 'hetero')")
    add("-m", dest="module", metavar="module", help="run a module, as python -m does")
    add("command", nargs=argparse.REMAINDER, help="script.py and its arguments")
    return parser


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    rest = list(args.command)
    if args.module:
        return ["-m", args.module, *rest]
    if not rest:
        parser.error("name a script (hetero-run train.py) or a module (hetero-run -m package.train)")
    if rest[0].startswith("-"):
        parser.error(f"unknown option {rest[0]!r} (options go before the script)")
    if not Path(rest[0]).is_file():
        parser.error(f"script {rest[0]!r} not found (relative to {os.getcwd()})")
    return rest


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every option in range, before anything starts (exit status 2 naming the option otherwise).
    ``--nproc`` is checked against the devices too, once they are known (``check_nproc``)."""
    if args.nproc < 1:
        parser.error(f"--nproc must be at least 1, got {args.nproc}")
    if args.nproc > MAX_NPROC:
        parser.error(f"--nproc must be at most {MAX_NPROC} (and {MAX_WORKERS_PER_DEVICE} per device), got {args.nproc}")
    if not 0 <= args.max_restarts <= MAX_RESTARTS:
        parser.error(f"--max-restarts must be 0 or more (at most {MAX_RESTARTS}), got {args.max_restarts}")
    if not (math.isfinite(args.heartbeat_timeout) and 0 <= args.heartbeat_timeout <= MAX_SECONDS):
        parser.error(f"--heartbeat-timeout must be 0 (off) or positive seconds up to {MAX_SECONDS:g}, "
                     f"got {args.heartbeat_timeout}")
    if not (math.isfinite(args.grace) and 0 <= args.grace <= MAX_SECONDS):
        parser.error(f"--grace must be 0 or more seconds (at most {MAX_SECONDS:g}), got {args.grace}")
    for option, port in (("--metrics-port", args.metrics_port), ("--master-port", args.master_port)):
        if port is not None and not 1 <= port <= 65535:
            parser.error(f"{option} must be a TCP port, 1..65535, got {port}")
    if args.metrics_addr != "localhost":
        try:
            ipaddress.ip_address(args.metrics_addr)
        except ValueError:
            parser.error(f"--metrics-addr must be an IP address (127.0.0.1, the default; 0.0.0.0 for every "
                         f"network) or localhost, got {args.metrics_addr!r}")
    if not 1 <= args.nnodes <= MAX_NODES:
        parser.error(f"--nnodes must be in 1..{MAX_NODES}, got {args.nnodes}")
    if not 0 <= args.node_rank < args.nnodes:
        parser.error(f"--node-rank must be in 0..{args.nnodes - 1} for --nnodes {args.nnodes}, got {args.node_rank}")
    if args.nnodes > 1 and not args.rdzv_endpoint:
        parser.error("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the address of node 0)")
    if args.rdzv_endpoint:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            parser.error(f"--rdzv-endpoint must be HOST:PORT with a port in 1..65535, got {args.rdzv_endpoint!r}")
    for option, folder in (("--run-dir", args.run_dir), ("--checkpoint-dir", args.checkpoint_dir)):
        if folder is not None and folder.exists() and not folder.is_dir():
            parser.error(f"{option} {str(folder)!r} is a file, not a directory; name a directory (made if missing)")
    if args.events is not None and args.events.is_dir():
        parser.error(f"--events {str(args.events)!r} is a directory; name the file to write, e.g. {args.events / 'events.jsonl'}")
    bad = [m for m in (m.strip() for m in args.preload.split(",")) if m and not _MODULE.match(m)]
    if bad:
        parser.error(f"--preload takes comma-separated module names (e.g. torch,numpy); {bad[0]!r} is not one")
    if args.inject:
        from hetero.errors import ConfigError
        from hetero.fault.injection_rules import parse_rule

        for rule in args.inject:
            try:
                parse_rule(rule)
            except ConfigError as exc:
                parser.error(f"--inject {rule!r}: {exc}")
    if args.quota is not None:
        from hetero.config import parse_quota
        from hetero.errors import ConfigError

        try:
            parse_quota(args.quota, "--quota")
        except ConfigError as exc:
            parser.error(str(exc))
        os.environ["HETERO_QUOTA"] = args.quota  # every worker's environment is built from this one


def default_run_dir() -> Path:
    from hetero.config import get_config

    return get_config().state_dir / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hetero-run`` with ``argv`` (default: the command line). Called as the command
    (``argv`` None), the process ends right after the summary, skipping interpreter teardown
    (unloading the vendor libraries device discovery opened costs ~0.3 s and does nothing
    useful: every file is closed and every worker is gone by then)."""
    code = _main(argv)
    if argv is None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    command = _command(parser, args)
    run_dir = (args.run_dir or default_run_dir()).resolve()
    checkpoint_dir = (args.checkpoint_dir or run_dir / "checkpoints").resolve()
    events = (args.events or run_dir / "events.jsonl").resolve()

    from hetero.fault.launch.metrics import Metrics

    metrics = Metrics()
    try:
        if args.metrics_port is not None and args.nnodes == 1 and not args.rdzv_endpoint:
            from hetero.fault.launch.metrics import serve

            metrics = serve(args.metrics_port, args.metrics_addr)
        if args.nnodes > 1 or args.rdzv_endpoint:
            from hetero.fault.launch.elastic import ElasticConfig, run_elastic

            ignored = [name for name, value, default in (
                ("--heartbeat-timeout", args.heartbeat_timeout, DEFAULT_HEARTBEAT_TIMEOUT),
                ("--restart", args.restart, "worker"), ("--metrics-port", args.metrics_port, None),
                ("--metrics-addr", args.metrics_addr, DEFAULT_METRICS_ADDR),
                ("--grace", args.grace, DEFAULT_GRACE), ("--preload", args.preload, "")) if value != default]
            if ignored:
                print(f"hetero-run: warning: {', '.join(ignored)} apply to single-node runs only; under torch "
                      "elastic a failure restarts the node's whole group (see docs/launcher.md)", file=sys.stderr)

            return run_elastic(ElasticConfig(
                command=command, run_dir=run_dir, checkpoint_dir=checkpoint_dir, events=events,
                nproc=args.nproc, devices=args.devices, policy=args.policy, max_restarts=args.max_restarts,
                inject=tuple(args.inject), nnodes=args.nnodes, node_rank=args.node_rank,
                rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id))
        from hetero.fault.launch.supervisor import RunConfig, run

        config = RunConfig(
            command=command, run_dir=run_dir, checkpoint_dir=checkpoint_dir, events=events, nproc=args.nproc,
            devices=args.devices, policy=args.policy, max_restarts=args.max_restarts,
            heartbeat_timeout=args.heartbeat_timeout, restart=args.restart, inject=tuple(args.inject),
            grace=args.grace, master_addr=args.master_addr, master_port=args.master_port, standby=args.standby,
            preload=tuple(m.strip() for m in args.preload.split(",") if m.strip()))
        return run(config, metrics, handle_signals=(signal.SIGINT, signal.SIGTERM))
    except OptionError as exc:
        print(f"hetero-run: error: {exc}", file=sys.stderr)
        return 2
    except (LaunchError, OSError) as exc:
        print(f"hetero-run: error: {exc}", file=sys.stderr)
        return 1
    finally:
        metrics.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
