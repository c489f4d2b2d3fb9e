"""``hetero-run``: run a training script as supervised workers, one per device, restarting
failed workers on healthy devices from their newest checkpoint.

    hetero-run train.py --epochs 3
    hetero-run --nproc 2 --devices cpu,oneapi --inject 'cpu:launch:nth=2000:crash' train.py
    hetero-run --nnodes 2 --node-rank 0 --rdzv-endpoint host0:29400 --nproc 4 -m my.train
    hetero-run --ray --nproc 4 --checkpoint-dir /shared/ckpt train.py    # workers as Ray actors, any node

A worker is restarted for a device fault (a fault report, a crash by a signal, a hang);
an exception of the program itself ends the run, as with torchrun (``--restart-on any``
restarts it too).

Exit status: 0 when every worker finished; 1 when the run failed (a worker's own error,
``--max-restarts`` used up, no usable device left); 2 for bad arguments (an unknown option
or device, a value out of range: one line, nothing started); 128+N when stopped by signal N
(130 for Ctrl-C, 143 for SIGTERM). The summary table goes to stderr once the run has started
(``--json``: a JSON object, the last line of stdout). See docs/launcher.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hetero._version import __version__
from hetero.core.exit_status import Parser, debug_wanted, report
from hetero.launcher.assign import POLICIES, OptionError
from hetero.launcher.config import (
    DEFAULT_GRACE,
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_MAX_RESTARTS,
    DEFAULT_METRICS_ADDR,
    DEFAULT_RDZV_ID,
    RESTART_MODES,
    RESTART_ON,
    LaunchConfig,
    Nodes,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hetero-run",
        usage="hetero-run [options] (script.py | -m module) [args ...]",
        description="Run a script as supervised workers, one per device; restart failed workers on "
                    "healthy devices from their newest checkpoint.",
        epilog="Exit status: 0 done, 1 failed (a worker's own error, restarts used up, no device left), "
               "2 bad arguments, 128+N stopped by signal N. Docs: docs/launcher.md, docs/cli.md",
    )
    add = parser.add_argument
    add("--version", action="version", version=f"hetero-run (hetero {__version__})")
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
    add("--restart", choices=RESTART_MODES, default="worker",
        help="restart only the failed worker (default) or every worker (collective training)")
    add("--restart-on", choices=RESTART_ON, default="fault",
        help="fault: restart a worker for a device fault, a crash by a signal or a hang, while an "
             "exception of the program ends the run (default, as torchrun); any: restart for every failure")
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
    add("--rdzv-id", default=DEFAULT_RDZV_ID,
        help=f"rendezvous (job) id shared by every node (default {DEFAULT_RDZV_ID!r})")
    add("--ray", action="store_true",
        help="run the workers as Ray actors on hetero devices across a Ray cluster (hetero.ray.run); only a failed "
             "worker restarts, on any node; give --checkpoint-dir on storage every node reads")
    add("--ray-address", metavar="ADDR",
        help="with --ray: the cluster to join, HOST:PORT or auto (the one Ray finds on this machine); default: "
             "RAY_ADDRESS, else a new one-node cluster of this machine's devices")
    add("--json", dest="summary_json", action="store_true",
        help="the end-of-run summary as one JSON object, the last line of stdout (instead of a table on stderr)")
    add("--debug", action="store_true", help="on an error of hetero-run itself, print the traceback too "
                                              "(as HETERO_LOG=DEBUG does)")
    add("-m", dest="module", metavar="module", help="run a module, as python -m does")
    add("command", nargs=argparse.REMAINDER, help="script.py and its arguments")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed, where everything after ``-m MODULE`` is the module's own, as with ``python -m``
    (argparse would read a module's ``--steps 60`` as hetero-run's and refuse it); everything after
    a script's name is the script's already (``command`` takes the remainder)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-m" in argv:
        end = argv.index("-m") + 2
        head = parser.parse_args(argv[:end])
        if head.module is not None and not head.command:  # -m came before any script: a module run
            head.command = argv[end:]
            return head
    return parser.parse_args(argv)


def build_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> LaunchConfig:
    """The run's one :class:`LaunchConfig`; an option out of range (checked by the record, before
    anything starts) exits 2 naming it. ``--nproc`` is checked against the devices too, once they
    are known (``check_nproc``)."""
    command = ["-m", args.module, *args.command] if args.module else list(args.command)
    run_dir = (args.run_dir or default_run_dir()).resolve()
    try:
        return LaunchConfig(
            command=tuple(command), run_dir=run_dir,
            checkpoint_dir=(args.checkpoint_dir or run_dir / "checkpoints").resolve(),
            events=(args.events or run_dir / "events.jsonl").resolve(), nproc=args.nproc, devices=args.devices,
            policy=args.policy, max_restarts=args.max_restarts, inject=tuple(args.inject), quota=args.quota,
            heartbeat_timeout=args.heartbeat_timeout, restart=args.restart, restart_on=args.restart_on,
            grace=args.grace, summary_json=args.summary_json,
            master_addr=args.master_addr, master_port=args.master_port, standby=args.standby,
            preload=tuple(m.strip() for m in args.preload.split(",") if m.strip()),
            metrics_port=args.metrics_port, metrics_addr=args.metrics_addr,
            nodes=Nodes(count=args.nnodes, rank=args.node_rank, rdzv_endpoint=args.rdzv_endpoint or None,
                        rdzv_id=args.rdzv_id))
    except OptionError as exc:
        parser.error(str(exc))


def check_ray_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--ray-address`` needs ``--ray``; options of one machine's supervisor do not apply to a cluster run."""
    if args.ray_address and not args.ray:
        parser.error("--ray-address needs --ray")
    if not args.ray:
        return
    local = [option for option, given in (
        ("--nnodes", args.nnodes != 1), ("--rdzv-endpoint", args.rdzv_endpoint), ("--metrics-port", args.metrics_port),
        ("--policy", args.policy != "spread"), ("--master-port", args.master_port)) if given]
    if local:
        parser.error(f"{', '.join(local)} do not apply with --ray: Ray places the workers (one per node first) "
                     "and the nodes are Ray's")


def default_run_dir() -> Path:
    from hetero.core.config import get_config

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
    args = parse_args(parser, argv)
    check_ray_options(parser, args)
    try:
        if args.ray:
            from hetero.core.cluster_hooks import RAY_RUN

            return int(RAY_RUN.get()(build_config(parser, args), args.ray_address))  # hetero.ray.train
        return _run(build_config(parser, args))  # a bad HETERO_* setting (read for the run dir) is said too
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line (and a status) for every error
        return report("hetero-run", exc, debug_wanted(args.debug))


def _run(config: LaunchConfig) -> int:
    """Run ``config``: the node's workers under torch elastic, or the supervisor; its exit status.
    What it raises (a bad option found once devices are listed, a port taken) :func:`_main` says."""
    if config.quota is not None:
        from hetero.core.config import reload_config

        os.environ["HETERO_QUOTA"] = config.quota  # every worker's environment is built from this one
        reload_config()  # and this process's own configuration (parsed once already, for the run dir)

    from hetero.launcher.metrics import Metrics

    metrics = Metrics()
    try:
        if config.nodes.elastic:
            from hetero.launcher.elastic import run_elastic

            ignored = config.ignored_under_elastic()
            if ignored:
                print(f"hetero-run: warning: {', '.join(ignored)} apply to single-node runs only; under torch "
                      "elastic a failure restarts the node's whole group (see docs/launcher.md)", file=sys.stderr)
            return run_elastic(config).exit_code
        if config.metrics_port is not None:
            from hetero.launcher.metrics import serve

            metrics = serve(config.metrics_port, config.metrics_addr)
        from hetero.launcher.supervisor import run

        return run(config, metrics, handle_signals=(signal.SIGINT, signal.SIGTERM)).exit_code
    finally:
        metrics.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
