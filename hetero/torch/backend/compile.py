"""``hetero.torch.compile(model, device=...)`` and ``hetero.torch.explain(model, *example)``."""

from __future__ import annotations

from typing import Any

import torch

from hetero.core.device import Device
from hetero.core.named_device import device as resolve_device
from hetero.torch.backend.dynamo import make_backend
from hetero.torch.backend.report import Report


class CompiledModel:
    """``model`` compiled by torch.compile with hetero's backend; call it as the model.
    :attr:`report` counts what ran where."""

    def __init__(self, model: Any, device: str | Device | None, jit: bool, cache_parameters: bool,
                 dynamic: bool | None) -> None:
        self.model = model
        self.device = None if device is None else resolve_device(device)
        self.report = Report("hetero.device()" if self.device is None else self.device.name)
        self._compiled = torch.compile(model, backend=make_backend(self.device, jit=jit,
                                                                   cache_parameters=cache_parameters,
                                                                   report=self.report),
                                       dynamic=dynamic)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def compile(model: Any, device: str | Device | None = None, *, jit: bool = True,  # noqa: A001 (torch's name)
            cache_parameters: bool = True, dynamic: bool | None = False) -> CompiledModel:
    """``model`` (an ``nn.Module`` or a function of tensors) compiled to run on hetero's ``device``
    (None: ``hetero.device()`` at each call, which inside ``hetero.guard`` is the guard's device,
    so a fault that moves the guard's work moves the model's graphs with it).

    Forward and backward graphs run there (``loss.backward()`` fills ``p.grad`` as usual);
    operations hetero does not lower run in torch on the host, counted in ``.report``. Shapes
    are static (``dynamic=False``): a new input shape compiles again."""
    return CompiledModel(model, device, jit, cache_parameters, dynamic)


def explain(model: Any, *example: Any, device: str | Device | None = None, backward: bool = False) -> Report:
    """Compile ``model`` for ``device``, run it once on ``example`` (and its backward, with
    ``backward=True``, through the sum of the outputs), and return the report: every ATen
    operation, how many calls hetero lowered, and what ran on the host and why."""
    compiled = compile(model, device, jit=False)
    out = compiled(*example)
    if backward:
        outputs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        sum(o.float().sum() for o in outputs).backward()
    return compiled.report


__all__ = ["CompiledModel", "compile", "explain"]
