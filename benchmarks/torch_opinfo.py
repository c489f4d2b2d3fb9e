"""torch's own OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``, in
the torch wheel) through hetero's torch backend: each operation's float32 sample inputs traced by
AOTAutograd to functional core ATen (torch's core ATen decompositions), as a compiled model's are, run
by :class:`hetero.torch.backend.interpreter.GraphProgram` on each device, and compared with torch
eager on the CPU (``torch.testing.assert_close`` at the OpInfo's float32 tolerances, at least
1e-5 relative: hetero's sums run in another order).

    python -m benchmarks.torch_opinfo [--devices cpu oneapi:0 opencl:0] [--ops add mul ...]
        [--samples 4] [--quick] [--merge]

Each sample ends as one of: ``device`` (right, every ATen operation ran on the device), ``host``
(right, some ran in torch on the host: counted with the reason), ``wrong`` (a value beyond
tolerance, a dtype or a shape differing: the worst outcome, listed), ``error`` (hetero raised),
or ``skipped`` (torch itself cannot run or trace it: data-dependent operations, in-place
variants; or it is random: two runs of torch eager on the sample differ, or the graph draws from
torch's generator, which OpInfos seed inside their call). The pass rate is (device + host) / (all but skipped); the device rate counts only
samples that never left the device. Writes ``benchmarks/results/torch_opinfo.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_function
from torch.utils import _pytree as pytree

import hetero
from benchmarks.harness import RESULTS_DIR, command_line, write_results
from hetero.torch.backend.interpreter import GraphProgram
from hetero.torch.backend.report import Report

#: Operations whose results are random or depend on the machine by design, or that are not
#: functions of their inputs' values (a name part of an OpInfo name: ``linalg.svd`` has ``svd``).
NOT_COMPARABLE = frozenset((
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "normal", "uniform", "bernoulli",
    "multinomial", "dropout", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu",
    "native_dropout_backward", "cauchy", "exponential", "geometric", "log_normal", "empty", "empty_like",
    "new_empty", "new_empty_strided", "empty_strided", "empty_permuted", "hash_tensor", "item", "allclose",
    "equal", "nonzero", "nonzero_static", "argwhere", "masked_select", "unique", "unique_consecutive",
    "histogram", "histogramdd", "resize_", "resize_as_", "to_sparse", "sparse", "jiterator_unary",
    "jiterator_binary", "jiterator_4inputs_with_extra_args", "jiterator_binary_return_by_ref",
    "jiterator_2inputs_2outputs", "svd", "svd_lowrank", "eig", "eigh", "eigvals", "eigvalsh", "qr", "lu",
    "lu_factor", "lu_factor_ex", "lu_unpack", "lu_solve", "ldl_factor", "ldl_factor_ex", "ldl_solve",
    "cholesky", "cholesky_ex", "pca_lowrank", "geqrf", "ormqr", "lstsq", "pinv", "pinverse", "matrix_rank",
    "householder_product", "stft", "fractional_max_pool2d", "fractional_max_pool3d"))
#: A quick set: the operations small models are made of (CI runs these on every device).
QUICK = ("add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "clamp",
         "maximum", "minimum", "where", "sum", "mean", "amax", "argmax", "softmax", "log_softmax", "matmul", "mm",
         "bmm", "addmm", "nn.functional.relu", "nn.functional.linear", "nn.functional.conv2d",
         "nn.functional.layer_norm", "nn.functional.max_pool2d", "permute", "reshape", "cat", "squeeze", "unsqueeze",
         "transpose", "expand", "flatten", "select", "slice")


def comparable(name: str) -> bool:
    return not any(part in NOT_COMPARABLE for part in name.split("."))


def _tolerances(op: Any) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-5}


def _same(a: Any, b: Any) -> bool:
    left, right = pytree.tree_leaves(a), pytree.tree_leaves(b)
    if len(left) != len(right):
        return False
    for x, y in zip(left, right, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape:
                return False
            try:
                if not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)) or not torch.equal(x.isnan(), y.isnan()):
                    return False
            except (RuntimeError, NotImplementedError, TypeError):  # complex32 has neither: compare as complex64
                a, b = x.to(torch.complex64), y.to(torch.complex64)
                if not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
                    return False
        elif x != y and not (x != x and y != y):
            return False
    return True


def check_sample(op: Any, sample: Any, device: hetero.Device) -> tuple[str, str]:
    """(outcome, detail) of one OpInfo sample on ``device`` (see the module docstring)."""
    args = (sample.input, *sample.args)
    leaves, spec = pytree.tree_flatten((args, sample.kwargs))
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i].detach().clone() for i in slots]

    def call(*given: torch.Tensor) -> Any:
        filled = list(leaves)
        for i, t in zip(slots, given, strict=True):
            filled[i] = t
        a, k = pytree.tree_unflatten(filled, spec)
        return op.op(*a, **k)

    try:
        expected = call(*tensors)
        again = call(*tensors)
    except Exception as exc:  # torch cannot run it on these inputs: nothing to compare
        return "skipped", f"torch: {type(exc).__name__}"
    if not _same(expected, again):  # random (dropout_p > 0, a sampler): two eager runs differ too
        return "skipped", "random: two runs of torch eager differ"
    report = Report(device.name)
    programs: list[GraphProgram] = []

    random: list[str] = []

    def compile_graph(graph: torch.fx.GraphModule, example: Any) -> GraphProgram:
        random.extend(str(n.target) for n in graph.graph.nodes if isinstance(n.target, torch._ops.OpOverload)
                      and torch.Tag.nondeterministic_seeded in n.target.tags)
        programs.append(GraphProgram(graph, device, report, op.name, None, jit=False))
        return programs[-1]

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = aot_function(call, fw_compiler=compile_graph, decompositions=core_aten_decompositions())
            got = pytree.tree_leaves(compiled(*[t.clone() for t in tensors]))
    except Exception as exc:
        if not programs:  # AOTAutograd could not trace it (data-dependent, in-place, ...): not hetero's
            return "skipped", f"torch: {type(exc).__name__}"
        return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if random:  # the OpInfo seeds torch's generator inside its call, where a traced graph cannot
        return "skipped", f"random: {', '.join(sorted(set(random)))} draws from torch's generator"
    want = [x for x in pytree.tree_leaves(expected)]
    if len(got) != len(want):
        return "wrong", f"{len(got)} outputs, torch {len(want)}"
    for g, w in zip(got, want, strict=True):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return "wrong", f"a {type(g).__name__} where torch gives a tensor"
            try:
                torch.testing.assert_close(g, w, equal_nan=True, **_tolerances(op))
            except AssertionError as exc:
                return "wrong", " ".join(str(exc).split())[:200]
        elif g != w:
            return "wrong", f"{g!r} where torch gives {w!r}"
    host = report.host_ops
    if host:
        return "host", "; ".join(f"{name}: {', '.join(sorted(c.reasons))}" for name, c in sorted(host.items()))
    return "device", ""


def run(device: hetero.Device, ops: Sequence[Any], samples: int, progress: bool = True) -> dict[str, Any]:
    """Every op's first ``samples`` float32 samples on ``device``: counts and each non-pass's detail."""
    counts: collections.Counter[str] = collections.Counter()
    per_op: dict[str, dict[str, Any]] = {}
    host_reasons: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    for n, op in enumerate(ops, 1):
        entry = per_op.setdefault(op.name + ("." + op.variant_test_name if op.variant_test_name else ""),
                                  {"counts": collections.Counter(), "details": []})
        try:
            made = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:samples]
        except Exception as exc:
            entry["details"].append(f"samples: {type(exc).__name__}")
            continue
        for sample in made:
            outcome, detail = check_sample(op, sample, device)
            counts[outcome] += 1
            entry["counts"][outcome] += 1
            if outcome == "host":
                for part in detail.split("; "):
                    host_reasons[part] += 1
            if outcome in ("wrong", "error", "host") and detail not in entry["details"]:
                entry["details"].append(detail)
        if progress:
            print(f"\r{device.name}: {n}/{len(ops)} operations, {dict(counts)} ({time.monotonic() - started:.0f} s)",
                  end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    compared = sum(counts[k] for k in ("device", "host", "wrong", "error"))
    return {"counts": dict(counts), "compared": compared,
            "pass_rate": (counts["device"] + counts["host"]) / compared if compared else None,
            "device_rate": counts["device"] / compared if compared else None,
            "host_reasons": dict(host_reasons.most_common(40)),
            "ops": {name: {"counts": dict(e["counts"]), "details": e["details"][:4]} for name, e in per_op.items()}}


def select_ops(names: Sequence[str] | None) -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    chosen = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu") and comparable(op.name)]
    if names:
        wanted = set(names)
        chosen = [op for op in chosen if op.name in wanted]
        missing = wanted - {op.name for op in chosen}
        if missing:
            raise SystemExit(f"torch_opinfo: no comparable float32 OpInfo named {', '.join(sorted(missing))}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=[d.name for d in hetero.devices()])
    parser.add_argument("--ops", nargs="+", help="OpInfo names (default: every comparable float32 one)")
    parser.add_argument("--quick", action="store_true", help=f"only {len(QUICK)} common operations")
    parser.add_argument("--samples", type=int, default=4, help="samples per operation (default 4)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other devices' results in the results file (runs side by side)")
    args = parser.parse_args(argv)
    ops = select_ops(list(QUICK) if args.quick and not args.ops else args.ops)
    results: dict[str, Any] = {}
    for name in args.devices:
        results[name] = run(hetero.device(name), ops, args.samples)
        r = results[name]
        print(f"{name}: {r['compared']} samples of {len(ops)} operations: pass {r['pass_rate']:.1%} "
              f"(on the device alone {r['device_rate']:.1%}), counts {r['counts']}")
    command = command_line("benchmarks.torch_opinfo", sys.argv[1:] if argv is None else argv)
    for result in results.values():
        result["command"] = command
    if args.merge and (RESULTS_DIR / "torch_opinfo.json").is_file():
        kept = json.loads((RESULTS_DIR / "torch_opinfo.json").read_text()).get("devices", {})
        results = {**{k: v for k, v in kept.items() if k not in results}, **results}
    write_results("torch_opinfo", {"torch": torch.__version__, "samples_per_op": args.samples, "operations": len(ops),
                                   "devices": results, "goal": {"pass_rate_min": 0.9, "wrong_max": 0}}, command)
    return 1 if any(r["counts"].get("wrong") for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
