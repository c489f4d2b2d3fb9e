"""The array API's ``fft`` extension for hetero arrays (:mod:`.transforms`), with VkFFT on OpenCL
devices (:mod:`.vkfft`).

May import what :mod:`hetero.array` may import, and that room.
"""
