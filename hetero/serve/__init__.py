"""``hetero serve``: a model behind the KServe v2 inference protocol over HTTP (the protocol Triton
Inference Server speaks, so ``tritonclient.http`` and KServe clients work unchanged).

- :mod:`hetero.serve.protocol`: request decoding and response encoding, JSON tensors and the
  binary tensor extension, pure NumPy;
- :mod:`hetero.serve.app`: :func:`make_app`, the aiohttp application (health, metadata, infer,
  ``/metrics``) over a :class:`~hetero.serve.servable.Servable` such as :class:`hetero.onnx.Pool`;
- :mod:`hetero.serve.limits`: what a client may take: timeouts for a request's head and body,
  body and JSON caps, requests and body bytes at once, the drain on shutdown;
- :mod:`hetero.serve.metrics`: the Prometheus metrics, request counts and the pool's members;
- :mod:`hetero.serve.runner`: :func:`serve` (blocking, SIGINT/SIGTERM shut down gracefully) and
  :class:`~hetero.serve.runner.ServerThread` (a background server for tests and benchmarks).

Importing it loads aiohttp and prometheus_client, never ONNX Runtime; without them it raises
:class:`~hetero.core.errors.MissingDependencyError` (``pip install 'hetero[serve]'``).

May import: every floor below (the ONNX pool it serves, the fault policy); a floor of its own beside the launcher.
"""

from __future__ import annotations

from hetero.core.optional import require

require("aiohttp", extra="serve", feature="hetero.serve")
require("prometheus_client", extra="serve", feature="hetero.serve")

from hetero.serve.app import make_app  # noqa: E402 (after the checks above)
from hetero.serve.runner import ServerThread, serve
from hetero.serve.servable import Servable

__all__ = ["Servable", "ServerThread", "make_app", "serve"]
