"""``hetero-run``, the launcher: a supervisor process that starts one worker process per device,
watches it, and restarts it elsewhere from its last checkpoint when it dies, hangs or reports a
device fault.

The floor above the fault policy (:mod:`hetero.fault`) and the public API it runs (checkpoints):
nothing below imports it. Which side of the process boundary each module runs on:

==================  ==========  =========================================================
module              runs in     job
==================  ==========  =========================================================
``cli``             supervisor  ``hetero-run``'s command line, building one :class:`LaunchConfig`
``config``          supervisor  :class:`LaunchConfig`: every option of a run, checked in one place
``state``           supervisor  :class:`WorkerState` (a rank's life) and :class:`RunResult` (how a run ended)
``supervisor``      supervisor  the restart loop (single node)
``starter``         supervisor  starting worker incarnations: their environment, warm standbys
``elastic``         supervisor  the same loop across nodes (a rendezvous store)
``assign``          supervisor  which device each worker gets, and its environment
``worker_handle``   supervisor  the supervisor's handle on one worker process
``events``          supervisor  the run's events file and goodput
``faults``          supervisor  what a worker's exit and fault report say (read without trusting it)
``warmup``          supervisor  checkpoint verification and device warm-up ahead of a restart
``descendants``     supervisor  finding and killing what a dead worker left running
``metrics``         supervisor  the Prometheus endpoint
``worker_main``     worker      the worker's bootstrap (``python -m hetero.launcher.worker_main``)
==================  ==========  =========================================================

What both sides agree on (environment names, exit codes, the heartbeat file) is in
:mod:`hetero.fault.protocol` and :mod:`hetero.fault.heartbeat`, a floor down, because the
checkpoint API and the guard speak it too.

May import: every floor below (checkpoints, the fault policy, the scheduler, core); nothing below imports it.
"""
