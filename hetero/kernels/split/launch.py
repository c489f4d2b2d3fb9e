"""``kernel.split(devices)[n](…)``: one data-parallel launch spread over several devices.

    saxpy.split(["cpu", "oneapi:0", "opencl:0"])[n](2.0, x, y)   # y on any device
    mandelbrot.split("all")[(w, h), (8, 8)](out, 200)            # 2-D: split along rows
    histogram.split("all", combine={"counts": "sum"})[n](v, 16, counts)

What can be split, and how each array travels, is in :mod:`hetero.kernels.split.check`: arrays
written at their own rows are split, read-only ones are split or broadcast, ``combine``
arrays are merged. The rows are divided in proportion to each device's predicted speed
*including* the copies its part needs (StarPU's dmda; :mod:`hetero.scheduler.split_plan`),
from the cost model (``hetero calibrate``, sampling, and every split launch's own timings).
A kernel the model has not timed on every chosen device is split evenly, and the parts'
timings teach the model for the next launch.

The parts run at once, one thread per device; the part on the arrays' own device works on
them in place (no copy), the others on full-size buffers of their own device holding the
rows they need. Results are in the arguments when the call returns (it waits), except when
every row goes to the arrays' own device: then the call is a plain launch, asynchronous like any
other (reading the arrays waits), and only a few, ever rarer, are timed
(:func:`~hetero.scheduler.split_plan.sampled`), so that no call pays a wait just to be measured
(on a GPU, more than a split saves). Buffers on the other devices are kept by the launcher for
its next call (``SplitKernel.release()`` frees them); ``kernel.split(...)`` with the same settings
returns the same object.

Because devices may share what the model counts as independent (cores, memory bandwidth),
an adaptive launcher (the default) also measures whole launches with every row on one device,
each device a few times in a row (the one the cost model predicts fastest alone with its copies
first), and runs the fastest way (:class:`hetero.scheduler.split_plan.Outcomes`), re-measuring the
others rarely enough that it costs at most 0.5%: a split is never slower than the best single device
for long. When that way is another device that can work on the arrays' host memory itself (an
OpenCL CPU device, the arrays on ``cpu``: :mod:`hetero.kernels.split.in_place`), it does, with no copy in
or out, and such calls take a short way too (no plan, a few timed). A part that fails raises its
device's own error, with a note naming the part.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array, empty
from hetero.core.device import Device, HealthState
from hetero.core.device_list import parse_devices
from hetero.core import tracing_state
from hetero.core.errors import KernelLaunchError
from hetero.kernels.launch_args import check_divides
from hetero.core.registry import device as resolve_device
from hetero.core.registry import devices as all_devices
from hetero.core.runtime_parts import runs_kernels
from hetero.scheduler import cost_model as cost_models
from hetero.scheduler import split_plan
from hetero.scheduler.split_plan import Outcomes, replan_after, sampled
from hetero.kernels.split import in_place as split_in_place
from hetero.kernels.split.check import COMBINE_OPS, Layout, NotSplittableError, analyse, with_offset
from hetero.kernels.split.moves import Staging, bytes_moved, copy_law, identity, merge
from hetero.core.types import i64
from hetero.compiler.ir import bounds

from hetero.kernels.hooks import SPLIT_KERNEL
from hetero.kernels.kernel import Kernel
from hetero.kernels.launch_args import size_tuple

__all__ = ["NotSplittableError", "SplitKernel", "SplitLauncher", "SplitPlan", "split_kernel"]

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="hetero-split")
        return _pool


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """What a split launch did (or would do): the devices, their ``[lo, hi)`` rows along
    launch axis ``axis``, each part's predicted and (after a run) measured compute seconds,
    each array's role, and why the rows fell as they did (``basis``)."""

    axis: int
    devices: tuple[str, ...]
    bounds: tuple[tuple[int, int], ...]
    predicted_s: tuple[float, ...]
    roles: dict[str, str]
    basis: str
    measured_s: tuple[float | None, ...] = ()
    fastest_alone: str | None = None  # the device the cost model predicts fastest with all the rows


class SplitKernel:
    """A kernel bound to devices for split launches; ``split_kernel[global]`` or
    ``split_kernel[global, local]`` gives a :class:`SplitLauncher`."""

    def __init__(self, kernel: Kernel, devices: Sequence[str | Device] | str, combine: dict[str, str],
                 model: cost_models.CostModel | None, adaptive: bool = True) -> None:
        self.kernel = kernel
        self.adaptive = adaptive
        self.devices = _choose(kernel.name, devices)
        self.combine = dict(combine)
        for name, op in self.combine.items():
            if op not in COMBINE_OPS:
                raise NotSplittableError(f"{kernel.name}.split: combine[{name!r}] is {op!r}; use one of "
                                         f"{', '.join(COMBINE_OPS)}")
        self.model = model
        self._launchers: dict[Any, SplitLauncher] = {}

    def __getitem__(self, config: Any) -> SplitLauncher:
        sizes: tuple[tuple[int, ...], tuple[int, ...] | None]
        if isinstance(config, tuple) and len(config) == 2 and not isinstance(config[0], (int, np.integer)):
            sizes = (size_tuple(config[0], "global size"), size_tuple(config[1], "local size"))
        else:
            sizes = (size_tuple(config, "global size"), None)
        if sizes not in self._launchers:
            self._launchers[sizes] = SplitLauncher(self, *sizes)
        return self._launchers[sizes]

    def __repr__(self) -> str:
        return f"<hetero split {self.kernel.name} over {', '.join(d.name for d in self.devices)}>"

    def release(self) -> None:
        """Free the buffers kept on the other devices for the next launch (they hold full-size
        copies of the split arrays) and forget plans and measurements."""
        self._launchers.clear()


_split_kernels: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], SplitKernel]] = weakref.WeakKeyDictionary()


def split_kernel(kernel: Kernel, devices: Sequence[str | Device] | str, combine: dict[str, str],
                 model: cost_models.CostModel | None, adaptive: bool = True) -> SplitKernel:
    """The :class:`SplitKernel` for these settings, the same object each time, so that its plans,
    measurements and buffers serve every ``kernel.split(...)[n](...)`` in a loop."""
    chosen = _choose(kernel.name, devices)
    key = (tuple(d.name for d in chosen), tuple(sorted(combine.items())), model, adaptive)
    per_kernel = _split_kernels.setdefault(kernel, {})
    found = per_kernel.get(key)
    if found is None:
        if len(per_kernel) >= 32:
            per_kernel.clear()
        found = per_kernel[key] = SplitKernel(kernel, chosen, combine, model, adaptive)
    return found


def _choose(kernel: str, spec: Sequence[str | Device] | str) -> list[Device]:
    """The devices ``spec`` names (:func:`hetero.core.device_list.parse_devices`: ``"cpu,oneapi:0"`` or a
    list; ``"all"``: every healthy, unquarantined device that runs kernels)."""
    entries = parse_devices(spec)
    if entries == ["all"]:
        from hetero.fault.quarantine import quarantined_ids

        quarantined = quarantined_ids()
        chosen = [d for d in all_devices() if runs_kernels(d.runtime)
                  and d.stable_id not in quarantined and d.health().state is not HealthState.UNHEALTHY]
        if not chosen:
            raise KernelLaunchError(f"{kernel}.split('all'): no healthy, unquarantined device here runs kernels "
                                    "(see 'hetero devices' and 'hetero quarantine')")
        return chosen
    chosen = [resolve_device(s) for s in entries]
    names = [d.name for d in chosen]
    if not chosen or len(set(names)) != len(names):
        raise KernelLaunchError(f"{kernel}.split: devices must be distinct and at least one, got {names}")
    for d in chosen:
        if not runs_kernels(d.runtime):
            raise KernelLaunchError(f"{kernel}.split: {d.name} cannot run hetero kernels; leave it out")
    return chosen


_offset_kernels: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()


def _offset_kernel(kernel: Kernel, axis: int) -> Kernel:
    """``kernel`` compiled with the row offset built in (see :func:`with_offset`), one per axis."""
    per_axis = _offset_kernels.setdefault(kernel, {})
    found = per_axis.get(axis)
    if found is not None:
        return found  # type: ignore[no-any-return]

    class OffsetKernel(Kernel):
        def fingerprint(self) -> str:
            return f"{kernel.fingerprint()}+split-axis{axis}"

        def param_names(self) -> list[str]:
            return [*kernel.param_names(), "hetero_split_offset", "hetero_split_total"]

        def declared(self) -> list[Any]:
            return [*kernel.declared(), i64, i64]

        def _lowered(self, types: tuple[Any, ...], checked: bool = False) -> Any:
            with self._lock:
                if types not in self._ir:
                    self._ir[types] = with_offset(kernel._lowered(types[:-2]), axis)
                if not checked:
                    return self._ir[types]
                key = (types, "bounds")  # the checked mode (HETERO_BOUNDS_CHECK), as Kernel._lowered keys it
                if key not in self._ir:
                    self._ir[key] = bounds.instrument(self._ir[types])[0]
                return self._ir[key]

        def cost_key(self) -> str:
            return kernel.cost_key()

    made = per_axis[axis] = OffsetKernel(kernel.py_func)
    return made


@dataclasses.dataclass(frozen=True)
class _Plain:
    """What a call of a plan key needs while its rows all go to the arrays' device, by the plan or by
    measurement (``walls`` then says when another way is to be measured)."""

    plan: SplitPlan  # the plan served (the cost model's)
    whole_key: tuple[Any, ...]  # its count of whole launches in SplitLauncher._whole
    launcher: Any  # the kernel's launcher for these sizes
    reported: SplitPlan  # what such a call returns (and leaves in .last)
    walls: Outcomes | None
    order: list[str]  # the devices Outcomes.choose is asked about
    device: Device | None = None  # measured fastest alone, and working on the arrays in place: where
    # the rows go (None: the arrays' device, plain asynchronous launches)
    aliased: tuple[int, ...] = ()  # the arrays it works on in place (all those the kernel uses)
    written: tuple[int, ...] = ()  # those of them it writes
    axis: int = 0  # the launch axis the rows are counted along


class SplitLauncher:
    """``kernel.split(devices)[global, local]``: call it with the kernel's arguments."""

    def __init__(self, owner: SplitKernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
        self.owner = owner
        self.global_size = global_size
        self.local_size = local_size
        self.last: SplitPlan | None = None
        self._layouts: dict[tuple[Any, ...], Layout] = {}
        self._buffers: dict[tuple[Any, ...], Array] = {}
        # plan, launches it has served, launches it serves before the next plan
        self._plans: dict[tuple[Any, ...], tuple[SplitPlan, int, int]] = {}
        self._walls: dict[tuple[Any, ...], Outcomes] = {}
        self._whole: dict[tuple[Any, ...], int] = {}  # launches run whole on the arrays' device, per plan key and alone
        self._queued: set[Device] = set()  # devices holding untimed launches not yet waited for
        self._layout_by_key: dict[tuple[Any, ...], Layout] = {}  # layout() by plan key: no type inference per call
        self._plain: dict[tuple[Any, ...], _Plain] = {}  # per plan key, while its calls run whole on the arrays' device
        self._alone_plans: dict[tuple[int, str, int], tuple[SplitPlan, SplitPlan]] = {}
        self._lock = threading.Lock()

    # -- planning -----------------------------------------------------------------------
    def layout(self, args: Sequence[Any]) -> Layout:
        kernel = self.owner.kernel
        types = kernel.arg_types(args)
        if types not in self._layouts:
            function = kernel._lowered(types)
            layout = analyse(function, kernel.name, len(self.global_size), self.owner.combine)
            if layout.needs_local_size and self.local_size is None:
                raise NotSplittableError(
                    f"{kernel.name} uses work-groups along launch axis {layout.axis} (group_id, barrier or local "
                    f"arrays); split it with a local size, {kernel.name}.split(…)[global, local](…), so that every "
                    "part keeps whole work-groups")
            self._layouts[types] = layout
        return self._layouts[types]

    def plan(self, *args: Any) -> SplitPlan:
        """The partition a call with ``args`` would use, without running anything."""
        source = _source_device(self.owner.kernel.name, args)
        layout = self.layout(args)
        return self._plan(layout, source, args)

    def _plan(self, layout: Layout, source: Device, args: Sequence[Any]) -> SplitPlan:
        kernel = self.owner.kernel
        model = self.owner.model or cost_models.default_model()
        devices = self.owner.devices
        axis = layout.axis
        total = self.global_size[axis]
        granularity = self.local_size[axis] if self.local_size else 1
        # At most ~1024 chunks: finer shares gain nothing measurable and cost planning time.
        granularity *= max(1, -(-total // (granularity * 1024)))
        per_row_items = max(int(np.prod(self.global_size)) // max(total, 1), 1)
        key = kernel.cost_key()
        moved = bytes_moved(kernel.param_names(), layout, args)
        predictors = [model.predictor(key, d.stable_id) for d in devices]
        untimed = [d.name for d, p in zip(devices, predictors, strict=True) if p is None]
        fastest: str | None = None
        if untimed:
            rows = split_plan.even(total, len(devices), granularity)
            basis = f"even: no timings of {kernel.name} on {', '.join(untimed)} yet (this launch records them)"
            predicted: tuple[float, ...] = tuple(0.0 for _ in devices)
        else:
            def cost(d: Device, compute: Any) -> split_plan.PartTime:
                copies = copy_law(model, source, d, moved)

                def time_for(rows: int) -> float:
                    return compute(rows * per_row_items) + copies(rows) if rows > 0 else 0.0
                return time_for

            times = [cost(d, p) for d, p in zip(devices, predictors, strict=True)]
            partition = split_plan.partition(total, times, granularity)
            rows, predicted = partition.rows, partition.predicted_s
            basis = "cost model: compute + copies (dmda)"
            whole = [time_for(total) for time_for in times]
            fastest = devices[whole.index(min(whole))].name
        bounds, lo = [], 0
        for count in rows:
            bounds.append((lo, lo + count))
            lo += count
        return SplitPlan(axis, tuple(d.name for d in devices), tuple(bounds), tuple(predicted), dict(layout.roles), basis,
                         fastest_alone=fastest)

    def _current_plan(self, layout: Layout, source: Device, args: Sequence[Any], key: tuple[Any, ...],
                      keep: bool = False) -> SplitPlan:
        """The plan for these arguments, made afresh after it has served
        :func:`~hetero.scheduler.split_plan.replan_after` launches (the model learns from each
        launch; planning every time would cost more than it could save), unless ``keep`` (the launch
        does not use it) and there is one."""
        cached = self._plans.get(key)
        if cached is not None and (cached[1] < cached[2] or keep) and not cached[0].basis.startswith("even"):
            self._plans[key] = (cached[0], cached[1] + 1, cached[2])
            return cached[0]
        if len(self._plans) >= 64:
            self._plans.clear()
        start = time.perf_counter()
        plan = self._plan(layout, source, args)
        served = 0 if cached is None or cached[0].basis.startswith("even") else cached[2]
        self._plans[key] = (plan, 1, replan_after(max(plan.predicted_s, default=0.0), time.perf_counter() - start, served))
        return plan

    # -- running ------------------------------------------------------------------------
    def __call__(self, *args: Any) -> SplitPlan:
        kernel = self.owner.kernel
        if tracing_state.active():
            # its parts run on other threads, and each plan follows the last launches' measured times
            raise KernelLaunchError(f"{kernel.name}.split cannot be recorded by hetero.jit: a split launch runs its "
                                    "parts on threads of its own and plans each launch from measured times; call it "
                                    "outside the jitted function, or launch the kernel on one device inside it")
        source: Device | None = None
        parts_of_key: list[Any] = []  # the plan key: the source's name, each array's shape and dtype,
        # each other argument's type (made in the same pass as the checks)
        for position, arg in enumerate(args):
            if type(arg) is not Array:
                parts_of_key.append(type(arg))
                continue
            if arg._base is not None and not arg._owns_layout():
                raise KernelLaunchError(f"{kernel.name}.split: argument {position} is a strided view (shape "
                                        f"{arg.shape}, strides {arg.strides}, offset {arg.offset}); a split launch "
                                        "divides whole buffers, so pass a contiguous array: view.copy(), and write "
                                        "it back after")
            if source is None:
                source = arg._device
            elif arg._device is not source:
                source = _source_device(kernel.name, args)  # raises: the arrays are on several devices
            parts_of_key.append((arg.shape, arg.dtype))
        if source is None:
            source = _source_device(kernel.name, args)  # raises: no array
        if self.local_size is not None and len(self.local_size) == len(self.global_size):
            check_divides(kernel.name, self.global_size, self.local_size)  # the whole launch, as unsplit
        key = (source.name, *parts_of_key)
        plain = self._plain.get(key)
        if plain is not None:  # every row on the arrays' device, as last time: plain launches, counted
            with self._lock:  # as below, without planning anything again (a new plan, a timed launch
                served = self._plans.get(key)  # or another way to measure goes the long way)
                count = self._whole.get(plain.whole_key, 0)
                runs_on = source if plain.device is None else plain.device
                # in place, a sampled launch is timed here (a plain one goes the long way), and so
                # is every launch of a round measuring a way, and of the chosen way's right before
                # a probe of another (Outcomes.next_launch)
                sample = sampled(count)
                way, fresh = (runs_on.name, False) if plain.walls is None else plain.walls.next_launch(plain.order)
                timed = sample or fresh
                # a plan expired is made again the long way, except while the rows all go to one
                # device by the measured choice (walls): no launch uses it then, until a probe splits
                if (served is not None and served[0] is plain.plan and (served[1] < served[2] or plain.walls is not None)
                        and (plain.device is not None or not timed) and way == runs_on.name):
                    if plain.device is None:
                        plain.launcher(*args)  # plain, not waited for
                        self._queued.add(source)
                    else:  # untimed launches on the arrays first
                        for device in self._queued:
                            device.synchronize()
                        self._queued.clear()
                        start = time.perf_counter()
                    if plain.device is None or split_in_place.run(plain.device, plain.launcher, args, plain.aliased,
                                                                  plain.written):
                        if plain.device is not None and timed and plain.walls is not None:
                            seconds = time.perf_counter() - start
                            plain.walls.add(runs_on.name, seconds)
                            if sample:
                                self._learn(args, [(runs_on, 0, self.global_size[plain.axis])],
                                            {runs_on.name: seconds}, plain.axis)
                        if plain.walls is not None:
                            plain.walls.launches += 1
                        self._plans[key] = (served[0], served[1] + 1, served[2])
                        self._whole[plain.whole_key] = count + 1
                        self.last = plain.reported
                        return plain.reported
                    del self._plain[key]  # an array it cannot work on in place: the long way
        layout = self._layout_by_key.get(key)
        if layout is None:
            layout = self.layout(args)
            if len(self._layout_by_key) >= 64:
                self._layout_by_key.clear()
            self._layout_by_key[key] = layout
        with self._lock:
            walls = self._walls.get(key)
            if walls is None:
                walls = self._walls[key] = Outcomes(source.name)
            cached = self._plans.get(key)
            # a launch the measured choice runs on one device alone uses no plan: the last one serves
            # (made again when a launch splits), not a ~1 ms plan afresh for nothing
            alone_next = (self.owner.adaptive and len(self.owner.devices) > 1 and bool(walls.split) and cached is not None
                          and walls.peek(self._alone_order(cached[0], source)) is not None)
            plan = served_plan = self._current_plan(layout, source, args, key, keep=alone_next)
            parts = [(d, lo, hi) for d, (lo, hi) in zip(self.owner.devices, plan.bounds, strict=True) if hi > lo]
            order = self._alone_order(plan, source)
            way, fresh = None, False  # fresh: a launch right before a probe, timed whatever it runs
            # A plan with every row on the arrays' device is a way too: measured against each device
            # alone as a split is (the model may not know another device runs the kernel faster)
            measuring = self.owner.adaptive and len(self.owner.devices) > 1 and bool(parts)
            if measuring:
                way, fresh = walls.next_launch(order)  # what choose() answers, and whether it is timed, in one look
                walls.launches += 1
                fresh = fresh or (way is None and not walls.split)  # the planned way's first time: timed
            alone = way is not None
            if alone:
                single = next(d for d in self.owner.devices if d.name == way)
                plan = self._alone_plan(plan, single, layout, walls)
                parts = [(single, 0, self.global_size[layout.axis])]
            whole = len(parts) == 1 and parts[0][0] is source  # all on the arrays' device
            whole_key = (key, alone)
            count = self._whole.get(whole_key, 0) if whole else 0
            if len(self._whole) > 256:
                self._whole.clear()
            if whole and not sampled(count) and not fresh:
                self._whole[whole_key] = count + 1
                _launch(kernel, self.global_size, self.local_size, args)  # plain, not waited for
                self._queued.add(source)
                self.last = dataclasses.replace(plan, measured_s=(None,) * len(self.owner.devices))
                if len(self._plain) >= 64:  # the next such calls take the short way (at the top)
                    self._plain.clear()
                self._plain[key] = _Plain(served_plan, whole_key, _launcher(kernel, self.global_size, self.local_size),
                                          self.last, walls if alone else None, order)
                return self.last
            for device in self._queued:  # untimed launches still queued: done before a sample, or
                device.synchronize()  # parts that read the arrays' memory from the host, start
            self._queued.clear()
            start = time.perf_counter()
            in_place = False
            if whole:  # a plain launch, timed
                self._whole[whole_key] = count + 1
                seconds = _timed(kernel, self.global_size, self.local_size, args, source)
                measured: list[float | None] = [seconds if d is source else None for d in self.owner.devices]
                self._learn(args, [(source, 0, self.global_size[layout.axis])], {source.name: seconds}, layout.axis)
            elif alone:  # all on another device: its compute time teaches the model on the sampled launches
                alone_key = ("alone", key, way)  # only (the walls below take every one)
                count = self._whole.get(alone_key, 0)
                self._whole[alone_key] = count + 1
                measured, in_place = self._run(layout, source, args, parts, plan, learn=sampled(count))
                if in_place:  # the next such calls take the short way (at the top), untimed but for samples
                    if len(self._plain) >= 64:
                        self._plain.clear()
                    names = kernel.param_names()
                    indices = [i for i, name in enumerate(names) if layout.roles.get(name) is not None]
                    self._plain[key] = _Plain(served_plan, alone_key, _launcher(kernel, self.global_size, self.local_size),
                                              dataclasses.replace(plan, measured_s=(None,) * len(self.owner.devices)),
                                              walls, order, single, tuple(indices),
                                              tuple(i for i in indices if names[i] in layout.written), layout.axis)
            else:
                measured, _ = self._run(layout, source, args, parts, plan)
            if measuring and None not in [measured[self.owner.devices.index(d)] for d, _, _ in parts]:
                # not when a part compiled: that is no sample. In place, the launch alone, as the
                # short way runs it (and as a timed launch on the arrays' device is measured)
                wall = measured[self.owner.devices.index(parts[0][0])] if in_place else None
                walls.add(way, wall if wall is not None else time.perf_counter() - start)
            self.last = dataclasses.replace(plan, measured_s=tuple(measured))
        return self.last

    def _alone_order(self, plan: SplitPlan, source: Device) -> list[str]:
        """The devices that may run a launch alone, in the order they are first measured: the one the
        cost model predicts fastest alone (its copies counted), the arrays' own device, the others."""
        names = [d.name for d in self.owner.devices]
        first = [name for name in (plan.fastest_alone, source.name) if name in names]
        return list(dict.fromkeys([*first, *names]))

    def _alone_plan(self, plan: SplitPlan, device: Device, layout: Layout, walls: Outcomes) -> SplitPlan:
        """``plan`` with every row on ``device``: made once per plan, device and measurement."""
        memo = (id(plan), device.name, walls.version)
        found = self._alone_plans.get(memo)
        if found is not None and found[0] is plan:
            return found[1]
        if len(self._alone_plans) >= 64:
            self._alone_plans.clear()
        total = self.global_size[layout.axis]
        bounds = tuple((0, total) if d is device else (total, total) for d in self.owner.devices)
        if not all(d.name in walls.alone for d in self.owner.devices):
            basis = f"alone on {device.name}: measuring it against the split"
        elif walls.best() == device.name:
            basis = f"alone on {device.name}: measured fastest ({walls.describe()})"
        else:
            basis = f"alone on {device.name}: re-measuring it ({walls.describe()})"
        alone = dataclasses.replace(plan, bounds=bounds, predicted_s=tuple(0.0 for _ in bounds), basis=basis)
        self._alone_plans[memo] = (plan, alone)
        return alone

    def _run(self, layout: Layout, source: Device, args: Sequence[Any], parts: list[tuple[Device, int, int]],
             plan: SplitPlan, learn: bool = True) -> tuple[list[float | None], bool]:
        """Run the parts and wait: each device's compute seconds (None where its launch compiled),
        and whether the part (there was one) worked on the arrays' host memory in place."""
        kernel = self.owner.kernel
        names = kernel.param_names()
        total = self.global_size[layout.axis]
        staged = Staging(source, names, layout, args, [(lo, hi) for d, lo, hi in parts if d is not source])
        combined: dict[int, list[np.ndarray]] = {i: [] for i, n in enumerate(names) if layout.roles.get(n) == "combine"}
        gathered: list[tuple[int, int, np.ndarray]] = []  # (argument, byte offset, rows) to upload to a non-host source
        # All the rows on one other device, the arrays in host memory: that device works on them in
        # place where it can (an OpenCL CPU device: no copy in or out), on copies where it cannot.
        in_place = len(parts) == 1 and staged.host and "combine" not in layout.roles.values()
        role_indices = [i for i, name in enumerate(names) if layout.roles.get(name) is not None]
        ran_in_place: list[bool] = []  # whether every array was worked on in place

        def run_part(device: Device, lo: int, hi: int) -> float | None:
            aliases: dict[int, Any] = {}
            local_args = list(args)
            if device is not source:
                if in_place:
                    aliases = {i: alias for i in role_indices if (alias := split_in_place.alias(device, args[i])) is not None}
                    local_args = split_in_place.arguments(device, args, aliases)
                    ran_in_place.append(len(aliases) == len(role_indices))
                for i in role_indices:
                    if i not in aliases:
                        local_args[i] = self._part_buffer(device, i, args[i], layout.roles[names[i]], staged, lo, hi)
            written = [alias for i, alias in aliases.items() if names[i] in layout.written]
            done = (lambda: split_in_place.finish(device, written)) if aliases else None
            if (lo, hi) == (0, total):  # all the rows: the kernel itself, as a plain launch compiles it
                seconds = _timed(kernel, self.global_size, self.local_size, local_args, device, done)
            else:
                size = list(self.global_size)
                size[layout.axis] = hi - lo
                seconds = _timed(_offset_kernel(kernel, layout.axis), tuple(size), self.local_size,
                                 [*local_args, lo, total], device, done)
            if device is not source:
                for i, name in enumerate(names):
                    role = layout.roles.get(name)
                    if i in aliases:
                        continue
                    if role == "split" and name in layout.written:
                        span = staged.rows(args[i], lo, hi)
                        if span is not None:
                            # A host source takes the rows straight into its memory; others after the parts.
                            host = args[i].buffer[span[0]:span[1]] if staged.host else np.empty(span[1] - span[0], np.uint8)
                            self._copy(device, "d2h", host, local_args[i].buffer, span[0])
                            if not staged.host:
                                gathered.append((i, span[0], host))
                    elif role == "combine":
                        combined[i].append(local_args[i].numpy().copy())
            return seconds

        times: dict[str, float | None] = {}
        errors: list[tuple[Device, Exception]] = []
        if len(parts) == 1:  # one part (all the rows on one other device): run here, no thread to hop to
            d, lo, hi = parts[0]
            try:
                times[d.name] = run_part(d, lo, hi)
            except Exception as exc:  # noqa: BLE001 - raised below, as a part's error
                errors.append((d, exc))
        else:
            pool = _threads()
            futures = [(d, pool.submit(run_part, d, lo, hi)) for d, lo, hi in parts]
            for d, future in futures:
                try:
                    times[d.name] = future.result()
                except Exception as exc:  # noqa: BLE001 - every part finishes before the first error is raised
                    errors.append((d, exc))
        if errors:
            # The device's own error, unwrapped, so that fault handling classifies it as usual.
            device, error = errors[0]
            others = ", ".join(d.name for d, _ in errors[1:])
            lo, hi = next((lo, hi) for d, lo, hi in parts if d is device)
            error.add_note(f"raised by the part of {kernel.name}.split on {device.name} (rows {lo}..{hi})"
                           + (f"; the parts on {others} failed too" if others else ""))
            raise error
        for i, byte_offset, host in gathered:
            source.runtime.upload(args[i].buffer, host, byte_offset)
        for i, partials in combined.items():
            merge(args[i], partials, self.owner.combine[names[i]])
        if learn:
            self._learn(args, parts, times, layout.axis)
        return [times.get(d.name) for d in self.owner.devices], bool(ran_in_place) and all(ran_in_place)

    def _learn(self, args: Sequence[Any], parts: list[tuple[Device, int, int]], times: dict[str, float | None],
               axis: int) -> None:
        """Record the parts' compute times in the cost model (the plan of the next launch uses them)."""
        kernel = self.owner.kernel
        model = self.owner.model or cost_models.default_model()
        per_row = int(np.prod(self.global_size)) // max(self.global_size[axis], 1)
        signature = kernel.signature(kernel.arg_types(args))
        for d, lo, hi in parts:
            seconds = times.get(d.name)
            if seconds is not None:
                model.record(kernel.cost_key(), d.stable_id, (hi - lo) * per_row, seconds, signature, d.name)

    def _copy(self, device: Device, direction: str, dst: Any, src: Any, offset: int = 0) -> None:
        """One copy to (``h2d``) or from (``d2h``) a part's device, timed into the cost model:
        the copies of split launches teach the model what copies cost while parts run."""
        start = time.perf_counter()
        if direction == "h2d":
            device.runtime.upload(dst, src, offset)
        else:
            device.runtime.download(dst, src, offset)
        seconds = time.perf_counter() - start
        nbytes = src.nbytes if direction == "h2d" else dst.nbytes
        model = self.owner.model or cost_models.default_model()
        model.record_transfer(device.stable_id, direction, nbytes, seconds, device_name=device.name)

    def _part_buffer(self, device: Device, index: int, array: Array, role: str, staged: Staging,
                     lo: int, hi: int) -> Array:
        key = (device.name, index, array.shape, array.dtype)
        with staged.lock:
            buffer = self._buffers.get(key)
            if buffer is None:
                buffer = self._buffers[key] = empty(array.shape, array.dtype, device=device)
        if not buffer.nbytes:
            return buffer
        if role == "broadcast":
            self._copy(device, "h2d", buffer.buffer, staged.whole(index, array))
        elif role == "combine":
            start = identity(self.owner.combine[self.owner.kernel.param_names()[index]], array.dtype)
            self._copy(device, "h2d", buffer.buffer, np.full(array.shape, start, array.dtype))
        else:
            span = staged.rows(array, lo, hi)
            if span is not None:
                self._copy(device, "h2d", buffer.buffer, staged.flat(index, array)[span[0]:span[1]], span[0])
        return buffer


def _launcher(kernel: Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> Any:
    return kernel[(global_size, local_size)] if local_size else kernel[global_size]


def _launch(kernel: Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
            args: Sequence[Any]) -> None:
    _launcher(kernel, global_size, local_size)(*args)


def _timed(kernel: Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
           args: Sequence[Any], device: Device, wait: Callable[[], object] | None = None) -> float | None:
    """Launch and wait (``wait``: what waits, instead of synchronizing the device: ending the
    launch's host aliases waits for it too); the seconds it took, or None when this launch
    compiled the kernel (a compile is not a sample of the kernel's speed)."""
    compiled = kernel._key_of(args) in kernel._dispatch
    device.synchronize()
    start = time.perf_counter()
    _launch(kernel, global_size, local_size, args)
    if wait is None:
        device.synchronize()
    else:
        wait()
    return time.perf_counter() - start if compiled else None


def _source_device(kernel: str, args: Sequence[Any]) -> Device:
    found = {a.device.name: a.device for a in args if isinstance(a, Array)}
    if len(found) != 1:
        raise KernelLaunchError(f"{kernel}.split: the array arguments must be on one device (the caller's), "
                                f"found {sorted(found) or 'none'}")
    return next(iter(found.values()))


SPLIT_KERNEL.register(split_kernel)  # kernel.split(...) asks it (see hetero.core.hooks)
