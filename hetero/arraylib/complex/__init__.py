"""Complex arrays, composed from real kernels on their component views: elementwise arithmetic
and casts (:mod:`.elementwise`), the elementary functions (:mod:`.functions`, :mod:`.inverse`) and
reductions (:mod:`.reductions`).

May import what :mod:`hetero.array` may import, and that room.
"""
