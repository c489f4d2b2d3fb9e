"""CUDA's contract for ``__syncthreads()`` under a condition, for kernels written against CUDA
(``hetero.compat.cuda``): the condition must evaluate the same for every thread of the block.

hetero's own kernels may put a barrier only under a condition it can *prove* uniform
(:func:`hetero.compiler.emit.cpu_regions.check_barriers`). CUDA code routinely guards a whole block's
work with ``if tid < size:`` that holds for every thread of the launch it was written for, so
for such kernels the condition of an ``if`` or ``while`` holding a barrier is taken as uniform,
as CUDA takes it: it is computed into a ``_uniform<n>`` variable just before (and, for a
``while``, again at the end of each iteration) and tested from there. GPUs and OpenCL devices
test every work-item's own value, as CUDA does; the CPU target runs the group's control flow
once and follows work-item 0's value. A kernel that breaks the contract is undefined in CUDA;
here every device still runs it without hanging.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import bool_t

from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.cpu_regions import UNIFORM_PREFIX, divergent_expr_test


def take_conditions_as_uniform(fn: ir.Function) -> ir.Function:
    """``fn`` with each divergent condition over a barrier hoisted into a ``_uniform<n>`` variable."""
    if not ir.contains_barrier(fn.body):
        return fn
    divergent = divergent_expr_test(fn)
    locals_ = dict(fn.locals)

    def fresh() -> str:
        name = f"{UNIFORM_PREFIX}{sum(n.startswith(UNIFORM_PREFIX) for n in locals_)}"
        locals_[name] = bool_t
        return name

    def block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            holds = ir.contains_barrier((s,))
            if isinstance(s, ir.If):
                if holds and divergent(s.cond):
                    name = fresh()
                    out += [ir.Assign(s.loc, name, s.cond), ir.If(s.loc, ir.Var(bool_t, name), block(s.then), block(s.orelse))]
                else:
                    out.append(dataclasses.replace(s, then=block(s.then), orelse=block(s.orelse)))
            elif isinstance(s, ir.While):
                if holds and divergent(s.cond):
                    name = fresh()
                    again = ir.Assign(s.loc, name, s.cond)
                    out += [again, ir.While(s.loc, ir.Var(bool_t, name), (*block(s.body), again))]
                else:
                    out.append(dataclasses.replace(s, body=block(s.body)))
            elif isinstance(s, ir.For):
                out.append(dataclasses.replace(s, body=block(s.body)))
            else:
                out.append(s)
        return tuple(out)

    body = block(fn.body)
    return dataclasses.replace(fn, body=body, locals=locals_)
