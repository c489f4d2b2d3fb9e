"""hetero's benchmarks: copy bandwidth against the raw vendor libraries, and import time.
Run them with ``python -m benchmarks.run_all``; see ``benchmarks/README.md``."""
