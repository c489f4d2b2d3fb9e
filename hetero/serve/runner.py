"""Running the server: :func:`serve` blocks (the ``hetero serve`` command) until SIGINT or SIGTERM,
then shuts down gracefully; :class:`ServerThread` runs it in a background thread on an ephemeral
port of 127.0.0.1 (tests, benchmarks)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from types import TracebackType
from typing import Any

from aiohttp import web

from hetero.serve.app import STATE, make_app
from hetero.serve.servable import Servable

log = logging.getLogger(__name__)

#: Seconds aiohttp's shutdown waits for handlers after the app's drain, before it cancels them.
SHUTDOWN_GRACE = 0.5
#: Seconds the rest of a refused body is read and dropped (aiohttp's default, 10 s, held slow clients).
LINGER = 1.0


async def start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving ``app`` on ``host:port`` (0: any free port); returns the runner and the bound port.
    Raises ``OSError`` naming the address when it cannot be bound."""
    # No access log: a line per request costs more than a small inference; /metrics counts them.
    # keepalive_timeout: aiohttp closes a connection that has not sent a whole request head within it
    # (from its opening or its last answer); the app's drain has already waited for the requests
    # being run when aiohttp's own shutdown wait starts, so that one is only a short grace.
    # lingering_time: after an answer sent before the body was read (408, 413, 503), aiohttp reads and
    # drops the rest for this long, so a client still sending gets the answer rather than a reset.
    limits = app[STATE].limits
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=min(SHUTDOWN_GRACE, limits.drain_timeout),
                           keepalive_timeout=limits.header_timeout, lingering_time=LINGER, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(exc.errno, f"hetero serve cannot listen on {host}:{port}: {exc.strerror}; "
                                 "pick another --port (or --host)") from exc
    return runner, int(runner.addresses[0][1])


async def _serve(model: Servable, host: str, port: int, app_options: dict[str, Any]) -> None:
    runner, bound = await start(make_app(model, **app_options), host, port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    main = asyncio.current_task()
    signals = (signal.SIGINT, signal.SIGTERM)

    def on_signal(signum: int) -> None:
        if not stop.is_set():
            log.info("hetero serve: %s, shutting down: finishing the requests in flight (again to stop at once)",
                     signal.Signals(signum).name)
            stop.set()
        elif main is not None:
            log.warning("hetero serve: %s again, stopping without the requests in flight", signal.Signals(signum).name)
            main.cancel()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    log.info("hetero serve: model %r at http://%s:%d/v2/models/%s (KServe v2 over HTTP; metrics at /metrics)",
             model.name, host, bound, model.name)
    try:
        await stop.wait()
        await runner.cleanup()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
    log.info("hetero serve: stopped")


def serve(model: Servable, host: str = "127.0.0.1", port: int = 8000, **app_options: Any) -> None:
    """Serve ``model`` over the KServe v2 HTTP protocol on ``host:port`` until SIGINT or SIGTERM; then
    answer the requests in flight, stop, and close the model. ``app_options`` go to
    :func:`hetero.serve.app.make_app` (max_batch, max_body_bytes, workers, shutdown_timeout and the
    other limits)."""
    try:
        asyncio.run(_serve(model, host, port, app_options))
    except asyncio.CancelledError:  # a second signal
        pass


class ServerThread:
    """The server in a background thread: ``with ServerThread(model) as server: ... server.url``.
    ``port`` 0 (the default) binds a free port; :meth:`stop` shuts down gracefully."""

    def __init__(self, model: Servable, host: str = "127.0.0.1", port: int = 0, **app_options: Any) -> None:
        self.app = make_app(model, **app_options)
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="hetero-serve", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as ``tritonclient.http.InferenceServerClient`` takes it."""
        return f"{self.host}:{self.port}"

    async def _run(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            runner, self.port = await start(self.app, self.host, self.port)
        except BaseException as exc:
            self._error = exc
            return
        finally:
            self._started.set()
        await self._stop.wait()
        await runner.cleanup()

    def start(self, timeout: float = 10.0) -> ServerThread:
        """Start the thread; returns once the server listens (raises what kept it from listening)."""
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"hetero serve did not start listening on {self.host}:{self.port} within {timeout} s")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop listening, answer every request in flight, close the model; returns when done."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None or not self._thread.is_alive():
            return
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop already closed
            pass
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"hetero serve on {self.address} did not shut down within {timeout} s")

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["ServerThread", "serve", "start"]
