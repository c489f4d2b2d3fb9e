"""hetero's built-in backends, one small module per vendor stack.

Each registers through the ``hetero.backends`` entry-point group, exactly as a
third-party plugin does (see :mod:`hetero.core.plugin`). No module here imports its
vendor library at import time: that happens in the registration's factory.

May import: the ground floor (:mod:`hetero.core`) only; never the compiler beside it, never a floor above.
"""
