"""The reference side of the copy benchmark: the same copy done with the vendor library
directly (NumPy for host memory, PyOpenCL for OpenCL devices), with no hetero code in
the timed call.

Each side of a copy is a hetero device (its buffer is ``Array.buffer``, or the ``cl.Buffer``
inside it on OpenCL devices) or ``None``
for a host NumPy array. Devices of other runtimes (CUDA, ROCm) have no reference here
yet, and get ``None``: their rows report hetero's figures alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetero import Device

RawCopy = tuple[str, Callable[[], None]]


def _host(side: Device | None) -> bool:
    return side is None or side.runtime.host_memory


def _queue(side: Device | None) -> Any | None:
    """The in-order queue of an OpenCL device (opened: its buffers exist), else None."""
    from hetero.backends.opencl.runtime import OpenCLRuntime  # here: isort files hetero.backends as third-party

    if side is not None and isinstance(side.runtime, OpenCLRuntime):
        return side.runtime.queue
    return None


def raw_copy(dst_side: Device | None, dst: Any, src_side: Device | None, src: Any, nbytes: int) -> RawCopy | None:
    """How the vendor library copies ``nbytes`` from ``src`` to ``dst``, finished when the
    call returns: a description and a zero-argument function. None when there is no
    reference for these devices."""
    if _host(src_side) and _host(dst_side):
        copyto = np.copyto

        def host_to_host() -> None:
            copyto(dst, src)

        return "numpy.copyto(dst, src)", host_to_host
    src_queue, dst_queue = _queue(src_side), _queue(dst_side)
    if _host(src_side) and dst_queue is not None:
        enqueue = dst_side.runtime.cl.enqueue_copy  # type: ignore[union-attr]

        def upload() -> None:
            enqueue(dst_queue, dst, src).wait()

        return "pyopencl.enqueue_copy(queue, buffer, host).wait()", upload
    if src_queue is not None and _host(dst_side):
        enqueue = src_side.runtime.cl.enqueue_copy  # type: ignore[union-attr]

        def download() -> None:
            enqueue(src_queue, dst, src).wait()

        return "pyopencl.enqueue_copy(queue, host, buffer).wait()", download
    if src_queue is not None and dst_queue is not None:
        enqueue = src_side.runtime.cl.enqueue_copy  # type: ignore[union-attr]
        if src_queue is dst_queue:

            def on_device() -> None:
                enqueue(src_queue, dst, src, byte_count=nbytes).wait()

            return "pyopencl.enqueue_copy(queue, dst, src, byte_count=n).wait()", on_device
        # Two contexts share no memory: the raw library stages through the host too.
        # The staging buffer is allocated once, as a hand-written program would.
        staging = np.empty(nbytes, dtype=np.uint8)

        def staged() -> None:
            enqueue(src_queue, staging, src).wait()
            enqueue(dst_queue, dst, staging).wait()

        return "pyopencl.enqueue_copy to a preallocated host buffer, then to dst (two .wait())", staged
    return None
