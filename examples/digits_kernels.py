"""The kernels of the digits MLP (examples/train_digits.py): hetero kernels only, so the same
training runs on every device kind (Numba on the CPU, OpenCL C on oneapi/opencl, CUDA C or
HIP on GPUs).

Every output element is computed by one work-item with a sequential loop in a fixed order
(no atomics, no reduction trees), so two devices differ only by their floating-point
rounding (FMA contraction, ``exp``/``log``), never by summation order.
"""

from __future__ import annotations

import math

import hetero
from hetero import f32, i32

Matrix = hetero.Array[f32]
Vector = hetero.Array[f32]


@hetero.kernel
def matmul(a: Matrix, b: Matrix, c: Matrix):
    """c = a @ b; a is M x K, b is K x N. Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@hetero.kernel
def matmul_tn(a: Matrix, b: Matrix, c: Matrix):
    """c = a.T @ b; a is K x M, b is K x N (weight gradients: x.T @ grad). Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[0]):
            acc += a[k, i] * b[k, j]
        c[i, j] = acc


@hetero.kernel
def matmul_nt(a: Matrix, b: Matrix, c: Matrix):
    """c = a @ b.T; a is M x K, b is N x K (input gradients: grad @ w.T). Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[j, k]
        c[i, j] = acc


@hetero.kernel
def bias_act(z: Matrix, bias: Vector, relu: i32):
    """z[i, j] += bias[j], then ReLU when ``relu`` is 1; in place. Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < z.shape[0] and j < z.shape[1]:
        v = z[i, j] + bias[j]
        if relu == 1 and v < 0.0:
            v = 0.0
        z[i, j] = v


@hetero.kernel
def softmax_xent(logits: Matrix, labels: hetero.Array[i32], grad: Matrix, loss: Vector):
    """Per row: softmax of the logits, the cross-entropy loss against ``labels`` and its gradient
    with respect to the logits, divided by the batch size (so the gradient is of the mean loss).
    Global size (rows,)."""
    row = hetero.global_id(0)
    if row < logits.shape[0]:
        cols = logits.shape[1]
        biggest = logits[row, 0]
        for j in range(1, cols):
            biggest = max(biggest, logits[row, j])
        total = 0.0
        for j in range(cols):
            total += math.exp(logits[row, j] - biggest)
        scale = 1.0 / f32(logits.shape[0])
        label = labels[row]
        for j in range(cols):
            p = math.exp(logits[row, j] - biggest) / total
            if j == label:
                grad[row, j] = (p - 1.0) * scale
            else:
                grad[row, j] = p * scale
        loss[row] = math.log(total) - (logits[row, label] - biggest)


@hetero.kernel
def relu_backward(grad: Matrix, activation: Matrix):
    """grad *= (activation > 0), in place: the ReLU's backward pass. Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < grad.shape[0] and j < grad.shape[1] and activation[i, j] <= 0.0:
        grad[i, j] = 0.0


@hetero.kernel
def column_sum(grad: Matrix, out: Vector):
    """out[j] = sum over rows of grad[:, j]: the bias gradient. Global size (N,)."""
    j = hetero.global_id(0)
    if j < grad.shape[1]:
        acc = 0.0
        for i in range(grad.shape[0]):
            acc += grad[i, j]
        out[j] = acc


@hetero.kernel
def sgd_matrix(w: Matrix, grad: Matrix, lr: f32):
    """w -= lr * grad (a weight matrix). Global size (N, M)."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    if i < w.shape[0] and j < w.shape[1]:
        w[i, j] = w[i, j] - lr * grad[i, j]


@hetero.kernel
def sgd_vector(w: Vector, grad: Vector, lr: f32):
    """w -= lr * grad (a bias vector). Global size (N,)."""
    j = hetero.global_id(0)
    if j < w.shape[0]:
        w[j] = w[j] - lr * grad[j]
