"""Where the cost model lives on disk: ``<state_dir>/costs.json``.

A :class:`hetero.core.files.JsonStore`: saves hold the store's lock (on ``costs.json.lock``) so that
processes sampling at once merge rather than overwrite each other; writes are atomic and durable.
A file that cannot be read as a cost model is reported with a warning naming it, and the model
starts afresh (the next save replaces the file).

The document::

    {"version": 1,
     "kernels": {kernel_key: {stable_id: {signature: {bucket: [[n, seconds], ...]}}}},
     "transfers": {stable_id: {"h2d": [[bytes, seconds], ...], "d2h": [...]}},
     "devices": {stable_id: device name},
     "calibration": [kernel_key, ...]}   # the keys hetero calibrate measured (optional)
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from hetero.core.files import JsonStore, StoreCorrupt

logger = logging.getLogger("hetero.scheduler")

VERSION = 1
FILE_NAME = "costs.json"


def empty_document() -> dict[str, Any]:
    return {"version": VERSION, "kernels": {}, "transfers": {}, "devices": {}, "calibration": []}


def read(path: Path, warn: bool = True) -> tuple[dict[str, Any], str | None]:
    """The document in ``path`` and None; an empty one when the file is missing; an empty one
    and what is wrong (also warned, naming the file, unless ``warn`` is False) when it is
    unreadable, corrupt or of another version."""
    try:
        return store(path).read(), None
    except OSError as exc:
        problem = f"unreadable ({exc})"
    except StoreCorrupt as exc:
        problem = str(exc)
    if warn:
        warnings.warn(f"the cost model {path} is corrupt: {problem}; starting with an empty model "
                      f"(the next save replaces the file; `hetero calibrate` refills it)", RuntimeWarning, stacklevel=3)
    return empty_document(), problem


def store(path: Path) -> JsonStore[dict[str, Any]]:
    """The cost model document in ``path``."""
    return JsonStore(path, "cost model", load=_checked, dump=dict, empty=empty_document, indent=1, sort_keys=True)


def _checked(data: Any) -> dict[str, Any]:
    problem = _problem(data)
    if problem is not None:
        raise StoreCorrupt(problem)
    return dict(data)


def _problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"the top level is a {type(data).__name__}, not an object"
    if data.get("version") != VERSION:
        return f"version {data.get('version')!r}, this hetero reads version {VERSION}"
    for key in ("kernels", "transfers", "devices"):
        if not isinstance(data.get(key), dict):
            return f"{key!r} is missing or not an object"
    for kernel, per_device in data["kernels"].items():
        if not isinstance(per_device, dict):
            return f"kernel {kernel!r} is not an object"
        for device, per_signature in per_device.items():
            if not isinstance(per_signature, dict):
                return f"kernel {kernel!r} on {device!r} is not an object"
            for buckets in per_signature.values():
                if not isinstance(buckets, dict) or not all(_samples_ok(s) for s in buckets.values()):
                    return f"kernel {kernel!r} on {device!r} holds malformed samples"
    calibration = data.get("calibration", [])
    if not isinstance(calibration, list) or not all(isinstance(key, str) for key in calibration):
        return "'calibration' is not a list of kernel keys"
    for device, directions in data["transfers"].items():
        if not isinstance(directions, dict) or not all(_samples_ok(s) for s in directions.values()):
            return f"transfers of {device!r} hold malformed samples"
    return None


def _samples_ok(samples: Any) -> bool:
    return isinstance(samples, list) and all(
        isinstance(s, list) and len(s) == 2 and all(isinstance(v, (int, float)) for v in s) for s in samples)


def write(path: Path, document: dict[str, Any]) -> None:
    """Replace ``path`` with ``document`` atomically (call within ``store(path).locked()``)."""
    store(path).write(document)
    logger.debug("cost model saved to %s", path)
