"""The roof: the ``hetero`` command (:mod:`.main`) and its subcommands, one module each; a
subcommand that gathers from several sources keeps them in modules named after it (``top`` and
``top_devices``, ``top_run_dir``, ``top_endpoint``, ``top_gather``, ``top_view``).

May import every room of hetero.
"""
