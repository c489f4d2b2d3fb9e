"""The roof: the ``hetero`` command (:mod:`.main`) and its subcommands, one module each.

May import every room of hetero.
"""
