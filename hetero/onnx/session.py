"""``hetero.onnx.Session``: an ONNX Runtime session on a hetero device, with no silent fallback.

    >>> s = hetero.onnx.Session("model.onnx", device="cuda:0")
    >>> s.run({"x": x})["y"]

ONNX Runtime binds the providers it can and runs the rest on the CPU without saying so
(onnxruntime#23372, #11323): ``InferenceSession(m, providers=["CUDAExecutionProvider"])`` on a
machine whose CUDA libraries do not load runs on the CPU, and so does asking for a plugin EP by
name; and once a session exists, an ``EPFail`` in ``run`` moves it to the CPU with only a print to
stdout (the wrapper's ``_enable_fallback``, on for CUDA and TensorRT). Here the session turns that
off (``disable_fallback()``) and checks ``get_providers()`` once it exists; a missing provider raises
:class:`ProviderUnavailableError` (naming the provider, the device and what to install), or with
``fallback="cpu"`` runs on the CPU *and says so*: a warning and a ``provider-fallback`` event on
the fault bus. A bound provider can still be given none of the model's nodes, or some, while
``get_providers()`` lists it first (OpenVINO ran no node of a scikit-learn model): the session
reads where ONNX Runtime put each node (:mod:`hetero.onnx.placement`, :meth:`Session.placement`)
and treats a provider given no node as missing, and one given part of the model as an error
naming the ops that went elsewhere, unless ``partial="allow"`` (or ``fallback="cpu"``) accepts
the split, announced with a ``provider-partial`` event. Every ``run`` counts as an inference for fault rules of the ``infer`` op, and an
ONNX Runtime error that is a device error comes out as hetero's (:mod:`hetero.fault.ort_errors`),
so :func:`hetero.fault.classify`, the guard and :class:`hetero.onnx.Pool` treat it as any other.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.core.device import Device
from hetero.core.notices import notice
from hetero.core.optional import require
from hetero.fault import event_bus, injection_infer, ort_errors
from hetero.onnx import feeds as _feeds
from hetero.onnx import placement as _placement
from hetero.onnx import providers as _providers
from hetero.onnx.errors import InputError, ModelError, ProviderFailedError, ProviderUnavailableError
from hetero.onnx.model_file import ModelFile, ModelSource, describe, model_bytes, read_model
from hetero.onnx.spec import TensorSpec, from_node_arg

log = logging.getLogger("hetero.onnx")



def onnxruntime() -> Any:
    """The ``onnxruntime`` module, or a MissingDependencyError that says how to install it."""
    return require("onnxruntime", extra="onnx", feature="hetero.onnx")


#: ONNX Runtime's errors that, raised while a session is made, say the model itself is not loadable.
_NOT_A_MODEL = ("InvalidProtobuf", "InvalidGraph", "NoModel", "InvalidArgument")
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")


def open_session(ort: Any, data: bytes, source: str, **options: Any) -> Any:
    """``ort.InferenceSession(data, **options)``; a model ONNX Runtime cannot parse raises
    :class:`ModelError` naming ``source`` (one line, not ONNX Runtime's protobuf traceback)."""
    try:
        return ort.InferenceSession(data, **options)
    except Exception as error:
        if type(error).__name__ not in _NOT_A_MODEL:
            raise
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise ModelError(source, _ORT_PREFIX.sub("", lines[0]).rstrip(".")) from None


def resolve_device(device: str | Device) -> Device:
    """A Device for ``device``; ``"auto"``: the first device (GPUs first) whose provider is installed."""
    import hetero

    if isinstance(device, Device):
        return device
    if device != "auto":
        return hetero.device(device)
    ort = onnxruntime()
    for candidate in hetero.devices():
        if _providers.choose(ort, candidate) is not None:
            return candidate
    return hetero.device("cpu")


class Session:
    """An ONNX Runtime session on one hetero device.

    ``model``: a path, the model's bytes or an ``onnx.ModelProto`` (external data only from a path:
    it is read from the model's folder, see :mod:`hetero.onnx.model_file`). ``device``: a Device, a name
    (``cuda:0``, ``oneapi:0``, ``cpu``) or ``"auto"``. ``fallback="cpu"``: run on the CPU when the
    device's provider cannot be bound or is given none of the model's nodes (announced), instead of
    raising; it also lets part of the model run on the CPU. ``partial="allow"``: run the model split
    when ONNX Runtime gives some of its nodes to the CPU (announced; :meth:`placement` says which),
    instead of raising (the default, ``"refuse"``). ``threads``: ONNX Runtime's
    intra-op threads (None: its default). ``session_options``: an ``onnxruntime.SessionOptions``
    to start from. ``provider_options``: extra options for the device's provider.
    """

    def __init__(self, model: ModelSource, device: str | Device = "auto", *, fallback: str | None = None,
                 partial: str = "refuse", threads: int | None = None, session_options: Any = None,
                 provider_options: Mapping[str, str] | None = None) -> None:
        if fallback not in (None, "cpu"):
            raise ValueError(f"fallback must be None or 'cpu', got {fallback!r}")
        if partial not in ("refuse", "allow"):
            raise ValueError(f"partial must be 'refuse' or 'allow', got {partial!r}")
        ort = onnxruntime()
        self.model: ModelFile = read_model(model)
        self._source = self.model.source
        self.requested: Device = resolve_device(device)
        self.device: Device = self.requested
        self.fell_back = False
        self.partial = False  # some nodes run on another provider than the device's
        self._placement: _placement.Placement | None = None
        choice = _providers.choose(ort, self.requested)
        session = None
        if choice is not None:
            session, problem = self._open(ort, choice, partial, fallback, threads, session_options, provider_options)
        else:
            wanted = _providers.wanted(self.requested) or "execution provider"
            problem = ProviderUnavailableError(wanted, self.requested.name, [], _providers.remedy(self.requested.backend))
        if session is None:
            assert problem is not None
            if fallback != "cpu":
                raise problem
            session = self._fall_back(ort, problem, threads, session_options)
        # ONNX Runtime's Python wrapper has a second silent fallback: when run() meets an EPFail (and
        # at creation, for CUDA and TensorRT) it moves the session to its fallback providers (the CPU)
        # with a print() to stdout, and retries. Off: the error reaches hetero's classifier instead.
        session.disable_fallback()
        self._session = session
        self.provider: str = session.get_providers()[0]
        self.inputs: tuple[TensorSpec, ...] = tuple(from_node_arg(a) for a in session.get_inputs())
        self.outputs: tuple[TensorSpec, ...] = tuple(from_node_arg(a, output=True) for a in session.get_outputs())
        self._output_names = [spec.name for spec in self.outputs]

    def _options(self, ort: Any, session_options: Any, threads: int | None) -> Any:
        """The SessionOptions to open with: the caller's or new ones, the threads, the model's folder,
        the placement recorded."""
        options = session_options if session_options is not None else ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.model.configure(options)
        _placement.record(ort, options)
        return options

    def _check_placement(self, session: Any, choice: _providers.ProviderChoice, partial: str,
                         fallback: str | None) -> ProviderUnavailableError | None:
        """None when the device's provider runs the model: all of it, or part of it where that is
        allowed (announced). The error when it runs none of it (the caller may fall back); raised
        when it runs part and that is not allowed."""
        found = self._placement = _placement.read(session)
        if found is None or choice.provider == _providers.CPU:
            return None
        off = found.off(choice.provider)
        if not off:
            return None
        placed = found.count(choice.provider)
        problem = ProviderUnavailableError(choice.provider, self.requested.name, session.get_providers(), choice.remedy,
                                           ops=off, placed=placed)
        if placed == 0:
            return problem
        if partial != "allow" and fallback != "cpu":
            raise problem
        self.partial = True
        others = found.elsewhere(choice.provider)
        why = "partial='allow'" if partial == "allow" else "fallback='cpu'"
        notice(log, f"{self.requested.name}: {choice.provider} runs {placed} of the model's nodes, {', '.join(others)} "
                    f"the other {sum(off.values())} ({_placement.describe(off)}) ({why})")
        event_bus.publish("provider-partial", device=self.requested.name, provider=choice.provider, to=others, ops=off,
                          placed=placed)
        return None

    def _open(self, ort: Any, choice: _providers.ProviderChoice, partial: str, fallback: str | None, threads: int | None,
              session_options: Any, provider_options: Mapping[str, str] | None) -> tuple[Any, ProviderUnavailableError | None]:
        """A session on the device's provider; or None and why not, for the caller to raise or fall
        back on: the provider was not bound, was given no node, or could not build the model (an
        ONNX Runtime error other than a bad model, such as OpenVINO's EPFail on a KNN)."""
        try:
            session = self._create(ort, choice, threads, session_options, provider_options)
        except ModelError:
            raise
        except Exception as error:
            if choice.provider == _providers.CPU or not ort_errors.is_ort_error(error):
                raise
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            failed = ProviderFailedError(choice.provider, self.requested.name, self._source, _ORT_PREFIX.sub("", first))
            failed.__cause__ = error
            return None, failed
        if choice.provider not in session.get_providers():
            return None, ProviderUnavailableError(choice.provider, self.requested.name, session.get_providers(), choice.remedy)
        problem = self._check_placement(session, choice, partial, fallback)
        return (None, problem) if problem is not None else (session, None)

    def _create(self, ort: Any, choice: _providers.ProviderChoice, threads: int | None,
                session_options: Any, provider_options: Mapping[str, str] | None) -> Any:
        data = self.model.data
        options = self._options(ort, session_options, threads)
        if choice.ep_devices:  # a plugin EP: bound to its devices through the options
            options.add_provider_for_devices(choice.ep_devices, {**choice.ep_options, **(provider_options or {})})
            return open_session(ort, data, self._source, sess_options=options)
        providers = list(choice.providers)
        if provider_options and providers and isinstance(providers[0], tuple):
            providers[0] = (providers[0][0], {**providers[0][1], **provider_options})
        elif provider_options:
            providers[0] = (providers[0], dict(provider_options))
        return open_session(ort, data, self._source, sess_options=options, providers=providers)

    def _fall_back(self, ort: Any, problem: ProviderUnavailableError, threads: int | None,
                   session_options: Any) -> Any:
        import hetero

        self.device = hetero.device("cpu")
        self.fell_back = True
        notice(log, f"{problem}; running on the CPU instead (fallback='cpu')")
        event_bus.publish("provider-fallback", device=self.requested.name, provider=problem.provider,
                          bound=["CPUExecutionProvider"], to="cpu", reason=str(problem))
        options = self._options(ort, session_options, threads)
        session = open_session(ort, self.model.data, self._source, sess_options=options, providers=[_providers.CPU])
        self._placement = _placement.read(session)
        return session

    def placement(self) -> dict[str, dict[str, int]] | None:
        """Which provider runs what: op type -> provider -> nodes (after ONNX Runtime's graph rewrites,
        so fused ops appear under their fused names). None when this ONNX Runtime cannot say (< 1.24)."""
        return None if self._placement is None else self._placement.by_op()

    @property
    def ort_session(self) -> Any:
        """The ``onnxruntime.InferenceSession`` underneath."""
        return self._session

    def run(self, feeds: Mapping[str, Any], outputs: Sequence[str] | None = None) -> dict[str, Any]:
        """Run the model on ``feeds`` (input name -> array); the outputs by name (all, or ``outputs``):
        arrays, and for an output that is not a numeric tensor what ONNX Runtime gives (a sequence of
        maps, skl2onnx's ZipMap, is a list of dicts)."""
        ready = _feeds.prepare(feeds, self.inputs)
        return self.run_prepared(ready, outputs)

    def run_prepared(self, ready: _feeds.Feeds, outputs: Sequence[str] | None = None) -> dict[str, Any]:
        """``run`` for feeds :func:`hetero.onnx.feeds.prepare` has checked (a pool checks once per request)."""
        names = self._output_names if outputs is None else self._check_outputs(outputs)
        injection_infer.check(self.device)
        try:
            if ready.on_device:
                results = self._run_bound(ready, names)
            else:
                results = self._session.run(names, ready)
        except Exception as error:
            raise self._translate(error) from error
        return dict(zip(names, results))

    def _check_outputs(self, outputs: Sequence[str]) -> list[str]:
        unknown = [name for name in outputs if name not in self._output_names]
        if unknown:
            raise InputError(f"the model has no output {unknown[0]!r}; its outputs: {', '.join(self._output_names)}",
                             unknown[0])
        return list(outputs)

    def _run_bound(self, ready: Mapping[str, Any], names: list[str]) -> list[np.ndarray]:
        """IOBinding: torch tensors in GPU memory are read where they are, outputs come back to the host."""
        if self.provider not in (_providers.CUDA, _providers.ROCM, _providers.MIGRAPHX):
            raise InputError(f"a GPU torch tensor was fed to a session on {self.device.name} ({self.provider}); "
                             "move it with .cpu() or run the session on the tensor's GPU")
        binding = self._session.io_binding()
        for name, value in ready.items():
            if _feeds.is_device_tensor(value):
                tensor = value.contiguous()
                binding.bind_input(name, "cuda", tensor.device.index or 0, np.dtype(str(tensor.dtype).removeprefix("torch.")),
                                   tuple(tensor.shape), tensor.data_ptr())
            else:
                binding.bind_cpu_input(name, value)
        for name in names:
            binding.bind_output(name, "cpu")
        self._session.run_with_iobinding(binding)
        return list(binding.copy_outputs_to_cpu())

    def _translate(self, error: BaseException) -> BaseException:
        if isinstance(error, InputError) or not ort_errors.is_ort_error(error):
            return error
        found = ort_errors.recognise(error, self.device)
        if found is not None:
            return found.error
        if type(error).__name__ == "InvalidArgument":
            return InputError(f"ONNX Runtime rejected the feeds: {str(error).strip().splitlines()[0]}")
        return error

    def warm_up(self, batch: int = 1) -> float:
        """Run once on zeros (free dimensions ``batch``, the rest as the model fixes them); the seconds it took."""
        started = time.perf_counter()
        self.run(probe_feeds(self.inputs, batch))
        return time.perf_counter() - started

    def __repr__(self) -> str:
        via = f" (fell back from {self.requested.name})" if self.fell_back else " (split across providers: placement())" if self.partial else ""
        return f"<hetero.onnx.Session on {self.device.name} via {self.provider}{via}>"


def probe_feeds(inputs: Sequence[TensorSpec], batch: int = 1) -> dict[str, np.ndarray]:
    """Zeros for every input, each free dimension ``batch``: a run that tells whether a device answers."""
    return {spec.name: np.zeros(tuple(batch if d is None else d for d in spec.shape), dtype=spec.dtype) for spec in inputs}


__all__ = ["Session", "describe", "model_bytes", "onnxruntime", "open_session", "probe_feeds", "resolve_device"]
