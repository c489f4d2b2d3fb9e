"""One FX graph of ATen operations run on one hetero device.

:class:`GraphProgram` walks the graph's nodes in order: a placeholder takes the next input (a
hetero array made from the torch tensor; parameters from :class:`.transfer.ParameterCache`); an
operation with a lowering runs as hetero operations; any other operation, or a call its lowering
refuses (:class:`.lowerings.NotLowered`), runs in torch on the host with its tensors copied there
and back, counted in the :class:`.report.Report`. Each lowered result's dtype and shape are
checked against the graph's own record (``node.meta["val"]``): a difference is a
:class:`LoweringMismatch`, never a silent one.

The first call runs eagerly. When every operation of it lowered, later calls run the same walk
under :func:`hetero.jit`: traced once, then replayed as one launch plan (the arrays' values
never read on the host). Graphs that mutate their inputs are refused at compile time
(AOTAutograd hands hetero functional graphs; a mutation would be lost on a copy).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

import hetero
from hetero.core.device import Device
from hetero.core.errors import HeteroError
from hetero.plans.errors import JitError
from hetero.torch.backend.lowerings import LOWERINGS, NotLowered
from hetero.torch.backend.lowerings.registry import TAKES_COMPLEX
from hetero.torch.backend.lowerings.shapes import DEVICE
from hetero.torch.backend.report import Report
from hetero.core.named_device import device as resolve_device
from hetero.torch.backend.transfer import DTYPES, ParameterCaches, is_parameter, to_device, to_torch


class LoweringMismatch(HeteroError, RuntimeError):
    """A lowering gave another dtype or shape than torch's: a bug in hetero (report it)."""


class MutatingGraph(HeteroError, ValueError):
    """A graph writes into one of its inputs; hetero runs functional graphs only."""


def _tree_map(value: Any, function: Callable[[Any], Any]) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_tree_map(v, function) for v in value)
    return function(value)


def _check(node: torch.fx.Node, value: Any, expected: Any) -> None:
    if isinstance(value, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(value) != len(expected):
            raise LoweringMismatch(f"{node.target} gave {len(value)} results, torch {len(expected)}")
        for v, e in zip(value, expected, strict=True):
            _check(node, v, e)
        return
    if isinstance(value, hetero.Array) and isinstance(expected, torch.Tensor):
        want_shape, want_dtype = tuple(expected.shape), DTYPES.get(expected.dtype)
        if value.shape != want_shape or value.dtype != want_dtype:
            raise LoweringMismatch(f"hetero's lowering of {node.target} ({node.name}) gave {value.dtype}{list(value.shape)}, "
                                   f"torch gives {expected.dtype}{list(want_shape)}: a bug in hetero, please report it")


def _holds_array(args: Any, kwargs: dict[str, Any]) -> bool:
    for value in (*args, *kwargs.values()):
        for leaf in (value if isinstance(value, (list, tuple)) else (value,)):
            if isinstance(leaf, hetero.Array):
                return True
    return False


def _holds_complex(args: Any, kwargs: dict[str, Any]) -> bool:
    for value in (*args, *kwargs.values()):
        for leaf in (value if isinstance(value, (list, tuple)) else (value,)):
            if isinstance(leaf, hetero.Array) and leaf.dtype.kind == "c":
                return True
    return False


def _host_tensor(args: Any, kwargs: dict[str, Any]) -> torch.dtype | None:
    """The dtype of a torch tensor among the arguments (one hetero has no dtype for), or None."""
    for value in (*args, *kwargs.values()):
        for leaf in (value if isinstance(value, (list, tuple)) else (value,)):
            if isinstance(leaf, torch.Tensor):
                return leaf.dtype
    return None


class Placement:
    """Where a compiled model's graphs run: one ``device``, or (None) ``hetero.device()`` at
    each call, the guard's current device inside ``hetero.guard``."""

    def __init__(self, device: Device | None) -> None:
        self.fixed = device
        self.name = device.name if device is not None else "hetero.device()"

    def current(self) -> Device:
        return self.fixed if self.fixed is not None else resolve_device(None)


class GraphProgram:
    """A graph compiled for ``device``; call it with the graph's inputs (a list, boxed)."""

    _boxed_call = True  # AOTAutograd passes the inputs as one list it may free

    def __init__(self, graph: torch.fx.GraphModule, placement: Placement | Device, report: Report, name: str,
                 parameters: ParameterCaches | None, jit: bool = True) -> None:
        self.module = graph
        self.placement = placement if isinstance(placement, Placement) else Placement(placement)
        self.device = self.placement.current()
        self.report = report
        self.parameters = parameters
        self.nodes = list(graph.graph.nodes)
        for node in self.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
                    and node.target._schema.is_mutable:
                raise MutatingGraph(f"the graph writes into a tensor ({node.target}, node {node.name}); "
                                    "hetero's backend runs functional graphs: compile through AOTAutograd "
                                    "(hetero.torch.compile does)")
        self.facts = report.graph(name=name, nodes=sum(n.op == "call_function" for n in self.nodes), jit=False,
                                  eager_because="not called yet")
        self.want_jit = jit
        self._jitted: Any = None
        self._host_run = False
        self._constants: dict[tuple[str, str], hetero.Array] = {}

    # -- a call --------------------------------------------------------------------
    def __call__(self, *given: Any) -> list[Any]:
        """The outputs for the inputs: one list (boxed, which AOTAutograd may free as it goes) or
        the inputs themselves (the backward's caller passes them unboxed)."""
        args = given[0] if len(given) == 1 and type(given[0]) is list else list(given)
        self.device = self.placement.current()
        inputs = [self._input(a) for a in args]
        if len(given) == 1 and type(given[0]) is list:
            given[0].clear()
        if self._jitted is not None:
            try:
                outputs = self._jitted(*inputs)
            except JitError as exc:  # a value read on the host while tracing, or a step a plan cannot hold
                self._jitted = None
                self.facts.update(jit=False, eager_because=f"hetero.jit refused it: {exc}")
                outputs = self.run(inputs, count=False)
        else:
            first = not self._host_run and self.facts["eager_because"] == "not called yet"
            outputs = self.run(inputs, count=True)
            if first:
                self._after_first_call()
        return [to_torch(o) if isinstance(o, hetero.Array) else o for o in outputs]  # torch tensors kept on the host pass

    def _after_first_call(self) -> None:
        if self._host_run:
            self.facts["eager_because"] = "some operations run on the host"
        elif not self.want_jit:
            self.facts["eager_because"] = "jit is off (options={'jit': False})"
        else:
            self._jitted = hetero.jit(self._replayable)
            self.facts.update(jit=True, eager_because=None)

    def _replayable(self, *inputs: Any) -> list[Any]:
        return self.run(list(inputs), count=False)

    def _input(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dtype not in DTYPES:  # bfloat16, complex32: stays a torch tensor, its operations on the host
                return value
            if self.parameters is not None and is_parameter(value):
                return self.parameters.on(self.device).get(value)
            return to_device(value, self.device)
        return value

    # -- the walk ------------------------------------------------------------------
    def run(self, inputs: Sequence[Any], count: bool) -> list[Any]:
        """The graph's outputs for ``inputs`` (hetero arrays and Python values)."""
        env: dict[torch.fx.Node, Any] = {}
        feed = iter(inputs)
        token = DEVICE.set(self.device)
        try:
            for node in self.nodes:
                if node.op == "placeholder":
                    env[node] = next(feed)
                elif node.op == "call_function":
                    env[node] = self._call(node, env, count)
                elif node.op == "get_attr":
                    env[node] = self._constant(node)
                elif node.op == "output":
                    values = _tree_map(node.args[0], lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
                    return list(values) if isinstance(values, (list, tuple)) else [values]
        finally:
            DEVICE.reset(token)
        raise RuntimeError("the graph has no output node")

    def _constant(self, node: torch.fx.Node) -> Any:
        value = getattr(self.module, str(node.target))
        if not isinstance(value, torch.Tensor):
            return value
        key = (str(node.target), self.device.name)
        made = self._constants.get(key)
        if made is None or made.device is not self.device:
            made = self._constants[key] = to_device(value, self.device)
        return made

    def _call(self, node: torch.fx.Node, env: dict[torch.fx.Node, Any], count: bool) -> Any:
        def value(a: Any) -> Any:
            return env[a] if isinstance(a, torch.fx.Node) else a
        args = _tree_map(node.args, value)
        kwargs = {k: _tree_map(v, value) for k, v in node.kwargs.items()}
        target = node.target
        if target is operator.getitem:
            return args[0][args[1]]
        if not isinstance(target, torch._ops.OpOverload):
            if not _holds_array(args, kwargs):
                return target(*args, **kwargs)  # Python arithmetic on sizes
            if count:
                self.report.count(getattr(target, "__name__", str(target)), "not an ATen operation")
            self._host_run = True
            return self._on_host(target, args, kwargs)
        name = str(target)
        lowering = LOWERINGS.get(target)
        reason = "no lowering yet"
        kept = _host_tensor(args, kwargs)
        if kept is not None:
            lowering, reason = None, f"a {kept} tensor (no hetero dtype: it stays in torch)"
        elif lowering is not None and target not in TAKES_COMPLEX and _holds_complex(args, kwargs):
            lowering, reason = None, "a complex tensor (its lowering takes real tensors only)"
        if lowering is not None:
            try:
                result = lowering(*args, **kwargs)
            except NotLowered as refused:
                reason = str(refused)
            else:
                _check(node, result, node.meta.get("val"))
                if count:
                    self.report.count(name)
                return result
        if count:
            self.report.count(name, reason)
        self._host_run = True
        return self._on_host(target, args, kwargs)

    def _on_host(self, target: Any, args: Any, kwargs: Any) -> Any:
        def to_host(a: Any) -> Any:
            return to_torch(a) if isinstance(a, hetero.Array) else a
        result = target(*_tree_map(args, to_host), **{k: _tree_map(v, to_host) for k, v in kwargs.items()})
        return _tree_map(result, lambda r: to_device(r, self.device)
                         if isinstance(r, torch.Tensor) and r.dtype in DTYPES else r)


__all__ = ["GraphProgram", "LoweringMismatch", "MutatingGraph", "Placement"]
