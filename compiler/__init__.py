"""The middle compiler: ``@hetero.kernel`` Python → typed IR → per-vendor source → the
vendor's own compiler. Built in the compiler issues; imports the vocabulary only.

May import: the ground floor and the kernel language (:mod:`hetero.core`, :mod:`hetero.language`,
:mod:`hetero.math`); it knows targets, never devices, and never imports a backend.
"""
