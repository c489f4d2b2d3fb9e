"""What ``hetero serve`` lets one client, and all of them together, take: time to send a request,
memory for bodies and their decoding, and requests at once; and how long a shutdown waits.

Each limit is there because its absence was a way to take the server down: a half-sent request
head or body held a socket and a handler forever (60 silent sockets at ``ulimit -n 64`` and no one
else got in); one 64 MiB JSON body took the process from 97 MiB to 995 MiB while ``json.loads``
built its Python numbers, three at once 1.96 GB; and SIGTERM waited 61 s for a client that never
finished its body. Over a limit, a request is answered at once, without reading the rest of its
body: 408 (too slow), 413 (too large for one request), 503 with ``Retry-After`` (the server is
full now, try again), each naming the flag that sets it.
"""

from __future__ import annotations

import asyncio
import dataclasses

from aiohttp import web

MIB = 2**20
#: JSON tensors cost 8 to 16 times their text while parsed (a Python object per number), so the JSON
#: part of a request is capped lower than a body of raw binary tensors.
DEFAULT_MAX_JSON_BYTES = 8 * MIB
DEFAULT_MAX_BODY_BYTES = 64 * MIB
DEFAULT_MAX_INFLIGHT_BYTES = 256 * MIB
DEFAULT_MAX_CONCURRENT = 64
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_DRAIN_TIMEOUT = 5.0


class ServeError(Exception):
    """An answer other than 200 with its message (unknown model, body too large, server full, too slow)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _mib(size: int) -> str:
    return f"{size / MIB:g} MiB"


@dataclasses.dataclass(frozen=True)
class ServeLimits:
    """``max_body_bytes``: one request's body (and the tensors it may decode to); ``max_json_bytes``:
    its JSON part; ``max_inflight_bytes``: the bodies of all requests held at once;
    ``max_concurrent``: requests being read or run at once; ``header_timeout``: seconds a connection
    may take to send a request head, counted from its opening or its last answer (so also how long
    an idle keep-alive connection stays); ``body_timeout``: seconds a request may take to send its
    body; ``drain_timeout``: seconds a shutdown waits for requests in flight."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_json_bytes", "max_inflight_bytes", "max_concurrent"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("header_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {getattr(self, name)}")
        if self.drain_timeout < 0:
            raise ValueError(f"drain_timeout must be 0 or more seconds, got {self.drain_timeout}")
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ValueError(f"max_inflight_bytes ({_mib(self.max_inflight_bytes)}, --max-inflight-mb) must be at least "
                             f"max_body_bytes ({_mib(self.max_body_bytes)}, --max-body-mb), or no body that large is "
                             "ever taken")

    @classmethod
    def build(cls, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_json_bytes: int | None = None,
              max_inflight_bytes: int | None = None, **rest: float) -> ServeLimits:
        """Limits with the derived defaults: the JSON cap at most the body's, the budget at least one body."""
        json_cap = min(DEFAULT_MAX_JSON_BYTES, max_body_bytes) if max_json_bytes is None else max_json_bytes
        budget = max(DEFAULT_MAX_INFLIGHT_BYTES, max_body_bytes) if max_inflight_bytes is None else max_inflight_bytes
        return cls(max_body_bytes, min(json_cap, max_body_bytes), budget, **rest)  # type: ignore[arg-type]

    # -- the answers over a limit ----------------------------------------------------------------
    def too_large(self, size: int | None) -> ServeError:
        what = f"of {size} bytes" if size is not None else f"of more than {self.max_body_bytes} bytes"
        return ServeError(413, f"request body {what} exceeds the limit of {self.max_body_bytes} bytes "
                               "(hetero serve --max-body-mb)")

    def json_too_large(self, size: int | None) -> ServeError:
        what = f"{size} bytes" if size is not None else f"more than {self.max_json_bytes} bytes"
        return ServeError(413, f"the JSON part of the request is {what}, over the limit of {self.max_json_bytes} bytes "
                               "(hetero serve --max-json-mb): send large tensors with the binary tensor extension "
                               "(tritonclient: binary_data=True, its default)")

    def busy(self) -> ServeError:
        return ServeError(503, f"hetero serve is handling {self.max_concurrent} requests, its limit (hetero serve "
                               "--max-concurrent); retry", {"Retry-After": "1"})

    def out_of_budget(self, held: int, size: int) -> ServeError:
        return ServeError(503, f"hetero serve holds {held} bytes of request bodies; {size} more would pass the limit of "
                               f"{self.max_inflight_bytes} bytes (hetero serve --max-inflight-mb); retry",
                          {"Retry-After": "1"})

    def too_slow(self) -> ServeError:
        return ServeError(408, f"the request body did not arrive within {self.body_timeout:g} s "
                               "(hetero serve --body-timeout)")


class BodyBudget:
    """The bytes of request bodies held at once, against ``limits.max_inflight_bytes`` (event-loop only)."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limits = limits
        self.held = 0

    def hold(self) -> Hold:
        """A request's share, empty until it grows; released once the request is answered."""
        return Hold(self)


class Hold:
    """The bytes one request holds of the :class:`BodyBudget`."""

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self.size = 0

    def grow(self, size: int) -> None:
        """Hold ``size`` bytes in all (no change when already as much), or raise the 503 that says the server is full."""
        more = size - self.size
        if more <= 0:
            return
        if self.budget.held + more > self.budget.limits.max_inflight_bytes:
            raise self.budget.limits.out_of_budget(self.budget.held, more)
        self.budget.held += more
        self.size = size

    def release(self) -> None:
        self.budget.held -= self.size
        self.size = 0


async def read_body(request: web.Request, limits: ServeLimits, hold: Hold, json_only: bool,
                    stopping: asyncio.Event) -> bytes:
    """The body of ``request``, read within ``limits.body_timeout``, each byte counted against the
    body limit, the JSON cap (``json_only``: no binary part) and the budget (``hold`` grows with
    it). A shutdown (``stopping``) cuts a read short with 503."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.body_timeout
    content = request.content
    chunks: list[bytes] = []
    size = 0
    stop_waiter: asyncio.Task[bool] | None = None
    try:
        while True:
            chunk = content.read_nowait()
            if not chunk:
                if content.at_eof():
                    break
                if stop_waiter is None:
                    stop_waiter = asyncio.ensure_future(stopping.wait())
                chunk = await _next_chunk(content, deadline - loop.time(), stop_waiter, limits)
                if not chunk:
                    break
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise limits.too_large(None if request.content_length is None else request.content_length)
            if json_only and size > limits.max_json_bytes:
                raise limits.json_too_large(None)
            hold.grow(size)
            chunks.append(chunk)
    finally:
        if stop_waiter is not None:
            stop_waiter.cancel()
    return b"".join(chunks)


async def _next_chunk(content: object, remaining: float, stop_waiter: asyncio.Task[bool], limits: ServeLimits) -> bytes:
    if remaining <= 0:
        raise limits.too_slow()
    reader = asyncio.ensure_future(content.readany())  # type: ignore[attr-defined]
    done, _ = await asyncio.wait({reader, stop_waiter}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    if reader in done:
        return reader.result()
    reader.cancel()
    if stop_waiter in done:
        raise ServeError(503, "hetero serve is shutting down; the request's body had not arrived (retry elsewhere)")
    raise limits.too_slow()


__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyBudget", "Hold", "ServeError", "ServeLimits", "read_body"]
