"""Kernel bundles loaded in this process, and the lookup a kernel launch makes before compiling.

``hetero.load_bundle(path)`` verifies a bundle and registers its entries. When a kernel is
first launched on a device, :func:`lookup` answers with what the bundle holds for that
kernel (same qualified name and Python fingerprint), signature and device target:

- a prebuilt module image (CUDA fatbin/PTX, AMD code object) for the device's arch, used
  as is; on CUDA a newer GPU takes the PTX built for an older ``sm`` when no exact one exists;
- portable source finished on the device: OpenCL C (built by the driver), and on the CPU
  the kernel's IR, emitted here (bundles never carry Python that would be run);
- for another arch, the kernel's IR, which the launch emits and compiles (said once at INFO).

A kernel whose Python changed since bundling is not matched: it compiles from its source.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hetero.core.target import Target

from hetero.compiler.ir import nodes as ir
from hetero.compiler.build.bundle import Bundle, BundleEntry, Manifest, read_bundle
from hetero.compiler.emit.base import EmittedSource
from hetero.compiler.frontend.signature import format_signature
from hetero.compiler.frontend.source import fingerprint
from hetero.compiler.build.toolchains import BINARY_KINDS

logger = logging.getLogger("hetero.compiler.build.bundle")
_CUDA_ARCH = re.compile(r"(sm|compute)_(\d+)")


@dataclasses.dataclass(frozen=True)
class Prebuilt:
    """What a bundle offers one launch. ``source`` is None when the launch must emit
    ``function`` for its device; ``binary`` is a module image for the runtime, or None;
    ``entry`` is None when only the IR matched (a target the bundle was not built for)."""

    function: ir.Function
    source: EmittedSource | None
    binary: bytes | None
    entry: BundleEntry | None
    bundle: Path


class BundleRegistry:
    """The bundles of this process; later loads take precedence."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, list[tuple[Bundle, BundleEntry]]] = {}
        self._said: set[tuple[str, ...]] = set()

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, bundle: Bundle) -> None:
        with self._lock:
            for entry in bundle.manifest.entries:
                self._entries.setdefault(entry.qualname, []).insert(0, (bundle, entry))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._said.clear()

    def lookup(self, py_func: Callable[..., Any], types: Sequence[Any], target: Target) -> Prebuilt | None:
        """What the loaded bundles hold for this kernel, signature and target, or None (compile from Python)."""
        with self._lock:
            candidates = list(self._entries.get(py_func.__qualname__, ()))
        if not candidates:
            return None
        name = f"{py_func.__module__}.{py_func.__qualname__}"
        signature = format_signature(py_func.__name__, tuple(types))
        current = fingerprint(py_func)
        same_code = [(b, e) for b, e in candidates if e.python_source_sha256 == current]
        if not same_code:
            self._say(("changed", name), "%s changed since %s was built; compiling it from its Python source",
                      name, candidates[0][0].path)
            return None
        exact = [(b, e) for b, e in same_code if e.signature == signature]
        if not exact:
            self._say(("signature", name, signature), "no prebuilt %s in the loaded bundles (they hold %s); "
                      "compiling it from its Python source", signature,
                      ", ".join(sorted({e.signature for _, e in same_code})))
            return None
        chosen = _best(exact, target)
        if chosen is not None:
            bundle, entry = chosen
            logger.debug("%s on %s: prebuilt %s (%s) from %s", signature, target, entry.target, entry.artifact_kind,
                         bundle.path)
            portable = entry.artifact_kind not in BINARY_KINDS
            return Prebuilt(bundle.function(entry), None if entry.dialect == "cpu" else bundle.source(entry),
                            None if portable else bundle.artifact(entry), entry, bundle.path)
        bundle, entry = exact[0]
        self._say(("arch", name, signature, str(target)),
                  "no prebuilt artifact for %s on %s in %s (it holds %s); compiling it from the bundle's IR",
                  signature, target, bundle.path, ", ".join(sorted({e.target for _, e in exact})))
        return Prebuilt(bundle.function(entry), None, None, None, bundle.path)

    def _say(self, key: tuple[str, ...], message: str, *args: Any) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        logger.info(message, *args)


def _best(found: list[tuple[Bundle, BundleEntry]], target: Target) -> tuple[Bundle, BundleEntry] | None:
    """The entry to use on ``target``: same dialect, features present, and an artifact the device takes."""
    usable = [(b, e) for b, e in found if e.dialect == target.dialect and set(e.requires) <= target.features
              and e.artifact_kind != "spirv"]  # no runtime here loads SPIR-V yet
    if target.dialect in ("cpu", "opencl"):
        return usable[0] if usable else None
    exact = [(b, e) for b, e in usable if e.arch == target.arch]
    if exact or target.dialect != "cuda":
        return exact[0] if exact else None
    # CUDA: PTX for compute_XX runs on any newer GPU (the driver compiles it); take the newest one that fits.
    device = _CUDA_ARCH.fullmatch(target.arch)
    if device is None:
        return None
    older = [(int(m.group(2)), b, e) for b, e in usable
             if (m := _CUDA_ARCH.fullmatch(e.arch)) and int(m.group(2)) <= int(device.group(2))]
    if not older:
        return None
    _, bundle, entry = max(older, key=lambda item: item[0])
    return bundle, entry


_registry = BundleRegistry()


def load_bundle(path: str | Path) -> Manifest:
    """Verify the bundle at ``path`` and use its kernels from now on, in this process.

    Raises :class:`~hetero.core.errors.BundleError` (naming the file and the bad member or entry)
    when it is malformed or tampered with; nothing of a rejected bundle is used.
    """
    bundle = read_bundle(path)
    _registry.add(bundle)
    manifest = bundle.manifest
    logger.info("loaded kernel bundle %s: %d entries for %s (built by hetero %s on %s)", bundle.path,
                len(manifest.entries), ", ".join(manifest.targets), manifest.hetero_version, manifest.created)
    return manifest


def lookup(py_func: Callable[..., Any], types: Sequence[Any], target: Target) -> Prebuilt | None:
    """See :meth:`BundleRegistry.lookup`; None at once when no bundle is loaded."""
    if not _registry:
        return None
    return _registry.lookup(py_func, types, target)


def unload_all() -> None:
    """Forget every loaded bundle (kernels already specialised keep what they loaded)."""
    _registry.clear()


__all__ = ["BundleRegistry", "Prebuilt", "load_bundle", "lookup", "unload_all"]
