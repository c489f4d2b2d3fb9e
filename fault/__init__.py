"""Fault handling: error taxonomy, health monitors, injection, quarantine and migration.
Built in the fault-handling issue; may use backends and the scheduler."""
