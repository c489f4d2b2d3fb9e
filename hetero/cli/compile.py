"""The ``hetero compile`` and ``hetero bundle inspect`` commands::

    hetero compile mykernels.py --targets cuda:sm_80,cuda:sm_90,rocm:gfx90a,opencl,cpu \\
        --signature 'saxpy(f32, f32[:], f32[:])' -o mykernels.hbundle
    hetero bundle inspect mykernels.hbundle [--json]

``hetero compile`` imports the module it is given to find its kernels, which runs that
module's top-level code, as ``python mykernels.py`` would: it is your own file, named on
your command line. Nothing is imported or run from a bundle.

:func:`add_compile_commands` adds both to the ``hetero`` parser and returns their handlers.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from hetero.core.errors import CompileError, did_you_mean
from hetero.core.exit_status import UsageError, usage_error

if TYPE_CHECKING:  # the compiler is imported when a command runs, so `hetero devices` starts fast
    from hetero.compiler.build.bundle import Manifest
    from hetero.compiler.build.bundle_build import BuildReport, KernelSpec
    from hetero.kernels.kernel import Kernel

Handler = Callable[[argparse.Namespace], int]


def load_module(spec: str) -> ModuleType:
    """Import ``spec``: a ``.py`` file (its folder goes first on ``sys.path``) or a module name. A
    file or module that is not there is a :class:`UsageError` (exit status 2)."""
    path = Path(spec)
    try:
        if spec.endswith(".py") or path.is_file():
            if not path.is_file():
                raise UsageError(f"no such file: {spec}" + (" (it is a directory)" if path.is_dir() else ""))
            name = path.stem if path.stem.isidentifier() else "hetero_user_module"
            sys.path.insert(0, str(path.resolve().parent))
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise CompileError(f"cannot import {spec} as a Python module")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
            return module
        return importlib.import_module(spec)
    except (CompileError, UsageError):
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == spec or spec.startswith(f"{exc.name}.")):  # the one named, not one it imports
            raise UsageError(f"no file or module {spec!r} (give a .py file or an importable module name)") from exc
        raise CompileError(f"importing {spec} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # the user's module failed: say which, with its own error
        raise CompileError(f"importing {spec} failed: {type(exc).__name__}: {exc}") from exc


def find_kernels(module: ModuleType, names: Sequence[str] | None) -> dict[str, Kernel]:
    """The module's kernels (defined there, or any named in ``names``), by name."""
    from hetero.kernels.kernel import Kernel

    every: dict[str, Kernel] = {}
    for name, obj in vars(module).items():
        if isinstance(obj, Kernel) and all(obj is not seen for seen in every.values()):  # aliases: once
            every[name] = obj
    if not names:
        own = {n: k for n, k in every.items() if k.py_func.__module__ == module.__name__}
        if not own:
            raise CompileError(f"{module.__name__} defines no @hetero.kernel")
        return own
    unknown = [n for n in names if n not in every]
    if unknown:
        raise CompileError(f"{module.__name__} has no kernel {unknown[0]!r}; its kernels: {', '.join(sorted(every)) or '(none)'}"
                           + did_you_mean(unknown[0], every))
    return {n: every[n] for n in names}


def kernel_specs(kernels: dict[str, Kernel], signatures: Sequence[str]) -> list[KernelSpec]:
    """Each kernel with the signatures given for it, or the one its annotations fix."""
    from hetero.compiler.build.bundle_build import KernelSpec, default_signature
    from hetero.compiler.frontend.signature import parse_signature

    given: dict[str, list[tuple[object, ...]]] = {name: [] for name in kernels}
    for text in signatures:
        name, types = parse_signature(text)
        if name is None:
            if len(kernels) != 1:
                raise CompileError(f"signature {text!r} names no kernel; write it as name(types), e.g. "
                                   f"'{next(iter(kernels))}({text})'")
            name = next(iter(kernels))
        if name not in kernels:
            raise CompileError(f"signature {text!r} is for {name!r}, which is not among the kernels built "
                               f"({', '.join(sorted(kernels))}){did_you_mean(name, kernels)}")
        given[name].append(types)
    specs, lacking = [], []
    for name, kernel in kernels.items():
        found = given[name] or [t for t in [default_signature(kernel.py_func)] if t is not None]
        if not found:
            lacking.append(name)
        specs.append(KernelSpec(kernel.py_func, tuple(dict.fromkeys(found))))  # type: ignore[arg-type]
    if lacking:
        example = f"--signature '{lacking[0]}(f32, f32[:], f32[:])'"
        raise CompileError(f"no signature for kernel(s) {', '.join(lacking)}: their annotations do not fix every "
                           f"parameter's type and rank; give one with {example} (or build only others with --kernels)")
    return specs


def cmd_compile(args: argparse.Namespace) -> int:
    from hetero.compiler.build.bundle_build import build_bundle, parse_targets
    from hetero.compiler.build.cache import default_cache

    try:
        targets = parse_targets(args.targets)
    except CompileError as exc:  # a target that does not parse is a bad argument
        raise UsageError(str(exc)) from None
    module = load_module(args.module)
    names = [n.strip() for n in args.kernels.split(",") if n.strip()] if args.kernels else None
    specs = kernel_specs(find_kernels(module, names), args.signature)
    timeout = {} if args.timeout is None else {"timeout": args.timeout}
    report = build_bundle(specs, targets, args.output, jobs=args.jobs, keep_going=args.keep_going,
                          cache=None if args.no_cache else default_cache(), progress=None if args.quiet else sys.stderr,
                          **timeout)
    manifest = report.manifest
    if args.json:
        print(json.dumps(compile_report(report, specs), indent=2))
        return 0
    print(f"wrote {report.path}: {len(manifest.entries)} artifacts ({len(specs)} kernel(s), "
          f"{sum(len(s.signatures) for s in specs)} signature(s), {len(targets)} target(s)); "
          f"{report.cached} from the cache; {report.wall_seconds:.2f} s")
    for target, seconds in report.target_seconds.items():
        print(f"  {target:<16} {seconds:8.2f} s of toolchain time")
    if manifest.missing:
        print(f"{len(manifest.missing)} build(s) failed and are missing from the bundle (--keep-going):")
        for gap in manifest.missing:
            print(f"  {gap.signature} for {gap.target}: {_summary(gap.error)}")
        print(f"(the full compiler logs: hetero bundle inspect --json {report.path})")
    return 0


def compile_report(report: BuildReport, specs: Sequence[KernelSpec]) -> dict[str, object]:
    """What ``hetero compile --json`` prints: the bundle written, what it holds, the time each target's
    toolchain took, and the builds that failed (``--keep-going``) with their full compiler logs."""
    manifest = report.manifest
    return {
        "path": str(report.path), "artifacts": len(manifest.entries), "kernels": [s.qualname for s in specs],
        "signatures": sum(len(s.signatures) for s in specs), "targets": list(manifest.targets),
        "cached": report.cached, "wall_seconds": round(report.wall_seconds, 3),
        "target_seconds": {target: round(seconds, 3) for target, seconds in report.target_seconds.items()},
        "missing": [{"kernel": m.kernel, "signature": m.signature, "target": m.target, "error": m.error}
                    for m in manifest.missing],
    }


def _summary(error: str) -> str:
    """An error in one line: its first line, and its last (where compilers put the reason)."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if not lines:
        return "?"
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def _size(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes} B"


def format_manifest(path: str, manifest: Manifest) -> str:
    """The human-readable listing of ``hetero bundle inspect``."""
    lines = [f"{path}: hetero kernel bundle, verified; made by hetero {manifest.hetero_version} at {manifest.created}",
             f"targets: {', '.join(manifest.targets)}", ""]
    header = ["kernel", "signature", "target", "toolchain", "artifact", "size"]
    rows = [[e.kernel, e.signature, e.target, e.toolchain_version, e.artifact_kind, _size(e.artifact_size)]
            for e in manifest.entries]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if manifest.missing:
        lines += ["", "missing (failed to build; launches there compile from the bundle's IR or from source):"]
        lines += [f"  {m.kernel} {m.signature} for {m.target}: {_summary(m.error)}" for m in manifest.missing]
    return "\n".join(lines)


def add_compile_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> dict[str, Handler]:
    """Add ``compile`` and ``bundle inspect`` to ``subparsers``; returns ``{"compile": …, "bundle": …}``."""
    build = subparsers.add_parser("compile", help="build a module's kernels for many targets into one bundle file")
    build.add_argument("module", help="a Python file (mykernels.py) or an importable module name (mypkg.kernels)")
    build.add_argument("--targets", required=True, action="append",
                       help="comma-separated targets: cuda:sm_XX, rocm:gfxXXXX, opencl, opencl:spirv64, cpu")
    build.add_argument("--signature", action="append", default=[], metavar="SIG",
                       help="a kernel signature, e.g. 'saxpy(f32, f32[:], f32[:])'; repeat for more")
    build.add_argument("--kernels", help="comma-separated names of the kernels to build (default: all the module defines)")
    build.add_argument("-o", "--output", required=True, help="the bundle file to write (e.g. mykernels.hbundle)")
    build.add_argument("-j", "--jobs", type=int, default=None, help="toolchains run at once (default: CPU count)")
    build.add_argument("--keep-going", action="store_true",
                       help="write the bundle without the builds that fail (they are listed as missing)")
    build.add_argument("--no-cache", action="store_true", help="run every toolchain, ignoring the kernel cache")
    build.add_argument("--timeout", type=float, default=None, help="seconds one compiler run may take (default 300)")
    build.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    build.add_argument("--json", action="store_true",
                       help="print what was built as JSON (progress still goes to stderr unless --quiet)")

    bundle = subparsers.add_parser("bundle", help="look inside kernel bundles")
    actions = bundle.add_subparsers(dest="bundle_command", metavar="ACTION")
    inspect = actions.add_parser("inspect", help="verify a bundle and list what it holds")
    inspect.add_argument("file")
    inspect.add_argument("--json", action="store_true", help="the manifest, as JSON")

    def cmd_bundle(args: argparse.Namespace) -> int:
        if args.bundle_command is None:
            return usage_error(bundle.prog, "name an action: inspect")
        from hetero.compiler.build.bundle import inspect_bundle

        if not Path(args.file).is_file():
            raise UsageError(f"no bundle file {args.file!r}" + (" (it is a directory)" if Path(args.file).is_dir() else ""))
        manifest = inspect_bundle(args.file)
        print(json.dumps(manifest.as_json(), indent=2) if args.json else format_manifest(args.file, manifest))
        return 0

    return {"compile": cmd_compile, "bundle": cmd_bundle}
