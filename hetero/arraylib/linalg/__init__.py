"""Linear algebra of hetero arrays: matrix products (:mod:`.matmul`, with the vendor BLAS chosen
in :mod:`.blas`), LAPACK work (:mod:`.lapack`, :mod:`.lapack_functions`), the functions that need no
LAPACK (:mod:`.device_functions`) and the array API's ``linalg`` namespace (:mod:`.namespace`).

May import what :mod:`hetero.array` may import, and that room.
"""
