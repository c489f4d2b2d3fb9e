"""Write a kernel once, run it on every device this machine has, check each against NumPy.

    python examples/kernel_everywhere.py [--size N]

Each device compiles the same Python kernel with its vendor's own compiler (the
OpenCL driver for oneapi/opencl devices, Numba/LLVM for the CPU, NVRTC/hipRTC on
GPUs); `--show-source` prints what was generated.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import hetero
from hetero import f32


@hetero.kernel
def scaled_softsign(a: f32, x: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        v = a * x[i]
        out[i] = v / (1.0 + abs(v))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--show-source", action="store_true", help="print the generated source per device")
    args = parser.parse_args()

    x = np.random.default_rng(0).standard_normal(args.size, dtype=np.float32)
    v = np.float32(1.5) * x
    want = v / (np.float32(1.0) + np.abs(v))
    failures = 0
    for device in hetero.devices():
        try:
            hx = hetero.asarray(x, device=device, copy=True)
            out = hetero.empty(args.size, device=device)
            start = time.perf_counter()
            scaled_softsign[args.size](1.5, hx, out)  # first launch: compile (or a cache hit)
            device.synchronize()
            first = time.perf_counter() - start
            start = time.perf_counter()
            scaled_softsign[args.size](1.5, hx, out)
            device.synchronize()
            again = time.perf_counter() - start
            ok = np.allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)
        except hetero.HeteroError as exc:
            print(f"  {device.name:<10} failed: {exc}")
            failures += 1
            continue
        failures += not ok
        print(f"  {device.name:<10} first launch {first * 1e3:8.1f} ms, next {again * 1e3:7.2f} ms  "
              f"{'matches NumPy' if ok else 'MISMATCH'}")
        if args.show_source:
            print(scaled_softsign.source(device))
    print("every device agrees with NumPy" if not failures else f"{failures} device(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
