"""Writes the native file of :mod:`hetero.backends.cpu_native` for a kernel Numba has just compiled.

The file holds the very module Numba compiled for the launch's argument types (already
optimised: it is not optimised again), linked with a small entry that takes C arguments (each
array as its address and shape, rebuilt into Numba's C-contiguous array; each scalar as its C
type), calls the kernel through Numba's own calling convention, and returns its status. Numba's
Python wrappers are dropped, so the object needs no Python and no Numba. A kernel that calls into
Numba's runtime (allocations: ``local_array`` in some forms) or any symbol not in the C library
gets no file: it keeps Numba's path. Nothing here is needed for a launch to be right.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hetero.files import atomic_write

from . import cpu_native

log = logging.getLogger(__name__)

ENTRY_PREFIX = "hetero_native_entry_"
#: A generated entry's first parameters: the work-group range and the six launch sizes.
RANGE_AND_SIZES = 8
#: Numba's reference counting calls this when a count reaches zero; the entry's arrays carry no
#: memory-info (a null pointer: never counted), so it is unreachable and may trap.
_DTOR_STUB = ("define void @NRT_MemInfo_call_dtor(i8* %m) {\n  call void @llvm.trap()\n  unreachable\n}\n"
              "declare void @llvm.trap()\n")
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
    if any(f.name == "NRT_MemInfo_call_dtor" and f.is_declaration for f in linked.functions):
        linked.link_in(ll.parse_assembly(_DTOR_STUB))
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
    externals = sorted(f.name for f in linked.functions if f.is_declaration and not f.name.startswith("llvm."))
    refused = [name for name in externals if name.startswith(_REFUSED) or not _in_process(name)]
    if refused:
        log.debug("kernel %s calls %s: it keeps Numba's path", compiled.fndesc.qualname, refused)
        return None
    if layout[:RANGE_AND_SIZES] != ["int"] * RANGE_AND_SIZES:
        return None
    header = {"symbol": symbol, "params": params, "layout": layout[RANGE_AND_SIZES:], "externals": externals,
              "kernel": compiled.fndesc.qualname}
    return header, machine.emit_object(linked)


def _in_process(name: str) -> bool:
    """Is ``name`` a symbol of the process itself (the C library, libm), not one Numba added?"""
    import ctypes

    try:
        getattr(ctypes.CDLL(None), name)
    except AttributeError:
        return False
    return True
