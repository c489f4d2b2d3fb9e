"""The OpenCL stack: the ``oneapi`` backend (Intel's platforms, :mod:`.oneapi`) and the ``opencl``
backend (every other platform: PoCL, rusticl, vendor ICDs, :mod:`.generic`), sharing one runtime
(:mod:`.runtime`) with its buffer pool, queued uploads, sub-group sizes, ICD discovery, error
table and CLBlast binding.

May import: the ground floor (:mod:`hetero.core`) and :mod:`hetero.backends.host`; PyOpenCL only
inside a registration's factory, never at import.
"""
