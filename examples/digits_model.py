"""The digits MLP of examples/train_digits.py: data, initial weights, one SGD step and the
test accuracy, written with the hetero kernels of digits_kernels.py only.

A step reads its weights from the ``state`` dict on every call and works on whatever device
``hetero.device()`` names, so under ``hetero.guard`` it follows the guard when the work
moves. Its mini-batch is a pure function of (seed, step): replaying a step after a fault
trains on exactly the same examples.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from digits_kernels import (  # examples/ is on sys.path when an example runs
    bias_act,
    column_sum,
    matmul,
    matmul_nt,
    matmul_tn,
    relu_backward,
    sgd_matrix,
    sgd_vector,
    softmax_xent,
)

import hetero

INPUTS, CLASSES = 64, 10


@dataclasses.dataclass(frozen=True)
class Digits:
    """scikit-learn's bundled 8x8 digits (1797 images, no download), split 80/20, pixels in [0, 1]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits(seed: int) -> Digits:
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    data = sklearn_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return Digits(np.ascontiguousarray(x_train), np.ascontiguousarray(y_train),
                  np.ascontiguousarray(x_test), np.ascontiguousarray(y_test))


def initial_weights(seed: int, hidden: int = 32) -> dict[str, np.ndarray]:
    """He-initialised weights and zero biases of a 64 -> hidden -> 10 MLP, from ``seed``."""
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((INPUTS, hidden)) * np.sqrt(2.0 / INPUTS)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, CLASSES)) * np.sqrt(2.0 / hidden)).astype(np.float32),
        "b2": np.zeros(CLASSES, np.float32),
    }


def to_device(weights: dict[str, np.ndarray], device: hetero.Device) -> dict[str, Any]:
    return {name: hetero.asarray(value, device=device, copy=True) for name, value in weights.items()}


class Workspace:
    """Activations and gradients of one batch size on one device, allocated once."""

    def __init__(self, device: hetero.Device, rows: int, hidden: int) -> None:
        def zeros(*shape: int, dtype: Any = np.float32) -> hetero.Array:
            return hetero.zeros(shape, dtype=dtype, device=device)

        self.x, self.y = zeros(rows, INPUTS), zeros(rows, dtype=np.int32)
        self.h, self.logits, self.grad_logits = zeros(rows, hidden), zeros(rows, CLASSES), zeros(rows, CLASSES)
        self.loss, self.grad_h = zeros(rows), zeros(rows, hidden)
        self.grad_w1, self.grad_b1 = zeros(INPUTS, hidden), zeros(hidden)
        self.grad_w2, self.grad_b2 = zeros(hidden, CLASSES), zeros(CLASSES)


class Trainer:
    """Mini-batch SGD on ``state`` ({"w1", "b1", "w2", "b2"}: hetero arrays on one device)."""

    def __init__(self, data: Digits, state: dict[str, Any], *, seed: int, lr: float = 0.1, batch: int = 64) -> None:
        self.data, self.state, self.seed, self.lr, self.batch = data, state, seed, np.float32(lr), batch
        self.steps_per_epoch = len(data.x_train) // batch
        self._workspaces: dict[str, Workspace] = {}
        self._order: tuple[int, np.ndarray] | None = None

    def batch_indices(self, step: int) -> np.ndarray:
        """The examples of ``step``: epoch e's shuffle comes from (seed, e) alone."""
        epoch, position = divmod(step, self.steps_per_epoch)
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, np.random.default_rng([self.seed, epoch]).permutation(len(self.data.x_train)))
        return self._order[1][position * self.batch:(position + 1) * self.batch]

    def workspace(self, device: hetero.Device) -> Workspace:
        work = self._workspaces.get(device.name)
        if work is None:
            work = self._workspaces[device.name] = Workspace(device, self.batch, self.state["w1"].shape[1])
        return work

    def step(self, step: int) -> hetero.Array:
        """One SGD step on the current device; returns the per-example loss (valid until the next step)."""
        s = self.state
        w1, b1, w2, b2 = s["w1"], s["b1"], s["w2"], s["b2"]
        work = self.workspace(w1.device)
        rows, hidden = self.batch, w1.shape[1]
        index = self.batch_indices(step)
        hetero.copyto(work.x, self.data.x_train[index])
        hetero.copyto(work.y, self.data.y_train[index])
        # forward
        matmul[hidden, rows](work.x, w1, work.h)
        bias_act[hidden, rows](work.h, b1, 1)
        matmul[CLASSES, rows](work.h, w2, work.logits)
        bias_act[CLASSES, rows](work.logits, b2, 0)
        softmax_xent[rows](work.logits, work.y, work.grad_logits, work.loss)
        # backward
        matmul_tn[CLASSES, hidden](work.h, work.grad_logits, work.grad_w2)
        column_sum[CLASSES](work.grad_logits, work.grad_b2)
        matmul_nt[hidden, rows](work.grad_logits, w2, work.grad_h)
        relu_backward[hidden, rows](work.grad_h, work.h)
        matmul_tn[hidden, INPUTS](work.x, work.grad_h, work.grad_w1)
        column_sum[hidden](work.grad_h, work.grad_b1)
        # update
        sgd_matrix[hidden, INPUTS](w1, work.grad_w1, self.lr)
        sgd_vector[hidden](b1, work.grad_b1, self.lr)
        sgd_matrix[CLASSES, hidden](w2, work.grad_w2, self.lr)
        sgd_vector[CLASSES](b2, work.grad_b2, self.lr)
        return work.loss

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The model's logits for ``x``, computed on the device that holds the weights."""
        s = self.state
        device, rows, hidden = s["w1"].device, len(x), s["w1"].shape[1]
        hx = hetero.asarray(x, device=device, copy=True)
        h = hetero.empty((rows, hidden), device=device)
        out = hetero.empty((rows, CLASSES), device=device)
        matmul[hidden, rows](hx, s["w1"], h)
        bias_act[hidden, rows](h, s["b1"], 1)
        matmul[CLASSES, rows](h, s["w2"], out)
        bias_act[CLASSES, rows](out, s["b2"], 0)
        return np.array(out.numpy(), copy=True)

    def test_accuracy(self) -> float:
        predicted = self.logits(self.data.x_test).argmax(axis=1)
        return float((predicted == self.data.y_test).mean())
