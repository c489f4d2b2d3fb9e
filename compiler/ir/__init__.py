"""hetero's typed kernel IR (:mod:`.nodes`) and what works on it before emission: passes
(:mod:`.passes`), inlining, complex lowering, grid synchronisation, warp emulation, queries, the
text and JSON forms.

May import: the ground floor.
"""
