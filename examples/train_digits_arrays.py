"""Train the digits MLP of examples/train_digits.py with hetero array expressions only (no
``@hetero.kernel``): forward, softmax cross-entropy, backward and SGD, under hetero.guard.

    python examples/train_digits_arrays.py                                   # on hetero.device()
    python examples/train_digits_arrays.py --inject 'oneapi:0:launch:nth=400:lost' --compare
    hetero-run --devices cpu,auto --inject 'cpu:launch:nth=2600:crash' examples/train_digits_arrays.py --checkpoint-every 20

The options, the data, the initial weights, the hyper-parameters and the batch order are
train_digits.py's (its loop runs this file's steps), so the two runs are comparable step for
step. Each step is about 22 launches (5 matmuls on the vendor's BLAS, 6 reductions, 7 fused
elementwise kernels, 4 fused in-place updates) where the kernel version has 15, so a fault
rule's ``nth=`` must be larger to fire at the same point: ``nth=400`` is in step 18, and
``nth=2600`` (under hetero-run) in step 118.

The arrays run what the kernel version's hand-written loops compute, in other orders: the
matmuls are the BLAS's, the sums hetero's reduction trees. So the two agree to rounding, not to
the bit: their test accuracies after 600 steps (seed 0) are within 0.5 percentage points
(tests/test_train_digits_arrays.py checks 1 point after 200 steps); measured on the 2-core VM,
2026-12-01, both 96.39% on cpu, oneapi:0 and opencl:0 (see the README's Arrays section).
Within one device the array version is deterministic (fixed-order reductions, the same BLAS
call every step), so a guard recovery or a hetero-run restart ends bit-identical to a
fault-free run that went through the same devices at the same steps.
"""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # train_digits, digits_model

import numpy as np
import train_digits
from digits_model import CLASSES, Digits, Trainer

import hetero


class ArrayTrainer(Trainer):
    """digits_model.Trainer's SGD on ``state`` ({"w1", "b1", "w2", "b2"}), each step written as
    array expressions; the batches (a pure function of seed and step) are the kernel version's."""

    def __init__(self, data: Digits, state: dict[str, Any], *, seed: int, lr: float = 0.1, batch: int = 64) -> None:
        super().__init__(data, state, seed=seed, lr=lr, batch=batch)
        self.onehot = np.eye(CLASSES, dtype=np.float32)[data.y_train]  # host labels as rows of the identity
        #: the step's arithmetic: eager here, under hetero.jit in JitArrayTrainer
        self.update: Callable[..., hetero.Array] = sgd_update

    def step(self, step: int) -> hetero.Array:
        """One SGD step on the weights' device; returns the batch's mean loss (a 0-d array)."""
        s = self.state
        index = self.batch_indices(step)
        # copy=True: on cpu an array sharing NumPy's memory would turn fusion off for what reads it
        x = hetero.asarray(self.data.x_train[index], device=s["w1"].device, copy=True)
        y = hetero.asarray(self.onehot[index], device=s["w1"].device, copy=True)
        return self.update(s["w1"], s["b1"], s["w2"], s["b2"], x, y, self.lr)

    def predict(self, x: np.ndarray) -> hetero.Array:
        """The predicted classes of ``x`` (int64), on the weights' device."""
        s = self.state
        hx = hetero.asarray(x, device=s["w1"].device, copy=True)
        logits = hetero.maximum(hx @ s["w1"] + s["b1"], 0) @ s["w2"] + s["b2"]
        return hetero.argmax(logits, axis=1)

    def test_accuracy(self) -> float:
        labels = hetero.asarray(self.data.y_test.astype(np.int64), device=self.state["w1"].device, copy=True)
        return int(hetero.sum(self.predict(self.data.x_test) == labels)) / len(labels)  # exact, as NumPy's mean


def sgd_update(w1: hetero.Array, b1: hetero.Array, w2: hetero.Array, b2: hetero.Array, x: hetero.Array,
               y: hetero.Array, lr: float) -> hetero.Array:
    """One SGD step of the MLP on a batch ``x`` (one-hot labels ``y``): the weights are updated in
    place; returns the batch's mean loss (a 0-d array). Only array operations, no host reads: it
    runs as it is under :func:`hetero.jit`."""
    # forward
    h = hetero.maximum(x @ w1 + b1, 0)
    logits = h @ w2 + b2
    shifted = logits - hetero.max(logits, axis=1, keepdims=True)
    e = hetero.exp(shifted)
    total = hetero.sum(e, axis=1, keepdims=True)
    loss = hetero.mean(hetero.log(total) - hetero.sum(y * shifted, axis=1, keepdims=True))
    # backward: the gradient of the mean loss
    grad_logits = (e / total - y) * (1.0 / x.shape[0])
    grad_w2 = h.T @ grad_logits
    grad_b2 = hetero.sum(grad_logits, axis=0)
    grad_h = hetero.where(h > 0, grad_logits @ w2.T, 0)
    grad_w1 = x.T @ grad_h
    grad_b1 = hetero.sum(grad_h, axis=0)
    # update: each one fused kernel, in place
    w1 -= lr * grad_w1
    b1 -= lr * grad_b1
    w2 -= lr * grad_w2
    b2 -= lr * grad_b2
    return loss


class JitArrayTrainer(ArrayTrainer):
    """ArrayTrainer with its step's arithmetic under :func:`hetero.jit`: traced at the first step
    (per device), then replayed: the same launches, bit-identical weights, no per-operation Python."""

    def __init__(self, data: Digits, state: dict[str, Any], *, seed: int, lr: float = 0.1, batch: int = 64) -> None:
        super().__init__(data, state, seed=seed, lr=lr, batch=batch)
        self.update = hetero.jit(sgd_update)


def main(argv: list[str] | None = None) -> int:
    return train_digits.main(argv, ArrayTrainer, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
