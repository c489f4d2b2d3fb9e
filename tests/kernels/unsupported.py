"""Kernels that use something outside the kernel language: each must fail to compile
with a CompileError at the marked line (the comment `# error: <text>` on that line)."""

from __future__ import annotations

import hetero


def helper_not_a_device_function(v):
    return v


@hetero.kernel
def list_literal(x):
    y = [1, 2]  # error: list literals are not supported in kernels
    x[0] = y


@hetero.kernel
def dict_literal(x):
    y = {1: 2}  # error: dict literals are not supported in kernels
    x[0] = y


@hetero.kernel
def comprehension(x):
    y = [v for v in range(3)]  # error: list comprehensions are not supported in kernels
    x[0] = y


@hetero.kernel
def lambda_expr(x):
    f = lambda v: v  # noqa: E731  # error: lambda functions are not supported in kernels
    x[0] = f


@hetero.kernel
def try_statement(x):
    try:  # error: try statements are not supported in kernels
        x[0] = 1
    except Exception:
        pass


@hetero.kernel
def with_statement(x):
    with open("f"):  # error: with statements are not supported in kernels
        x[0] = 1


@hetero.kernel
def slicing(x):
    x[0:2] = 1  # error: slicing is not supported in kernels


@hetero.kernel
def keyword_call(x):
    x[0] = hetero.global_id(axis=0)  # error: keyword arguments are not supported


@hetero.kernel
def python_call(x):
    x[0] = helper_not_a_device_function(1)  # error: calling helper_not_a_device_function is not supported


@hetero.kernel
def string_constant(x):
    s = "text"  # error: str constants are not supported in kernels
    x[0] = s


@hetero.kernel
def tuple_assign(x):
    a, *b = 1, 2  # error: starred assignment (a, *b = …) is not supported in kernels
    x[0] = a


@hetero.kernel
def undefined_name(x):
    x[0] = not_defined_anywhere  # noqa: F821  # error: name 'not_defined_anywhere' is not defined


@hetero.kernel
def return_value(x):
    return 1  # error: kernels cannot return a value


@hetero.kernel
def wrong_rank(x):
    x[0, 1] = 1  # error: x has 1 dimension(s) but is indexed with 2


@hetero.kernel
def float_index(x):
    x[1.5] = 1  # error: array index must be an integer, got f32


@hetero.kernel
def non_constant_local(x):
    n = x.shape[0]
    t = hetero.local_array(n, hetero.f32)  # error: a local_array dimension must be a constant integer
    t[0] = 1.0


@hetero.kernel
def iterate_array(x):
    for v in x:  # error: kernels can only loop over range
        v += 1
