"""Cached machine code for ``cpu`` kernels, loaded without Numba: how a new process's first cpu
kernel starts in milliseconds.

Numba's own cache skips compilation, but loading from it imports Numba and builds its typing and
lowering registries first: 0.5-0.8 s before the first cached kernel of a process runs. So after a
kernel is compiled, :mod:`hetero.backends.cpu.native_build` also writes the machine code Numba made
for one launch signature (the same optimised LLVM module, plus a small C-ABI entry) beside the
generated module. A later process finds it there, loads it into an LLVM MCJIT engine of its own
(llvmlite only: ~50 ms once per process) and calls it through ``ctypes``; Numba is then imported
in a background thread, and each kernel moves to its Numba dispatcher (the faster call: ~1 us
against ctypes' 3-5 us) once that has loaded it. Both paths run the same compiled code.

A file is used only when everything it names is there: its header's checksum of the object code,
the llvmlite, host CPU and ``NUMBA_*`` settings it was built under (also in its file name), and
every symbol the object leaves undefined (read from its ELF symbol table: C library and libm
functions), each resolved in this process first and handed to LLVM (a symbol LLVM cannot
resolve aborts the process). Anything else -- a missing, foreign,
damaged or unloadable file -- is not an error: the launch takes Numba's path, as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: The header's format; a file with another is ignored (and rebuilt).
FORMAT = 1
MAGIC = b"HETERO-CPU-NATIVE\n"
SUFFIX = ".hnat"

#: The C types of a native entry's parameters, by the code its header gives them.
CTYPES: dict[str, Any] = {
    "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
    "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
    "f32": ctypes.c_float, "f64": ctypes.c_double, "ptr": ctypes.c_void_p,
}

Signature = tuple[Any, ...]
#: Native entries loaded in this process (tests and benchmarks read it).
loaded = 0


def launch_signature(values: Sequence[Any]) -> Signature | None:
    """What decides the machine code a launch runs: each value's kind and type (arrays: dtype and
    rank, C-contiguous only). None for a value this path does not carry (it takes Numba's)."""
    parts: list[Any] = []
    for value in values:
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous or not value.flags.aligned or not value.flags.writeable:
                return None
            parts.append((value.dtype.str, value.ndim))
        elif isinstance(value, (bool, np.bool_)):
            parts.append("bool")
        elif isinstance(value, np.generic):
            parts.append(value.dtype.str)
        elif isinstance(value, int):
            parts.append("int")
        elif isinstance(value, float):
            parts.append("float")
        else:
            return None
    return tuple(parts)


_host: tuple[str, str] | None = None
_settings: dict[str, str] | None = None
_host_lock = threading.Lock()


def _binding() -> Any:
    """llvmlite's binding layer, initialised for the host (once)."""
    import llvmlite.binding as ll

    global _host
    if _host is None:
        with _host_lock:
            if _host is None:
                ll.initialize_native_target()
                ll.initialize_native_asmprinter()
                _host = (ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten())
    return ll


def build_settings() -> dict[str, str]:
    """What the machine code depends on besides the kernel and its signature: llvmlite's version,
    the host CPU and its features (the code uses them), and Numba's ``NUMBA_*`` settings (they
    choose the CPU, the optimisation level, fast-math defaults)."""
    global _settings
    if _settings is None:
        import llvmlite

        _binding()
        cpu, features = _host or ("", "")
        settings = {"llvmlite": llvmlite.__version__, "cpu": cpu, "features": features}
        settings.update({k: v for k, v in sorted(os.environ.items()) if k.startswith("NUMBA_")})
        _settings = settings
    return _settings


def native_path(module_path: Path, signature: Signature) -> Path:
    """Where the machine code for ``signature`` of the generated module at ``module_path`` lives."""
    text = json.dumps([FORMAT, list(signature), build_settings()], sort_keys=True, default=list)
    return module_path.with_name(f"{module_path.stem}.native-{hashlib.sha256(text.encode()).hexdigest()[:24]}{SUFFIX}")


def has_any(module_path: Path) -> bool:
    """Does any native file sit beside the module at ``module_path`` (so its import can wait)?"""
    try:
        return any(module_path.parent.glob(f"{module_path.stem}.native-*{SUFFIX}"))
    except OSError:
        return False


def encode(header: dict[str, Any], code: bytes) -> bytes:
    """A native file: magic, one JSON header line (with the code's sha256), the object code."""
    header = {**header, "format": FORMAT, "sha256": hashlib.sha256(code).hexdigest(), "settings": build_settings()}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + code


def _decode(data: bytes) -> tuple[dict[str, Any], bytes] | None:
    if not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC):end])
    except ValueError:
        return None
    code = data[end + 1:]
    if (not isinstance(header, dict) or header.get("format") != FORMAT
            or header.get("sha256") != hashlib.sha256(code).hexdigest()
            or header.get("settings") != build_settings()):
        return None
    return header, code


def undefined_symbols(code: bytes) -> list[str] | None:
    """The symbols a 64-bit little-endian ELF object needs from elsewhere (its undefined global and
    weak symbols: the C library, libm, and what LLVM lowers intrinsics to, such as ``expf``), or
    None for anything else. Read from the object itself: its IR does not show the calls that
    code generation adds."""
    try:
        if code[:4] != b"\x7fELF" or code[4] != 2 or code[5] != 1:
            return None
        shoff, = struct.unpack_from("<Q", code, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", code, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", code, shoff + i * shentsize) for i in range(shnum)]
        names: list[str] = []
        for _, kind, _, _, offset, size, link, _, _, entsize in sections:
            if kind != 2 or not entsize:  # SHT_SYMTAB
                continue
            strings = sections[link][4]
            for at in range(offset, offset + size, entsize):
                name, info, _, index, _, _ = struct.unpack_from("<IBBHQQ", code, at)
                if name and index == 0 and info >> 4 in (1, 2):  # SHN_UNDEF; STB_GLOBAL or STB_WEAK
                    end = code.index(b"\0", strings + name)
                    names.append(code[strings + name:end].decode())
        return sorted(set(names))
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        return None


_process: ctypes.CDLL | None = None


def process_symbol(name: str) -> int | None:
    """The address of ``name`` in this process (the C library, libm: what CPython links), or None."""
    global _process
    if _process is None:
        _process = ctypes.CDLL(None)
    try:
        return ctypes.cast(getattr(_process, name), ctypes.c_void_p).value
    except AttributeError:
        return None


class NativeKernel:
    """One loaded entry: ``call(first, last, sizes, values)`` runs work-groups first..last-1 and
    returns 0, or Numba's error status (nonzero: the launch must be rerun on Numba's path)."""

    def __init__(self, engine: Any, address: int, params: Sequence[str], layout: Sequence[Any]) -> None:
        self._engine = engine  # keeps the code mapped
        self._function = ctypes.CFUNCTYPE(ctypes.c_int32, *(CTYPES[p] for p in params))(address)
        self._layout = tuple(layout)

    def arguments(self, values: Sequence[Any]) -> list[Any]:
        """The C arguments for launch ``values``: an array as its address and shape, a scalar as a
        Python number (ctypes converts it to the parameter's C type exactly)."""
        out: list[Any] = []
        for how, value in zip(self._layout, values, strict=True):
            if how == "array":
                out.append(value.ctypes.data)
                out.extend(value.shape)
            elif how == "bool":
                out.append(1 if value else 0)
            elif how == "float":
                out.append(float(value))
            else:
                out.append(int(value))
        return out

    def __call__(self, first: int, last: int, sizes: Sequence[int], arguments: Sequence[Any]) -> int:
        return int(self._function(first, last, *sizes, *arguments))


def load(path: Path) -> NativeKernel | None:
    """The native entry in the file at ``path``, or None (absent, foreign, damaged, or naming a
    symbol this process lacks)."""
    try:
        data = path.read_bytes() if path.is_file() else None
    except OSError:
        return None
    decoded = _decode(data) if data is not None else None
    if decoded is None:
        return None
    header, code = decoded
    ll = _binding()
    needed = undefined_symbols(code)
    if needed is None:
        return None
    addresses = {name: process_symbol(name) for name in needed}
    missing = [name for name, address in addresses.items() if not address]
    if missing:  # checked here: LLVM aborts the process on a symbol it cannot resolve
        log.debug("%s: symbols %s are not in this process; Numba's path runs", path.name, missing)
        return None
    try:
        for name, address in addresses.items():
            if not ll.address_of_symbol(name):
                ll.add_symbol(name, address)
        machine = ll.Target.from_default_triple().create_target_machine(jit=True)
        engine = ll.create_mcjit_compiler(ll.parse_assembly(""), machine)
        engine.add_object_file(ll.ObjectFileRef.from_data(code))
        engine.finalize_object()
        address = engine.get_function_address(header["symbol"])
        if not address:
            return None
        kernel = NativeKernel(engine, address, header["params"], header["layout"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        log.debug("%s: not loadable (%s); Numba's path runs", path.name, exc)
        return None
    global loaded
    loaded += 1
    return kernel
