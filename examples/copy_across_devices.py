"""Copy one array through every device this machine has and check it arrives intact.

    python examples/copy_across_devices.py [--size N]

Shows the device API end to end: list devices of every vendor, make an array,
move it device to device (cpu -> oneapi:0 -> opencl:0 -> ... -> cpu), and compare
bit for bit at each hop.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import hetero


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 22, help="number of float32 elements (default 4 Mi)")
    args = parser.parse_args()

    devices = hetero.devices()
    print(f"hetero {hetero.__version__}: {len(devices)} device(s): {', '.join(d.name for d in devices)}")
    data = np.random.default_rng(0).standard_normal(args.size, dtype=np.float32)
    array = hetero.asarray(data, device="cpu", copy=True)
    failures = 0
    for target in [*devices, hetero.device("cpu")]:
        start = time.perf_counter()
        moved = array.copy() if target is array.device else array.to(target)
        moved.device.synchronize()
        seconds = time.perf_counter() - start
        ok = moved.numpy().tobytes() == data.tobytes()
        failures += not ok
        rate = data.nbytes / seconds / 1e9 if seconds else float("inf")
        print(f"  {array.device.name:>10} -> {target.name:<10} {data.nbytes / 2**20:7.1f} MiB "
              f"{seconds * 1e3:8.2f} ms {rate:6.2f} GB/s  {'ok' if ok else 'MISMATCH'}")
        array = moved
    print("all copies bit-exact" if not failures else f"{failures} copies differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
