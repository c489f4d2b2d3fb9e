"""One data-parallel launch spread over several devices: ``kernel.split(devices)[n](...)``.
:mod:`.launch` runs it, :mod:`.check` reads from a kernel's IR whether it can be split,
:mod:`.moves` is how the data travels, :mod:`.in_place` the one-device shortcut.

May import what :mod:`hetero.kernels` may import.
"""
