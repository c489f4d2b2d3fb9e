"""The CUDA C front end: CUDA C/C++ kernel source -> hetero's IR, parsed by libclang.

The source is parsed as CUDA device code (``-x cuda --cuda-device-only``) without CUDA's own
headers: a hetero prelude declares what kernels use (``threadIdx`` and its kin, ``__syncthreads``,
atomics, the math library), and an ``#include`` that neither the source's folder nor the given
include folders hold (``<stdio.h>``, ``<cuda_runtime.h>``, ``<helper_cuda.h>``) is answered with an
empty stand-in, so that the host code of a sample file parses far enough to be skipped. Types
come from clang: every implicit conversion C++ makes is an explicit cast in the IR, so the
kernel computes in the types nvcc would. Only ``__global__`` functions and the ``__device__``
functions they call are lowered; anything else inside them is a :class:`CompileError` naming
the file, line and construct. Source nested deeper than libclang or this front end can follow
is refused first, with the file, the line and the limit (:mod:`.cuda_c_limits`).

A template kernel is instantiated by name (``"MatrixMulCUDA<32>"``): its text is compiled again
as a plain function in a namespace that defines each template parameter (``constexpr int
BLOCK_SIZE = 32;``, ``typedef float T;``), so clang types it fully.

C's semantics are kept where hetero's IR differs: integer ``/`` and ``%`` truncate towards zero
(the IR floors, as Python does). Pointers are 1-D arrays: a kernel's ``float *A`` takes any
contiguous array, indexed flat.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hetero.core.errors import CompileError, MissingDependencyError
from hetero.core.optional import require
from hetero.core.types import ArrayType, ScalarType, bool_t, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from hetero.compiler.ir import nodes as ir, passes
from hetero.compiler.frontend import cuda_c_bounds, cuda_c_files, cuda_c_loops
from hetero.compiler.frontend.cuda_c_cursors import TreeTooDeep, check_depth, children, declarations, recursion_room, walk
from hetero.compiler.frontend.cuda_c_limits import check_nesting
from hetero.compiler.frontend.cuda_c_headers import KNOWN_HEADERS, PRELUDE
from hetero.compiler.frontend.cuda_c_math import MATH_PRELUDE, STORES, UNSUPPORTED_HINT, MathCalls
from hetero.compiler.frontend.cuda_c_memory import VECTOR_PRELUDE, MemoryAccess, Pointer, vector_type
from hetero.compiler.ir.queries import own_expressions
from hetero.compiler.ir.warp_emulation import linear_id, warp_lane

_SCALARS = {
    "Bool": bool_t, "Char_S": i8, "SChar": i8, "Char_U": u8, "UChar": u8, "Short": i16, "UShort": u16, "Int": i32,
    "UInt": u32, "Long": i64, "ULong": u64, "LongLong": i64, "ULongLong": u64, "Float": f32, "Double": f64,
    "Half": f16, "Float16": f16,
}
_ATOMICS = {"atomicAdd": "add", "atomicSub": "sub", "atomicExch": "exch", "atomicMin": "min", "atomicMax": "max",
            "atomicAnd": "and", "atomicOr": "or", "atomicXor": "xor", "atomicInc": "inc", "atomicDec": "dec",
            "atomicCAS": "cas"}
_BUILTIN_DIMS = {"threadIdx": "local_id", "blockIdx": "group_id", "blockDim": "local_size", "gridDim": "num_groups"}
_HEADERS_DIR: str | None = None
#: Expressions are split into statements past this depth (see :meth:`_Lowering.expr`).
SPLIT_DEPTH = 32
#: ``cg::reduce``'s operations: the IR's operator on integers, and on floats.
_REDUCTIONS = {"plus": ("+", "+"), "less": ("min", "fmin"), "greater": ("max", "fmax"), "bit_and": ("&", ""),
               "bit_or": ("|", ""), "bit_xor": ("^", "")}
_GROUPS = {"thread_block": "block", "grid_group": "grid"}
_TILE = re.compile(r"thread_block_tile<(\d+)u?>$")
_WARP_INTRINSICS = {"__shfl_sync": "shfl", "__shfl_up_sync": "shfl_up", "__shfl_down_sync": "shfl_down",
                    "__shfl_xor_sync": "shfl_xor", "__all_sync": "all", "__any_sync": "any", "__ballot_sync": "ballot",
                    "__activemask": "activemask", "__syncwarp": "sync"}
_FENCES = {"__threadfence": "device", "__threadfence_block": "block", "__threadfence_system": "system"}
_TILE_SHUFFLES = {"shfl": "shfl", "shfl_up": "shfl_up", "shfl_down": "shfl_down", "shfl_xor": "shfl_xor"}


def _clang() -> Any:
    try:  # optional: only the CUDA C front end needs it
        return require("clang.cindex", extra="cuda-c", feature="the CUDA C front end (RawKernel, RawModule)",
                       package="libclang")
    except MissingDependencyError as exc:  # a CompileError, as every failure of a front end is
        raise CompileError(str(exc)) from None


def _work_dir() -> str:
    """A private folder for the prelude, made once per process."""
    global _HEADERS_DIR
    if _HEADERS_DIR is None:
        _HEADERS_DIR = tempfile.mkdtemp(prefix="hetero-cuda-c-")
        atexit.register(shutil.rmtree, _HEADERS_DIR, True)
        with open(os.path.join(_HEADERS_DIR, "hetero_prelude.h"), "w") as out:
            out.write(PRELUDE + VECTOR_PRELUDE + "\n" + MATH_PRELUDE + "\n")
    return _HEADERS_DIR


class Source:
    """One CUDA C translation unit, parsed: its kernels lowered by name (:meth:`kernel`)."""

    def __init__(self, code: str, path: str = "<source>.cu", include_dirs: Sequence[str] = (),
                 defines: Sequence[str] = ()) -> None:
        self.code = code
        self.shared_bytes = 0  # the dynamic shared memory of the launch a kernel is lowered for
        self.path = path
        self.folders = [os.path.dirname(os.path.abspath(path)), *include_dirs]
        self.include_dirs = list(include_dirs)
        self.defines = list(defines)
        self.instances: list[str] = []
        #: An instance's: (its first line in the parsed text, that line in the template's file, that file)
        self.line_shift: tuple[int, int, str] | None = None
        self.depths: dict[int, int] = {}  # a function's cursor hash -> its tree's depth
        #: "<template's hash><arguments>" -> the unit of its instance and the instance's cursor
        self.instance_units: dict[str, tuple[Source, Any]] = {}
        check_nesting(code, path)  # before libclang, which a deep enough expression crashes
        self.inputs = cuda_c_files.gather(code, self.path, self.folders, KNOWN_HEADERS, self)
        self.missing_includes = self.inputs.missing
        self._tu = self._parse(code)

    def _parse(self, code: str) -> Any:
        cindex = _clang()
        args = ["-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "-nostdinc", "-std=c++17",
                "--cuda-gpu-arch=sm_70", "-include", os.path.join(_work_dir(), "hetero_prelude.h"),
                *(f"-I{d}" for d in self.folders), f"-I{self.inputs.stand_ins}",
                *(f"-D{d}" for d in self.defines), "-Wno-everything",
                "-ferror-limit=0"]  # host code a kernel file also holds may fail: clang must read on to the end
        files = [(self.path, code), *self.inputs.files]  # libclang reads no header from disk
        cuda_c_bounds.check_parse(self.path, args, files)  # time, memory and size, in a child process first
        return cindex.Index.create().parse(self.path, args=args, unsaved_files=files)

    def kernel(self, name: str, shared_bytes: int = 0) -> ir.Function:
        """The kernel ``name`` (``"vectorAdd"``, or a template by name: ``"MatrixMulCUDA<32>"``) as IR,
        for launches with ``shared_bytes`` of dynamic shared memory (its ``extern __shared__`` array)."""
        cindex = _clang()
        self.shared_bytes = shared_bytes
        base, _, template_args = name.partition("<")
        decl = self._find(base)
        if decl is None:
            raise CompileError(f"{self.path}: no __global__ function named {base!r}")
        if decl.kind == cindex.CursorKind.FUNCTION_TEMPLATE:
            if not template_args:
                raise CompileError(f"{self.path}: {base} is a template: name an instance, e.g. {base}<32>")
            return self._instantiate(decl, base, template_args.rstrip(">").strip())
        if template_args:
            raise CompileError(f"{self.path}: {base} is not a template")
        self._check(decl)
        return self._lower(decl, base)

    def device_function(self, name: str) -> ir.Function:
        """The ``__device__`` function ``name`` (with the functions it calls) as IR: a foreign function
        a Python kernel calls (:func:`hetero.compat.cuda.declare_device`)."""
        cindex = _clang()
        self.shared_bytes = 0
        for cursor in declarations(self._tu):
            if cursor.kind == cindex.CursorKind.FUNCTION_DECL and cursor.spelling == name and cursor.is_definition() \
                    and any(c.kind == cindex.CursorKind.CUDADEVICE_ATTR for c in children(cursor)):
                self._check(cursor)
                return self._lower(cursor, name, with_callees=True)
        raise CompileError(f"{self.path}: no __device__ function named {name!r} is defined here")

    def _lower(self, decl: Any, name: str, with_callees: bool = False) -> ir.Function:
        """Function ``decl`` as IR, folded and without dead code, as Python kernels are (an inlined
        helper's unused parameter goes); ``with_callees``: with the functions it calls (a kernel
        has them already). Python's stack is given room for the tree's depth, and running out of
        it anyway is a CompileError that says where."""
        lowering = _Lowering(self, decl, name)
        try:
            with recursion_room(self.depth_of(decl, lowering.where)):
                fn = lowering.function()
                if with_callees:
                    fn = dataclasses.replace(fn, callees=tuple(lowering.program.values()))
                return passes.optimize(fn)
        except RecursionError as exc:
            at = exc.cursor if isinstance(exc, TreeTooDeep) else decl
            raise CompileError(f"{name} nests too deep for Python's stack, which hetero's CUDA C front end recurses "
                               f"on (sys.getrecursionlimit() is {sys.getrecursionlimit()}): split its expressions "
                               "or flatten its statements", *lowering.where(at)) from None

    def origin(self, file: str | None, line: int) -> tuple[str, int]:
        """Where ``line`` of ``file``, as parsed, was written: in a template instance, the template's text."""
        shift = self.line_shift
        if shift is not None and file == self.path and line >= shift[0]:
            return shift[2], line - shift[0] + shift[1]
        return file or self.path, line

    def depth_of(self, decl: Any, where: Callable[[Any], tuple[str, int, int]]) -> int:
        """How deep function ``decl``'s tree goes (a CompileError past the limit), measured once."""
        if decl.hash not in self.depths:
            self.depths[decl.hash] = check_depth(decl, where)
        return self.depths[decl.hash]

    def _find(self, name: str) -> Any:
        cindex = _clang()
        for cursor in declarations(self._tu):
            if cursor.kind in (cindex.CursorKind.FUNCTION_DECL, cindex.CursorKind.FUNCTION_TEMPLATE) \
                    and cursor.spelling == name and cursor.is_definition() \
                    and any(c.kind == cindex.CursorKind.CUDAGLOBAL_ATTR for c in children(cursor)):
                return cursor
        return None

    def _check(self, decl: Any) -> None:
        """A CompileError for the first error clang reported inside ``decl``."""
        start, end = decl.extent.start, decl.extent.end
        for diag in self._tu.diagnostics:
            loc = diag.location
            if diag.severity >= 3 and loc.file is not None and loc.file.name == start.file.name \
                    and start.line <= loc.line <= end.line:
                message = diag.spelling
                if self.missing_includes:  # the likely cause: a header of the kernel's that is not here
                    message += (f" (these #includes were found in none of the include folders, "
                                f"{', '.join(self.folders) or 'none'}, and read as empty: {', '.join(self.missing_includes)})")
                raise CompileError(message, *self.origin(loc.file.name, loc.line), max(loc.column - 1, 0))

    def _instantiate(self, decl: Any, base: str, arguments: str) -> ir.Function:
        unit, inner = self.instance(decl, base, arguments)
        unit.shared_bytes = self.shared_bytes  # this launch's, not the first's
        unit._check(inner)
        return unit._lower(inner, _c_name(f"{base}<{arguments}>"))

    def instance(self, decl: Any, base: str, arguments: str) -> tuple[Source, Any]:
        """Template ``decl`` with ``arguments`` (``"float, 4"``): its text compiled again as a plain
        function in a namespace defining each parameter, and that function's cursor (made once)."""
        key = f"{decl.hash}<{arguments}>"
        if key not in self.instance_units:
            self.instance_units[key] = self._instance(decl, base, arguments)
        return self.instance_units[key]

    def _instance(self, decl: Any, base: str, arguments: str) -> tuple[Source, Any]:
        cindex = _clang()
        params = [c for c in children(decl) if c.kind in (cindex.CursorKind.TEMPLATE_NON_TYPE_PARAMETER,
                                                                 cindex.CursorKind.TEMPLATE_TYPE_PARAMETER)]
        values = [v.strip() for v in _split_arguments(arguments)]
        if len(values) != len(params):
            raise CompileError(f"{base} takes {len(params)} template argument(s), got {len(values)}: <{arguments}>")
        lines = []
        for param, value in zip(params, values, strict=True):
            if param.kind == cindex.CursorKind.TEMPLATE_TYPE_PARAMETER:
                lines.append(f"typedef {value} {param.spelling};")
            else:
                kind = " ".join(t.spelling for t in param.get_tokens())
                kind = kind.rsplit(param.spelling, 1)[0].strip() or "int"
                lines.append(f"constexpr {kind} {param.spelling} = {value};")
        text = self.code
        home = decl.location.file.name if decl.location.file else self.path
        written = self.code if home == self.path else dict(self.inputs.files).get(home)
        if written is None:
            raise CompileError(f"cannot read the text of the template {base}", *_where_of(decl))
        body = _text_of(decl, written)
        header_end = body.index(">") + 1 if body.lstrip().startswith("template") else 0
        plain = body[header_end:]
        instance = f"__hetero_instance{len(self.instances)}"
        self.instances.append(f"{base}<{arguments}>")
        head = f"{text}\nnamespace {instance} {{\n{' '.join(lines)}\n"
        text = f"{head}{plain}\n}}\n"
        unit = Source.__new__(Source)
        unit.__dict__.update(self.__dict__)
        unit.line_shift = (head.count("\n") + 1, *self.origin(home, decl.extent.start.line)[::-1])
        unit.code = text
        unit.depths = {}
        unit.instance_units = {}
        unit._tu = unit._parse(text)
        for cursor in declarations(unit._tu):
            if cursor.kind == cindex.CursorKind.NAMESPACE and cursor.spelling == instance:
                for inner in children(cursor):
                    if inner.kind == cindex.CursorKind.FUNCTION_DECL and inner.spelling == base:
                        return unit, inner
        raise CompileError(f"could not instantiate {base}<{arguments}>", *_where_of(decl))


def _evaluate(cursor: Any) -> int | float | None:
    """clang's value of a constant expression cursor (a literal, also one a macro expanded to)."""
    import ctypes  # noqa: PLC0415

    cindex = _clang()
    lib = cindex.conf.lib
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_Cursor_Evaluate.argtypes = [cindex.Cursor]
    for fn, restype in (("clang_EvalResult_getKind", ctypes.c_int), ("clang_EvalResult_isUnsignedInt", ctypes.c_uint),
                        ("clang_EvalResult_getAsUnsigned", ctypes.c_ulonglong),
                        ("clang_EvalResult_getAsLongLong", ctypes.c_longlong),
                        ("clang_EvalResult_getAsDouble", ctypes.c_double), ("clang_EvalResult_dispose", None)):
        getattr(lib, fn).restype = restype
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        kind = lib.clang_EvalResult_getKind(result)
        if kind == 1:  # CXEval_Int
            if lib.clang_EvalResult_isUnsignedInt(result):
                return int(lib.clang_EvalResult_getAsUnsigned(result))
            return int(lib.clang_EvalResult_getAsLongLong(result))
        if kind == 2:  # CXEval_Float
            return float(lib.clang_EvalResult_getAsDouble(result))
        return None
    finally:
        lib.clang_EvalResult_dispose(result)


def _operator_spelling(cursor: Any) -> str:
    """clang's spelling of a unary or binary operator cursor's operator ('' where it has none)."""
    import ctypes  # noqa: PLC0415

    cindex = _clang()
    lib = cindex.conf.lib
    unary = cursor.kind == cindex.CursorKind.UNARY_OPERATOR
    kind_of = lib.clang_getCursorUnaryOperatorKind if unary else lib.clang_getCursorBinaryOperatorKind
    spell = lib.clang_getUnaryOperatorKindSpelling if unary else lib.clang_getBinaryOperatorKindSpelling
    kind_of.argtypes, kind_of.restype = [cindex.Cursor], ctypes.c_int
    spell.argtypes, spell.restype = [ctypes.c_int], cindex._CXString
    spell.errcheck = cindex._CXString.from_result
    kind = kind_of(cursor)
    if not kind:
        return ""
    text = str(spell(kind))
    return {"__extension__": ""}.get(text, text)


def _for_clauses(cursor: Any) -> tuple[bool, bool, bool]:
    """Whether a ``for`` statement's header has its init, condition and increment."""
    depth, parts, current = 0, [], 0
    for token in cursor.get_tokens():
        text = token.spelling
        if text == "(":
            depth += 1
            if depth == 1:
                continue
        elif text == ")":
            depth -= 1
            if depth == 0:
                parts.append(current)
                break
        if depth == 1 and text == ";":
            parts.append(current)
            current = 0
        elif depth >= 1:
            current += 1
    if len(parts) != 3:
        return (True, True, True)
    return (parts[0] > 0, parts[1] > 0, parts[2] > 0)


def _split_arguments(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
            continue
        depth += 1 if ch in "<(" else -1 if ch in ">)" else 0
        current += ch
    return [*out, current] if current.strip() else out


def _text_of(cursor: Any, code: str) -> str:
    lines = code.splitlines(keepends=True)
    start, end = cursor.extent.start, cursor.extent.end
    if start.line == end.line:
        return lines[start.line - 1][start.column - 1: end.column - 1]
    return "".join([lines[start.line - 1][start.column - 1:], *lines[start.line: end.line - 1],
                    lines[end.line - 1][: end.column - 1]])


def _c_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")


def scalar_of(ctype: Any, where: tuple[str, int, int]) -> ScalarType:
    kind = ctype.get_canonical().kind.name
    key = {"BOOL": "Bool", "CHAR_S": "Char_S", "SCHAR": "SChar", "CHAR_U": "Char_U", "UCHAR": "UChar", "SHORT": "Short",
           "USHORT": "UShort", "INT": "Int", "UINT": "UInt", "LONG": "Long", "ULONG": "ULong", "LONGLONG": "LongLong",
           "ULONGLONG": "ULongLong", "FLOAT": "Float", "DOUBLE": "Double", "HALF": "Half", "FLOAT16": "Float16"}.get(kind)
    if key is None:
        raise CompileError(f"the type {ctype.spelling} is not supported in kernels yet", *where)
    return _SCALARS[key]


class _Lowering(MemoryAccess, MathCalls):
    """One function's body -> IR statements (types from clang, conversions explicit)."""

    def __init__(self, unit: Source, decl: Any, name: str, program: dict[str, ir.Function] | None = None) -> None:
        self.unit = unit
        self.cindex = _clang()
        self.decl = decl
        self.name = name
        self.program: dict[str, ir.Function] = {} if program is None else program
        self.is_kernel = any(c.kind == self.cindex.CursorKind.CUDAGLOBAL_ATTR for c in children(decl))
        self.names: dict[Any, str] = {}  # a declaration's cursor hash -> its IR name
        self.taken: set[str] = set()
        self.locals: dict[str, ScalarType] = {}
        self.local_arrays: list[ir.LocalArray] = []
        self.arrays: dict[str, Any] = {}
        self.params: list[ir.Param] = []
        self.groups: dict[str, str] = {}  # a cooperative-groups handle -> "block" or "grid"
        self.offsets: dict[str, str] = {}  # a pointer parameter the body moves -> its i64 offset local
        self.references: dict[Any, tuple[str, tuple[ir.Expr, ...]]] = {}  # an inlined T& parameter -> its element
        self.inlining: set[Any] = set()
        self.temps = 0
        self.pointers: dict[Any, tuple[str, str, ScalarType, int]] = {}
        self.vectors: dict[Any, tuple[str, ...]] = {}
        self.lanes: dict[str, int] = {}
        #: Statements an expression needs run before the statement holding it (an inlined call's body,
        #: the deep part of a split expression).
        self.prelude: list[ir.Stmt] = []
        self.unsplittable = 0  # inside expressions that must stay whole (:meth:`in_place`)
        self.expr_depths: dict[int, tuple[ir.Expr, int]] = {}  # id -> (the expression, its depth)
        self.unpointed: set[Any] = set()  # pointer variables declared null, not yet pointed anywhere
        self.callee_units: dict[Any, Source] = {}  # a function template instance's cursor hash -> its unit

    # -- helpers -------------------------------------------------------------------------
    def where(self, cursor: Any) -> tuple[str, int, int]:
        loc = cursor.location
        unit = next((u for u in self.callee_units.values() if u._tu is cursor._tu), self.unit)  # an inlined instance's
        return (*unit.origin(loc.file.name if loc.file else None, loc.line), max(loc.column - 1, 0))

    def loc(self, cursor: Any) -> ir.Loc:
        return ir.Loc(*self.where(cursor))

    def fail(self, cursor: Any, message: str) -> CompileError:
        return CompileError(message, *self.where(cursor))

    def fresh(self, wanted: str) -> str:
        name, n = wanted, 2
        while name in self.taken:
            name, n = f"{wanted}_{n}", n + 1
        self.taken.add(name)
        return name

    def declare(self, cursor: Any) -> str:
        name = self.fresh(cursor.spelling or "tmp")
        self.names[cursor.hash] = name
        return name

    def kids(self, cursor: Any) -> list[Any]:
        return children(cursor)

    def scalar(self, cursor: Any, ctype: Any = None) -> ScalarType:
        return scalar_of(cursor.type if ctype is None else ctype, self.where(cursor))

    # -- the function ----------------------------------------------------------------------
    def function(self) -> ir.Function:
        K = self.cindex.CursorKind  # noqa: N806
        for param in children(self.decl):
            if param.kind != K.PARM_DECL:
                continue
            name = self.declare(param)
            canonical = param.type.get_canonical()
            if canonical.kind.name == "POINTER":
                element, lanes = self.pointee(param, canonical)
                array = ArrayType(element, 1)  # a vector type's array: the flat array of its components
                self.arrays[name] = array
                if lanes > 1:
                    self.lanes[name] = lanes
                self.params.append(ir.Param(name, array))
            elif vector_type(canonical) is not None:
                raise self.fail(param, f"a {param.type.spelling} parameter (a vector by value) is supported in "
                                       "__device__ functions the front end inlines, not here")
            else:
                t = self.scalar(param)
                self.params.append(ir.Param(name, t))
        body_cursor = next((c for c in children(self.decl) if c.kind == K.COMPOUND_STMT), None)
        if body_cursor is None:
            raise self.fail(self.decl, f"{self.decl.spelling} has no body here")
        start: list[ir.Stmt] = []
        for moved in self.moved_pointers(body_cursor):  # d_Src += offset: the parameter with an i64 offset
            offset = self.fresh(f"{moved}_offset")
            self.locals[offset] = i64
            self.offsets[moved] = offset
            start.append(ir.Assign(self.loc(self.decl), offset, ir.Const(i64, 0)))
        body = (*start, *self.block(body_cursor))
        return_type = ir.VOID if self.decl.result_type.kind.name == "VOID" else self.scalar(self.decl, self.decl.result_type)
        callees = tuple(self.program.values()) if self.is_kernel else ()
        features = {"fp64"} if any(t == f64 for t in self.locals.values()) else set()
        return ir.Function(self.name, tuple(self.params), return_type, dict(self.locals), tuple(self.local_arrays), body,
                           self.is_kernel, self.loc(self.decl), callees, frozenset(features))

    # -- statements -------------------------------------------------------------------------
    def block(self, cursor: Any) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for child in self.kids(cursor):
            out.extend(self.stmt(child))
        return out

    def stmt(self, c: Any) -> list[ir.Stmt]:
        """Statement ``c``, after what its expressions need run first (inlined calls)."""
        outer, self.prelude = self.prelude, []
        try:
            lowered = self.statement(c)
            return [*self.prelude, *lowered]
        finally:
            self.prelude = outer

    def no_prelude(self, c: Any, what: str) -> None:
        if self.prelude:
            raise self.fail(c, f"a call of a __device__ function the front end inlines (it takes shared memory, a "
                               f"group or vectors, or holds a barrier) cannot stand in {what}; call it before the "
                               "loop and again at the end of its body")

    def statement(self, c: Any) -> list[ir.Stmt]:  # noqa: C901 (one case per statement kind)
        K = self.cindex.CursorKind  # noqa: N806
        loc = self.loc(c)
        kind = c.kind
        if kind == K.COMPOUND_STMT:
            return self.block(c)
        if kind == K.DECL_STMT:
            out: list[ir.Stmt] = []
            for var in self.kids(c):
                out.extend(self.var_decl(var))
            return out
        if kind == K.NULL_STMT:
            return []
        if kind == K.UNEXPOSED_STMT and len(self.kids(c)) == 1:  # #pragma unroll and other loop hints
            return self.stmt(self.kids(c)[0])
        if kind == K.IF_STMT:
            parts = self.kids(c)
            cond = self.truth(parts[0])
            then = tuple(self.stmt(parts[1]))
            orelse = tuple(self.stmt(parts[2])) if len(parts) > 2 else ()
            return [ir.If(loc, cond, then, orelse)]
        if kind == K.WHILE_STMT:
            cond_c, body_c = self.kids(c)
            with self.in_place():
                cond = self.truth(cond_c)
            self.no_prelude(cond_c, "a while condition")
            return self.loop(ir.While(loc, cond, tuple(self.stmt(body_c))))
        if kind == K.FOR_STMT:
            kids = self.kids(c)
            present = _for_clauses(c)  # which of init; condition; increment the header has
            if sum(present) + 1 != len(kids):
                raise self.fail(c, "cannot read this for loop's header")
            clauses: list[Any] = []
            for has in present:
                clauses.append(kids.pop(0) if has else None)
            init, cond_c, inc = clauses
            body_c = kids[0]
            start = self.stmt(init) if init is not None else []
            with self.in_place():
                cond = self.truth(cond_c) if cond_c is not None else ir.Const(bool_t, True)
            self.no_prelude(c, "a for loop's condition")
            step = tuple(self.stmt(inc)) if inc is not None else ()
            body = tuple(_continue_runs(tuple(self.stmt(body_c)), step))
            return [*start, *self.loop(ir.While(loc, cond, (*body, *step)))]
        if kind == K.DO_STMT:
            body_c, cond_c = self.kids(c)
            first = self.fresh("_first")
            self.locals[first] = bool_t
            with self.in_place():
                go = ir.Logical(bool_t, "or", ir.Var(bool_t, first), self.truth(cond_c))
            self.no_prelude(cond_c, "a do-while condition")
            return [ir.Assign(loc, first, ir.Const(bool_t, True)),
                    *self.loop(ir.While(loc, go, (ir.Assign(loc, first, ir.Const(bool_t, False)), *self.stmt(body_c))))]
        if kind == K.RETURN_STMT:
            parts = self.kids(c)
            return [ir.Return(loc, self.expr(parts[0]) if parts else None)]
        if kind == K.BREAK_STMT:
            return [ir.Break(loc)]
        if kind == K.CONTINUE_STMT:
            return [ir.Continue(loc)]
        if kind.is_statement():  # switch, goto, a label, asm, try
            words = kind.name.lower().replace("_stmt", "").replace("_", " ")
            raise self.fail(c, f"a {words} statement is not supported in kernels yet; write it with if/else and loops")
        return self.effect(c)

    def loop(self, lowered: ir.While) -> list[ir.Stmt]:
        """A loop, its ``break`` turned into a flag where its body holds a barrier (:mod:`.cuda_c_loops`)."""
        if not (ir.contains_barrier(lowered.body) and cuda_c_loops.breaks_here(lowered.body)):
            return [lowered]
        flag = self.fresh("_broke")
        self.locals[flag] = bool_t
        return cuda_c_loops.flagged(lowered, flag)

    def var_decl(self, var: Any) -> list[ir.Stmt]:
        K = self.cindex.CursorKind  # noqa: N806
        if var.kind != K.VAR_DECL:
            raise self.fail(var, f"{var.kind.name.lower()} declarations are not supported in kernels")
        shared = any(k.kind == K.CUDASHARED_ATTR for k in children(var))
        canonical = var.type.get_canonical()
        if canonical.kind.name == "INCOMPLETEARRAY":  # extern __shared__ T name[]: the launch's dynamic memory
            self.names[var.hash] = self.dynamic_shared(var, self.scalar(var, canonical.get_array_element_type()))
            return []
        if canonical.kind.name == "POINTER":
            inits = [k for k in children(var) if k.kind.is_expression()]
            if not inits or _is_null(inits[-1]):  # float *p = nullptr;: it points once assigned (self.repoint)
                self.unpointed.add(var.hash)
                return []
            moved = self.pointer_var(var, inits[-1] if inits else None, self.loc(var))
            if moved is not None:
                return moved
            pointee = canonical.get_pointee()
            target = self.pointer_target(inits[-1], self.scalar(var, pointee)) \
                if inits and vector_type(pointee) is None else None
            if target is None:
                raise self.fail(var, f"the pointer variable {var.spelling}: hetero follows pointers into a kernel's "
                                     "arrays (a parameter, a __shared__ array, p + k, &a[i], casts of those, "
                                     "SharedMemory<T>())")
            self.names[var.hash] = target
            return []
        vector = vector_type(canonical)
        if vector is not None:
            inits = [k for k in children(var) if k.kind.is_expression()]
            return self.vector_var(var, vector, inits[-1] if inits else None, self.loc(var))
        if canonical.kind.name == "CONSTANTARRAY":
            shape: list[int] = []
            element = canonical
            while element.kind.name == "CONSTANTARRAY":
                shape.append(element.get_array_size())
                element = element.get_array_element_type().get_canonical()
            name = self.declare(var)
            array = ir.LocalArray(name, self.scalar(var, element), tuple(shape), private=not shared)
            self.local_arrays.append(array)
            self.arrays[name] = array
            return []
        record = canonical.spelling.rsplit("::", 1)[-1] if canonical.kind.name == "RECORD" else ""
        group = _GROUPS.get(record)
        tile = _TILE.match(record)
        if tile is not None:  # cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta)
            size = int(tile.group(1))
            if size not in (1, 2, 4, 8, 16, 32):
                raise self.fail(var, f"a thread_block_tile<{size}>: hetero's tiles are warps or parts of one "
                                     "(1, 2, 4, 8, 16 or 32 threads)")
            group = f"tile{size}"
        if group is not None:  # cg::thread_block cta = cg::this_thread_block(): a name for the group
            self.groups[self.declare(var)] = group
            return []
        if shared:  # __shared__ uint buf: a one-element array, read and written as buf
            name = self.declare(var)
            cell = ir.LocalArray(name, self.scalar(var), (1,))
            self.local_arrays.append(cell)
            self.arrays[name] = cell
            self.references[var.hash] = (name, (ir.Const(i64, 0),))
            return []
        t = self.scalar(var)
        name = self.declare(var)
        self.locals[name] = t
        inits = [k for k in children(var) if k.kind.is_expression()]
        if not inits:
            return []
        return [ir.Assign(self.loc(var), name, self.cast(self.expr(inits[-1]), t))]

    def moved_pointers(self, body: Any) -> list[str]:
        """The pointer parameters the body moves (``p += k``, ``p -= k``, ``p++``), in order."""
        K = self.cindex.CursorKind  # noqa: N806
        found: list[str] = []
        for node in walk(body):
            if node.kind == K.COMPOUND_ASSIGNMENT_OPERATOR or (node.kind == K.UNARY_OPERATOR and self.operator(node) in ("++", "--")):
                target = self.kids(node)[0]
                while target.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and self.kids(target):
                    target = self.kids(target)[0]
                name = self.names.get(target.referenced.hash) if target.kind == K.DECL_REF_EXPR else None
                if name is not None and isinstance(self.arrays.get(name), ArrayType) and name not in found:
                    found.append(name)
        return found

    def dynamic_shared(self, where: Any, element: ScalarType) -> str:
        """The launch's dynamic shared memory as an array of ``element`` (one per kernel: every
        ``extern __shared__`` declaration names the same memory, as in CUDA)."""
        bytes_ = self.unit.shared_bytes
        if not bytes_:
            raise self.fail(where, "this kernel uses dynamic shared memory (extern __shared__): launch it with "
                                   "shared_mem=<bytes>")
        existing = next((a for a in self.local_arrays if a.name == "_dynamic_shared"), None)
        if existing is not None:
            if existing.dtype != element:
                raise self.fail(where, f"dynamic shared memory used as both {existing.dtype} and {element} is not "
                                       "supported")
            return existing.name
        if bytes_ % (element.bits // 8):
            raise self.fail(where, f"shared_mem={bytes_} is not a whole number of {element} elements")
        array = ir.LocalArray("_dynamic_shared", element, (bytes_ // (element.bits // 8),))
        self.local_arrays.append(array)
        self.arrays[array.name] = array
        self.taken.add(array.name)
        return array.name

    def pointer_target(self, c: Any, element: ScalarType) -> str | None:
        """The shared array a pointer's initializer names: an array itself, or a function (such as
        ``SharedMemory<T>``'s conversion operator) that returns its ``extern __shared__`` array."""
        K = self.cindex.CursorKind  # noqa: N806
        node = c
        while node.kind in (K.UNEXPOSED_EXPR, K.CSTYLE_CAST_EXPR, K.PAREN_EXPR, K.CXX_STATIC_CAST_EXPR) and self.kids(node):
            node = self.kids(node)[-1]
        if node.kind == K.DECL_REF_EXPR:
            name = self.names.get(node.referenced.hash)
            return name if name in self.arrays and isinstance(self.arrays[name], ir.LocalArray) else None
        for part in walk(c):
            record = part.type.get_declaration() if part.type.kind.name in ("RECORD", "ELABORATED", "UNEXPOSED") else None
            if record is None or record.kind.name == "NO_DECL_FOUND":
                continue
            if self.returns_dynamic_shared(record.spelling):
                return self.dynamic_shared(c, element)
        return None

    def returns_dynamic_shared(self, record: str) -> bool:
        """Whether the struct (or struct template) ``record`` has a conversion operator returning an
        ``extern __shared__`` array: cuda-samples' ``SharedMemory<T>`` idiom."""
        K = self.cindex.CursorKind  # noqa: N806
        for decl in walk(self.unit._tu.cursor):
            if decl.kind in (K.STRUCT_DECL, K.CLASS_TEMPLATE, K.CLASS_DECL) and decl.spelling == record:
                for method in children(decl):
                    if method.kind == K.CONVERSION_FUNCTION and any(
                            inner.kind == K.VAR_DECL and inner.type.get_canonical().kind.name == "INCOMPLETEARRAY"
                            for inner in walk(method)):
                        return True
        return False

    def effect(self, c: Any) -> list[ir.Stmt]:
        """An expression statement: an assignment, an increment, a call."""
        K = self.cindex.CursorKind  # noqa: N806
        loc = self.loc(c)
        if c.kind == K.UNEXPOSED_EXPR and len(self.kids(c)) == 1:
            return self.effect(self.kids(c)[0])
        if c.kind == K.PAREN_EXPR:
            return self.effect(self.kids(c)[0])
        if c.kind == K.BINARY_OPERATOR and self.operator(c) == "=" and vector_type(self.kids(c)[0].type) is not None:
            target, value = self.kids(c)
            return self.store_vector(target, self.vector_value(value), loc)
        if c.kind == K.BINARY_OPERATOR and self.operator(c) == "=" and self.pointer_named(self.kids(c)[0]) is not None:
            return self.repoint(self.pointer_named(self.kids(c)[0]), self.kids(c)[1], loc)
        if c.kind == K.BINARY_OPERATOR and self.operator(c) == "=":
            target, value = self.kids(c)
            inner = value
            while inner.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and len(self.kids(inner)) == 1:
                inner = self.kids(inner)[0]
            if inner.kind == K.BINARY_OPERATOR and self.operator(inner) == "=":  # a = b = value
                first = self.effect(inner)
                return [*first, *self.store(target, self.expr(self.kids(inner)[0]), loc)]
            return self.store(target, self.expr(value), loc)
        variable = self.moved_variable(c)
        if variable is not None:  # p += k on a pointer variable: its offset moves
            into, offset_local, pointee, lanes = variable
            step_c = None if c.kind == K.UNARY_OPERATOR else self.kids(c)[1]
            amount: ir.Expr = ir.Const(i64, 1) if step_c is None else self.cast(self.expr(step_c), i64)
            if self.operator(c) in ("-=", "--"):
                amount = ir.UnaryOp(i64, "-", amount)
            scale = self.ratio(c, Pointer(into, ir.Var(i64, offset_local), pointee, lanes))
            if scale != 1:
                amount = ir.BinOp(i64, "*", amount, ir.Const(i64, scale))
            return [ir.Assign(loc, offset_local, ir.BinOp(i64, "+", ir.Var(i64, offset_local), amount))]
        moved = self.moved_name(c)
        if moved is not None:  # p += k on a pointer parameter: its offset moves
            offset = ir.Var(i64, self.offsets[moved])
            if c.kind == K.UNARY_OPERATOR:
                step: ir.Expr = ir.Const(i64, 1 if self.operator(c) == "++" else -1)
            else:
                step = self.cast(self.expr(self.kids(c)[1]), i64)
                if self.operator(c) == "-=":
                    step = ir.UnaryOp(i64, "-", step)
            return [ir.Assign(loc, self.offsets[moved], ir.BinOp(i64, "+", offset, step))]
        if c.kind == K.COMPOUND_ASSIGNMENT_OPERATOR:
            target, value = self.kids(c)
            op = self.operator(c)[:-1]
            current = self.expr(target)
            t = self.scalar(c)
            return self.store(target, self.cast(self.arith(op, current, self.expr(value), t, c), t), loc)
        if c.kind == K.UNARY_OPERATOR and self.operator(c) in ("++", "--"):
            (target,) = self.kids(c)
            current = self.expr(target)
            one = ir.Const(current.type, 1)
            return self.store(target, ir.BinOp(current.type, "+" if self.operator(c) == "++" else "-", current, one), loc)
        if c.kind == K.BINARY_OPERATOR and self.operator(c) == ",":
            first, second = self.kids(c)
            return [*self.effect(first), *self.effect(second)]
        if c.kind == K.CALL_EXPR and c.spelling == "operator=" and vector_type(c.type) is not None:
            kids = self.kids(c)  # a struct assignment: the target, the operator, the value
            return self.store_vector(kids[0], self.vector_value(kids[-1]), loc)
        if c.kind == K.CALL_EXPR:
            if c.spelling in STORES and _from_prelude(c):
                return self.hinted_store(c, loc)
            if c.spelling == "__syncthreads":
                return [ir.Barrier(loc)]
            if c.spelling in _FENCES:
                return [ir.Fence(loc, _FENCES[c.spelling])]
            group = self.group_call(c)
            if group is not None:
                kind, method = group
                if method != "sync":
                    raise self.fail(c, f"{method}() of a cooperative group is not supported as a statement")
                if kind.startswith("tile"):  # a tile's threads are one warp's
                    return [ir.ExprStmt(loc, ir.Warp(ir.VOID, "sync", (_tile_mask(int(kind[4:])),)))]
                return [ir.Barrier(loc) if kind == "block" else ir.GridSync(loc)]
            callee = c.referenced.get_definition() if c.referenced is not None else None
            if callee is not None and c.spelling not in _WARP_INTRINSICS and self.must_inline(c, callee):
                return self.inline(c, self.definition(c))[0]
            return [ir.ExprStmt(loc, self.expr(c))]
        raise self.fail(c, f"this expression statement ({c.kind.name.lower()}) has no effect a kernel can have")

    def pointer_named(self, c: Any) -> Any:
        """The pointer variable ``c`` names (one declared here, pointing or still null), else None."""
        node = self._unwrap(c)
        if node.kind != self.cindex.CursorKind.DECL_REF_EXPR or node.referenced is None:
            return None
        ref = node.referenced
        return ref if ref.hash in self.unpointed or ref.hash in self.pointers else None

    def repoint(self, var: Any, value: Any, loc: ir.Loc) -> list[ir.Stmt]:
        """``p = <pointer>``: a null pointer variable takes its array; one that points moves within
        its array (hetero's pointers are an array and an offset, so they never change array)."""
        target = self.pointer_expr(value)
        if target is None:
            raise self.fail(value, f"the pointer variable {var.spelling} is set to a pointer hetero does not follow "
                                   "(a parameter, a __shared__ array, p + k, &a[i], casts of those)")
        if var.hash in self.unpointed:
            self.unpointed.discard(var.hash)
            return self.pointer_var(var, value, loc) or []  # pointer_expr(value) above followed it
        array, offset, _, _ = self.pointers[var.hash]
        if target.array != array:
            raise self.fail(value, f"the pointer variable {var.spelling} points into {array} and is set here to "
                                   f"point into {target.array}: hetero's pointer variables stay in one array")
        return [ir.Assign(loc, offset, target.offset)]

    def moved_variable(self, c: Any) -> tuple[str, str, ScalarType, int] | None:
        """The pointer variable ``c`` (``p += k``, ``p++``) moves, else None."""
        K = self.cindex.CursorKind  # noqa: N806
        if not (c.kind == K.COMPOUND_ASSIGNMENT_OPERATOR or (c.kind == K.UNARY_OPERATOR and self.operator(c) in ("++", "--"))):
            return None
        target = self._unwrap(self.kids(c)[0])
        return self.pointers.get(target.referenced.hash) if target.kind == K.DECL_REF_EXPR else None

    def moved_name(self, c: Any) -> str | None:
        """The pointer parameter ``c`` (``p += k``, ``p++``) moves, else None."""
        K = self.cindex.CursorKind  # noqa: N806
        if not (c.kind == K.COMPOUND_ASSIGNMENT_OPERATOR or (c.kind == K.UNARY_OPERATOR and self.operator(c) in ("++", "--"))):
            return None
        target = self.kids(c)[0]
        while target.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and self.kids(target):
            target = self.kids(target)[0]
        name = self.names.get(target.referenced.hash) if target.kind == K.DECL_REF_EXPR else None
        return name if name in self.offsets else None

    def must_inline(self, c: Any, callee: Any) -> bool:
        """Whether a call of ``callee`` is lowered into its caller instead of an IR call: it takes
        references, shared memory or pointers into an array (not a kernel's plain pointer
        parameter), a cooperative group or vectors, returns a vector, or holds a barrier."""
        K = self.cindex.CursorKind  # noqa: N806
        params = [p for p in children(callee) if p.kind == K.PARM_DECL]
        if vector_type(callee.result_type) is not None:
            return True
        for param, arg in zip(params, list(c.get_arguments()), strict=False):
            canonical = param.type.get_canonical()
            if canonical.kind.name == "LVALUEREFERENCE" or vector_type(canonical) is not None:
                return True
            if canonical.kind.name == "RECORD":
                return True  # a cooperative group, passed by value
            if canonical.kind.name == "POINTER":
                node = self._unwrap(arg)
                name = self.names.get(node.referenced.hash) if node.kind == K.DECL_REF_EXPR else None
                if name is None or not isinstance(self.arrays.get(name), ArrayType) or name in self.offsets \
                        or name in self.lanes:
                    return True
        body = next((k for k in children(callee) if k.kind == K.COMPOUND_STMT), None)
        return body is not None and any(
            n.kind == K.CALL_EXPR and n.spelling in ("__syncthreads", "sync", "__syncwarp") for n in walk(body))

    def inline(self, c: Any, callee: Any) -> tuple[list[ir.Stmt], ir.Expr | list[ir.Expr] | None]:
        """A call of a device function lowered into its caller: the statements, and the result (a
        value, a vector's components, or None). Each ``T&`` parameter names the caller's element
        (its indices computed once) or local; a pointer parameter points where the argument does;
        a group parameter is the caller's group; other parameters are fresh locals. Only a
        ``return`` at the function's end is supported."""
        if callee.hash in self.inlining:
            raise self.fail(c, f"{callee.spelling} calls itself; recursion is not supported")
        with recursion_room(self.unit.depth_of(callee, self.where)):
            return self._inline(c, callee)

    def _inline(self, c: Any, callee: Any) -> tuple[list[ir.Stmt], ir.Expr | list[ir.Expr] | None]:
        K = self.cindex.CursorKind  # noqa: N806
        loc = self.loc(c)
        out: list[ir.Stmt] = []
        params = [p for p in children(callee) if p.kind == K.PARM_DECL]
        for param, arg in zip(params, list(c.get_arguments()), strict=True):
            canonical = param.type.get_canonical()
            if canonical.kind.name == "LVALUEREFERENCE":
                node = self._unwrap(arg)
                local = self.names.get(node.referenced.hash) if node.kind == K.DECL_REF_EXPR else None
                if local is not None and local in self.locals:
                    self.names[param.hash] = local  # a reference to a local: the local itself
                    continue
                if local is not None and local in self.groups:
                    self.names[param.hash] = local  # a reference to a group: the group
                    continue
                array, indices = self.element(node)
                fixed: list[ir.Expr] = []
                for index in indices:
                    if isinstance(index, ir.Const):
                        fixed.append(index)
                        continue
                    temp = self.fresh(f"_{param.spelling}_index")
                    self.locals[temp] = i64
                    out.append(ir.Assign(loc, temp, index))
                    fixed.append(ir.Var(i64, temp))
                self.references[param.hash] = (array, tuple(fixed))
            elif canonical.kind.name == "POINTER":
                moved = self.pointer_var(param, arg, loc)
                if moved is None:
                    raise self.fail(arg, f"pass {callee.spelling} a pointer into one of the kernel's arrays")
                out += moved
            elif vector_type(canonical) is not None:
                out += self.vector_var(param, vector_type(canonical), arg, loc)  # type: ignore[arg-type]
            elif canonical.kind.name == "RECORD":
                node = self._unwrap(arg)
                group = self.names.get(node.referenced.hash) if node.kind == K.DECL_REF_EXPR else None
                if group not in self.groups:
                    raise self.fail(arg, f"{callee.spelling} takes a {param.type.spelling}: pass a cooperative group")
                self.names[param.hash] = group  # type: ignore[assignment]
            else:
                name = self.declare(param)
                t = self.scalar(param)
                self.locals[name] = t
                out.append(ir.Assign(loc, name, self.cast(self.expr(arg), t)))
        body = next((k for k in children(callee) if k.kind == K.COMPOUND_STMT), None)
        if body is None:
            raise self.fail(c, f"{callee.spelling} has no body here")
        statements = self.kids(body)
        last = statements[-1] if statements and statements[-1].kind == K.RETURN_STMT else None
        self.inlining.add(callee.hash)
        try:
            inlined = [s for child in (statements[:-1] if last is not None else statements) for s in self.stmt(child)]
            result: ir.Expr | list[ir.Expr] | None = None
            if last is not None and self.kids(last):
                outer, self.prelude = self.prelude, []
                try:
                    value_c = self.kids(last)[0]
                    vector = vector_type(callee.result_type)
                    if vector is not None:
                        values = self.vector_value(value_c)
                        names = [self.fresh(f"_{callee.spelling}_{k}") for k in "xyzw"[:vector[1]]]
                        for name in names:
                            self.locals[name] = vector[0]
                        assigns = [ir.Assign(loc, n, self.cast(v, vector[0])) for n, v in zip(names, values, strict=True)]
                        result = [ir.Var(vector[0], n) for n in names]
                    else:
                        t = self.scalar(callee, callee.result_type)
                        name = self.fresh(f"_{callee.spelling}_result")
                        self.locals[name] = t
                        assigns = [ir.Assign(loc, name, self.cast(self.expr(value_c), t))]
                        result = ir.Var(t, name)
                    inlined += [*self.prelude, *assigns]
                finally:
                    self.prelude = outer
        finally:
            self.inlining.discard(callee.hash)
        if any(isinstance(s, ir.Return) for s in ir.walk_stmts(tuple(inlined))):
            raise self.fail(c, f"{callee.spelling} returns before its end; hetero inlines it into its caller "
                               "(it takes shared memory, references, groups or vectors, or holds a barrier), where "
                               "only a return at the end is supported")
        return [*out, *inlined], result

    def call_vector(self, c: Any) -> list[ir.Expr]:
        """A call of a device function returning a vector: inlined, its components."""
        callee = self.definition(c)
        stmts, result = self.inline(c, callee)
        if not isinstance(result, list):
            raise self.fail(c, f"{callee.spelling} returns no vector")
        self.prelude += stmts
        return result

    def definition(self, c: Any) -> Any:
        callee = c.referenced
        template = _specialized_template(callee)
        if template is not None:
            return self.template_instance(c, callee, template)
        if callee is None or not callee.is_definition():
            definition = callee.get_definition() if callee is not None else None
            if definition is None and _from_prelude(c):
                raise self.fail(c, f"{c.spelling}: {UNSUPPORTED_HINT}")
            if definition is None:
                raise self.fail(c, f"calling {c.spelling} is not supported in kernels (no device definition here)")
            callee = definition
        if not any(k.kind == self.cindex.CursorKind.CUDADEVICE_ATTR for k in children(callee)):
            raise self.fail(c, f"{c.spelling} is not a __device__ function")
        return callee

    def template_instance(self, c: Any, specialization: Any, template: Any) -> Any:
        """The instance a call of a ``__device__`` function template names (``load<float, 4>(p)``, or
        with its arguments deduced), compiled as the front end compiles a template kernel."""
        arguments: list[str] = []
        for k in range(specialization.get_num_template_arguments()):
            kind = specialization.get_template_argument_kind(k).name
            if kind == "TYPE":
                arguments.append(specialization.get_template_argument_type(k).get_canonical().spelling)
            elif kind == "INTEGRAL":
                arguments.append(str(specialization.get_template_argument_value(k)))
            else:
                raise self.fail(c, f"{c.spelling}: a template argument of kind {kind.lower()} is not supported "
                                   "(types and integers are)")
        defined = template.get_definition() or template
        unit, inner = self.unit.instance(defined, template.spelling, ", ".join(arguments))
        unit.shared_bytes = self.unit.shared_bytes
        unit._check(inner)
        if not any(k.kind == self.cindex.CursorKind.CUDADEVICE_ATTR for k in children(inner)):
            raise self.fail(c, f"{c.spelling} is not a __device__ function")
        self.callee_units[inner.hash] = unit
        return inner

    def store(self, target: Any, value: ir.Expr, loc: ir.Loc) -> list[ir.Stmt]:
        K = self.cindex.CursorKind  # noqa: N806
        while target.kind in (K.PAREN_EXPR,) or (target.kind == K.UNEXPOSED_EXPR and len(self.kids(target)) == 1):
            target = self.kids(target)[0]
        if target.kind == K.DECL_REF_EXPR and target.referenced.hash in self.references:
            array, indices = self.references[target.referenced.hash]
            return [ir.Store(loc, array, indices, self.cast(value, self.element_type(array)))]
        if target.kind == K.DECL_REF_EXPR:
            name = self.names.get(target.referenced.hash)
            if name is None or name not in self.locals and name not in {p.name for p in self.params}:
                raise self.fail(target, f"cannot assign to {target.spelling} in a kernel")
            t = self.locals.get(name) or next(p.type for p in self.params if p.name == name)
            return [ir.Assign(loc, name, self.cast(value, t))]  # type: ignore[arg-type]
        into_component = self.store_component(target, value, loc)
        if into_component is not None:
            return into_component
        through = self.subscript(target)
        if through is not None:
            return self.store_through(through, value, loc)
        array, indices = self.element(target)
        return [ir.Store(loc, array, indices, self.cast(value, self.element_type(array)))]

    # -- expressions --------------------------------------------------------------------------
    def operator(self, c: Any) -> str:
        """The operator of a unary, binary or compound-assignment expression, as clang names it."""
        named = _operator_spelling(c)
        if named:
            return named
        kids = self.kids(c)
        tokens = [t.spelling for t in c.get_tokens()]
        if c.kind == self.cindex.CursorKind.UNARY_OPERATOR:
            first = kids[0].extent.start
            before = [t.spelling for t in c.get_tokens() if (t.extent.start.line, t.extent.start.column) < (first.line, first.column)]
            return before[0] if before else tokens[-1]
        end = kids[0].extent.end
        for token in c.get_tokens():
            if (token.extent.start.line, token.extent.start.column) >= (end.line, end.column):
                return str(token.spelling)
        raise self.fail(c, "cannot read this operator")

    def element_type(self, array: str) -> ScalarType:
        found = self.arrays[array]
        return found.dtype  # type: ignore[no-any-return]

    def element(self, c: Any) -> tuple[str, tuple[ir.Expr, ...]]:
        """``a[i]``, ``s[i][j]`` or ``*p``: the array and its (i64) indices."""
        K = self.cindex.CursorKind  # noqa: N806
        indices: list[ir.Expr] = []
        node = c
        while True:
            while node.kind == K.PAREN_EXPR or (node.kind == K.UNEXPOSED_EXPR and len(self.kids(node)) == 1):
                node = self.kids(node)[0]
            if node.kind == K.ARRAY_SUBSCRIPT_EXPR:
                base, index = self.kids(node)
                indices.insert(0, self.cast(self.expr(index), i64))
                node = base
                continue
            if node.kind == K.UNARY_OPERATOR and self.operator(node) == "*":
                indices.insert(0, ir.Const(i64, 0))
                node = self.kids(node)[0]
                continue
            break
        if node.kind != K.DECL_REF_EXPR or self.names.get(node.referenced.hash) not in self.arrays:
            raise self.fail(node, "only a kernel's pointer parameters and its arrays can be indexed here")
        name = self.names[node.referenced.hash]
        array = self.arrays[name]
        rank = len(array.shape) if isinstance(array, ir.LocalArray) else 1
        if name in self.offsets and indices:
            indices[0] = ir.BinOp(i64, "+", ir.Var(i64, self.offsets[name]), indices[0])
        if len(indices) != rank:
            raise self.fail(c, f"{node.spelling} has {rank} dimension(s), indexed with {len(indices)}")
        return name, tuple(indices)

    def cast(self, e: ir.Expr, t: ScalarType) -> ir.Expr:
        return e if e.type == t else ir.Cast(t, e)

    def truth(self, c: Any) -> ir.Expr:
        e = self.expr(c)
        return e if e.type == bool_t else ir.Compare(bool_t, "!=", e, ir.Const(e.type, 0))

    def arith(self, op: str, left: ir.Expr, right: ir.Expr, t: ScalarType, c: Any) -> ir.Expr:
        """``left op right`` with C's meaning, both sides already of type ``t`` (shifts: the left's)."""
        if op in ("<<", ">>"):
            return ir.BinOp(t, op, self.cast(left, t), right)
        left, right = self.cast(left, t), self.cast(right, t)
        if op in ("/", "%") and t.is_int:
            return _c_division(op, left, right, t)
        if op in ("+", "-", "*", "/", "%", "&", "|", "^"):
            return ir.BinOp(t, op, left, right)
        raise self.fail(c, f"operator {op} is not supported in kernels")

    def expr(self, c: Any) -> ir.Expr:
        """Expression ``c`` as IR, at most :data:`SPLIT_DEPTH` deep where that is safe: a deeper
        one is computed into a temporary first (C leaves the order of an expression's operands
        open), so that no backend meets an expression nested deeper than its own limits (the
        CPU backend's Python parser takes 200 nested brackets)."""
        e = self.expression(c)
        if self.unsplittable or e.type == ir.VOID or self.ir_depth(e) <= SPLIT_DEPTH:
            return e
        name = self.fresh("_part")
        self.locals[name] = e.type
        self.prelude.append(ir.Assign(self.loc(c), name, e))
        return ir.Var(e.type, name)

    def ir_depth(self, e: ir.Expr) -> int:
        known = self.expr_depths.get(id(e))
        if known is None or known[0] is not e:
            known = (e, 1 + max((self.ir_depth(inner) for inner in own_expressions(e)), default=0))
            self.expr_depths[id(e)] = known
        return known[1]

    @contextlib.contextmanager
    def in_place(self) -> Iterator[None]:
        """The block lowers an expression that may not run first (the right of ``&&``, a branch of
        ``?:``) or cannot have statements before it (a loop's condition): it is not split."""
        self.unsplittable += 1
        try:
            yield
        finally:
            self.unsplittable -= 1

    def expression(self, c: Any) -> ir.Expr:  # noqa: C901 (one case per expression kind)
        K = self.cindex.CursorKind  # noqa: N806
        kind = c.kind
        if kind == K.UNEXPOSED_EXPR or kind == K.PAREN_EXPR:
            kids = self.kids(c)
            if len(kids) != 1:
                written = " ".join(t.spelling for t in c.get_tokens()) or c.type.spelling
                raise self.fail(c, f"this expression ({written}, {len(kids)} parts) is not supported in kernels")
            inner = self.expr(kids[0])
            if kind == K.UNEXPOSED_EXPR and c.type.get_canonical().kind.name not in ("POINTER", "CONSTANTARRAY"):
                return self.cast(inner, self.scalar(c))
            return inner
        if kind in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR):
            return self.cast(self.expr(self.kids(c)[-1]), self.scalar(c))
        if kind in (K.INTEGER_LITERAL, K.FLOATING_LITERAL):  # by clang's evaluation: macros expand to these too
            value = _evaluate(c)
            if value is None:
                raise self.fail(c, "cannot read this literal")
            t = self.scalar(c)
            return ir.Const(t, float(value) if t.is_float else int(value))
        if kind == K.CXX_BOOL_LITERAL_EXPR:
            return ir.Const(bool_t, next(c.get_tokens()).spelling == "true")
        if kind == K.DECL_REF_EXPR and c.referenced.hash in self.references:
            array, indices = self.references[c.referenced.hash]
            return ir.Load(self.element_type(array), array, indices)
        if kind == K.DECL_REF_EXPR and c.spelling == "warpSize" and c.referenced.hash not in self.names:
            return ir.Const(i32, ir.WARP_SIZE)  # 32 on every device: HIP's 64-wide wavefronts work as two warps
        if kind == K.DECL_REF_EXPR:
            name = self.names.get(c.referenced.hash)
            if name is None:
                constant = self.constant(c)
                if constant is not None:
                    return constant
                raise self.fail(c, f"{c.spelling} cannot be read in a kernel (only its parameters and locals)")
            if name in self.arrays:
                raise self.fail(c, f"the pointer {c.spelling} can only be indexed here")
            return ir.Var(self.scalar(c), name)
        if kind == K.MEMBER_REF_EXPR and self.component(c) is not None:
            return self.read_component(c)  # type: ignore[return-value]
        if kind == K.MEMBER_REF_EXPR:
            (base,) = self.kids(c)
            while base.kind == K.UNEXPOSED_EXPR and len(self.kids(base)) == 1:
                base = self.kids(base)[0]
            if base.kind == K.DECL_REF_EXPR and base.spelling in _BUILTIN_DIMS and c.spelling in ("x", "y", "z"):
                return ir.Cast(u32, ir.WorkItem(i64, _BUILTIN_DIMS[base.spelling], "xyz".index(c.spelling)))
            raise self.fail(c, f"member {c.spelling} is not supported in kernels")
        if kind == K.ARRAY_SUBSCRIPT_EXPR or (kind == K.UNARY_OPERATOR and self.operator(c) == "*"):
            through = self.subscript(c)
            if through is not None:
                if through.lanes != 1:
                    raise self.fail(c, "a whole vector cannot be used as a number here; take a component (.x)")
                return self.load_through(through)
            array, indices = self.element(c)
            return ir.Load(self.element_type(array), array, indices)
        if kind == K.UNARY_OPERATOR:
            op = self.operator(c)
            operand = self.expr(self.kids(c)[0])
            t = self.scalar(c)
            if op == "-":
                return ir.UnaryOp(t, "-", self.cast(operand, t))
            if op == "+":
                return self.cast(operand, t)
            if op == "~":
                return ir.UnaryOp(t, "~", self.cast(operand, t))
            if op == "!":
                return ir.UnaryOp(bool_t, "not", self.truth(self.kids(c)[0]))
            raise self.fail(c, f"operator {op} is not supported in kernel expressions (only as a statement)")
        if kind == K.BINARY_OPERATOR:
            op = self.operator(c)
            left_c, right_c = self.kids(c)
            if op in ("&&", "||"):
                left_truth = self.truth(left_c)
                with self.in_place():
                    return ir.Logical(bool_t, "and" if op == "&&" else "or", left_truth, self.truth(right_c))
            left, right = self.expr(left_c), self.expr(right_c)
            if op in ("<", "<=", ">", ">=", "==", "!="):
                return ir.Compare(bool_t, op, left, self.cast(right, left.type))
            if op in ("=", ","):
                raise self.fail(c, f"'{op}' inside an expression is not supported; write it as a statement")
            return self.arith(op, left, right, self.scalar(c), c)
        if kind == K.CONDITIONAL_OPERATOR:
            cond_c, yes_c, no_c = self.kids(c)
            t = self.scalar(c)
            cond = self.truth(cond_c)
            with self.in_place():
                return ir.Select(t, cond, self.cast(self.expr(yes_c), t), self.cast(self.expr(no_c), t))
        if kind == K.CALL_EXPR:
            return self.call(c)
        raise self.fail(c, f"{kind.name.lower().replace('_', ' ')} is not supported in kernels")

    def constant(self, c: Any) -> ir.Expr | None:
        """A ``constexpr``/``const`` variable or enumerator from outside the function, by its value."""
        K = self.cindex.CursorKind  # noqa: N806
        ref = c.referenced
        if ref.kind == K.ENUM_CONSTANT_DECL:
            return ir.Const(self.scalar(c), ref.enum_value)
        if ref.kind == K.VAR_DECL and ref.type.is_const_qualified():
            inits = [k for k in children(ref) if k.kind.is_expression()]
            if inits:
                value = _Lowering(self.unit, self.decl, self.name, self.program).expr(inits[-1])
                if isinstance(value, (ir.Const, ir.Cast)):
                    return self.cast(value, self.scalar(c))
        return None

    def group_call(self, c: Any) -> tuple[str, str] | None:
        """``cta.sync()``, ``cg::sync(cta)``, ``cta.thread_rank()``: (the group's kind, the method), or None."""
        K = self.cindex.CursorKind  # noqa: N806
        kids = self.kids(c)
        handle = None
        if kids and kids[0].kind == K.MEMBER_REF_EXPR:  # cta.method()
            inner = self.kids(kids[0])
            handle = inner[0] if inner else None
        elif c.spelling == "sync" and list(c.get_arguments()):  # cg::sync(cta)
            handle = list(c.get_arguments())[0]
        while handle is not None and handle.kind == K.UNEXPOSED_EXPR and self.kids(handle):
            handle = self.kids(handle)[0]
        if handle is None:
            return None
        if handle.kind == K.DECL_REF_EXPR and self.names.get(handle.referenced.hash) in self.groups:
            return self.groups[self.names[handle.referenced.hash]], c.spelling
        if handle.kind == K.CALL_EXPR and handle.spelling in ("this_thread_block", "this_grid"):
            return ("block" if handle.spelling == "this_thread_block" else "grid"), c.spelling
        if handle.kind == K.CALL_EXPR and handle.spelling == "tiled_partition":
            tile = _TILE.match(handle.type.get_canonical().spelling.rsplit("::", 1)[-1])
            if tile is not None:
                return f"tile{tile.group(1)}", c.spelling
        return None

    def tile_call(self, c: Any, size: int, method: str) -> ir.Expr:
        """A method of a ``thread_block_tile<size>``: a warp, or an aligned part of one."""
        lane = warp_lane()
        rank = ir.BinOp(i64, "&", lane, ir.Const(i64, size - 1))
        base = ir.BinOp(i64, "-", lane, rank)  # the tile's first lane in its warp
        mask = _tile_mask(size)
        args = list(c.get_arguments())
        if method == "thread_rank":
            return self.cast(rank, self.scalar(c))
        if method in ("size", "num_threads"):
            return self.cast(ir.Const(i64, size), self.scalar(c))
        if method == "meta_group_rank":
            return self.cast(ir.BinOp(i64, "//", linear_id(), ir.Const(i64, size)), self.scalar(c))
        if method == "meta_group_size":
            threads = ir.BinOp(i64, "*", ir.BinOp(i64, "*", ir.WorkItem(i64, "local_size", 0), ir.WorkItem(i64, "local_size", 1)),
                               ir.WorkItem(i64, "local_size", 2))
            groups = ir.BinOp(i64, "//", ir.BinOp(i64, "+", threads, ir.Const(i64, size - 1)), ir.Const(i64, size))
            return self.cast(groups, self.scalar(c))
        if method in _TILE_SHUFFLES:
            value = self.expr(args[0])
            t = self.scalar(c)
            lane_arg = self.cast(self.expr(args[1]), i32)
            return ir.Warp(t, _TILE_SHUFFLES[method], (mask, self.cast(value, t), lane_arg, ir.Const(i32, size)))
        if method in ("any", "all", "ballot"):
            holds = self.truth(args[0])
            if method == "ballot":
                bits = ir.Warp(u32, "ballot", (mask, holds))
                return self.cast(ir.BinOp(u32, ">>", bits, base) if size != 32 else bits, self.scalar(c))
            return self.cast(ir.Warp(bool_t, method, (mask, holds)), self.scalar(c))
        raise self.fail(c, f"{method}() of a thread_block_tile is not supported here")

    def tile_reduce(self, c: Any, args: list[Any]) -> ir.Expr:
        """``cg::reduce(tile, v, cg::plus<T>())``: a butterfly of shuffles over the tile, every
        thread of which gets the result."""
        tile = _TILE.match(args[0].type.get_canonical().spelling.rsplit("::", 1)[-1])
        if tile is None:
            raise self.fail(c, f"cg::reduce over a {args[0].type.spelling}: hetero reduces over a thread_block_tile")
        operation = args[2].type.get_canonical().spelling.rsplit("::", 1)[-1].split("<")[0]
        t = self.scalar(c)
        if operation not in _REDUCTIONS or (t.is_float and not _REDUCTIONS[operation][1]):
            raise self.fail(args[2], f"cg::reduce with {args[2].type.spelling}: hetero reduces with cg::plus, less, "
                                     "greater (and bit_and, bit_or, bit_xor on integers)")
        op = _REDUCTIONS[operation][1 if t.is_float else 0]
        size, loc = int(tile.group(1)), self.loc(c)
        total = self.fresh("_reduced")
        self.locals[total] = t
        self.prelude.append(ir.Assign(loc, total, self.cast(self.expr(args[1]), t)))
        step = size // 2
        while step:
            mine = ir.Var(t, total)
            other = ir.Warp(t, "shfl_xor", (_tile_mask(size), mine, ir.Const(i32, step), ir.Const(i32, size)))
            both = ir.Math(t, op, (mine, other)) if op in ("fmin", "fmax") else ir.BinOp(t, op, mine, other)
            self.prelude.append(ir.Assign(loc, total, both))
            step //= 2
        return ir.Var(t, total)

    def warp_intrinsic(self, c: Any, op: str) -> ir.Expr:
        """``__shfl_down_sync(mask, v, delta[, width])``, ``__ballot_sync(mask, p)`` and their kin."""
        args = _written(c)
        if op == "activemask":
            return ir.Warp(u32, op, ())
        if op == "sync" and not args:  # __syncwarp(): the whole warp
            return ir.Warp(ir.VOID, op, (ir.Const(u32, 0xFFFFFFFF),))
        mask = self.cast(self.expr(args[0]), u32)
        if op == "sync":
            return ir.Warp(ir.VOID, op, (mask,))
        if op in ("all", "any", "ballot"):
            holds = self.truth(args[1])
            if op == "ballot":
                return ir.Warp(u32, op, (mask, holds))
            return self.cast(ir.Warp(bool_t, op, (mask, holds)), self.scalar(c))
        t = self.scalar(c)
        width = self.cast(self.expr(args[3]), i32) if len(args) > 3 else ir.Const(i32, ir.WARP_SIZE)
        if isinstance(width, ir.Const) and width.value not in (1, 2, 4, 8, 16, 32):
            raise self.fail(c, f"{c.spelling} width {width.value}: CUDA takes a power of two up to 32")
        return ir.Warp(t, op, (mask, self.cast(self.expr(args[1]), t), self.cast(self.expr(args[2]), i32), width))

    def call(self, c: Any) -> ir.Expr:
        name = c.spelling
        group = self.group_call(c)
        if group is not None:
            kind, method = group
            if kind == "block" and method == "thread_rank":
                rank: ir.Expr = ir.WorkItem(i64, "local_id", 2)
                for axis in (1, 0):
                    rank = ir.BinOp(i64, "+", ir.BinOp(i64, "*", rank, ir.WorkItem(i64, "local_size", axis)),
                                    ir.WorkItem(i64, "local_id", axis))
                return self.cast(rank, self.scalar(c))
            if kind.startswith("tile"):
                return self.tile_call(c, int(kind[4:]), method)
            if kind == "block" and method in ("size", "num_threads"):
                size: ir.Expr = ir.WorkItem(i64, "local_size", 0)
                for axis in (1, 2):
                    size = ir.BinOp(i64, "*", size, ir.WorkItem(i64, "local_size", axis))
                return self.cast(size, self.scalar(c))
            raise self.fail(c, f"{method}() of a cooperative group is not supported here")
        args = list(c.get_arguments())
        if name == "reduce" and _declared_in(c, "cooperative_groups.h"):
            return self.tile_reduce(c, args)
        if name in _WARP_INTRINSICS:
            return self.warp_intrinsic(c, _WARP_INTRINSICS[name])
        if c.type.kind.name != "VOID":
            self.scalar(c)  # a result kernels cannot hold (a struct) is refused here, by its type
        if name in _ATOMICS:
            op = _ATOMICS[name]
            K = self.cindex.CursorKind  # noqa: N806
            address = args[0]
            pointee = None  # the element type a pointer cast ((unsigned int *)&a[i]) names
            while address.kind in (K.UNEXPOSED_EXPR, K.CSTYLE_CAST_EXPR, K.PAREN_EXPR) and self.kids(address):
                if address.kind == K.CSTYLE_CAST_EXPR:
                    pointee = self.scalar(address, address.type.get_canonical().get_pointee())
                address = self.kids(address)[-1]
            through = self.pointer_expr(address)
            if not (address.kind == K.UNARY_OPERATOR and self.operator(address) == "&") and through is None:
                raise self.fail(c, f"{name} takes the address of an array element here: {name}(&a[i], v) or "
                                   f"{name}(p + k, v)")
            indices: tuple[ir.Expr, ...]
            if through is not None:
                array, indices = through.array, (through.offset,)
                if pointee is None and through.pointee != self.element_type(array):
                    pointee = through.pointee
            else:
                array, indices = self.element(self.kids(address)[0])
            element = self.element_type(array)
            if pointee is not None and pointee != element and not (
                    pointee.is_int and element.is_int and pointee.bits == element.bits):
                raise self.fail(c, f"{name} on a {element} element through a {pointee} pointer is not supported")
            values = tuple(self.cast(self.expr(a), element) for a in args[1:])
            return ir.Atomic(element, op, array, indices, values)
        if _from_prelude(c):
            found = self.library_call(c, name)
            if found is not None:
                return found
        callee = self.definition(c)
        if self.must_inline(c, callee):
            stmts, result = self.inline(c, callee)
            if isinstance(result, list):
                raise self.fail(c, f"{name} returns a vector; take a component, or assign it to a vector variable")
            self.prelude += stmts
            if result is None:
                raise self.fail(c, f"{name} returns nothing; call it as a statement")
            return result
        key = f"{name}_{callee.hash}"
        if key not in self.program:
            inner = _Lowering(self.callee_units.get(callee.hash, self.unit), callee, self.fresh_function(name), self.program)
            with recursion_room(self.unit.depth_of(callee, self.where)):
                self.program[key] = inner.function()
        function = self.program[key]
        lowered: list[ir.Expr] = []
        for param, arg in zip(function.params, args, strict=True):
            if isinstance(param.type, ArrayType):
                node = arg
                while node.kind == self.cindex.CursorKind.UNEXPOSED_EXPR and len(self.kids(node)) == 1:
                    node = self.kids(node)[0]
                passed = self.names.get(node.referenced.hash) if node.kind == self.cindex.CursorKind.DECL_REF_EXPR else None
                if passed is None or passed not in self.arrays or isinstance(self.arrays[passed], ir.LocalArray):
                    raise self.fail(arg, "pass a pointer parameter itself to a device function")
                lowered.append(ir.Var(self.arrays[passed].dtype, passed))
            else:
                lowered.append(self.cast(self.expr(arg), param.type))  # type: ignore[arg-type]
        return ir.Call(function.return_type, function.name, tuple(lowered))

    def fresh_function(self, name: str) -> str:
        taken = {f.name for f in self.program.values()}
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        return candidate


def _written(c: Any) -> list[Any]:
    """Call ``c``'s arguments as written: without those a default argument supplies (no tokens)."""
    args = list(c.get_arguments())
    while args and next(iter(args[-1].get_tokens()), None) is None:
        args.pop()
    return args


def _specialized_template(cursor: Any) -> Any:
    """The function template ``cursor`` is an instance of, else None."""
    if cursor is None or cursor.kind.name != "FUNCTION_DECL":
        return None
    template = _clang().conf.lib.clang_getSpecializedCursorTemplate(cursor)
    return template if template is not None and template.kind.name == "FUNCTION_TEMPLATE" else None


def _where_of(cursor: Any) -> tuple[str, int, int]:
    loc = cursor.location
    return (loc.file.name if loc.file else "<source>", loc.line, max(loc.column - 1, 0))


def _is_null(c: Any) -> bool:
    """Whether pointer expression ``c`` is ``nullptr``, ``NULL`` or ``0``."""
    while c.kind.name in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR") and len(children(c)) == 1:
        c = children(c)[0]
    return c.kind.name in ("CXX_NULL_PTR_LITERAL_EXPR", "GNU_NULL_EXPR") or (
        c.kind.name == "INTEGER_LITERAL" and _evaluate(c) == 0)


def _declared_in(c: Any, header: str) -> bool:
    """Whether call ``c`` names a function declared in the front end's stand-in for ``header``."""
    callee = c.referenced
    where = callee.location.file if callee is not None else None
    return where is not None and os.path.basename(where.name) == header


def _from_prelude(c: Any) -> bool:
    """Whether call ``c`` names a function of the front end's prelude (CUDA's own, not the user's)."""
    callee = c.referenced
    where = callee.location.file if callee is not None else None
    return where is not None and os.path.basename(where.name) == "hetero_prelude.h"


def _tile_mask(size: int) -> ir.Expr:
    """The lanes of this thread's ``thread_block_tile<size>`` in its warp (u32)."""
    if size == 32:
        return ir.Const(u32, 0xFFFFFFFF)
    lane = warp_lane()
    base = ir.BinOp(i64, "-", lane, ir.BinOp(i64, "&", lane, ir.Const(i64, size - 1)))
    return ir.BinOp(u32, "<<", ir.Const(u32, (1 << size) - 1), base)


def _continue_runs(body: tuple[ir.Stmt, ...], step: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
    """``body`` with each ``continue`` of this loop (not of loops inside it) running ``step`` first."""
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Continue):
            out.extend([*step, s])
        elif isinstance(s, ir.If):
            out.append(ir.If(s.loc, s.cond, tuple(_continue_runs(s.then, step)), tuple(_continue_runs(s.orelse, step))))
        else:
            out.append(s)
    return out


def _c_division(op: str, a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr:
    """C's integer ``/`` and ``%`` (truncating towards zero) from the IR's floor division."""
    floor = ir.BinOp(t, "//" if op == "/" else "%", a, b)
    if t.kind == "u":
        return floor  # unsigned: the same
    zero = ir.Const(t, 0)
    remainder = ir.BinOp(t, "%", a, b)
    signs_differ = ir.Compare(bool_t, "<", ir.BinOp(t, "^", a, b), zero)
    inexact = ir.Compare(bool_t, "!=", remainder, zero)
    adjust = ir.Logical(bool_t, "and", inexact, signs_differ)
    if op == "/":
        return ir.Select(t, adjust, ir.BinOp(t, "+", floor, ir.Const(t, 1)), floor)
    return ir.Select(t, adjust, ir.BinOp(t, "-", floor, b), floor)


def lower_source(code: str, name: str, path: str = "<source>.cu", include_dirs: Sequence[str] = (),
                 defines: Sequence[str] = ()) -> ir.Function:
    """The kernel ``name`` of CUDA C ``code`` as IR (see the module docstring)."""
    return Source(code, path, include_dirs, defines).kernel(name)
