"""``hetero.jit``: a function of hetero arrays traced once per signature, then replayed.

The first call with a signature (:mod:`hetero.plans.signature`) runs the function as eager code
would, while a :class:`hetero.plans.recorder.Recorder` notes every device operation it makes;
the result is a :class:`hetero.plans.plan.LaunchPlan`. Later calls with the same signature run
no Python of the function: they bind the arguments' buffers, allocate the outputs and replay
the recorded launches (fused kernels built once, intermediates allocated once, launch values
made once per call). See docs/arrays.md, "Compiled steps: hetero.jit", for what a plan can hold.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar, overload

from hetero.array.ndarray import Array
from hetero.core.errors import DeviceError
from hetero.core.notices import notice
from hetero.core.registry import opened_devices
from hetero.plans import plan as _plan
from hetero.plans.recorder import Recorder, tracing
from hetero.plans.signature import TreeDef, flatten, root, signature, unflatten

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

#: Plans kept per function at most (the least recently used goes first).
MAX_PLANS = 32
#: Traces of one function past which a PerformanceWarning says it keeps being traced.
RETRACE_WARNING = 8


class JitFunction(Generic[P, R]):
    """A jitted function: call it as the function; :meth:`describe` says what its plans do."""

    def __init__(self, function: Callable[P, R], max_plans: int = MAX_PLANS) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.name = getattr(function, "__qualname__", getattr(function, "__name__", "function"))
        self.max_plans = max_plans
        self.traces = 0  #: how many times the function was traced (a new signature each)
        self.replays = 0  #: how many calls replayed a plan
        self._plans: OrderedDict[Hashable, tuple[_plan.LaunchPlan, TreeDef]] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        leaves: list[Any] = []
        tree = flatten((args, kwargs), leaves)
        key = (tree, signature(leaves, self.name))
        with self._lock:
            found = self._plans.get(key)
            if found is not None:
                self._plans.move_to_end(key)
        if found is None:
            if tracing():  # inside another function's trace: the outer plan records this call's operations
                return self.function(*args, **kwargs)
            return self._trace(key, leaves, args, kwargs)
        plan, out_tree = found
        try:
            outputs = plan.replay(leaves)
        except DeviceError:
            with self._lock:  # the device failed: a later call on it (or another) traces anew
                self._plans.pop(key, None)
            raise
        self.replays += 1
        return unflatten(out_tree, outputs)[0]  # type: ignore[no-any-return]

    def _trace(self, key: Hashable, leaves: list[Any], args: Any, kwargs: Any) -> R:
        runtimes = {id(d.runtime): (d.runtime, d.name) for d in opened_devices()}
        recorder = Recorder(self.name, runtimes)
        inputs: list[tuple[int, int]] = []
        for position, leaf in enumerate(leaves):
            if isinstance(leaf, Array) and leaf.nbytes:
                owner = root(leaf)
                inputs.append((position, recorder.table.add(owner._buffer)))  # computed first if recorded
                leaf._karg = owner._karg = None  # made again while recording, so launches are found to take it
        with recorder.active():
            result = self.function(*args, **kwargs)
            results: list[Any] = []
            out_tree = flatten(result, results)
            for value in results:
                if isinstance(value, Array):
                    value._buffer  # noqa: B018  (a recorded result is computed inside the trace)
        made = _plan.build(recorder, leaves, inputs, results)
        with self._lock:
            self._plans[key] = (made, out_tree)
            while len(self._plans) > self.max_plans:
                self._plans.popitem(last=False)
            self.traces += 1
            warn = self.traces > RETRACE_WARNING and not self._warned
            self._warned |= warn
        log.debug("hetero.jit: traced %s: %s", self.name, made.describe())
        if warn:
            notice(log, f"hetero.jit: {self.name}() has been traced {self.traces} times, once per new signature "
                        f"(shapes, dtypes, devices, layouts, Python scalar values); pass a value that changes at "
                        f"every call as a 0-d array, not a Python scalar")
        return result

    def describe(self) -> list[dict[str, Any]]:
        """Per kept plan: its steps by kind, launches per replay, inputs, outputs and intermediate bytes."""
        with self._lock:
            return [made.describe() for made, _ in self._plans.values()]

    def clear(self) -> None:
        """Forget every plan (and the intermediates they keep); the next call traces again."""
        with self._lock:
            self._plans.clear()

    def __repr__(self) -> str:
        return f"<hetero.jit of {self.name}: {len(self._plans)} plan(s), {self.traces} trace(s), {self.replays} replay(s)>"


@overload
def jit(function: Callable[P, R], /, *, max_plans: int = MAX_PLANS) -> JitFunction[P, R]: ...
@overload
def jit(function: None = None, /, *, max_plans: int = MAX_PLANS) -> Callable[[Callable[P, R]], JitFunction[P, R]]: ...


def jit(function: Callable[P, R] | None = None, /, *, max_plans: int = MAX_PLANS) -> Any:
    """Compile ``function`` (a function of hetero arrays and Python scalars) into launch plans:
    ``@hetero.jit`` or ``hetero.jit(f)``.

    The first call per signature — the arguments' shapes, dtypes, devices and layouts, which of
    them share memory, and the values of Python scalars — runs ``function`` and records its device
    operations; later calls with that signature replay them without running ``function``'s Python:
    arguments bound, outputs allocated fresh, intermediates reused. Results are bit-identical to
    calling ``function`` itself. In-place updates of argument arrays (``w -= lr * g``) are replayed
    on the new call's arguments; arrays the function closes over are read (and written) as the
    same arrays at every call. Python side effects happen during the trace only.

    Reading a value on the host inside ``function`` (``bool(x)``, ``float(x)``, ``x.numpy()``, a
    function whose output shape depends on values) raises :class:`hetero.ConcretizationError`
    naming the line. ``max_plans``: signatures kept per function (least recently used dropped)."""
    if function is None:
        return lambda f: JitFunction(f, max_plans)
    return JitFunction(function, max_plans)


__all__ = ["MAX_PLANS", "JitFunction", "jit"]
