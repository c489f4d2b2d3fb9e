"""Fault handling: error taxonomy, health monitors, injection, quarantine and migration.
Built in the fault-handling issue; may use backends and the scheduler."""

from hetero.fault.injection import inject as inject  # noqa: E402  (fault injection: hetero.fault.inject(rule))
