"""hetero's calibrated cost model: how long a kernel takes on a device for ``n`` work-items,
and how long copies to and from each device take (StarPU's history + regression models).

Samples are keyed by (kernel key, device stable id, signature, size bucket), the bucket
being the power of two below ``n``. A bucket's time is the median of its most recent
samples (:data:`~hetero.scheduler.cost_fit.RECENT_SAMPLES`), so one spike cannot send all
work to one device (starpu#50). Per kernel and device a law ``t = a·n^b`` is fitted by
least squares on the log-log bucket medians; :meth:`CostModel.predict` answers from the
bucket of ``n`` when it has samples (scaled to ``n`` by the fitted exponent) and from the
law otherwise. Copies: ``t = latency + bytes / bandwidth`` per device and direction.

Where samples come from: ``hetero calibrate``; :func:`sampling` (every k-th launch of every
kernel is synchronised and timed; off by default, and then launches do nothing extra);
and ``kernel.split`` (each part's compute time). The model persists in
``<state_dir>/costs.json`` (:mod:`hetero.scheduler.cost_store`).

    from hetero.scheduler import cost_model
    with cost_model.sampling(every=10):     # saved to the state dir on exit
        train()
    cost_model.default_model().predict(key, device.stable_id, 1 << 20)   # seconds or None
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hetero.scheduler import cost_store
from hetero.scheduler.cost_fit import RECENT_SAMPLES, PowerLaw, TransferLaw, bucket_point, fit_power_law, fit_transfer, size_bucket

DIRECTIONS = ("h2d", "d2h")


def kernel_key(name: str, fingerprint: str) -> str:
    """The key of a kernel in the model: its name and source fingerprint (an edited kernel
    is a new kernel: its old timings no longer apply)."""
    return f"{name}@{fingerprint[:16]}"


_UNKNOWN: Any = object()  # a prediction not made yet (None is one: no samples)
#: Sizes whose predictions are kept per kernel and device (a program launches at a few).
MAX_SIZES_KEPT = 256


class CostModel:
    """Timing samples and the laws fitted from them. Thread-safe.

    ``path`` is the file it loads from and :meth:`save` merges into; None keeps it in memory.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._kernels: dict[tuple[str, str, str, int], list[tuple[int, float]]] = {}
        self._transfers: dict[tuple[str, str], list[tuple[int, float]]] = {}
        self._devices: dict[str, str] = {}
        self._calibration: set[str] = set()  # kernel keys hetero calibrate measured
        self._pending: list[tuple[Any, ...]] = []  # samples recorded since the last load/save
        self._fits: dict[tuple[str, str], PowerLaw | None] = {}
        #: (kernel key as asked, device) -> (predictor(), or None without samples; its answers by n),
        #: made once per samples held: a placement by ``fastest`` asks predict() for every device,
        #: at the few sizes a program launches at (see _forget_predictors)
        self._predictors: dict[tuple[str, str], tuple[Callable[[int], float] | None, dict[int, float | None]]] = {}
        self._keys: set[str] = set()  # the kernel keys samples are held under
        self._transfer_fits: dict[tuple[str, str], TransferLaw | None] = {}
        self._reported: str | None = None  # the file problem already warned about
        if path is not None:
            document, self._reported = cost_store.read(path)
            self._load(document)

    # -- recording ----------------------------------------------------------------------
    def record(self, kernel_key: str, device_stable_id: str, n: int, seconds: float, signature: str = "",
               device_name: str | None = None) -> None:
        """One timed launch of ``n`` work-items that took ``seconds``."""
        if n <= 0 or not seconds > 0:
            return
        with self._lock:
            self._add_kernel(kernel_key, device_stable_id, signature, int(n), float(seconds))
            self._pending.append(("kernel", kernel_key, device_stable_id, signature, int(n), float(seconds)))
            if device_name:
                self._devices[device_stable_id] = device_name

    def record_transfer(self, device_stable_id: str, direction: str, nbytes: int, seconds: float,
                        device_name: str | None = None) -> None:
        """One timed copy of ``nbytes`` host->device (``h2d``) or device->host (``d2h``)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"transfer direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        if nbytes <= 0 or not seconds > 0:
            return
        with self._lock:
            self._add_transfer(device_stable_id, direction, int(nbytes), float(seconds))
            self._pending.append(("transfer", device_stable_id, direction, int(nbytes), float(seconds)))
            if device_name:
                self._devices[device_stable_id] = device_name

    def mark_calibration(self, kernel_key: str) -> None:
        """``kernel_key`` is one of ``hetero calibrate``'s kernels: its figures stand for the
        devices' speed when a kernel was never measured (see :meth:`calibration_keys`)."""
        with self._lock:
            if kernel_key not in self._calibration:
                self._calibration.add(kernel_key)
                self._pending.append(("calibration", kernel_key))

    def calibration_keys(self) -> list[str]:
        """The keys of the calibration's kernels this model holds samples of."""
        with self._lock:
            return sorted(self._calibration)

    def _add_kernel(self, key: str, device: str, signature: str, n: int, seconds: float) -> None:
        samples = self._kernels.setdefault((key, device, signature, size_bucket(n)), [])
        samples.append((n, seconds))
        del samples[:-RECENT_SAMPLES]
        self._fits.pop((key, device), None)
        self._forget_predictors(key, device)

    def _forget_predictors(self, key: str, device: str) -> None:
        """Drop the cached predictions a new sample of ``key`` on ``device`` changes: that kernel's
        there, under its key and its bare name; all of them when the key is new (a bare name may
        now resolve to another key, or to none)."""
        if key not in self._keys:
            self._keys.add(key)
            self._predictors.clear()
            return
        self._predictors.pop((key, device), None)
        self._predictors.pop((key.partition("@")[0], device), None)

    def _add_transfer(self, device: str, direction: str, nbytes: int, seconds: float) -> None:
        samples = self._transfers.setdefault((device, direction), [])
        samples.append((nbytes, seconds))
        del samples[:-RECENT_SAMPLES * 8]  # a calibration measures a few sizes several times each
        self._transfer_fits.pop((device, direction), None)

    # -- questions ----------------------------------------------------------------------
    def _points(self, key: str, device: str) -> list[tuple[int, tuple[float, float]]]:
        return [(bucket, bucket_point(samples)) for (k, d, _, bucket), samples in self._kernels.items()
                if k == key and d == device and samples]

    def fit(self, kernel_key: str, device_stable_id: str) -> PowerLaw | None:
        """The law ``t = a·n^b`` of a kernel on a device, or None without samples."""
        with self._lock:
            cache_key = (kernel_key, device_stable_id)
            if cache_key not in self._fits:
                self._fits[cache_key] = fit_power_law([p for _, p in self._points(kernel_key, device_stable_id)])
            return self._fits[cache_key]

    def predict(self, kernel_key: str, device_stable_id: str, n: int) -> float | None:
        """Predicted seconds for ``n`` work-items of the kernel on the device; None when the
        model has no sample of that kernel there."""
        entry = self._predictors.get((kernel_key, device_stable_id))
        if entry is None:
            with self._lock:  # made and kept under the lock: a sample recorded meanwhile cannot be missed
                entry = self._predictors[(kernel_key, device_stable_id)] = (self.predictor(kernel_key, device_stable_id), {})
        predictor, answers = entry
        found = answers.get(n, _UNKNOWN)
        if found is _UNKNOWN:
            found = None if predictor is None else predictor(n)
            if len(answers) < MAX_SIZES_KEPT:  # an entry a new sample dropped meanwhile is only garbage
                answers[n] = found
        return found

    def resolve(self, kernel_key: str) -> str:
        """The key samples are held under: ``kernel_key`` itself, or for a bare name such as
        ``"saxpy"`` (how ``hetero calibrate`` and people name kernels) the one key of that name
        (``saxpy@6daf88e190eb5258``). A name with several fingerprints stays as given."""
        if "@" in kernel_key:
            return kernel_key
        with self._lock:
            found = {key for key, _, _, _ in self._kernels if key.partition("@")[0] == kernel_key}
        return found.pop() if len(found) == 1 else kernel_key

    def predictor(self, kernel_key: str, device_stable_id: str) -> Callable[[int], float] | None:
        """:meth:`predict` for one kernel and device as a function of ``n``, fixed at the samples
        held now (cheap to call many times, as a partition search does); None without samples.
        ``kernel_key`` may be a bare name (see :meth:`resolve`)."""
        kernel_key = self.resolve(kernel_key)
        with self._lock:
            law = self.fit(kernel_key, device_stable_id)
            if law is None:
                return None
            by_bucket: dict[int, list[tuple[float, float]]] = {}
            for bucket, point in self._points(kernel_key, device_stable_id):
                by_bucket.setdefault(bucket, []).append(point)
            # Measured at a size: the bucket's median, scaled to n by the fitted exponent.
            measured = {b: sorted(points)[len(points) // 2] for b, points in by_bucket.items()}
        exponent = law.b

        def predict(n: int) -> float:
            point = measured.get(size_bucket(n))
            if point is None:
                return law(n)
            return point[1] * (max(n, 1) / point[0]) ** exponent

        return predict

    def transfer(self, device_stable_id: str, direction: str) -> TransferLaw | None:
        """The copy law of a device in one direction, or None when never measured."""
        with self._lock:
            key = (device_stable_id, direction)
            if key not in self._transfer_fits:
                self._transfer_fits[key] = fit_transfer(self._transfers.get(key, []))
            return self._transfer_fits[key]

    def transfer_time(self, device_stable_id: str, direction: str, nbytes: int) -> float | None:
        law = self.transfer(device_stable_id, direction)
        return None if law is None else law(nbytes)

    def kernels(self) -> list[str]:
        with self._lock:
            return sorted({k for k, _, _, _ in self._kernels})

    def summary(self) -> dict[str, Any]:
        """Every fitted law, for ``hetero calibrate --json`` and for people reading it."""
        with self._lock:
            kernels: dict[str, dict[str, Any]] = {}
            for key, device, _, _ in sorted(self._kernels):
                law = self.fit(key, device)
                if law is not None:
                    entry = kernels.setdefault(key, {})
                    entry[self._devices.get(device, device)] = {"stable_id": device, **law.as_dict()}
            transfers: dict[str, dict[str, Any]] = {}
            for device, direction in sorted(self._transfers):
                transfer_law = self.transfer(device, direction)
                if transfer_law is not None:
                    name = self._devices.get(device, device)
                    transfers.setdefault(name, {"stable_id": device})[direction] = transfer_law.as_dict()
            return {"path": str(self.path) if self.path else None, "kernels": kernels, "transfers": transfers}

    # -- persistence --------------------------------------------------------------------
    def _load(self, document: dict[str, Any]) -> None:
        for key, per_device in document["kernels"].items():
            for device, per_signature in per_device.items():
                for signature, buckets in per_signature.items():
                    for samples in buckets.values():
                        for n, seconds in samples:
                            self._add_kernel(key, device, signature, int(n), float(seconds))
        for device, directions in document["transfers"].items():
            for direction, samples in directions.items():
                if direction in DIRECTIONS:
                    for nbytes, seconds in samples:
                        self._add_transfer(device, direction, int(nbytes), float(seconds))
        self._devices.update({str(k): str(v) for k, v in document["devices"].items()})
        self._calibration.update(document.get("calibration", []))

    def _document(self) -> dict[str, Any]:
        document = cost_store.empty_document()
        for (key, device, signature, bucket), samples in sorted(self._kernels.items()):
            buckets = document["kernels"].setdefault(key, {}).setdefault(device, {}).setdefault(signature, {})
            buckets[str(bucket)] = [[n, t] for n, t in samples]
        for (device, direction), samples in sorted(self._transfers.items()):
            document["transfers"].setdefault(device, {})[direction] = [[n, t] for n, t in samples]
        document["devices"] = dict(self._devices)
        document["calibration"] = sorted(self._calibration)
        return document

    def save(self) -> Path | None:
        """Merge this process's new samples into the file (under its lock) and write it
        atomically; returns the path, or None for an in-memory model."""
        if self.path is None:
            return None
        with self._lock, cost_store.store(self.path).locked():
            pending, devices = self._pending, dict(self._devices)
            self._kernels.clear()
            self._transfers.clear()
            self._calibration.clear()
            self._fits.clear()
            self._predictors.clear()
            self._keys.clear()
            self._transfer_fits.clear()
            document, problem = cost_store.read(self.path, warn=self._reported is None)
            self._reported = self._reported or problem
            self._load(document)  # what other processes saved meanwhile
            for sample in pending:
                if sample[0] == "kernel":
                    self._add_kernel(*sample[1:])
                elif sample[0] == "calibration":
                    self._calibration.add(sample[1])
                else:
                    self._add_transfer(*sample[1:])
            self._devices.update(devices)
            cost_store.write(self.path, self._document())
            self._pending = []
        return self.path


# -- the process-wide model ------------------------------------------------------------------
_default: CostModel | None = None
_default_lock = threading.Lock()


def default_path() -> Path:
    from hetero.core.config import get_config

    return get_config().state_dir / cost_store.FILE_NAME


def default_model() -> CostModel:
    """The process's model, loaded from ``<state_dir>/costs.json`` on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = CostModel(default_path())
    return _default


def reset_default_model() -> None:
    """Forget the process's model (it is loaded again on next use; e.g. after changing the state dir)."""
    global _default
    with _default_lock:
        _default = None


# -- opt-in sampling of real launches -----------------------------------------------------------
_sampling_every: int | None = None
_listeners: list[Callable[[int | None], None]] = []


def sampling_interval() -> int | None:
    """Every how many launches a launch is timed; None when sampling is off."""
    return _sampling_every


def add_sampling_listener(listener: Callable[[int | None], None]) -> None:
    """Call ``listener(every_or_None)`` now and whenever sampling changes (how ``hetero.kernels.kernel``
    switches its launch path; the scheduler imports no launch code)."""
    _listeners.append(listener)
    listener(_sampling_every)


def set_sampling(every: int | None) -> None:
    """Time every ``every``-th launch of each kernel from now on (None or 0: stop)."""
    global _sampling_every
    if every is not None and (not isinstance(every, int) or every < 0):
        raise ValueError(f"sampling interval must be a positive number of launches, got {every!r}")
    _sampling_every = every or None
    for listener in _listeners:
        listener(_sampling_every)


@contextlib.contextmanager
def sampling(every: int = 10, save: bool = True) -> Iterator[CostModel]:
    """Inside the block, every ``every``-th launch of each kernel waits for the device and is
    timed into :func:`default_model`; on leaving, the model is saved (``save=True``)."""
    previous = _sampling_every
    set_sampling(every)
    try:
        yield default_model()
    finally:
        set_sampling(previous)
        if save:
            default_model().save()
