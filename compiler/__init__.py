"""The middle compiler: ``@hetero.kernel`` Python → typed IR → per-vendor source → the
vendor's own compiler. Built in the compiler issues; imports the vocabulary only."""
