"""Fakes of vendor libraries for tests that run without the hardware (named as fakes on purpose)."""
