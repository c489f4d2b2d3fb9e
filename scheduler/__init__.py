"""Placement of work on devices by policy, quota and measured speed. Pure policy over
device descriptors: no vendor library, no I/O. Built in the scheduler issue."""
