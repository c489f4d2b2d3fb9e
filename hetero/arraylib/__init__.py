"""The array library behind ``hetero.xp`` (the public API floor, above the Array type and the
kernels): elementwise operations and their fusion (:mod:`.elementwise`, :mod:`.fusion`,
:mod:`.functions`), casts, copies into views (:mod:`.copy`), reductions and scans, creation and
manipulation, sorting, searching, sets, take/put and advanced indexing, the inspection API, and
the rooms :mod:`.linalg`, :mod:`.fft` and :mod:`.complex`. Each operation is a kernel built as IR
by :mod:`hetero.compiler.array_kernels` and launched through :mod:`hetero.kernels`, or a vendor
library's call.

:class:`hetero.Array` (in :mod:`hetero.array`, loaded by ``import hetero``) reaches this room
through the hooks of :mod:`hetero.array.hooks`, answered by the modules here when first asked;
the real operations reach the rooms built on them (fusion, complex numbers) through
:mod:`.hooks`.

May import: every floor below, :mod:`hetero.kernels` and :mod:`hetero.array`.
"""
