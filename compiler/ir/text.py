"""A readable text form of the IR (``kernel.ir(signature)``), for tests and error messages."""

from __future__ import annotations

from hetero.compiler.ir import nodes as ir


def format_expr(e: ir.Expr) -> str:
    if isinstance(e, ir.Const):
        return f"{e.value!r}:{e.type}"
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({format_expr(e.left)}, {format_expr(e.right)})"
        return f"({format_expr(e.left)} {e.op} {format_expr(e.right)})"
    if isinstance(e, ir.UnaryOp):
        return f"{e.op}({format_expr(e.operand)})" if e.op == "abs" else f"({e.op} {format_expr(e.operand)})"
    if isinstance(e, (ir.Compare, ir.Logical)):
        return f"({format_expr(e.left)} {e.op} {format_expr(e.right)})"
    if isinstance(e, ir.Select):
        return f"({format_expr(e.if_true)} if {format_expr(e.cond)} else {format_expr(e.if_false)})"
    if isinstance(e, ir.Cast):
        return f"{e.type}({format_expr(e.value)})"
    if isinstance(e, ir.Load):
        return f"{e.array}[{', '.join(map(format_expr, e.indices))}]"
    if isinstance(e, ir.Shape):
        return f"{e.array}.shape[{e.axis}]"
    if isinstance(e, ir.WorkItem):
        return f"{e.name}({e.axis})"
    if isinstance(e, ir.Math):
        return f"math.{e.name}:{e.type}({', '.join(map(format_expr, e.args))})"
    if isinstance(e, ir.Atomic):
        target = f"{e.array}[{', '.join(map(format_expr, e.indices))}]"
        return f"atomic_{e.op}({target}, {', '.join(map(format_expr, e.args))})"
    if isinstance(e, ir.Call):
        return f"{e.func}({', '.join(map(format_expr, e.args))})"
    raise TypeError(f"unknown expression {type(e).__name__}")


def format_body(body: tuple[ir.Stmt, ...], indent: int) -> list[str]:
    pad = "    " * indent
    lines: list[str] = []
    for s in body:
        if isinstance(s, ir.Assign):
            lines.append(f"{pad}{s.name} = {format_expr(s.value)}")
        elif isinstance(s, ir.Store):
            lines.append(f"{pad}{s.array}[{', '.join(map(format_expr, s.indices))}] = {format_expr(s.value)}")
        elif isinstance(s, ir.If):
            lines.append(f"{pad}if {format_expr(s.cond)}:")
            lines += format_body(s.then, indent + 1) or [pad + "    pass"]
            if s.orelse:
                lines.append(f"{pad}else:")
                lines += format_body(s.orelse, indent + 1)
        elif isinstance(s, ir.For):
            lines.append(f"{pad}for {s.var} in range({format_expr(s.start)}, {format_expr(s.stop)}, {format_expr(s.step)}):")
            lines += format_body(s.body, indent + 1) or [pad + "    pass"]
        elif isinstance(s, ir.While):
            lines.append(f"{pad}while {format_expr(s.cond)}:")
            lines += format_body(s.body, indent + 1) or [pad + "    pass"]
        elif isinstance(s, ir.Return):
            lines.append(f"{pad}return" + (f" {format_expr(s.value)}" if s.value is not None else ""))
        elif isinstance(s, ir.ExprStmt):
            lines.append(f"{pad}{format_expr(s.value)}")
        else:
            lines.append(f"{pad}{type(s).__name__.lower()}")
    return lines


def format_function(fn: ir.Function) -> str:
    params = ", ".join(f"{p.name}: {p.type}" for p in fn.params)
    head = f"{'kernel' if fn.is_kernel else 'func'} {fn.name}({params}) -> {fn.return_type}"
    lines = [f"{c}\n" for c in map(format_function, fn.callees)]
    lines.append(head + ":")
    for name, t in sorted(fn.locals.items()):
        lines.append(f"    local {name}: {t}")
    for arr in fn.local_arrays:
        lines.append(f"    {'private' if arr.private else 'shared'} {arr.name}: {arr.dtype}{list(arr.shape)}")
    lines += format_body(fn.body, 1)
    return "\n".join(lines)
