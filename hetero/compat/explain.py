"""``hetero.compat.explain(kernel)``: what a kernel needs of a device, before it runs anywhere.

    >>> print(hetero.compat.explain(my_kernel, "void(float32[:], float64)"))

Names, from the kernel's IR for one signature (the given one, else the last launched): its
typing rules, its features (fp64, int64 atomics, fp16), its work-group memory, whether it uses
barriers and grid syncs (with how they run), the arrays it reads from outside its body, and, per
device present, whether that device can run it and why not.
"""

from __future__ import annotations

from typing import Any

import hetero
from hetero.compat.cuda import types as nbtypes
from hetero.compat.cuda.dispatcher import Dispatcher
from hetero.compiler.ir import grid_sync, nodes as ir, warp_emulation
from hetero.compiler.emit.registry import emitter_for
from hetero.kernels.kernel import Kernel
from hetero.language import typing_of
from hetero.core.types import ArrayType, ScalarType


def _ir(kernel: Kernel, signature: Any) -> ir.Function:
    if signature is not None:
        types = kernel._parse(signature) if isinstance(signature, str) and "(" not in signature else None
        if types is None:
            parsed = nbtypes.parse(signature, kernel.name).hetero_types(kernel.name)
            if any(t is None for t in parsed):
                raise TypeError(f"{kernel.name}: the signature must give every argument a type")
            types = tuple(t for t in parsed if t is not None)
        return kernel._lowered(tuple(types))  # type: ignore[no-any-return]
    if not kernel._ir:
        raise ValueError(f"{kernel.name} has not been launched yet: pass a signature, e.g. "
                         f"explain({kernel.name}, 'void(float32[:], int64)')")
    return next(reversed(kernel._ir.values()))  # type: ignore[no-any-return]


def _needs(fn: ir.Function) -> list[str]:
    needs = set(fn.features) & {"fp64", "fp16", "int64_atomics"}
    for f in (fn, *fn.callees):
        named = {t.name for t in f.locals.values()} | {p.type.dtype.name if isinstance(p.type, ArrayType) else p.type.name
                                                          for p in f.params}
        if "f64" in named:
            needs.add("fp64")
    return sorted(needs)


def explain(kernel: Any, signature: Any = None) -> str:
    """What ``kernel`` (a ``@cuda.jit`` kernel or a ``@hetero.kernel``) needs of a device, as text."""
    target = kernel.kernel if isinstance(kernel, Dispatcher) else kernel
    if not isinstance(target, Kernel):
        raise TypeError(f"explain() takes a @cuda.jit or @hetero.kernel kernel, got {type(kernel).__name__}")
    fn = _ir(target, signature)
    declared = target.param_names()
    hidden = [p for p in fn.params if p.name.startswith("_grid_")]
    captured = [p for p in fn.params if p.name not in declared and not p.name.startswith("_grid_")]
    shared = sum(a.dtype.bits // 8 * _count(a.shape) for a in fn.local_arrays)
    needs = _needs(fn)
    lines = [f"kernel {target.name} ({typing_of(target.py_func)} typing)",
             "  parameters: " + ", ".join(f"{p.name}: {_type(p.type)}" for p in fn.params if p.name in declared)]
    if captured:
        lines.append("  arrays read from outside: " + ", ".join(f"{p.name}: {_type(p.type)}" for p in captured))
    lines.append(f"  needs: {', '.join(needs) or 'nothing beyond the kernel language'}")
    lines.append(f"  work-group (shared) memory: {shared} bytes" + (
        f" in {', '.join(a.name for a in fn.local_arrays)}" if fn.local_arrays else ""))
    lines.append(f"  barriers: {'yes' if ir.contains_barrier(fn.body) else 'none'}")
    if hidden:
        lines.append("  grid syncs: yes, run as phases of launches (each work-item's locals kept in "
                     f"{', '.join(p.name for p in hidden if grid_sync.spill_layout(p.name))} between them)")
    warps = warp_emulation.group_limit(fn) != 0
    if warps:
        lines.append(f"  warp operations: yes, on warps of {ir.WARP_SIZE} lanes on every device; blocks of at most "
                     f"{warp_emulation.MAX_GROUP} threads")
    else:
        lines.append("  warp size: not assumed (no warp operations)")
    for device in hetero.devices():
        runs_kernels = device.runtime.kernel_target()
        if runs_kernels is None:
            verdict = "cannot run hetero kernels"
        else:
            missing = [n for n in needs if n not in runs_kernels.features]
            verdict = f"refused: lacks {', '.join(missing)}" if missing else "runs"
            if warps and not missing:
                emitter = emitter_for(runs_kernels.dialect)
                if emitter.native_warps:
                    verdict += " (warps: native)"
                elif emitter.subgroup_warps and "subgroups32" in runs_kernels.features:
                    what = "votes and shuffles" if "subgroup_shuffles32" in runs_kernels.features else \
                        "votes (shuffles through work-group memory)"
                    verdict += (f" (warps: {what} on 32-wide sub-groups where each row of a block holds whole "
                                "warps, else through work-group memory and barriers)")
                else:
                    verdict += " (warps: through work-group memory and barriers)"
        lines.append(f"  {device.name}: {verdict}")
    return "\n".join(lines)


def _count(shape: tuple[int, ...]) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def _type(t: ScalarType | ArrayType) -> str:
    return str(t)
