"""Writes the native file of :mod:`hetero.backends.cpu.native` for a kernel Numba has just compiled.

The file holds the very module Numba compiled for the launch's argument types (already
optimised: it is not optimised again), linked with a small entry that takes C arguments (each
array as its address and shape, rebuilt into Numba's C-contiguous array; each scalar as its C
type), calls the kernel through Numba's own calling convention, and returns its status. Numba's
Python wrappers are dropped, so the object needs no Python and no Numba. A kernel's work-group memory
(``local_array``: Numba's runtime allocates it) is allocated by an equivalent written here on
the C library's malloc; a kernel that calls any other symbol outside the C library gets no
file: it keeps Numba's path. Nothing here is needed for a launch to be right.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hetero.core.files import atomic_write

from hetero.backends.cpu import native as cpu_native

log = logging.getLogger(__name__)

ENTRY_PREFIX = "hetero_native_entry_"
#: A generated entry's first parameters: the work-group range and the six launch sizes.
RANGE_AND_SIZES = 8
#: Numba's runtime, as far as kernels use it (``local_array``: an allocation freed when its count
#: drops to zero), in the C library's malloc/free. The memory-info layout is Numba's own
#: (``numba/core/runtime/nrt.cpp``: refct, dtor, dtor_info, data, size, external allocator; the
#: data after it, aligned), checked against Numba's allocator before a file uses it
#: (:func:`_layout_matches`). The entry's own arrays carry no memory-info (never counted).
_RUNTIME = """
declare i8* @malloc(i64)
declare void @free(i8*)
define i8* @NRT_MemInfo_alloc_aligned(i64 %size, i32 %align) {
entry:
  %wide = zext i32 %align to i64
  %zero = icmp eq i64 %wide, 0
  %a = select i1 %zero, i64 1, i64 %wide
  %pad = shl i64 %a, 1
  %body = add i64 %size, %pad
  %total = add i64 %body, 48
  %base = call i8* @malloc(i64 %total)
  %failed = icmp eq i8* %base, null
  br i1 %failed, label %out, label %fill
out:
  ret i8* null
fill:
  %first = getelementptr i8, i8* %base, i64 48
  %at = ptrtoint i8* %first to i64
  %rem = urem i64 %at, %a
  %aligned = icmp eq i64 %rem, 0
  %step = sub i64 %a, %rem
  %offset = select i1 %aligned, i64 0, i64 %step
  %data = getelementptr i8, i8* %first, i64 %offset
  %mi = bitcast i8* %base to { i64, i8*, i8*, i8*, i64, i8* }*
  store { i64, i8*, i8*, i8*, i64, i8* } zeroinitializer, { i64, i8*, i8*, i8*, i64, i8* }* %mi
  %refct = getelementptr { i64, i8*, i8*, i8*, i64, i8* }, { i64, i8*, i8*, i8*, i64, i8* }* %mi, i32 0, i32 0
  store i64 1, i64* %refct
  %dataslot = getelementptr { i64, i8*, i8*, i8*, i64, i8* }, { i64, i8*, i8*, i8*, i64, i8* }* %mi, i32 0, i32 3
  store i8* %data, i8** %dataslot
  %sizeslot = getelementptr { i64, i8*, i8*, i8*, i64, i8* }, { i64, i8*, i8*, i8*, i64, i8* }* %mi, i32 0, i32 4
  store i64 %size, i64* %sizeslot
  ret i8* %base
}
define void @NRT_MemInfo_call_dtor(i8* %mi) {
  call void @free(i8* %mi)
  ret void
}
"""
#: The Numba runtime functions :data:`_RUNTIME` stands in for.
_RUNTIME_FUNCTIONS = ("NRT_MemInfo_alloc_aligned", "NRT_MemInfo_call_dtor")
_SCALAR_CODES = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                 "uint32": "u32", "uint64": "u64", "float32": "f32", "float64": "f64", "bool": "u8"}
#: Prefixes of symbols the object must not need: Numba's helpers and runtime, and Python's C API.
_REFUSED = ("numba_", "NRT_", "Py", "_Py")


_builder: ThreadPoolExecutor | None = None
_builder_lock = threading.Lock()


def build_later(dispatcher: Any, values: Sequence[Any], path: Path) -> Future[bool]:
    """:func:`build` on a background thread (LLVM's code generation runs without the GIL; the
    thread is joined at exit, so a short process still leaves its files)."""
    global _builder
    argtypes = tuple(dispatcher.typeof_pyval(v) for v in values)
    with _builder_lock:
        if _builder is None:
            _builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hetero-cpu-native")
    return _builder.submit(build, dispatcher, argtypes, path)


def build(dispatcher: Any, argtypes: tuple[Any, ...], path: Path) -> bool:
    """Write the native file for ``dispatcher``'s overload for Numba types ``argtypes`` (the
    work-group range and the six sizes, then the launch's arguments) to ``path``; False, and
    nothing written, where this kernel cannot have one."""
    from numba.core.compiler_lock import global_compiler_lock

    try:
        with global_compiler_lock:  # Numba's target machine and modules: not while it compiles
            made = _native_object(dispatcher, argtypes, ENTRY_PREFIX + path.stem.rsplit("-", 1)[-1])
    except Exception as exc:  # noqa: BLE001 -- an optimisation: Numba's path stays, the reason is logged
        log.debug("no native code for %s: %s", path.name, exc)
        return False
    if made is None:
        return False
    header, code = made
    try:
        atomic_write(path, cpu_native.encode(header, code))
    except OSError as exc:
        log.debug("native code for %s not written: %s", path.name, exc)
        return False
    return True


def _native_object(dispatcher: Any, argtypes: tuple[Any, ...], symbol: str) -> tuple[dict[str, Any], bytes] | None:
    import llvmlite.binding as ll
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.np.arrayobj import populate_array

    compiled = dispatcher.overloads.get(argtypes)
    if compiled is None:
        return None
    library, context = compiled.library, compiled.target_context
    final = library._final_module  # noqa: SLF001 -- Numba keeps the linked module here
    if not any(f.name == compiled.fndesc.mangled_name and not f.is_declaration for f in final.functions):
        return None  # loaded from Numba's cache: object code only, no module to relink

    module = ir.Module("hetero_native")
    params: list[str] = []
    layout: list[str] = []
    c_types: list[ir.Type] = []
    for t in argtypes:
        if isinstance(t, types.Array):
            if t.layout != "C" or not t.aligned or not t.mutable:
                return None
            params += ["ptr"] + ["i64"] * t.ndim
            c_types += [context.get_data_type(t.dtype).as_pointer()] + [ir.IntType(64)] * t.ndim
            layout.append("array")
        else:
            code = _SCALAR_CODES.get(str(t))
            if code is None:
                return None
            params.append(code)
            c_types.append(ir.IntType(8) if t == types.boolean else context.get_data_type(t))
            layout.append("bool" if t == types.boolean else "float" if code.startswith("f") else "int")
    entry = ir.Function(module, ir.FunctionType(ir.IntType(32), c_types), symbol)
    builder = ir.IRBuilder(entry.append_basic_block())
    incoming = iter(entry.args)
    arguments = []
    for t in argtypes:
        if isinstance(t, types.Array):
            data = next(incoming)
            shape = [next(incoming) for _ in range(t.ndim)]
            itemsize = context.get_abi_sizeof(context.get_data_type(t.dtype))
            strides: list[Any] = []
            step: Any = ir.Constant(ir.IntType(64), itemsize)
            for extent in reversed(shape):
                strides.insert(0, step)
                step = builder.mul(step, extent)
            array = context.make_array(t)(context, builder)
            populate_array(array, data=data, shape=cgutils.pack_array(builder, shape),
                           strides=cgutils.pack_array(builder, strides),
                           itemsize=context.get_constant(types.intp, itemsize), meminfo=None)
            arguments.append(array._getvalue())
        else:
            value = next(incoming)
            arguments.append(builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
                             if t == types.boolean else value)
    callee = ir.Function(module, context.call_conv.get_function_type(compiled.signature.return_type, argtypes),
                         compiled.fndesc.mangled_name)
    status, _ = context.call_conv.call_function(builder, callee, compiled.signature.return_type, argtypes, arguments)
    builder.ret(builder.select(status.is_error, ir.Constant(ir.IntType(32), 1), ir.Constant(ir.IntType(32), 0)))

    linked = ll.parse_assembly(str(final))
    linked.link_in(ll.parse_assembly(str(module)))
    needed = {f.name for f in linked.functions if f.is_declaration and f.name in _RUNTIME_FUNCTIONS}
    if needed:
        if not _layout_matches():
            return None
        linked.link_in(ll.parse_assembly(_RUNTIME))
    for function in linked.functions:
        if not function.is_declaration and function.name != symbol:
            function.linkage = "internal"
    for variable in linked.global_variables:
        if not variable.is_declaration:
            variable.linkage = "internal"
    machine = library._codegen._tm  # noqa: SLF001 -- the target machine Numba compiled with
    passes = ll.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()
    passes.add_strip_dead_prototype_pass()
    passes.run(linked, ll.create_pass_builder(machine, ll.create_pipeline_tuning_options(speed_level=0)))
    if layout[:RANGE_AND_SIZES] != ["int"] * RANGE_AND_SIZES:
        return None
    code = machine.emit_object(linked)
    externals = cpu_native.undefined_symbols(code)
    if externals is None:
        return None  # not an ELF object (this path is for Linux)
    refused = [name for name in externals if name.startswith(_REFUSED) or not cpu_native.process_symbol(name)]
    if refused:
        log.debug("kernel %s calls %s: it keeps Numba's path", compiled.fndesc.qualname, refused)
        return None
    header = {"symbol": symbol, "params": params, "layout": layout[RANGE_AND_SIZES:], "externals": externals,
              "kernel": compiled.fndesc.qualname}
    return header, code


_layout_checked: bool | None = None


def _layout_matches() -> bool:
    """Does Numba's own ``NRT_MemInfo_alloc_aligned`` lay a memory-info out as :data:`_RUNTIME`
    does (so the kernel's inlined reference counting and data reads fit ours)?"""
    global _layout_checked
    if _layout_checked is None:
        import ctypes

        from numba.core.runtime import _nrt_python, nrt  # type: ignore[attr-defined]

        if not getattr(nrt.rtsys, "_init", False):  # Numba compiled nothing that allocates yet: ask later
            return False
        alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint)(_nrt_python.c_helpers["MemInfo_alloc_aligned"])
        release = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_nrt_python.c_helpers["MemInfo_call_dtor"])
        mi = alloc(100, 64)
        words = (ctypes.c_uint64 * 6).from_address(mi)
        data = words[3]
        _layout_checked = (words[0] == 1 and words[1] == 0 and words[2] == 0 and words[4] == 100 and words[5] == 0
                           and data % 64 == 0 and mi + 48 <= data < mi + 48 + 64)
        release(mi)
        if not _layout_checked:
            log.debug("Numba's memory-info layout is not the one hetero's native entries assume: kernels that "
                      "allocate keep Numba's path")
    return _layout_checked
