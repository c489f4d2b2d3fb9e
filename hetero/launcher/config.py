"""What a ``hetero-run`` run is asked to do: one :class:`LaunchConfig`, built once by the command
line (:mod:`hetero.launcher.cli`) and read by the single-node supervisor and by the torch
elastic path alike, each option checked here, in one place, before anything starts.

The fields every run uses come first; then those only the single-node supervisor acts on
(under torch elastic a failure restarts the node's whole group, so ``hetero-run`` warns when
they are set there: :meth:`LaunchConfig.ignored_under_elastic`); the node's place in a
multi-node job is the nested :class:`Nodes` record.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from pathlib import Path

from hetero.core.device_list import parse_devices
from hetero.core.errors import DeviceSpecError
from hetero.launcher.assign import MAX_WORKERS_PER_DEVICE, POLICIES, OptionError

DEFAULT_MAX_RESTARTS = 3
DEFAULT_HEARTBEAT_TIMEOUT = 300.0
DEFAULT_GRACE = 5.0
DEFAULT_METRICS_ADDR = "127.0.0.1"
DEFAULT_RDZV_ID = "hetero"
DEFAULT_RDZV_TIMEOUT = 300
RESTART_MODES = ("worker", "group")
#: What a failed worker is restarted for: ``fault`` (default) a device fault, a crash by a signal or a
#: hang, never an exception of the program itself (as torchrun); ``any`` every failure.
RESTART_ON = ("fault", "any")
#: Bounds of the options (each checked before anything starts).
MAX_NPROC = 1024
MAX_RESTARTS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_NODES = 10_000
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclasses.dataclass(frozen=True)
class Nodes:
    """This node's place in the job. One node with no rendezvous endpoint is a single-node run
    (the supervisor); more nodes, or an endpoint, run under torch elastic's agent."""

    count: int = 1  # --nnodes
    rank: int = 0  # --node-rank; node 0 hosts the rendezvous store
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0
    rdzv_id: str = DEFAULT_RDZV_ID
    rdzv_timeout: int = DEFAULT_RDZV_TIMEOUT  # seconds to wait for every node

    @property
    def elastic(self) -> bool:
        """Whether torch elastic runs this node's workers (rather than the supervisor)."""
        return self.count > 1 or self.rdzv_endpoint is not None

    def check(self) -> None:
        """Raise :class:`OptionError` naming the first option out of range."""
        if not 1 <= self.count <= MAX_NODES:
            raise OptionError(f"--nnodes must be in 1..{MAX_NODES}, got {self.count}")
        if not 0 <= self.rank < self.count:
            raise OptionError(f"--node-rank must be in 0..{self.count - 1} for --nnodes {self.count}, got {self.rank}")
        if self.count > 1 and not self.rdzv_endpoint:
            raise OptionError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the address of node 0)")
        if self.rdzv_endpoint is not None:
            host, _, port = self.rdzv_endpoint.rpartition(":")
            if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
                raise OptionError(f"--rdzv-endpoint must be HOST:PORT with a port in 1..65535, "
                                  f"got {self.rdzv_endpoint!r}")
        if self.rdzv_timeout <= 0:
            raise OptionError(f"the rendezvous timeout must be positive seconds, got {self.rdzv_timeout}")


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """Everything a run needs, resolved and checked (construction raises :class:`OptionError`,
    naming the option, for a value out of range; ``hetero-run`` exits 2 with it)."""

    command: tuple[str, ...]  # ("script.py", *args) or ("-m", "module", *args)
    run_dir: Path
    checkpoint_dir: Path
    events: Path | None
    nproc: int = 1
    devices: str | None = None
    policy: str = "spread"
    max_restarts: int = DEFAULT_MAX_RESTARTS
    inject: tuple[str, ...] = ()
    quota: str | None = None  # HETERO_QUOTA for every worker (hetero-run --quota)
    # -- what only the single-node supervisor acts on ----------------------------------------
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT  # 0: never a hang
    restart: str = "worker"  # or "group"
    restart_on: str = "fault"  # or "any": restart for an exception of the program too
    grace: float = DEFAULT_GRACE
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # None: a free port
    standby: bool = True  # start workers' interpreters ahead of need (worker_main.WarmStandby)
    preload: tuple[str, ...] = ()  # modules a standby imports while it waits (e.g. torch)
    metrics_port: int | None = None
    metrics_addr: str = DEFAULT_METRICS_ADDR
    summary_json: bool = False  # the end-of-run summary as JSON on stdout, not a table on stderr
    # -- a multi-node job --------------------------------------------------------------------
    nodes: Nodes = dataclasses.field(default_factory=Nodes)

    def __post_init__(self) -> None:
        self._check_counts()
        self._check_devices()
        self._check_addresses()
        self.nodes.check()
        self._check_paths()
        self._check_rules()
        self._check_command()

    def ignored_under_elastic(self) -> list[str]:
        """The single-node-only options given other values than their defaults (named as on the
        command line), which torch elastic does not act on."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        return [option for option, name in (
            ("--heartbeat-timeout", "heartbeat_timeout"), ("--restart", "restart"), ("--metrics-port", "metrics_port"),
            ("--metrics-addr", "metrics_addr"), ("--grace", "grace"), ("--preload", "preload"),
            ("--restart-on", "restart_on"), ("--json", "summary_json"),
        ) if getattr(self, name) != fields[name].default]

    # -- checks, in the order the command line reports them ----------------------------------
    def _check_counts(self) -> None:
        if self.nproc < 1:
            raise OptionError(f"--nproc must be at least 1, got {self.nproc}")
        if self.nproc > MAX_NPROC:
            raise OptionError(f"--nproc must be at most {MAX_NPROC} (and {MAX_WORKERS_PER_DEVICE} per device), "
                              f"got {self.nproc}")
        if self.policy not in POLICIES:
            raise OptionError(f"--policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.restart not in RESTART_MODES:
            raise OptionError(f"--restart must be one of {', '.join(RESTART_MODES)}, got {self.restart!r}")
        if self.restart_on not in RESTART_ON:
            raise OptionError(f"--restart-on must be one of {', '.join(RESTART_ON)}, got {self.restart_on!r}")
        if not 0 <= self.max_restarts <= MAX_RESTARTS:
            raise OptionError(f"--max-restarts must be 0 or more (at most {MAX_RESTARTS}), got {self.max_restarts}")
        if not (math.isfinite(self.heartbeat_timeout) and 0 <= self.heartbeat_timeout <= MAX_SECONDS):
            raise OptionError(f"--heartbeat-timeout must be 0 (off) or positive seconds up to {MAX_SECONDS:g}, "
                              f"got {self.heartbeat_timeout}")
        if not (math.isfinite(self.grace) and 0 <= self.grace <= MAX_SECONDS):
            raise OptionError(f"--grace must be 0 or more seconds (at most {MAX_SECONDS:g}), got {self.grace}")

    def _check_addresses(self) -> None:
        for option, port in (("--metrics-port", self.metrics_port), ("--master-port", self.master_port)):
            if port is not None and not 1 <= port <= 65535:
                raise OptionError(f"{option} must be a TCP port, 1..65535, got {port}")
        if self.metrics_addr != "localhost":
            try:
                ipaddress.ip_address(self.metrics_addr)
            except ValueError:
                raise OptionError(f"--metrics-addr must be an IP address (127.0.0.1, the default; 0.0.0.0 for every "
                                  f"network) or localhost, got {self.metrics_addr!r}") from None

    def _check_paths(self) -> None:
        for option, folder in (("--run-dir", self.run_dir), ("--checkpoint-dir", self.checkpoint_dir)):
            if folder.exists() and not folder.is_dir():
                raise OptionError(f"{option} {str(folder)!r} is a file, not a directory; name a directory "
                                  "(made if missing)")
        if self.events is not None and self.events.is_dir():
            raise OptionError(f"--events {str(self.events)!r} is a directory; name the file to write, "
                              f"e.g. {self.events / 'events.jsonl'}")

    def _check_devices(self) -> None:
        """The syntax of ``--devices`` (whether each name is present is known once devices are listed)."""
        if self.devices is None:
            return
        try:
            parse_devices(self.devices, "--devices")
        except DeviceSpecError as exc:
            raise OptionError(str(exc)) from None

    def _check_rules(self) -> None:
        bad = [m for m in self.preload if not _MODULE.match(m)]
        if bad:
            raise OptionError(f"--preload takes comma-separated module names (e.g. torch,numpy); {bad[0]!r} is not one")
        if self.inject:
            from hetero.core.errors import ConfigError  # only with --inject: the rule parser is not start-up's cost
            from hetero.fault.injection_rules import parse_rule

            for rule in self.inject:
                try:
                    parse_rule(rule)
                except ConfigError as exc:
                    raise OptionError(f"--inject {rule!r}: {exc}") from None
        if self.quota is not None:
            from hetero.core.config import parse_quota
            from hetero.core.errors import ConfigError

            try:
                parse_quota(self.quota, "--quota")
            except ConfigError as exc:
                raise OptionError(str(exc)) from None

    def _check_command(self) -> None:
        if not self.command:
            raise OptionError("name a script (hetero-run train.py) or a module (hetero-run -m package.train)")
        if self.command[0] == "-m":
            return  # found (or not) by the worker, as python -m does
        if self.command[0].startswith("-"):
            raise OptionError(f"unknown option {self.command[0]!r} (options go before the script)")
        if not Path(self.command[0]).is_file():
            raise OptionError(f"script {self.command[0]!r} not found (relative to {os.getcwd()})")
