"""The kit's web-app transport: real ASGI (FastAPI) and WSGI applications called in-process, tools mapped
to routes, the transport kept for the app's life (no thread or event loop per request)."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

import pytest
from fastapi import FastAPI, File, Request, Response, UploadFile
from fastapi.responses import PlainTextResponse

from statekit.kit import Replay, Route, WebApp


def fastapi_app(events: list[str]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        events.append("startup")
        yield {"greeting": "hello"}
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)

    @app.get("/items/{name}")
    async def read(name: str, request: Request, limit: int = 1, full: bool = False) -> dict[str, Any]:
        return {
            "name": name,
            "limit": limit,
            "full": full,
            "greeting": request.state.greeting,
            "thread": threading.get_ident(),
            "token": request.headers.get("authorization"),
        }

    @app.post("/items/{name}", status_code=201)
    async def write(name: str, request: Request) -> dict[str, Any]:
        body = await request.body()
        return {"name": name, "body": json.loads(body) if body else None}

    @app.post("/upload")
    async def upload(file: Annotated[UploadFile, File()]) -> dict[str, Any]:
        return {"filename": file.filename, "size": len(await file.read())}

    @app.get("/sync-thread")
    def sync_thread() -> dict[str, int]:
        return {"thread": threading.get_native_id()}  # the kernel's id: a new thread gets a new one

    @app.get("/login")
    def login(response: Response) -> dict[str, str]:
        response.set_cookie("visitor", "v1")
        return {"ok": "yes"}

    @app.get("/whoami")
    def whoami(request: Request) -> dict[str, str | None]:
        return {"visitor": request.cookies.get("visitor")}

    @app.get("/text")
    def text() -> PlainTextResponse:
        return PlainTextResponse("not json")

    @app.get("/boom")
    def boom() -> dict[str, str]:
        raise RuntimeError("the app broke")

    return app


@pytest.fixture
def asgi() -> Iterator[tuple[WebApp, list[str]]]:
    events: list[str] = []
    web = WebApp.asgi(fastapi_app(events), headers={"Authorization": "Bearer t0k"})
    try:
        yield web, events
    finally:
        web.close()


def test_an_asgi_app_runs_its_lifespan_once_and_every_request_on_one_loop(
    asgi: tuple[WebApp, list[str]],
) -> None:
    web, events = asgi
    assert events == ["startup"]
    threads_before = threading.active_count()
    answers = [
        web.call(Route("GET", "/items/{name}"), {"name": "a b?c", "limit": 3, "full": True})
        for _ in range(30)
    ]
    assert threading.active_count() == threads_before  # no thread started per request
    first = answers[0]
    assert first == {
        "status": 200,
        "body": {
            "name": "a b?c",  # quoted into the path, not a query string
            "limit": 3,
            "full": True,
            "greeting": "hello",  # the lifespan's state reaches the requests
            "thread": first["body"]["thread"],  # type: ignore[index,call-overload]
            "token": "Bearer t0k",
        },
    }
    assert {a["body"]["thread"] for a in answers} == {first["body"]["thread"]}  # type: ignore[index,call-overload]
    assert first["body"]["thread"] != threading.get_ident()  # type: ignore[index,call-overload]
    # a sync route runs on anyio's worker threads, kept for the app's life, not one per request
    synced = [web.call(Route("GET", "/sync-thread"), {}) for _ in range(30)]
    assert len({a["body"]["thread"] for a in synced}) <= 2  # type: ignore[index,call-overload]
    assert threading.active_count() <= threads_before + 2
    web.close()
    assert events == ["startup", "shutdown"]
    with pytest.raises(RuntimeError, match="closed"):
        web.call(Route("GET", "/text"), {})


def test_routes_send_the_arguments_where_the_route_says(asgi: tuple[WebApp, list[str]]) -> None:
    web, _ = asgi
    assert web.call(Route("post", "/items/{name}"), {"name": "x", "n": 1}) == {
        "status": 201,
        "body": {"name": "x", "body": {"n": 1}},
    }
    read = web.call(Route("GET", "/items/{name}"), {"name": "x", "limit": None})["body"]
    assert read["limit"] == 1  # type: ignore[index,call-overload]  # null: absent, the route's default
    chosen = Route("POST", "/items/{name}", body=("keep",))
    assert web.call(chosen, {"name": "x", "keep": 1, "drop": 2})["body"] == {"name": "x", "body": {"keep": 1}}
    assert web.call(Route("POST", "/items/{name}", body=()), {"name": "x"})["body"] == {
        "name": "x",
        "body": None,
    }
    upload = Route("POST", "/upload", files=lambda args: {"file": (str(args["as"]), b"12345", "text/plain")})
    assert web.call(upload, {"as": "r.txt"}) == {"status": 200, "body": {"filename": "r.txt", "size": 5}}


def test_app_failures_are_answers_not_crashes(asgi: tuple[WebApp, list[str]]) -> None:
    web, _ = asgi
    assert web.call(Route("GET", "/boom"), {})["status"] == 500
    assert web.call(Route("GET", "/text"), {}) == {
        "status": 200,
        "body": {"error": {"code": "non_json_response", "message": "not json"}},
    }
    assert web.call(Route("GET", "/nowhere"), {})["status"] == 404


def test_cookies_last_until_forgotten(asgi: tuple[WebApp, list[str]]) -> None:
    web, _ = asgi
    web.call(Route("GET", "/login"), {})
    assert web.call(Route("GET", "/whoami"), {})["body"] == {"visitor": "v1"}
    web.forget_cookies()  # a new episode: a new visitor
    assert web.call(Route("GET", "/whoami"), {})["body"] == {"visitor": None}


def test_an_asgi_app_without_a_lifespan_is_served() -> None:
    async def bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise RuntimeError("only HTTP")  # as many small apps answer the lifespan scope
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"path": "%s"}' % scope["path"].encode()})

    web = WebApp.asgi(bare)
    try:
        assert web.call(Route("GET", "/p"), {}) == {"status": 200, "body": {"path": "/p"}}
    finally:
        web.close()


def test_an_app_that_ignores_the_lifespan_scope_is_served() -> None:
    """Many small apps simply return on a scope they do not handle: no lifespan, not a hang."""

    async def quiet(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    web = WebApp.asgi(quiet)
    try:
        assert web.request("GET", "/").status_code == 204
    finally:
        web.close()


def test_a_failed_startup_is_an_error_and_leaves_no_thread(caplog: pytest.LogCaptureFixture) -> None:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="startup failed"):
        WebApp.asgi(FastAPI(lifespan=lifespan))
    assert threading.active_count() == before
    gc.collect()  # nor a task whose exception asyncio would log from wherever collection runs
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def wsgi_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """A plain WSGI application (PEP 3333): what Django and Flask are underneath."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    answer = {
        "method": environ["REQUEST_METHOD"],
        "path": environ["PATH_INFO"],
        "query": parse_qs(environ["QUERY_STRING"]),
        "body": json.loads(body) if body else None,
        "thread": threading.get_ident(),
        "cookie": environ.get("HTTP_COOKIE"),
    }
    headers = [("Content-Type", "application/json")]
    if environ["PATH_INFO"] == "/login":
        headers.append(("Set-Cookie", "sessionid=s1; Path=/"))
    start_response("200 OK", headers)
    return [json.dumps(answer).encode()]


def test_a_wsgi_app_is_called_in_the_callers_thread() -> None:
    web = WebApp.wsgi(wsgi_app)
    try:
        got = web.call(Route("GET", "/tickets/{id}"), {"id": 7, "open": False})
        assert got["body"] == {
            "method": "GET",
            "path": "/tickets/7",
            "query": {"open": ["false"]},
            "body": None,
            "thread": threading.get_ident(),
            "cookie": None,
        }
        sent = web.call(Route("PUT", "/tickets/{id}"), {"id": 7, "title": "t"})["body"]
        assert sent["method"] == "PUT" and sent["body"] == {"title": "t"}  # type: ignore[index,call-overload]
        web.call(Route("GET", "/login"), {})
        assert web.call(Route("GET", "/x"), {})["body"]["cookie"] == "sessionid=s1"  # type: ignore[index,call-overload]
        web.forget_cookies()
        assert web.call(Route("GET", "/x"), {})["body"]["cookie"] is None  # type: ignore[index,call-overload]
    finally:
        web.close()


def test_replay_does_not_see_calls_into_the_app(asgi: tuple[WebApp, list[str]], tmp_path: Path) -> None:
    """Replay answers the app's outbound calls from a cassette and refuses unrecorded ones; statekit's
    own in-process call into the app is neither (an empty cassette would refuse it if vcrpy saw it)."""
    web, _ = asgi
    cassette = tmp_path / "empty.yaml"
    cassette.write_text("interactions: []\nversion: 1\n")
    replay = Replay(cassette)
    with replay.session():
        assert web.call(Route("GET", "/items/{name}"), {"name": "n"})["status"] == 200
        wsgi = WebApp.wsgi(wsgi_app)
        try:
            assert web.call(Route("GET", "/text"), {})["status"] == 200
            assert wsgi.call(Route("GET", "/x"), {})["body"]["path"] == "/x"  # type: ignore[index,call-overload]
        finally:
            wsgi.close()
    assert replay.misses == []
