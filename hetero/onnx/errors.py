"""The errors of :mod:`hetero.onnx`: a model ONNX Runtime cannot load, a provider that did not bind,
a bad feed, a request that no device could answer (with every attempt it made)."""

from __future__ import annotations

import dataclasses

from hetero.core.errors import HeteroError


class ModelError(HeteroError, ValueError):
    """The model is not one ONNX Runtime can load (not ONNX at all: a text file, random bytes; or a
    broken graph): which model, and ONNX Runtime's reason, in one line."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source} is not an ONNX model ONNX Runtime can load: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.source, self.reason))


class ExternalDataError(ModelError):
    """A tensor of the model keeps its data in a file hetero will not let ONNX Runtime read: outside
    the model's folder (an absolute path, ``..``, a symlink that leaves it), not a regular file,
    missing or too short; or the model came as bytes, which have no folder to read it from."""

    def __init__(self, source: str, tensor: str, location: str, problem: str) -> None:
        self.tensor = tensor
        self.location = location
        self.problem = problem
        self.source = source
        self.reason = f"tensor {tensor!r} keeps its data in {location!r}, {problem}"
        # not ModelError's "is not an ONNX model" wording: the model may be fine, its reference is not
        HeteroError.__init__(self, f"{source}: {self.reason}; hetero does not read it (external data must be a "
                                   "regular file inside the model's folder)")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.source, self.tensor, self.location, self.problem))


class ProviderUnavailableError(HeteroError, RuntimeError):
    """ONNX Runtime did not bind the execution provider a device needs, or bound it and gave some or
    all of the model's nodes to another (it would have run them on the CPU without saying so).
    ``ops``: op type -> nodes that went elsewhere (None: the provider was not bound at all);
    ``placed``: the nodes the provider did take."""

    def __init__(self, provider: str, device: str, bound: list[str], remedy: str, *,
                 ops: dict[str, int] | None = None, placed: int = 0) -> None:
        self.provider = provider
        self.device = device
        self.bound = list(bound)
        self.remedy = remedy
        self.ops = None if ops is None else dict(ops)
        self.placed = placed
        cpu = "run on the CPU on purpose with fallback='cpu' (hetero infer/serve --fallback-cpu)"
        if ops is not None:
            off = sum(ops.values())
            listed = ", ".join(f"{op} x{count}" for op, count in sorted(ops.items()))
            if placed == 0:
                message = (f"ONNX Runtime bound {provider} for device {device!r} but gave it none of the model's {off} "
                           f"nodes ({listed}: {provider} does not take them); {cpu}")
            else:
                message = (f"ONNX Runtime gave {off} of the model's {off + placed} nodes to another provider than "
                           f"{provider} for device {device!r} ({listed}: {provider} does not take them); run the model "
                           f"split on purpose with partial='allow' (hetero infer/serve --allow-partial), or {cpu}")
            super().__init__(message)
            return
        problem = (f"ONNX Runtime did not bind {provider} for device {device!r} (it bound {', '.join(bound)})" if bound
                   else f"this ONNX Runtime has no {provider} for device {device!r}")
        super().__init__(f"{problem}; {remedy}; or {cpu}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_provider_error, (self.provider, self.device, self.bound, self.remedy, self.ops, self.placed))


def _rebuild_provider_error(provider: str, device: str, bound: list[str], remedy: str, ops: dict[str, int] | None,
                            placed: int) -> ProviderUnavailableError:
    return ProviderUnavailableError(provider, device, bound, remedy, ops=ops, placed=placed)


class ProviderFailedError(ProviderUnavailableError):
    """The device's execution provider is there, but could not build this model: ONNX Runtime raised
    (``EPFail``: OpenVINO on a KNN or a PCA + SVC model) while the session was made with it."""

    def __init__(self, provider: str, device: str, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        self.provider, self.device, self.bound, self.remedy = provider, device, [provider], ""
        self.ops, self.placed = None, 0
        HeteroError.__init__(self, f"ONNX Runtime's {provider} could not build {source} for device {device!r}: {reason}; "
                                   "run it on the CPU on purpose with fallback='cpu' (hetero infer/serve --fallback-cpu)")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.provider, self.device, self.source, self.reason))


class NoMemberError(HeteroError, RuntimeError):
    """No device of a pool could run the model: ``failures`` maps each device to why."""

    def __init__(self, model: str, failures: dict[str, str]) -> None:
        self.model = model
        self.failures = dict(failures)
        listed = "; ".join(f"{device}: {why}" for device, why in self.failures.items()) or "no device was found"
        super().__init__(f"no device can run model {model!r}: {listed}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.model, self.failures))


class InputError(HeteroError, ValueError):
    """A feed does not fit the model: unknown or missing input name, wrong dtype or shape. Nothing ran."""

    def __init__(self, message: str, name: str | None = None) -> None:
        self.name = name
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.args[0], self.name))


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One try of a request on one pool member: where, how long, and why it failed (None: it answered)."""

    member: str
    device: str
    seconds: float
    error: str | None = None
    fault_class: str | None = None
    action: str | None = None


class InferenceFailedError(HeteroError, RuntimeError):
    """A request no member of the pool could answer within its retry budget; ``history`` holds each
    attempt, the last error is the ``__cause__``."""

    def __init__(self, message: str, history: list[Attempt] | tuple[Attempt, ...] = ()) -> None:
        self.history = tuple(history)
        lines = [message] + [f"  try {i + 1}: {a.member} ({a.device}) after {a.seconds * 1e3:.1f} ms: {a.error}"
                             + (f" [{a.fault_class} -> {a.action}]" if a.fault_class else "")
                             for i, a in enumerate(self.history)]
        super().__init__("\n".join(lines))
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.history))


__all__ = ["Attempt", "ExternalDataError", "InferenceFailedError", "InputError", "ModelError", "NoMemberError",
           "ProviderFailedError", "ProviderUnavailableError"]
