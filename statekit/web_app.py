"""A web application as an adapter's tools: requests sent in-process over a transport kept for the app's life.

Most applications worth an environment are web APIs. Their adapters called them through a test client,
which for an ASGI app (Starlette's ``TestClient``) starts a thread and an event loop per request, or
hops to a portal thread per request once entered (about 2 ms of a 6 ms claims read, measured).
``WebApp`` keeps one transport per warm app instead:

- WSGI (Django, Flask): httpx's ``WSGITransport`` calls the app in the caller's thread, no hop at all;
- ASGI (FastAPI, Starlette): one event loop in one thread for the app's life, running its lifespan
  (startup once, shutdown on close) and every request, handed over with one thread switch each way;
  sync routes run on anyio's worker threads, kept for the loop's life as under a server.

``Route`` maps a tool to a request: the path's ``{names}`` are filled from the tool's arguments, the
other arguments go to the query string (GET, DELETE) or to the JSON body, and ``WebApp.call`` answers
``{"status": ..., "body": ...}`` (a body that is not JSON is shown as an error body). Redirects are
answered, not followed, and cookies live until ``forget_cookies()``, which an adapter calls when an
episode starts so that no session leaks from one episode into the next.
"""

from __future__ import annotations

import asyncio
import string
import threading
import urllib.parse
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from statekit.contract import JSON

BASE_URL = "http://app.in-process"
"""The host every in-process request names (it reaches no socket, and replay does not see it)."""

T = TypeVar("T")
Files = Mapping[str, tuple[str, bytes, str]]


@dataclass(frozen=True)
class Route:
    """How one tool becomes a request.

    ``path`` may name arguments (``/claims/{reference}/notes``); the rest go to the query string for
    GET and DELETE and to the JSON body otherwise (``body`` names them when only some belong there;
    ``()`` sends no body). ``files`` turns the arguments into a multipart upload instead.
    """

    method: str
    path: str
    body: tuple[str, ...] | None = None
    files: Callable[[Mapping[str, JSON]], Files] | None = None
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = tuple(n for _, n, _, _ in string.Formatter().parse(self.path) if n)
        object.__setattr__(self, "method", self.method.upper())
        object.__setattr__(self, "_names", names)

    def request(self, arguments: Mapping[str, JSON]) -> dict[str, Any]:
        """The keyword arguments of ``WebApp.request`` for one call."""
        values = {name: urllib.parse.quote(str(arguments.get(name, "")), safe="") for name in self._names}
        path = self.path.format_map(values)
        if self.files is not None:
            return {"method": self.method, "path": path, "files": self.files(arguments)}
        rest = {k: v for k, v in arguments.items() if k not in self._names}
        if self.method in ("GET", "DELETE", "HEAD"):
            # a null argument is an absent one in a query string (``k=`` would be an empty value)
            params = {
                k: str(v).lower() if isinstance(v, bool) else v for k, v in rest.items() if v is not None
            }
            return {"method": self.method, "path": path, "params": params}
        if self.body == ():  # the route takes no body
            return {"method": self.method, "path": path}
        if self.body is not None:
            rest = {k: rest[k] for k in self.body if k in rest}
        return {"method": self.method, "path": path, "json": rest}


class _AppASGITransport(httpx.ASGITransport):
    """httpx's ASGI transport with its request handler bound here, at import: replay (vcrpy) patches
    httpx's own transports to record and replay a process's outbound calls, and a call into the app in
    process is not one (vcrpy copied, filtered and serialised each such request and its answer, then
    let it through: 0.3 ms of a 5 ms step). The replay module imports this one, so what is bound here
    is httpx's own handler, never a patch."""

    handle_async_request = httpx.ASGITransport.handle_async_request


class _AppWSGITransport(httpx.WSGITransport):
    """httpx's WSGI transport, its handler bound at import for the same reason."""

    handle_request = httpx.WSGITransport.handle_request


class WebApp:
    """An ASGI or WSGI application called in-process, its transport kept until ``close()``.

    ``headers`` are sent with every request (a login token the world holds, say). Build it with
    ``WebApp.asgi(app)`` or ``WebApp.wsgi(app)``: which protocol an app speaks is the author's to say.
    """

    def __init__(
        self,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport,
        client: httpx.Client,
        loop: _LoopThread | None,
    ) -> None:
        self._client = client
        """Builds requests and keeps cookies; requests go to the transport itself, past the client's
        send (no auth or redirect machinery)."""
        self._transport = transport
        self._loop = loop
        self._closed = False

    @classmethod
    def wsgi(cls, app: Any, *, headers: Mapping[str, str] | None = None) -> WebApp:
        return cls(_AppWSGITransport(app=app), _client(headers), None)

    @classmethod
    def asgi(cls, app: Any, *, headers: Mapping[str, str] | None = None) -> WebApp:
        client = _client(headers)  # bad headers fail here, before the app starts
        loop = _LoopThread(app)
        try:
            loop.start()
        except BaseException:
            loop.stop()
            client.close()
            raise
        # the app's exceptions become 500 answers (as a server would send), not the caller's crash
        return cls(_AppASGITransport(app=loop.app, raise_app_exceptions=False), client, loop)

    @property
    def headers(self) -> httpx.Headers:
        return self._client.headers

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """One request (``params``, ``json``, ``files``, ``data``, ``headers`` as httpx takes them)."""
        if self._closed:
            raise RuntimeError("the web app is closed")
        request = self._client.build_request(method, path, **options)
        if isinstance(self._transport, httpx.BaseTransport):
            response = self._transport.handle_request(request)
            response.read()
        else:
            assert self._loop is not None
            response = self._loop.run(self._send(self._transport, request))
        response.request = request
        self._client.cookies.extract_cookies(response)
        return response

    @staticmethod
    async def _send(transport: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
        response = await transport.handle_async_request(request)
        await response.aread()
        return response

    def call(self, route: Route, arguments: Mapping[str, JSON]) -> JSON:
        """A tool call: ``{"status": code, "body": the JSON answer}``."""
        response = self.request(**route.request(arguments))
        try:
            payload: JSON = response.json()
        except ValueError:
            payload = {"error": {"code": "non_json_response", "message": response.text[:500]}}
        return {"status": response.status_code, "body": payload}

    def forget_cookies(self) -> None:
        """Start a new visitor: the cookies an earlier episode was given are dropped."""
        self._client.cookies.clear()

    def close(self) -> None:
        """Shut the app down (its lifespan's shutdown, for ASGI) and end the transport's thread."""
        loop, self._loop, self._closed = self._loop, None, True
        try:
            self._client.close()
        finally:
            if loop is not None:
                loop.stop()


def _client(headers: Mapping[str, str] | None) -> httpx.Client:
    """A fixed user agent: httpx's names its version, which an app that stores it would put in the
    world (and a dependency upgrade would then change the digest)."""
    return httpx.Client(base_url=BASE_URL, headers={"User-Agent": "statekit", **(headers or {})})


class _LoopThread:
    """One event loop on one daemon thread, running an ASGI app's lifespan and its requests."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="statekit-web-app", daemon=True)
        self._stopping = asyncio.Event()
        self._state: dict[str, Any] = {}
        self._shutdown: asyncio.Queue[dict[str, Any]] | None = None
        self._lifespan: asyncio.Future[None] | None = None
        self._supported = False

    def _serve(self) -> None:
        """The loop runs one task until ``stop()``: anyio takes a ``run_until_complete`` task for the
        root of the tasks it serves, and keeps its worker threads (a sync route's) while that task
        lives; under ``run_forever`` each request's task was the root, and each sync route or
        dependency started a worker thread that ended with the request."""
        self._loop.run_until_complete(self._stopping.wait())

    async def app(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """The app as requests reach it: with the state its lifespan set up, as servers pass it."""
        if self._supported:
            scope = {**scope, "state": dict(self._state)}
        await self._app(scope, receive, send)

    def start(self) -> None:
        self._thread.start()
        self.run(self._startup())

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    async def _startup(self) -> None:
        """ASGI's lifespan protocol: startup now; an app without one (it raises) simply has none."""
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        started: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        inbox.put_nowait({"type": "lifespan.startup"})

        async def send(message: dict[str, Any]) -> None:
            if message["type"].startswith("lifespan.startup") and not started.done():
                started.set_result(message)
            elif message["type"] == "lifespan.shutdown.failed":
                raise RuntimeError(f"the app's shutdown failed: {message.get('message', '')}")

        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": self._state}

        async def lifespan() -> None:
            try:
                await self._app(scope, inbox.get, send)
            except Exception as exc:
                if not started.done():  # no lifespan support: the app raised on its scope
                    started.set_result({"type": "unsupported", "error": exc})
                elif started.result()["type"] != "lifespan.startup.failed":
                    raise
                # a failed startup is reported by its message, its exception retrieved here: left
                # to the garbage collector, asyncio would log it from wherever collection ran
            finally:
                if not started.done():  # it returned (or was cancelled) without answering: none
                    started.set_result({"type": "unsupported"})

        self._lifespan = asyncio.ensure_future(lifespan())
        answer = await started
        if answer["type"] == "lifespan.startup.failed":
            raise RuntimeError(f"the app's startup failed: {answer.get('message', '')}")
        self._supported = answer["type"] == "lifespan.startup.complete"
        self._shutdown = inbox if self._supported else None

    async def _stop_lifespan(self) -> None:
        if self._shutdown is not None and self._lifespan is not None:
            self._shutdown.put_nowait({"type": "lifespan.shutdown"})
            await self._lifespan

    def stop(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a web app cannot be closed from its own requests")
        try:
            if self._thread.is_alive():
                try:
                    self.run(self._stop_lifespan())
                finally:
                    self._loop.call_soon_threadsafe(self._stopping.set)
                    self._thread.join()
        finally:
            self._finish()

    def _finish(self) -> None:
        """What ``asyncio.run`` does after its main task: cancel what is left (the app's own tasks),
        shut down async generators and the default executor, close the loop."""
        if self._loop.is_closed():
            return
        try:
            left = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()
