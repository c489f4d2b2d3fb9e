"""Where hetero meets torch inside a process (the public API floor): memory quotas as torch's
per-process memory fraction (:mod:`.memory`) and fault rules at torch's op boundary
(:mod:`.injection`). torch is imported only when the program has imported it.

May import: every floor below.
"""
