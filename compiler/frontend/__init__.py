"""The compiler's front ends: the ``@hetero.kernel`` Python subset (:mod:`.python`, with
:mod:`.expressions`, :mod:`.values`, :mod:`.source`), Numba-CUDA's typing (:mod:`.typing_numba`,
:mod:`.ufunc_calls`) and CUDA C through libclang (:mod:`.cuda_c`). Each turns source into the
typed IR of :mod:`hetero.compiler.ir`.

May import: the ground floor and the compiler's IR room.
"""
