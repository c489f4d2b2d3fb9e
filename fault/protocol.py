"""The contract between ``hetero-run`` (the supervisor) and its workers: environment
variable names, the reserved exit code, and the fault-report and heartbeat formats.

Only constants and tiny pure helpers live here, so both sides (and tests) import it
without pulling anything else in.

Environment the launcher sets for each worker (besides ``HETERO_DEVICE``, the vendor's
visibility variable and torch.distributed's ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/
``MASTER_ADDR``/``MASTER_PORT``):

- ``HETERO_RUN_DIR``: a directory private to this run (fault reports, heartbeats).
- ``HETERO_WORKER``: the worker's rank, as a string.
- ``HETERO_HEARTBEAT_FILE``: the file :func:`hetero.heartbeat` rewrites (JSON, see
  :data:`HEARTBEAT_FIELDS`); the launcher reads its contents' ``time`` (and the file's mtime),
  ``launches`` and ``host_fallbacks`` (counts for its metrics), and ``torch_device``: where torch
  runs for the worker's device (null until that is known).
- ``HETERO_FAULT_REPORT``: where a worker that meets a fatal device error writes a JSON
  report (:data:`FAULT_REPORT_FIELDS`) before exiting with :data:`FAULT_EXIT_CODE`; a worker
  whose program raised any other exception writes an exception report there instead
  (:data:`EXCEPTION_REPORT_FIELDS`, ``exception`` true, ``quarantine`` false) and exits 1.
- ``HETERO_CHECKPOINT_DIR``: where :mod:`hetero.checkpoint.store` saves by default.
- ``HETERO_RESUME_STEP``: the step the restarted worker resumes from (absent on a first start).
- ``HETERO_RESTART``: how many times this worker has been restarted (``0`` on a first start).
- ``HETERO_CHECKPOINT_VERIFIED``: set on a restart: the checkpoint the launcher already
  verified and its files' identity, so ``hetero.checkpoint.store.load`` need not hash it again
  while the files are unchanged (see ``hetero/checkpoint/store.py``).
- ``HETERO_QUOTA``: the worker's memory quota (``hetero-run --quota``), applied by the bootstrap.
- ``HETERO_RUN_ID``: one per run, inherited by everything a worker starts: how the launcher
  finds (and ends) what a worker left behind (``hetero.launcher.descendants``).
- ``HETERO_LAUNCHER_PID``: the launcher's pid; the bootstrap arms ``PR_SET_PDEATHSIG`` against it
  and removes the variable.
"""

from __future__ import annotations

ENV_RUN_DIR = "HETERO_RUN_DIR"
ENV_WORKER = "HETERO_WORKER"
ENV_HEARTBEAT_FILE = "HETERO_HEARTBEAT_FILE"
ENV_FAULT_REPORT = "HETERO_FAULT_REPORT"
ENV_CHECKPOINT_DIR = "HETERO_CHECKPOINT_DIR"
ENV_RESUME_STEP = "HETERO_RESUME_STEP"
ENV_RESTART = "HETERO_RESTART"
ENV_CHECKPOINT_VERIFIED = "HETERO_CHECKPOINT_VERIFIED"
ENV_RUN_ID = "HETERO_RUN_ID"
ENV_LAUNCHER_PID = "HETERO_LAUNCHER_PID"

#: Exit status of a worker that stopped because of a device fault it reported in
#: ``HETERO_FAULT_REPORT`` (EX_SOFTWARE+16; not used by Python, shells or signals).
FAULT_EXIT_CODE = 86

#: Keys of the fault report JSON object.
FAULT_REPORT_FIELDS = (
    "device",       # "cuda:0"
    "stable_id",    # the device's stable id (quarantine key)
    "backend",
    "error_type",   # the hetero error class name, e.g. "ContextCorruptedError"
    "fault_class",  # the classifier's class: recoverable|context-corrupting|device-lost|degraded
    "code",         # vendor code or null
    "code_name",
    "xid",
    "injected",
    "message",
    "time",         # wall clock, epoch seconds
    "torch_device",  # where torch ran for that device (hetero.torch_device): "cpu", "cuda:0", or null (unknown)
)

#: Keys of the exception report (an error of the program, not of a device: never quarantines).
EXCEPTION_REPORT_FIELDS = ("exception", "error_type", "message", "fault_class", "quarantine", "time", "worker", "pid")

#: Keys of the heartbeat JSON object.
HEARTBEAT_FIELDS = ("time", "step", "pid", "device", "launches", "host_fallbacks", "torch_device")
