"""hetero.jit on every device: a replayed plan computes eager's bits (elementwise chains,
reductions, matmul, indexing, views, in-place updates into arguments and into views), a new
signature traces again and only a new one does, reading a value on the host while tracing is an
error naming the line, launch counters and fault injection see a replay's launches, and a jitted
training step under hetero.guard recovers from an injected fault bit-identically to the same
step run eagerly."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core.errors import DeviceLostError
from hetero.core.launch_counts import launches
from hetero.fault.injection import inject

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

RNG = np.random.default_rng(46)


def put(host: np.ndarray, device: hetero.Device) -> hetero.Array:
    return hetero.asarray(host, device=device, copy=True)


def host(value: Any) -> Any:
    if isinstance(value, hetero.Array):
        return value.numpy().copy()
    if isinstance(value, (tuple, list)):
        return [host(v) for v in value]
    if isinstance(value, dict):
        return {k: host(v) for k, v in value.items()}
    return value


def same(a: Any, b: Any) -> bool:
    a, b = host(a), host(b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def chain(x: hetero.Array, y: hetero.Array) -> Any:
    return hetero.exp(x * 0.5 - y) / (1.0 + y * y) + hetero.where(x > y, x, -y)


def reductions(x: hetero.Array, y: hetero.Array) -> Any:
    return (hetero.sum(x), hetero.mean(x, axis=0), hetero.max(x - y, axis=1, keepdims=True), hetero.argmax(y, axis=1),
            x - hetero.mean(x, axis=0))


def matmuls(x: hetero.Array, y: hetero.Array) -> Any:
    # (x @ y.T + 1.0) is recorded lazily and computed on the way into the second product
    return (x @ y.T + 1.0) @ y, x.T @ y


def views(x: hetero.Array, y: hetero.Array) -> Any:
    return x[1:, ::2] + y[:-1, 1::2], x.T, (x + y)[2], x[::-1] * 2


def in_place(x: hetero.Array, y: hetero.Array) -> Any:
    x -= 0.25 * y  # an argument updated in place
    y[1:3] = x[0:2] * 3  # a view of an argument written
    return hetero.sum(x * y, axis=1)


def indexing(x: hetero.Array, y: hetero.Array) -> Any:
    x[0] = y[1]  # a row written through an index
    x[:, -1] = 7.0
    return x[2:5, 1] * 2, x[None, :, -1] + y[..., ::-2][:, :1].T, hetero.matrix_transpose(y)[::2]


CASES: dict[str, Callable[..., Any]] = {"chain": chain, "reductions": reductions, "matmuls": matmuls,
                                         "views": views, "in_place": in_place, "indexing": indexing}


@pytest.mark.parametrize("case", list(CASES))
def test_a_replay_computes_eagers_bits(device: hetero.Device, case: str) -> None:
    function = CASES[case]
    jitted = hetero.jit(function)
    for call in range(3):
        xs, ys = RNG.standard_normal((8, 6)).astype(np.float32), RNG.standard_normal((8, 6)).astype(np.float32)
        ex, ey = put(xs, device), put(ys, device)
        jx, jy = put(xs, device), put(ys, device)
        eager, replayed = function(ex, ey), jitted(jx, jy)
        assert same(eager, replayed), f"call {call}"
        assert same([ex, ey], [jx, jy]), f"call {call}: the arguments after it"
    assert (jitted.traces, jitted.replays) == (1, 2)


def test_only_a_new_signature_traces_again(device: hetero.Device) -> None:
    jitted = hetero.jit(lambda x, s: x * s + 1)
    x = put(np.arange(6, dtype=np.float32), device)
    for expected, call in [(1, lambda: jitted(x, 2.0)), (1, lambda: jitted(put(np.ones(6, np.float32), device), 2.0)),
                           (2, lambda: jitted(x, 3.0)),  # a scalar's value is part of the signature
                           (3, lambda: jitted(put(np.arange(7, dtype=np.float32), device), 2.0)),  # shape
                           (4, lambda: jitted(put(np.arange(6, dtype=np.int32), device), 2.0)),  # dtype
                           (5, lambda: jitted(x[::2], 2.0)),  # a view's layout
                           (5, lambda: jitted(x, 3.0))]:
        result = call()
        assert jitted.traces == expected
    assert np.array_equal(result.numpy(), np.arange(6, dtype=np.float32) * 3 + 1)
    assert np.array_equal(jitted(x, 2).numpy(), np.arange(6, dtype=np.float32) * 2 + 1)  # int 2: a new kind


def test_aliased_arguments_and_returned_arguments(device: hetero.Device) -> None:
    def f(a: hetero.Array, b: hetero.Array) -> Any:
        a += b
        return a, a[1:], b * 2

    jitted = hetero.jit(f)
    base = np.arange(5, dtype=np.float32)
    for _ in range(2):
        x, y = put(base, device), put(base + 10, device)
        out = jitted(x, y)
        assert out[0] is x and np.array_equal(out[1].numpy(), (base * 2 + 10)[1:])
        z = put(base, device)
        out = jitted(z, z)  # the same array twice: its own plan
        assert np.array_equal(z.numpy(), base * 2) and np.array_equal(out[2].numpy(), base * 4)
    assert jitted.traces == 2


def test_arrays_closed_over_are_read_at_every_call(device: hetero.Device) -> None:
    scale = put(np.full(4, 2.0, np.float32), device)
    jitted = hetero.jit(lambda x: x * scale)
    x = put(np.arange(4, dtype=np.float32), device)
    jitted(x)
    scale[...] = 5.0
    assert np.array_equal(jitted(x).numpy(), np.arange(4, dtype=np.float32) * 5)


def test_arrays_made_inside_are_made_at_every_call(device: hetero.Device) -> None:
    def f(x: hetero.Array) -> Any:
        acc = hetero.zeros(x.shape, dtype=x.dtype, device=x.device)
        acc += x
        acc += hetero.asarray(np.arange(4, dtype=np.float32), device=x.device)
        return acc

    jitted = hetero.jit(f)
    for k in range(3):
        x = put(np.full(4, float(k), np.float32), device)
        assert np.array_equal(jitted(x).numpy(), np.arange(4, dtype=np.float32) + k)


@pytest.mark.parametrize("read", ["float", "bool", "numpy", "item"])
def test_reading_a_value_while_tracing_names_the_line(device: hetero.Device, read: str) -> None:
    def f(x: hetero.Array) -> hetero.Array:
        total = hetero.sum(x)
        if read == "float":
            value = float(total)  # the line named
        elif read == "bool":
            value = bool(total > 0)  # the line named
        elif read == "numpy":
            value = total.numpy()  # the line named
        else:
            value = total.item()  # the line named
        return x * value

    with pytest.raises(hetero.ConcretizationError) as caught:
        hetero.jit(f)(put(np.ones(4, np.float32), device))
    message = str(caught.value)
    assert "test_jit.py" in message and "# the line named" in message and "while it is being traced" in message


def test_indices_checked_on_the_host_are_a_clear_error(device: hetero.Device) -> None:
    # take and integer-array indexing check their indices' range on the host (an IndexError as eager
    # gives one): a value the plan cannot depend on, so not recordable (docs/arrays.md says so)
    x = put(np.arange(6, dtype=np.float32), device)
    with pytest.raises(hetero.ConcretizationError, match="take"):
        hetero.jit(lambda x, i: hetero.xp.take(x, i))(x, hetero.asarray([0, 2], device=device))


def test_arguments_it_cannot_take_are_clear_errors(device: hetero.Device) -> None:
    with pytest.raises(hetero.JitError, match="NumPy array"):
        hetero.jit(lambda x: x)(np.ones(3))


def test_a_replay_is_counted_and_faults_reach_it(device: hetero.Device) -> None:
    jitted = hetero.jit(lambda x, y: (hetero.sum(x * y), x - y))
    x, y = put(np.ones(16, np.float32), device), put(np.ones(16, np.float32), device)
    jitted(x, y)
    per_replay = jitted.describe()[0]["launches"]
    before = launches(device.name)
    jitted(x, y)
    assert launches(device.name) - before == per_replay >= 2
    with inject(f"{device.name}:launch:nth=2:lost"), pytest.raises(DeviceLostError):
        jitted(x, y)
    assert jitted.describe() == []  # the plan of a failed device is dropped: the next call traces anew


def test_a_jitted_call_inside_a_trace_is_recorded_in_the_outer_plan(device: hetero.Device) -> None:
    inner = hetero.jit(lambda x: x * 2 + 1)
    outer = hetero.jit(lambda x: inner(x) - inner(x * 3))
    x = put(np.arange(5, dtype=np.float32), device)
    inner(x)  # inner's own plan exists; inside outer's trace it is replayed (and recorded)
    for k in range(3):
        x = put(np.arange(5, dtype=np.float32) + k, device)
        assert np.array_equal(outer(x).numpy(), (np.arange(5, dtype=np.float32) + k) * -4)


def test_another_threads_work_during_a_trace_is_not_recorded(device: hetero.Device) -> None:
    started, done = threading.Event(), threading.Event()
    side = put(np.ones(1000, np.float32), device)

    def other() -> None:
        started.wait(5)
        for _ in range(20):
            side.__iadd__(1.0)
        done.set()

    def f(x: hetero.Array) -> hetero.Array:
        started.set()
        done.wait(5)
        return x + 1

    side += 0.0  # both kernels built first: two threads building at once is not what this checks
    (side[:4] + 1).numpy()
    worker = threading.Thread(target=other)
    worker.start()
    jitted = hetero.jit(f)
    x = put(np.zeros(4, np.float32), device)
    jitted(x)
    worker.join()
    assert jitted.describe()[0]["launches"] == 1
    assert np.array_equal(jitted(x).numpy(), np.ones(4, np.float32))
    assert np.array_equal(side.numpy(), np.full(1000, 21, np.float32))  # replays did not add to it  # replays did not add to it


def test_a_jitted_training_step_under_the_guard_recovers_bit_identically(state_dir: Any) -> None:
    from digits_model import initial_weights, load_digits, to_device
    from train_digits_arrays import ArrayTrainer, JitArrayTrainer

    names = [d.name for d in hetero.devices()]
    if len(names) < 2:
        pytest.skip("needs two devices")
    a, b = names[0], names[1]
    data = load_digits(0)

    def run(trainer_class: type, rule: str | None) -> tuple[dict[str, np.ndarray], list[float], str]:
        trainer = trainer_class(data, to_device(initial_weights(0), hetero.device(a)), seed=0, lr=0.2, batch=64)
        losses: list[float] = []
        with inject(rule) if rule else _nothing(), hetero.guard(trainer.state, snapshot_every=3, devices=[a, b]) as guard:
            for step in range(10):
                losses.append(float(guard.run(trainer.step, step)))
        return {k: v.numpy().copy() for k, v in trainer.state.items()}, losses, trainer.state["w1"].device.name

    rule = f"{a}:launch:nth=100:lost"  # in step 4 of 22 launches each: the plan is replaying by then
    eager_state, eager_losses, eager_device = run(ArrayTrainer, rule)
    jit_state, jit_losses, jit_device = run(JitArrayTrainer, rule)
    assert eager_device == jit_device == b
    assert eager_losses == jit_losses
    assert all(np.array_equal(eager_state[k], jit_state[k]) for k in eager_state)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_intermediates_share_buffers_where_their_lives_do_not_overlap(device: hetero.Device) -> None:
    def f(x: hetero.Array) -> hetero.Array:
        for k in range(8):
            x = hetero.sin(x) * (k + 1.0) - x  # fusion off: each operation its own buffer
        return x

    with hetero.fusion(False):
        jitted = hetero.jit(f)
        for k in range(3):
            x = put(np.linspace(-1, 1, 256, dtype=np.float32) + k, device)
            assert same(f(x), jitted(x))
    described = jitted.describe()[0]
    assert described["launches"] == 24
    assert described["intermediate_bytes"] <= 3 * 256 * 4  # 23 intermediates in at most 3 buffers


def test_a_split_launch_inside_a_trace_is_refused() -> None:
    names = [d.name for d in hetero.devices()]
    if len(names) < 2:
        pytest.skip("needs two devices")

    @hetero.kernel
    def scale(x: hetero.Array[hetero.f32]) -> None:
        i = hetero.global_id(0)
        if i < x.shape[0]:
            x[i] = x[i] * 2.0

    split = scale.split(devices=names[:2])
    x = put(np.ones(64, np.float32), hetero.device(names[0]))
    with pytest.raises(hetero.KernelLaunchError, match="cannot be recorded by hetero.jit"):
        hetero.jit(lambda x: split[64](x))(x)
    assert np.array_equal(x.numpy(), np.ones(64, np.float32))  # refused before anything ran
