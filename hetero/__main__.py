"""``python -m hetero``: the ``hetero`` command (:mod:`hetero.cli.main`), for environments where the
console script is not on ``PATH``."""

from __future__ import annotations

import sys

from hetero.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
