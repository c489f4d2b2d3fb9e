"""What the torch lowering tests share: a fresh TorchDynamo around each test, and the comparison of a
compiled result with eager (the same dtype and shape, then the values: exactly unless a tolerance
is given)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

EXACT = {"rtol": 0.0, "atol": 0.0}


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def same(got: Any, want: Any, **tolerance: float) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        torch.testing.assert_close(g, w, equal_nan=True, **(tolerance or EXACT))
