"""``hetero infer MODEL.onnx --input x.npy [--device D] [--benchmark N] [--output out.npz]``: run an
ONNX model once on a hetero device (no silent CPU fallback: :class:`hetero.onnx.Session`), or
time it.

Inputs are ``.npy`` files (``--input x.npy`` for a one-input model, ``--input name=x.npy`` per
input) or one ``.npz`` whose array names are the input names; they are read with
``allow_pickle=False`` (a file never runs code). ``--output`` writes the outputs to an ``.npz``
atomically (a failed run leaves no file). ``--benchmark N`` runs N timed inferences after one
warm-up and reports the latency percentiles and throughput (``--json`` for a machine).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hetero.cli.inputs import existing_file
from hetero.core.errors import HeteroError
from hetero.core.exit_status import UsageError
from hetero.core.optional import require

PROGRESS_EVERY = 2.0  # seconds between progress lines of a long benchmark


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    parser = sub.add_parser("infer", help="run an ONNX model on a device, or benchmark it",
                            description="Run an ONNX model on a hetero device through ONNX Runtime, with the "
                                        "device's own execution provider (an error, not a quiet CPU fallback, "
                                        "when it is missing). Example: hetero infer model.onnx --input x.npy "
                                        "--device oneapi:0 --benchmark 1000")
    parser.add_argument("model", type=Path, metavar="MODEL.onnx")
    parser.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE",
                        help="an .npy file (NAME= for models with several inputs) or an .npz of all inputs; repeat")
    parser.add_argument("--device", default="auto", help="device (cpu, cuda:0, oneapi:0 ...; default auto)")
    parser.add_argument("--fallback-cpu", action="store_true", help="run on the CPU if the device's provider is missing")
    parser.add_argument("--allow-partial", action="store_true",
                        help="run the model split when the device's provider takes only some of its nodes (default: "
                             "an error naming the ops that went to the CPU)")
    parser.add_argument("--benchmark", type=int, default=0, metavar="N", help="time N inferences after a warm-up")
    parser.add_argument("--output", type=Path, default=None, metavar="OUT.npz", help="write the outputs here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return {"infer": cmd_infer}


def _load(path: Path) -> Any:
    existing_file(path, "input file")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as error:  # an object array needs pickle: refused
        raise HeteroError(f"input file {str(path)!r} cannot be read without unpickling ({error}); save plain "
                          "numeric arrays with numpy.save") from None
    except OSError as error:
        raise HeteroError(f"input file {str(path)!r} is not a .npy/.npz file: {error}") from None


def read_feeds(specs: list[str], input_names: list[str]) -> dict[str, np.ndarray]:
    """The feeds ``--input`` options name, for a model whose inputs are ``input_names``."""
    if not specs:
        raise UsageError(f"give the model's input with --input FILE.npy (its inputs: {', '.join(input_names)})")
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep:
            name, file = "", spec
        loaded = _load(Path(file))
        if isinstance(loaded, np.lib.npyio.NpzFile):
            feeds.update({key: loaded[key] for key in loaded.files})
            continue
        if not name:
            if len(input_names) != 1:
                raise HeteroError(f"the model has inputs {', '.join(input_names)}: name each, --input NAME={file}")
            name = input_names[0]
        feeds[name] = loaded
    return feeds


def _write_npz(path: Path, outputs: dict[str, Any]) -> None:
    """The outputs as an .npz that loads without pickle: a sequence of maps (or any value that is not
    an array) as an array of JSON strings, one per item, as hetero serve sends it."""
    from hetero.core.files import atomic_write
    from hetero.onnx.values import as_strings

    arrays = {name: value if isinstance(value, np.ndarray) and value.dtype.kind != "O" else as_strings(value)
              for name, value in outputs.items()}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    atomic_write(path, buffer.getvalue())


def _describe(value: Any, onnx_type: str | None) -> dict[str, Any]:
    """An output for the report: shape and dtype of an array, else its ONNX type and item count."""
    if onnx_type is None and isinstance(value, np.ndarray):
        return {"shape": list(value.shape), "dtype": value.dtype.name}
    return {"type": onnx_type or type(value).__name__, "items": len(value) if hasattr(value, "__len__") else 1}


def _line(name: str, value: Any, onnx_type: str | None) -> str:
    if onnx_type is None and isinstance(value, np.ndarray):
        flat = value.reshape(-1)
        return (f"  {name}: {value.dtype.name}{list(value.shape)}  {np.array2string(flat[:6], precision=5)}"
                + (" ..." if flat.size > 6 else ""))
    described = _describe(value, onnx_type)
    first = value[0] if isinstance(value, list) and value else value
    text = repr(first)
    return f"  {name}: {described['type']}, {described['items']} items  {text[:80]}" + (" ..." if len(text) > 80 else "")


def _benchmark(session: Any, feeds: dict[str, np.ndarray], count: int) -> dict[str, float]:
    session.run(feeds)  # warm-up: the provider's first run builds its kernels
    times = np.empty(count)
    started = last = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        session.run(feeds)
        times[i] = time.perf_counter() - t0
        if time.perf_counter() - last > PROGRESS_EVERY:
            last = time.perf_counter()
            print(f"  {i + 1}/{count} inferences ...", file=sys.stderr)
    total = time.perf_counter() - started
    p50, p90, p99 = (np.percentile(times, [50, 90, 99]) * 1e3).tolist()
    return {"count": count, "seconds": total, "per_second": count / total, "p50_ms": p50, "p90_ms": p90, "p99_ms": p99}


def _split(session: Any) -> str:
    """`` (split: Cast x2 on CPUExecutionProvider)`` for a session that runs part of the model elsewhere."""
    placement = session.placement()
    if not session.partial or placement is None:
        return ""
    off = {f"{op} x{n} on {provider}" for op, where in placement.items() for provider, n in where.items()
           if provider != session.provider}
    return f" (split: {', '.join(sorted(off))})"


def cmd_infer(args: argparse.Namespace) -> int:
    require("onnxruntime", extra="onnx", feature="hetero infer")
    from hetero.onnx import Session

    existing_file(args.model, "model file", "pass the path of an .onnx file")
    if args.benchmark < 0:
        raise UsageError("--benchmark N needs N >= 1")
    session = Session(args.model, args.device, fallback="cpu" if args.fallback_cpu else None,
                      partial="allow" if args.allow_partial else "refuse")
    feeds = read_feeds(args.input, [spec.name for spec in session.inputs])
    outputs = session.run(feeds)
    types = {spec.name: spec.onnx_type for spec in session.outputs}
    report: dict[str, Any] = {"device": session.device.name, "provider": session.provider, "fell_back": session.fell_back,
                              "partial": session.partial, "placement": session.placement(),
                              "outputs": {k: _describe(v, types[k]) for k, v in outputs.items()}}
    if args.benchmark:
        report["benchmark"] = _benchmark(session, feeds, args.benchmark)
    if args.output is not None:
        _write_npz(args.output, outputs)
        report["written"] = str(args.output)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.model.name} on {session.device.name} via {session.provider}"
          + (" (fell back to the CPU)" if session.fell_back else "") + _split(session))
    for name, value in outputs.items():
        print(_line(name, value, types[name]))
    if args.benchmark:
        b = report["benchmark"]
        print(f"  {b['count']} inferences: {b['per_second']:.1f}/s, p50 {b['p50_ms']:.3f} ms, p90 {b['p90_ms']:.3f} ms, "
              f"p99 {b['p99_ms']:.3f} ms")
    if args.output is not None:
        print(f"  outputs written to {args.output}")
    return 0


__all__ = ["add_commands", "cmd_infer", "read_feeds"]
