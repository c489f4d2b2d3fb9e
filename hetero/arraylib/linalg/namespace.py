"""The array API standard's ``linalg`` extension (2024.12) for hetero arrays, as one namespace:
``hetero.xp.linalg`` (``from hetero.xp import linalg; linalg.solve(a, b)``).

Where each function runs:

- on the device, by hetero's generated operations: ``cross diagonal matrix_norm`` (``ord`` "fro",
  1, -1, inf, -inf) ``matrix_power outer trace vector_norm`` (:mod:`hetero.arraylib.linalg.device_functions`),
  and ``matmul matrix_transpose tensordot vecdot`` (:mod:`hetero.arraylib.linalg.matmul`, the device's BLAS);
- on the device's LAPACK: ``cholesky det eigh eigvalsh inv matrix_rank pinv qr slogdet solve svd
  svdvals`` and ``matrix_norm`` for ``ord`` 2, -2 and "nuc" (:mod:`hetero.arraylib.linalg.lapack_functions`):
  NumPy's on ``cpu``, cuSOLVER/rocSOLVER through CuPy on ``cuda``/``rocm``, and on OpenCL devices,
  which have none, NumPy on the host, counted and announced (:mod:`hetero.arraylib.host_fallback`,
  the ``host_fallback`` setting). :func:`host_functions` lists those per device.

Every function is batched over the axes before the last two (the vector ones over the others),
as the standard says; :mod:`hetero.arraylib.linalg.lapack_functions` and :mod:`hetero.arraylib.linalg.device_functions` say
what each computes and its dtype rules.
"""

from __future__ import annotations

from hetero.arraylib.host_fallback import host_functions
from hetero.arraylib.linalg.lapack import choose as lapack_library
from hetero.arraylib.linalg.device_functions import cross, diagonal, matrix_norm, matrix_power, outer, trace, vector_norm
from hetero.arraylib.linalg.lapack_functions import (
    EighResult, QRResult, SlogdetResult, SVDResult, cholesky, det, eigh, eigvalsh, inv, matrix_rank, pinv, qr, slogdet,
    solve, svd, svdvals,
)
from hetero.arraylib.linalg.matmul import matmul, matrix_transpose, tensordot, vecdot

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "host_functions", "inv", "lapack_library", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]
