"""Kernels written the way their users write them, used by the tests and benchmarks."""
