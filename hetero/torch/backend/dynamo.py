"""The backend torch calls: ``torch.compile(model, backend="hetero", options={...})`` (registered
through the ``torch_dynamo_backends`` entry point, so no import is needed), or
:func:`hetero.torch.compile`.

Options: ``device`` (a hetero device name or Device; default: ``hetero.device()`` at each call,
the guard's device inside ``hetero.guard``),
``jit`` (default True: replay fully lowered graphs as launch plans), ``cache_parameters``
(default True: parameters uploaded once per torch version, :mod:`.transfer`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd

from hetero.core.device import Device
from hetero.core.errors import ConfigError
from hetero.core.named_device import device as resolve_device
from hetero.torch.backend.interpreter import GraphProgram, Placement
from hetero.torch.backend.report import Report
from hetero.torch.backend.transfer import ParameterCaches

_OPTIONS = ("device", "jit", "cache_parameters")
_lock = threading.Lock()
_numbers = itertools.count()
#: One report per device for models compiled by name (``backend="hetero"``); hetero.torch.compile
#: gives each model its own.
REPORTS: dict[str, Report] = {}


def _options(options: dict[str, Any] | None) -> dict[str, Any]:
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ConfigError(f"hetero's torch backend has no option {', '.join(map(repr, unknown))}; "
                          f"it takes {', '.join(_OPTIONS)}")
    return options


def make_backend(device: str | Device | None = None, *, jit: bool = True, cache_parameters: bool = True,
                 report: Report | None = None) -> Callable[..., Any]:
    """A TorchDynamo backend running graphs on ``device`` (see the module docstring); None:
    on ``hetero.device()`` at each call, which inside ``hetero.guard`` is the guard's device, so
    the graphs follow it when a fault moves the work."""
    placement = Placement(None if device is None else resolve_device(device))
    if report is None:
        with _lock:
            report = REPORTS.setdefault(placement.name, Report(placement.name))
    parameters = ParameterCaches() if cache_parameters else None

    def compiler(kind: str) -> Callable[[torch.fx.GraphModule, list[Any]], GraphProgram]:
        def compile_graph(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> GraphProgram:
            return GraphProgram(graph, placement, report, f"{kind}{next(_numbers)}", parameters, jit=jit)
        return compile_graph

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        decompositions=core_aten_decompositions())


def hetero_backend(graph: torch.fx.GraphModule, example_inputs: list[Any], options: dict[str, Any] | None = None,
                   mode: str | None = None) -> Any:
    """The ``torch_dynamo_backends`` entry point named ``hetero``."""
    if mode not in (None, "default"):
        raise ConfigError(f"hetero's torch backend has no mode {mode!r}; pass options={{'device': ...}} instead")
    return make_backend(**_options(options))(graph, example_inputs)


__all__ = ["REPORTS", "hetero_backend", "make_backend"]
