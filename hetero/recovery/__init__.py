"""Recovery inside the process (the public API floor): ``hetero.guard`` (:mod:`.guard`) with its
host snapshots (:mod:`.snapshot`, :mod:`.snapshot_rng`), fingerprints of the guarded state
(:mod:`.fingerprint`), the failover standby and its reserved memory (:mod:`.standby`,
:mod:`.reserve`), the health monitor while guarded (:mod:`.monitor`) and torch's device on both
sides of a move (:mod:`.torch_devices`).

May import: every floor below, and the public API floor's rooms (arrays, kernels, checkpoint, torch).
"""
