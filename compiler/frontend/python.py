"""The frontend: a ``@hetero.kernel`` / ``@hetero.func`` Python function -> typed IR.

Local variable types are inferred the way Numba does it, by unification: a
variable's type is the common type of everything assigned to it (weak literals
yield to typed values), found by lowering the body until the types stop changing.
Anything outside the kernel language is a CompileError at the user's line.
"""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np
from collections.abc import Sequence
from typing import Any

from hetero import language
from hetero.language import cuda as language_cuda
from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, bool_t, c128, f16, f64, i32, i64, scalar_type

from hetero.compiler.ir import complex_lowering, grid_sync, inline, nodes as ir
from hetero.compiler.frontend import block_votes, cuda_contract, loops, static_args, typing_numba, typing_rules, ufunc_calls
from hetero.compiler.emit.cpu_regions import check_barriers
from hetero.compiler.ir.queries import all_expressions
from hetero.compiler.frontend.expressions import BINOPS, ArrayAlias, ExpressionLowering, Value, cast, const, foreign_device_function
from hetero.compiler.frontend.source import FunctionSource, function_source
from hetero.compiler.frontend.tuple_locals import TupleLocals

_MAX_PASSES = 8
_RULES = {"hetero": typing_rules, "numba": typing_numba}
#: The built-ins that declare work-group memory when assigned to a name.
_LOCAL_ARRAYS = ("local_array", "cuda.shared.array")

_BLOCK_VOTES = ("cuda.syncthreads_count", "cuda.syncthreads_and", "cuda.syncthreads_or")


def rules_for(py_func: Any) -> Any:
    """The typing rules module ``py_func`` is lowered with (:func:`hetero.language.typing_of`)."""
    return _RULES[language.typing_of(py_func)]
_UNSUPPORTED_STATEMENTS = {
    ast.With: "with statements", ast.AsyncWith: "with statements", ast.Try: "try statements", ast.Raise: "raise",
    ast.FunctionDef: "nested functions", ast.AsyncFunctionDef: "nested functions", ast.ClassDef: "class definitions",
    ast.Import: "imports", ast.ImportFrom: "imports", ast.Global: "global statements", ast.Nonlocal: "nonlocal statements",
    ast.Delete: "del statements", ast.Assert: "assert statements", ast.AsyncFor: "async for", ast.Match: "match statements",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STATEMENTS[ast.TryStar] = "try statements"


class Program:
    """The device functions specialised while lowering one kernel (shared by nested calls)."""

    def __init__(self, dynamic_shared: int = 0) -> None:
        #: How many values each device function returning a tuple returns (by id of its function).
        self.arity: dict[int, int] = {}
        #: Bytes of dynamic shared memory the kernel is compiled for.
        self.dynamic_shared = dynamic_shared
        self.functions: dict[tuple[int, tuple[Any, ...]], ir.Function] = {}
        self.order: list[ir.Function] = []
        self.in_progress: set[int] = set()
        #: The names given to device functions so far: each specialisation has one of its own.
        self.names: set[str] = set()

    def function(self, callee: language.DeviceFunction, types: Sequence[ScalarType | ArrayType | static_args.Bound],
                 caller: FunctionSource, node: ast.AST, element: int | None = None) -> ir.Function:
        key = (id(callee.py_func), (*types, element)) if element is not None else (id(callee.py_func), tuple(types))
        if key in self.functions:
            return self.functions[key]
        if id(callee.py_func) in self.in_progress:
            raise caller.error(node, f"{callee.py_func.__name__} calls itself (directly or indirectly); recursion is not supported")
        self.in_progress.add(id(callee.py_func))
        try:
            src = function_source(callee.py_func)
            params = _params(src, list(types), node_for_errors=src.tree)
            suffix = "_".join(str(t).replace("[", "").replace("]", "").replace(":", "").replace(", ", "")
                              .replace(" ", "") for t in types)
            name = f"{src.tree.name}__{suffix}" if suffix else src.tree.name
            if element is not None:
                name = f"{name}__value{element}"
            base, count = name, 2
            while name in self.names:  # another specialisation's name (two objects with one token, or name)
                name, count = f"{base}_{count}", count + 1
            self.names.add(name)
            function = lower(src, params, is_kernel=False, program=self, name=name, element=element)
        finally:
            self.in_progress.discard(id(callee.py_func))
        self.functions[key] = function
        self.order.append(function)
        return function

    def foreign(self, callee: Any, caller: FunctionSource, node: ast.AST) -> ir.Function:
        key = (id(callee), ())
        if key not in self.functions:
            try:
                wrapper = callee.__hetero_foreign__()
            except CompileError as exc:
                raise caller.error(node, f"{exc.message} (at {exc.file}:{exc.line})" if exc.file else exc.message) from None
            taken = {f.name for f in self.order}
            for function in (*wrapper.callees, wrapper):
                if function.name in taken:
                    raise caller.error(node, f"the foreign function {function.name!r} has the name of another device "
                                             "function of this kernel; rename one")
                self.order.append(function)
                taken.add(function.name)
            self.functions[key] = wrapper
        return self.functions[key]


def _writes_memory(fn: ir.Function, functions: list[ir.Function]) -> bool:
    """Whether calling ``fn`` twice could differ from calling it once (it writes or synchronises)."""
    by_name = {f.name: f for f in functions}
    if any(isinstance(s, (ir.Store, ir.Barrier, ir.Fence, ir.GridSync)) for s in ir.walk_stmts(fn.body)):
        return True
    return any(isinstance(e, (ir.Atomic, ir.Warp)) or (isinstance(e, ir.Call) and (
        e.func not in by_name or _writes_memory(by_name[e.func], functions))) for e in all_expressions(fn.body))


def _is_from_buffer(obj: Any) -> bool:
    """``ffi.from_buffer`` of a cffi ``FFI`` instance (Numba-CUDA kernels use it for CPointer arguments)."""
    owner = getattr(obj, "__self__", None)
    return getattr(obj, "__name__", "") == "from_buffer" and type(owner).__module__.startswith("cffi")


def _annotation(src: FunctionSource, annotation: ast.expr | None) -> ScalarType | ArrayType | None:
    if annotation is None:
        return None
    try:
        obj = eval(compile(ast.Expression(annotation), src.file, "eval"), src.namespace)  # annotations only
    except Exception as exc:
        raise src.error(annotation, f"cannot evaluate the annotation {ast.unparse(annotation)!r}: {exc}") from None
    if isinstance(obj, (ScalarType, ArrayType)):
        return obj
    try:
        return scalar_type(obj)
    except Exception:
        raise src.error(annotation, f"annotation {ast.unparse(annotation)!r} is not a hetero type "
                                    "(use hetero.f32, hetero.i64, hetero.Array[hetero.f32], …)") from None


def declared_types(py_func: Any) -> list[ScalarType | ArrayType | None]:
    """The parameter types a function's annotations declare (None where unannotated)."""
    quick = _declared_without_parsing(py_func)
    if quick is not None:
        return quick
    src = function_source(py_func)
    return [_annotation(src, arg.annotation) for arg in src.tree.args.args]


def _declared_without_parsing(py_func: Any) -> list[ScalarType | ArrayType | None] | None:
    """:func:`declared_types` from ``__annotations__`` when they are strings (``from __future__
    import annotations``: each the annotation's source, evaluated in the function's namespace as the
    parsed one would be) or absent, so a cache hit parses nothing; None when that cannot be done
    (annotations evaluated at definition, a lambda) or fails: the parsed path says why."""
    code = getattr(py_func, "__code__", None)
    annotations = getattr(py_func, "__annotations__", None)
    if code is None or not isinstance(annotations, dict) or py_func.__name__ == "<lambda>":
        return None
    names = code.co_varnames[:code.co_argcount]
    if not annotations:
        return [None] * len(names)
    wanted = [annotations.get(name) for name in names]
    if not all(a is None or isinstance(a, str) for a in wanted):
        return None
    namespace = dict(py_func.__globals__)
    for name, cell in zip(code.co_freevars, py_func.__closure__ or (), strict=True):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:
            continue
    found: list[ScalarType | ArrayType | None] = []
    try:
        for text in wanted:
            if text is None:
                found.append(None)
                continue
            obj = eval(text, namespace)  # noqa: S307 - the function's own annotation, as the parsed path evaluates it
            found.append(obj if isinstance(obj, (ScalarType, ArrayType)) else scalar_type(obj))
    except Exception:  # noqa: BLE001 - the parsed path raises the error with its source location
        return None
    return found


def _params(src: FunctionSource, types: list[ScalarType | ArrayType | static_args.Bound], node_for_errors: ast.AST) -> tuple[ir.Param, ...]:
    args = src.tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise src.error(node_for_errors, "kernels and device functions take plain positional parameters only "
                                         "(no *args, **kwargs, keyword-only parameters or defaults)")
    if len(types) != len(args.args):
        raise src.error(node_for_errors, f"{src.tree.name} takes {len(args.args)} argument(s), got {len(types)}")
    params = []
    for arg, given in zip(args.args, types, strict=True):
        if isinstance(given, static_args.Bound):  # known at compile time: the name reads it as a global would
            src.namespace[arg.arg] = given.value
            continue
        declared = _annotation(src, arg.annotation)
        if isinstance(declared, ArrayType):
            if not isinstance(given, ArrayType) or given.dtype != declared.dtype or \
                    (declared.ndim is not None and declared.ndim != given.ndim):
                raise src.error(arg, f"parameter {arg.arg!r} is declared {declared}, got {given}")
            params.append(ir.Param(arg.arg, given))
        elif isinstance(declared, ScalarType):
            if isinstance(given, ArrayType):
                raise src.error(arg, f"parameter {arg.arg!r} is declared {declared}, got an array {given}")
            params.append(ir.Param(arg.arg, declared))
        else:
            params.append(ir.Param(arg.arg, given))
    return tuple(params)


def lower_kernel(py_func: Any, types: Sequence[ScalarType | ArrayType]) -> ir.Function:
    """Lower a kernel for concrete parameter types (arrays with their rank)."""
    src = function_source(py_func)
    params = _params(src, list(types), src.tree)
    program = Program(language.dynamic_shared_of(py_func))
    kernel = lower(src, params, is_kernel=True, program=program, name=src.tree.name)
    kernel = inline.inline_calls(kernel, inline.kernel_bound(kernel))  # barriers, local arrays: in the kernel
    kernel = complex_lowering.lower_complex(kernel)  # complex values become pairs of floats
    kernel = grid_sync.cut(kernel)
    if language.typing_of(py_func) == "numba":  # written against CUDA: its contract for barriers holds
        kernel = cuda_contract.take_conditions_as_uniform(kernel)
    check_barriers(kernel)  # before any emitter: the same answer on every device
    return kernel


def lower(src: FunctionSource, params: tuple[ir.Param, ...], *, is_kernel: bool, program: Program, name: str,
          element: int | None = None) -> ir.Function:
    previous: dict[str, ScalarType] = {}
    rules = rules_for(src.py_func)
    for _ in range(_MAX_PASSES):
        lowerer = Lowerer(src, params, is_kernel, program, previous, rules)
        lowerer.element = element
        body = lowerer.block(src.tree.body)
        types = lowerer.unified_types()
        if types == previous:
            return lowerer.function(name, body)
        previous = types
    raise src.error(src.tree, "the types of the local variables do not settle; add annotations (x: hetero.f32 = 0)")


def _assigned_names(tree: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                parts = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(t.id for t in parts if isinstance(t, ast.Name))
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


class Lowerer(TupleLocals, ExpressionLowering):
    """One lowering pass over a function body with the variable types of the previous pass."""

    def __init__(self, src: FunctionSource, params: tuple[ir.Param, ...], is_kernel: bool, program: Program,
                 previous: dict[str, ScalarType], rules: Any = typing_rules) -> None:
        self.src = src
        self.rules = rules
        self.is_kernel = is_kernel
        self.program = program
        self.params = params
        self.arrays: dict[str, Any] = {p.name: p.type for p in params if isinstance(p.type, ArrayType)}
        self.scalar_params = {p.name: p.type for p in params if isinstance(p.type, ScalarType)}
        self.previous = previous
        self.var_types: dict[str, ScalarType] = {**previous, **self.scalar_params}
        self.assigned = _assigned_names(src.tree) - set(self.arrays)
        self.assignments: dict[str, list[Value]] = {}
        self.declared: dict[str, ScalarType] = {}
        self.local_arrays: list[ir.LocalArray] = []
        self.dynamic_name: str | None = None  # the name of the dynamic shared memory, once declared
        self.pointers: dict[str, str] = {}
        self.element: int | None = None  # the value this lowering of a tuple-returning function returns
        self.features: set[str] = set()
        self.loop_depth = 0
        self.returns: list[Value] = []
        self.ufunc_loads: dict[str, ir.Load] = {}  # the element loads of an array ufunc statement (ufunc_calls)
        self.grid_groups: set[str] = set()
        self.tuple_locals: dict[str, int] = {}  # name -> item count (hetero.compiler.frontend.tuple_locals)
        self.captured = self.captured_arrays()
        self.arrays.update({p.name: p.type for p in self.captured})
        self.arrays.update(self.array_aliases())

    def aliased_array(self, value: ast.expr) -> str | None:
        """The array ``value`` names: an array's name, or ``cuda.const.array_like(GLOBAL)`` (a global
        NumPy array, passed frozen: hetero's devices read it as they read any array)."""
        if isinstance(value, ast.Name) and value.id in self.arrays:
            return value.id
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            callee = self.static(value.func)
            if isinstance(callee, language.Intrinsic) and callee.name == "cuda.const.array_like":
                arg = value.args[0]
                if isinstance(arg, ast.Name) and arg.id in {p.name for p in self.captured}:
                    return arg.id
                raise self.src.error(value, "cuda.const.array_like() takes a NumPy array from outside the kernel")
        return None

    def array_aliases(self) -> dict[str, ArrayAlias]:
        """Local names assigned arrays (``data = buf_0``): each an :class:`ArrayAlias` of the arrays it is given."""
        found: dict[str, list[str]] = {}
        for node in ast.walk(self.src.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                source = self.aliased_array(node.value)
                if source is not None:
                    names = found.setdefault(node.targets[0].id, [])
                    if source not in names:
                        names.append(source)
        aliases: dict[str, ArrayAlias] = {}
        for name, candidates in found.items():
            first = self.arrays[candidates[0]]
            if name in self.arrays or isinstance(first, ir.LocalArray):
                continue  # reassigning a parameter, or a shared array: refused where it is written
            for other in candidates[1:]:
                array = self.arrays[other]
                if isinstance(array, ir.LocalArray) or array.dtype != first.dtype or array.ndim != first.ndim:
                    raise self.src.error(self.src.tree, f"{name!r} is assigned arrays of different types or ranks "
                                                        f"({candidates[0]}: {first}, {other}: {array})")
            aliases[name] = ArrayAlias(tuple(candidates), first.dtype, first.ndim or 0)
            self.var_types[name] = i32
        return aliases
    def captured_arrays(self) -> tuple[ir.Param, ...]:
        """Module-level and closure arrays the body reads (``PRICES[i]``), as Numba-CUDA kernels may:
        extra array parameters after the declared ones, in name order, which the launch passes
        (:func:`hetero.kernels.kernel.captured_arguments`: a NumPy array as it was at the first launch, a
        device array as it is)."""
        params = {p.name for p in self.params}
        found: dict[str, ir.Param] = {}
        body = ast.Module(body=self.src.tree.body, type_ignores=[])  # the body: annotations name types, not data
        for node in ast.walk(body):
            if not isinstance(node, ast.Name) or node.id in params or node.id in self.assigned or node.id in found:
                continue
            value = self.src.resolve(node.id)
            if isinstance(value, type) or not (isinstance(value, np.ndarray) or hasattr(value, "__hetero_array__")):
                continue  # a class (hetero.Array itself) is not an array
            if not self.is_kernel:
                raise self.src.error(node, f"{node.id!r} is an array from outside the function; device functions "
                                           "cannot read those: pass it from the kernel as an argument")
            try:
                dtype = scalar_type(np.dtype(value.dtype))
            except Exception:
                raise self.src.error(node, f"{node.id!r} is an array of {value.dtype}, which kernels cannot read") from None
            found[node.id] = ir.Param(node.id, ArrayType(dtype, len(value.shape)))
        return tuple(found[name] for name in sorted(found))
    # -- types ---------------------------------------------------------------------------
    def var_type(self, name: str, node: ast.AST) -> ScalarType:
        if name in self.var_types:
            return self.var_types[name]
        return self.previous.get(name, self.rules.literal_type(0))

    def note_type(self, t: ScalarType) -> None:
        if t == f64 or t == c128:
            self.features.add("fp64")

    def record(self, name: str, value: Value, node: ast.AST) -> ScalarType:
        """Note an assignment; return the variable's type for this pass."""
        if name in self.scalar_params or name in self.declared:
            return self.var_types[name]
        self.assignments.setdefault(name, []).append(value)
        if name not in self.var_types:
            self.var_types[name] = value.type
        return self.var_types[name]

    def unified_types(self) -> dict[str, ScalarType]:
        result = dict(self.declared)
        for name, values in self.assignments.items():
            typed = [v.type for v in values if not v.weak]
            if typed:
                t = typed[0]
                for other in typed[1:]:
                    t = t if t == other else self.rules.promote(t, other)
            else:
                t = self.rules.promote_literals([v.expr.value for v in values])  # type: ignore[attr-defined]
            result[name] = t
        return result

    # -- statements ----------------------------------------------------------------------
    def block(self, statements: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        lowered: list[ir.Stmt] = []
        for node in statements:
            lowered.extend(self.stmt(node))
        return tuple(lowered)

    def stmt(self, node: ast.stmt) -> list[ir.Stmt]:
        if type(node) in _UNSUPPORTED_STATEMENTS:
            raise self.src.error(node, f"{_UNSUPPORTED_STATEMENTS[type(node)]} are not supported in kernels")
        hoist = block_votes.hoisted(node, self.static, self.src.error)
        if hoist is not None:  # a block vote inside an expression: a statement of its own first
            self.assigned.update(part.targets[0].id for part in hoist[:-1] if isinstance(part, ast.Assign)
                                 and isinstance(part.targets[0], ast.Name))
            return [lowered for part in hoist for lowered in self.stmt(part)]
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.src.error(node, f"{type(node).__name__} statements are not supported in kernels")
        result: list[ir.Stmt] = method(node)
        return result

    def call_ufunc(self, ufunc: Any, node: ast.Call) -> Value:
        return ufunc_calls.scalar_call(self, ufunc, node)

    def stmt_Pass(self, node: ast.Pass) -> list[ir.Stmt]:
        return []

    def stmt_Expr(self, node: ast.Expr) -> list[ir.Stmt]:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # a docstring
        if isinstance(node.value, ast.Call) and isinstance(self.static(node.value.func), language.Intrinsic) \
                and self.static(node.value.func).name == "barrier":
            if node.value.args:
                raise self.src.error(node, "barrier() takes no arguments")
            return [ir.Barrier(self.src.loc(node))]  # in a device function: inlined into the kernel
        if not isinstance(node.value, ast.Call):
            raise self.src.error(node, "this expression has no effect; kernels allow calls as statements only")
        if self.is_grid_sync(node.value):
            if not self.is_kernel:
                raise self.src.error(node, "a grid sync is only allowed in kernels, not in device functions")
            return [ir.GridSync(self.src.loc(node))]
        callee = self.static(node.value.func)
        if isinstance(callee, language.Intrinsic) and callee.name in language_cuda.FENCES:
            if node.value.args:
                raise self.src.error(node, f"{callee.name}() takes no arguments")
            return [ir.Fence(self.src.loc(node), language_cuda.FENCES[callee.name])]
        if ufunc_calls.is_ufunc(callee):
            return ufunc_calls.array_statement(self, callee, node.value, self.src.loc(node))
        return [ir.ExprStmt(self.src.loc(node), self.expr(node.value).expr)]

    def stmt_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        if len(node.targets) != 1:
            raise self.src.error(node, "chained assignment (a = b = …) is not supported in kernels")
        target = node.targets[0]
        if isinstance(target, ast.Tuple):
            return self.tuple_assign(target, node)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call) and _is_from_buffer(self.static(node.value.func)):
            arg = node.value.args[0] if len(node.value.args) == 1 else None
            if not (isinstance(arg, ast.Name) and arg.id in self.arrays):
                raise self.src.error(node.value, "ffi.from_buffer() in a kernel takes one of its arrays")
            self.pointers[target.id] = arg.id  # a pointer to the array's data, for foreign functions
            self.assigned.discard(target.id)
            return []
        if isinstance(target, ast.Name) and isinstance(self.arrays.get(target.id), ArrayAlias):
            alias = self.arrays[target.id]
            source = self.aliased_array(node.value)
            if source not in alias.candidates:
                raise self.src.error(node, f"{target.id!r} names an array here; it cannot also hold a scalar")
            return [ir.Assign(self.src.loc(node), target.id, const(alias.candidates.index(source), i32))]
        if isinstance(target, ast.Name) and self.is_tuple_value(node.value):  # t = (a, b), gid = cuda.grid(2)
            values = self.tuple_values(node.value)
            return self.unpack(self.tuple_target(target, len(values), node), values, node)
        if isinstance(target, ast.Name) and target.id in self.tuple_locals:
            raise self.src.error(node, f"{target.id!r} holds a tuple elsewhere; a kernel's local holds a scalar or a "
                                       "tuple, not both: give the scalar a name of its own")
        if isinstance(target, ast.Name) and self.is_this_grid(node.value):
            self.grid_groups.add(target.id)  # names the grid group: no value at run time
            self.assigned.discard(target.id)
            return []
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call):
            callee = self.static(node.value.func)
            if isinstance(callee, language.Intrinsic) and callee.name in _LOCAL_ARRAYS:
                call = self.positional(node.value, callee) if node.value.keywords else node.value
                return self.local_array(target.id, call)
            if isinstance(callee, language.Intrinsic) and callee.name in _BLOCK_VOTES:
                return self.block_vote(target, callee.name, node)
            if isinstance(callee, language.Intrinsic) and callee.name == "cuda.local.array":
                call = self.positional(node.value, callee) if node.value.keywords else node.value
                return self.local_array(target.id, call, private=True)
        return self.assign(target, self.expr(node.value), node)

    def block_vote(self, target: ast.Name, name: str, node: ast.Assign) -> list[ir.Stmt]:
        """``n = cuda.syncthreads_count(p)`` (``_and``, ``_or``): a barrier that also counts the
        threads of the block whose predicate holds, through a one-element work-group counter."""
        call = node.value
        assert isinstance(call, ast.Call)
        if not self.is_kernel:
            raise self.src.error(node, f"{name}() is only allowed in kernels")
        if len(call.args) != 1 or call.keywords:
            raise self.src.error(call, f"usage: n = {name}(predicate)")
        loc = self.src.loc(node)
        counter = f"_vote{node.lineno}_{node.col_offset}"
        array = ir.LocalArray(counter, i32, (1,))
        if all(a.name != counter for a in self.local_arrays):
            self.local_arrays.append(array)
        self.arrays[counter] = array
        predicate = self.truth(self.expr(call.args[0]))
        zero = const(0, i64)
        first = ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", ir.WorkItem(i64, "local_id", 0), zero), ir.Logical(
            bool_t, "and", ir.Compare(bool_t, "==", ir.WorkItem(i64, "local_id", 1), zero),
            ir.Compare(bool_t, "==", ir.WorkItem(i64, "local_id", 2), zero)))
        count: ir.Expr = ir.Load(i32, counter, (zero,))
        if name == "cuda.syncthreads_and":
            size: ir.Expr = ir.WorkItem(i64, "local_size", 0)
            for axis in (1, 2):
                size = ir.BinOp(i64, "*", size, ir.WorkItem(i64, "local_size", axis))
            count = ir.Cast(i32, ir.Compare(bool_t, "==", ir.Cast(i64, count), size))
        elif name == "cuda.syncthreads_or":
            count = ir.Cast(i32, ir.Compare(bool_t, ">", count, const(0, i32)))
        return [
            ir.If(loc, first, (ir.Store(loc, counter, (zero,), const(0, i32)),)),
            ir.Barrier(loc),
            ir.If(loc, predicate, (ir.ExprStmt(loc, ir.Atomic(i32, "add", counter, (zero,), (const(1, i32),))),)),
            ir.Barrier(loc),
            *self.assign(target, Value(count), node),
            ir.Barrier(loc),  # every thread has read the counter before a next vote resets it
        ]

    def is_this_grid(self, node: ast.expr) -> bool:
        """``cuda.cg.this_grid()``, or a name it was assigned to."""
        if isinstance(node, ast.Name):
            return node.id in self.grid_groups
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            callee = self.static(node.func)
            return isinstance(callee, language.Intrinsic) and callee.name == "cuda.cg.this_grid"
        return False

    def is_grid_sync(self, call: ast.Call) -> bool:
        """``g.sync()`` on a grid group (the whole launch waits)."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "sync" and self.is_this_grid(func.value)):
            return False
        if call.args or call.keywords:
            raise self.src.error(call, "a grid group's sync() takes no arguments")
        return True

    def tuple_assign(self, target: ast.Tuple, node: ast.Assign) -> list[ir.Stmt]:
        """``a, b = x, y`` and ``i, j = cuda.grid(2)``: every value is computed (into a temporary)
        before any target is assigned, as Python does, so ``a, b = b, a`` swaps."""
        if any(isinstance(t, ast.Starred) for t in target.elts):
            raise self.src.error(node, "starred assignment (a, *b = …) is not supported in kernels")
        return self.unpack(target, self.tuple_values(node.value), node)

    def unpack(self, target: ast.Tuple, values: list[Value], node: ast.Assign) -> list[ir.Stmt]:
        """``target`` assigned ``values`` item by item, each value computed before any is assigned."""
        if len(values) != len(target.elts):
            raise self.src.error(node, f"cannot unpack {len(values)} value(s) into {len(target.elts)} target(s)")
        loc = self.src.loc(node)
        out: list[ir.Stmt] = []
        temps: list[Value] = []
        for k, value in enumerate(values):
            if isinstance(value.expr, (ir.Const, ir.WorkItem)):
                temps.append(value)  # reads nothing a target could change
                continue
            temp = f"_tuple{node.lineno}_{node.col_offset}_{k}"
            self.assigned.add(temp)
            t = self.record(temp, value, node)
            out.append(ir.Assign(loc, temp, cast(value, t)))
            temps.append(Value(ir.Var(t, temp)))
        for element, value in zip(target.elts, temps, strict=True):
            out.extend(self.assign(element, value, node))
        return out

    def tuple_values(self, node: ast.expr) -> list[Value]:
        if isinstance(node, ast.Tuple):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise self.src.error(node, "starred expressions are not supported in kernels")
            return [self.expr(e) for e in node.elts]
        if isinstance(node, ast.Name) and node.id in self.tuple_locals:  # a, b = t
            return self.local_items(node.id, node)
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) \
                and node.value.id in self.arrays:  # m, n = a.shape
            array = self.arrays[node.value.id]
            ndim = len(array.shape) if isinstance(array, ir.LocalArray) else (array.ndim or 0)
            return [self.shape_of(node.value.id, axis, node) for axis in range(ndim)]
        if isinstance(node, ast.Call):
            callee = self.static(node.func)
            if isinstance(callee, language.Intrinsic) and callee.name in ("cuda.grid", "cuda.gridsize"):
                return self.grid_values(callee.name, self.positional(node, callee) if node.keywords else node)
            if isinstance(callee, language.Intrinsic) and callee.name == "cuda.match_all_sync":
                return self.match_all(self.positional(node, callee) if node.keywords else node)
            if callee is math.frexp:
                return self.frexp(self.positional(node, callee) if node.keywords else node)
            callee = callee if isinstance(callee, language.DeviceFunction) else foreign_device_function(callee)
            if isinstance(callee, language.DeviceFunction):
                return self.tuple_call(callee, node)
        raise self.src.error(node, "tuple assignment takes a tuple (a, b = x, y), a tuple local, cuda.grid(n) / "
                                   "cuda.gridsize(n), a.shape or a device function returning a tuple on the right")

    def tuple_call(self, callee: language.DeviceFunction, node: ast.Call) -> list[Value]:
        """``a, b = f(x)`` of a device function returning a tuple: one call per value, each of a variant
        of ``f`` returning that value. ``f`` must not write memory, so that calling it again changes
        nothing; C compilers merge what the variants compute alike."""
        first = self.call_function(callee, node, element=0)
        arity = self.program.arity.get(id(callee.py_func))
        if arity is None:
            raise self.src.error(node, f"{callee.py_func.__name__}() returns one value, not a tuple to unpack")
        calls = [first] + [self.call_function(callee, node, element=k) for k in range(1, arity)]
        variant = next(f for f in self.program.order if isinstance(first.expr, ir.Call) and f.name == first.expr.func)
        if _writes_memory(variant, self.program.order):
            raise self.src.error(node, f"{callee.py_func.__name__}() returns a tuple and writes memory (a store, an atomic, a "
                                       "barrier or a call that does); hetero computes each value by a call of its own, so "
                                       "return one value, or write the others into an array")
        return calls

    def assign(self, target: ast.expr, value: Value, node: ast.stmt) -> list[ir.Stmt]:
        loc = self.src.loc(node)
        if isinstance(target, ast.Name):
            if target.id in self.arrays:
                raise self.src.error(target, f"array {target.id!r} cannot be reassigned in a kernel")
            t = self.record(target.id, value, node)
            return [ir.Assign(loc, target.id, cast(value, t))]
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in self.arrays:
            name = target.value.id
            element = self.element_type(name)
            indices = self.indices(name, target.slice, target)
            stored = cast(value, element)
            alias = self.arrays[name]
            if not isinstance(alias, ArrayAlias):
                return [ir.Store(loc, name, indices, stored)]
            chain: tuple[ir.Stmt, ...] = (ir.Store(loc, alias.candidates[-1], indices, stored),)
            for k in reversed(range(len(alias.candidates) - 1)):
                test = ir.Compare(bool_t, "==", ir.Var(i32, name), const(k, i32))
                chain = (ir.If(loc, test, (ir.Store(loc, alias.candidates[k], indices, stored),), chain),)
            return list(chain)
        raise self.src.error(target, "kernels can assign to local names and array elements only")

    def stmt_AugAssign(self, node: ast.AugAssign) -> list[ir.Stmt]:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.src.error(node, f"operator {type(node.op).__name__} is not supported in kernels")
        current = self.expr(node.target) if not isinstance(node.target, ast.Name) or node.target.id in self.var_types \
            else Value(ir.Var(self.var_type(node.target.id, node), node.target.id))
        return self.assign(node.target, self.binop(op, current, self.expr(node.value), node), node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> list[ir.Stmt]:
        if not isinstance(node.target, ast.Name):
            raise self.src.error(node, "annotations are allowed on local names only")
        declared = _annotation(self.src, node.annotation)
        if not isinstance(declared, ScalarType):
            raise self.src.error(node, "local variables hold scalars; annotate with a scalar type such as hetero.f32")
        name = node.target.id
        if name in self.declared and self.declared[name] != declared:
            raise self.src.error(node, f"{name} is declared {self.declared[name]} earlier")
        self.declared[name] = declared
        self.var_types[name] = declared
        self.note_type(declared)
        if node.value is None:
            return []
        return self.assign(node.target, self.expr(node.value), node)

    def local_array(self, name: str, call: ast.Call, private: bool = False) -> list[ir.Stmt]:
        if not self.is_kernel and self.rules.NAME != "numba":
            raise self.src.error(call, f"{'cuda.local.array' if private else 'local_array'}() is only allowed in kernels")
        if len(call.args) != 2:
            raise self.src.error(call, "usage: local_array(shape, dtype), e.g. local_array((16, 16), hetero.f32)")
        if isinstance(call.args[0], ast.Name) and isinstance(self.src.resolve(call.args[0].id), tuple):
            shape_value = self.src.resolve(call.args[0].id)  # a shape tuple from outside the kernel
            call = ast.copy_location(ast.Call(call.func, [ast.copy_location(
                ast.Tuple([ast.Constant(v) for v in shape_value], ast.Load()), call.args[0]), call.args[1]], []), call)
        shape_node = call.args[0]
        parts = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
        shape = tuple(self.static_int(self.constant_local(p), "a local_array dimension") for p in parts)
        dtype_obj = self.static(call.args[1])
        try:
            dtype = scalar_type(getattr(dtype_obj, "hetero_type", dtype_obj))
        except Exception:
            raise self.src.error(call.args[1], f"{ast.unparse(call.args[1])} is not a hetero scalar type") from None
        if shape in ((0,), ()) and not private and self.rules.NAME == "numba":
            return self.dynamic_shared(name, dtype, call)
        if any(d <= 0 for d in shape):
            raise self.src.error(call, f"local_array shape {shape} must be positive")
        if name in self.arrays and not any(a.name == name for a in self.local_arrays):
            raise self.src.error(call, f"{name!r} is already an array parameter")
        existing = next((a for a in self.local_arrays if a.name == name), None)
        array = ir.LocalArray(name, dtype, shape, private)
        if existing is not None and existing != array:
            raise self.src.error(call, f"local array {name!r} is declared twice with different shapes or types")
        if existing is None:
            self.local_arrays.append(array)
        self.arrays[name] = array
        self.assigned.discard(name)
        self.note_type(dtype)
        return []

    def constant_local(self, node: ast.expr) -> ast.expr:
        """The constant a local name is assigned, where it is assigned that constant once and nothing
        else (``n = 100``, then ``cuda.shared.array(n, int32)``), as Numba propagates it; else ``node``."""
        if not (isinstance(node, ast.Name) and node.id in self.assigned):
            return node
        writes = [n for n in ast.walk(self.src.tree) if isinstance(n, ast.Name) and n.id == node.id
                  and isinstance(n.ctx, ast.Store)]
        values = [n.value for n in ast.walk(self.src.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                  and isinstance(n.targets[0], ast.Name) and n.targets[0].id == node.id]
        if len(writes) == 1 and len(values) == 1 and isinstance(values[0], ast.Constant) \
                and type(values[0].value) is int:
            return ast.copy_location(ast.Constant(values[0].value), node)
        return node

    def dynamic_shared(self, name: str, dtype: ScalarType, call: ast.Call) -> list[ir.Stmt]:
        """``cuda.shared.array(0, dtype)``: the launch's dynamic shared memory (its 4th launch
        argument, in bytes), one array however many names it has, as in CUDA."""
        nbytes = self.program.dynamic_shared
        if not nbytes:
            raise self.src.error(call, "cuda.shared.array(0, …) is the launch's dynamic shared memory: give its size "
                                       "in bytes as the 4th launch argument, kernel[blocks, threads, 0, nbytes](…)")
        size = dtype.bits // 8
        if nbytes % size:
            raise self.src.error(call, f"{nbytes} bytes of dynamic shared memory are not a whole number of {dtype}")
        array = ir.LocalArray(name, dtype, (nbytes // size,))
        if self.dynamic_name not in (None, name):
            raise self.src.error(call, f"the dynamic shared memory is already named {self.dynamic_name!r}; hetero "
                                       "takes one name for it (CUDA gives every such array the same address)")
        self.dynamic_name = name
        if all(a.name != name for a in self.local_arrays):
            self.local_arrays.append(array)
        self.arrays[name] = array
        self.assigned.discard(name)
        self.note_type(dtype)
        return []

    def stmt_If(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.truth(self.expr(node.test))
        return [ir.If(self.src.loc(node), cond, self.block(node.body), self.block(node.orelse))]

    def stmt_While(self, node: ast.While) -> list[ir.Stmt]:
        if node.orelse:
            raise self.src.error(node, "while … else is not supported in kernels")
        cond = self.truth(self.expr(node.test))
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return [ir.While(self.src.loc(node), cond, body)]

    def stmt_For(self, node: ast.For) -> list[ir.Stmt]:
        if node.orelse:
            raise self.src.error(node, "for … else is not supported in kernels")
        rewritten = loops.counted(self, node)  # for i, v in enumerate(x) / for a, b in zip(x, y)
        if rewritten is not None:
            return self.stmt_For(rewritten)
        call = node.iter
        if isinstance(call, ast.Name) and call.id in self.tuple_locals:  # for v in t: each item of a tuple local
            names = [ast.copy_location(ast.Name(n.expr.name, ast.Load()), call)  # type: ignore[attr-defined]
                     for n in self.local_items(call.id, call)]
            call = ast.copy_location(ast.Tuple(names, ast.Load()), call)
        if isinstance(call, ast.Tuple) and isinstance(node.target, ast.Name):
            return self.tuple_loop(node, call)
        if not (isinstance(call, ast.Call) and self.static(call.func) is range):
            raise self.src.error(node.iter, "kernels can only loop over range(…) or a tuple of scalars")
        if not isinstance(node.target, ast.Name):
            raise self.src.error(node.target, "the loop variable must be a single name")
        if call.keywords or not 1 <= len(call.args) <= 3:
            raise self.src.error(call, "range() takes 1 to 3 positional arguments")
        values = [self.expr(a) for a in call.args]
        if len(values) == 1:
            values = [Value(ir.Const(values[0].type, 0), weak=True), values[0]]
        if len(values) == 2:
            values.append(Value(ir.Const(values[0].type, 1), weak=True))
        for value, arg in zip(values, call.args, strict=False):
            if not (value.type.is_int or value.type == bool_t):
                raise self.src.error(arg, f"range() takes integers, got {value.type}")
        start, stop, step = values
        if step.weak and step.expr.value == 0:  # type: ignore[attr-defined]
            raise self.src.error(call, "range() step must not be zero")
        typed = [v.type for v in values if not v.weak]
        if typed:
            t = typed[0]
            for other in typed[1:]:
                t = self.rules.promote(t, other)
            loop_value = Value(ir.Var(t, node.target.id))
        else:
            loop_value = Value(const(0, self.rules.promote_literals([v.expr.value for v in values])), weak=True)  # type: ignore[attr-defined]
        var = node.target.id
        if var in self.arrays:
            raise self.src.error(node.target, f"{var!r} is an array and cannot be a loop variable")
        t = self.record(var, loop_value, node)
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return [ir.For(self.src.loc(node), var, cast(start, t), cast(stop, t), cast(step, t), body)]

    def tuple_loop(self, node: ast.For, items: ast.Tuple) -> list[ir.Stmt]:
        """``for offset in (16, 8, 4, 2, 1):``: a counted loop whose variable takes each item in turn."""
        assert isinstance(node.target, ast.Name)
        if not items.elts:
            return []
        values = [self.expr(e) for e in items.elts]
        if all(v.weak for v in values):
            t = self.rules.promote_literals([v.expr.value for v in values])  # type: ignore[attr-defined]
        else:
            t = None
            for v in values:
                if not v.weak:
                    t = v.type if t is None else self.rules.promote(t, v.type)
        assert t is not None
        var = node.target.id
        if var in self.arrays:
            raise self.src.error(node.target, f"{var!r} is an array and cannot be a loop variable")
        t = self.record(var, Value(ir.Var(t, var)), node)
        counter = f"_item_{var}_{node.lineno}_{node.col_offset}"
        self.assigned.add(counter)
        self.record(counter, Value(ir.Var(i64, counter)), node)
        chosen = cast(values[-1], t)
        for k in range(len(values) - 2, -1, -1):
            test = ir.Compare(bool_t, "==", ir.Var(i64, counter), ir.Const(i64, k))
            chosen = ir.Select(t, test, cast(values[k], t), chosen)
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        loc = self.src.loc(node)
        return [ir.For(loc, counter, ir.Const(i64, 0), ir.Const(i64, len(values)), ir.Const(i64, 1),
                       (ir.Assign(loc, var, chosen), *body))]

    def stmt_Break(self, node: ast.Break) -> list[ir.Stmt]:
        if not self.loop_depth:
            raise self.src.error(node, "break outside a loop")
        return [ir.Break(self.src.loc(node))]

    def stmt_Continue(self, node: ast.Continue) -> list[ir.Stmt]:
        if not self.loop_depth:
            raise self.src.error(node, "continue outside a loop")
        return [ir.Continue(self.src.loc(node))]

    def stmt_Return(self, node: ast.Return) -> list[ir.Stmt]:
        loc = self.src.loc(node)
        if node.value is None:
            return [ir.Return(loc)]
        if self.is_kernel:
            raise self.src.error(node, "kernels cannot return a value; write results into an array argument")
        returned = node.value
        if isinstance(returned, ast.Tuple):  # one element: this lowering is one of the function's variants
            if self.element is None:
                raise self.src.error(node, "this device function returns a tuple: unpack it where it is called, "
                                           "a, b = f(...)")
            if self.program.arity.setdefault(id(self.src.py_func), len(returned.elts)) != len(returned.elts):
                raise self.src.error(node, "every return of a function returning a tuple must return as many values")
            returned = returned.elts[self.element]
        elif self.element is not None:
            raise self.src.error(node, "a function returning a tuple must return a tuple from every return")
        value = self.expr(returned)
        self.returns.append(value)
        return [ir.Return(loc, value.expr)]

    # -- result --------------------------------------------------------------------------
    def return_type(self) -> ScalarType:
        declared = _annotation(self.src, self.src.tree.returns) if self.src.tree.returns is not None else None
        if isinstance(declared, ArrayType):
            raise self.src.error(self.src.tree, "device functions return scalars, not arrays")
        if declared is not None:
            return declared
        typed = [v.type for v in self.returns if not v.weak]
        if typed:
            t = typed[0]
            for other in typed[1:]:
                t = t if t == other else self.rules.promote(t, other)
            return t
        if self.returns:
            return self.rules.promote_literals([v.expr.value for v in self.returns])  # type: ignore[attr-defined]
        return ir.VOID

    def function(self, name: str, body: tuple[ir.Stmt, ...]) -> ir.Function:
        return_type = ir.VOID if self.is_kernel else self.return_type()
        if return_type is not ir.VOID:
            body = _cast_returns(body, return_type)
        local_types = {n: t for n, t in self.var_types.items() if n not in self.scalar_params and n in self.assigned | set(self.declared)}
        for t in [*local_types.values(), *self.scalar_params.values(), return_type]:
            self.note_type(t)
            if t == f16:
                self.features.add("fp16")
        for param in self.params:
            if isinstance(param.type, ArrayType):
                self.note_type(param.type.dtype)
        callees = tuple(self.program.order) if self.is_kernel else ()
        features = set(self.features)
        for callee in callees:
            features |= callee.features
        return ir.Function(
            name=name, params=self.params + self.captured, return_type=return_type, locals=local_types,
            local_arrays=tuple(self.local_arrays), body=body, is_kernel=self.is_kernel,
            loc=self.src.loc(self.src.tree), callees=callees, features=frozenset(features),
        )


def _cast_returns(body: tuple[ir.Stmt, ...], t: ScalarType) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Return) and s.value is not None and s.value.type != t:
            s = ir.Return(s.loc, cast(Value(s.value, isinstance(s.value, ir.Const)), t))
        elif isinstance(s, ir.If):
            s = ir.If(s.loc, s.cond, _cast_returns(s.then, t), _cast_returns(s.orelse, t))
        elif isinstance(s, ir.For):
            s = ir.For(s.loc, s.var, s.start, s.stop, s.step, _cast_returns(s.body, t))
        elif isinstance(s, ir.While):
            s = ir.While(s.loc, s.cond, _cast_returns(s.body, t))
        out.append(s)
    return tuple(out)


def signature_of(py_func: Any) -> inspect.Signature:
    return inspect.signature(py_func)


__all__ = ["CompileError", "Program", "declared_types", "lower_kernel"]
