"""The Array type (the public API floor's base): :class:`hetero.Array` (:mod:`.ndarray`) with its
layout, strided views (:mod:`.views`), basic indexing (:mod:`.index`), operators and reduction
methods, ``repr``, type promotion (:mod:`.promotion`) and complex arrays' component views
(:mod:`.components`). ``import hetero`` loads this room and nothing heavier: no compiler, no
vendor library.

What an array does beyond its layout (copies, arithmetic, reductions, casts, matrix products,
advanced indexing) is the array library's, a floor above in :mod:`hetero.arraylib`; the Array
asks it through the hooks of :mod:`.hooks`, each answered when first asked.

May import: the floors below (core, the scheduler's usage ledger). ``from hetero.array import
Array`` keeps working: the names of :mod:`.ndarray`, the module this room grew from, are found
here too.
"""

from __future__ import annotations

from hetero.core.facade import room_attributes

__getattr__ = room_attributes(__name__, "hetero.array.ndarray")
