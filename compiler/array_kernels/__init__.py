"""The array library's kernel builders: elementwise, reduction, scan, sort, search, gather,
unique, compaction, matrix product and strided copy kernels, each built directly as IR from a
hashable description (the library in :mod:`hetero.array` launches them).

May import: the ground floor and the compiler's IR room.
"""
