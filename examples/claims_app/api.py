"""HTTP API (FastAPI). Thin: parse, authenticate, open a transaction, call a service, shape errors."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, BinaryIO, Literal

from fastapi import Depends, FastAPI, File, Header, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import services
from .config import Settings
from .db import make_engine, make_session_factory
from .errors import AppError, PayloadTooLarge, Unauthorized
from .schemas import ApproveRequest, DenyRequest, LoginRequest, NoteRequest, SubmitClaimRequest, TriageRequest
from .services import Actor
from .worker import start_in_thread

log = logging.getLogger(__name__)

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}
UPLOAD_CHUNK = 64 * 1024


def error_response(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message, **extra}})


def _validation_details(exc: RequestValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(part) for part in error.get("loc", ())), "message": str(error.get("msg", ""))}
        for error in exc.errors()
    ]


def install_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"code", "message"}}``; nothing escapes as an HTML/500 page."""

    @app.exception_handler(AppError)
    async def app_error(request: Request, exc: AppError) -> JSONResponse:
        return error_response(exc.status_code, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        if any(error.get("type") == "json_invalid" for error in exc.errors()):
            return error_response(
                400, "malformed_json", "the request body is not valid JSON", details=details
            )
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details) or "invalid request"
        return error_response(422, "invalid_request", summary, details=details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "something went wrong on our side")


def create_app(
    settings: Settings,
    *,
    session_factory: sessionmaker[Session] | None = None,
    start_worker: bool = False,
) -> FastAPI:
    """Build the API. Pass ``session_factory`` to share an engine; otherwise one is made from settings."""
    engine: Engine | None = None
    if session_factory is None:
        engine = make_engine(settings.db_url)
        session_factory = make_session_factory(engine)
    factory = session_factory

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker = start_in_thread(factory, settings) if start_worker else None
        try:
            yield
        finally:
            if worker is not None:
                worker.stop()
            if engine is not None:
                engine.dispose()

    app = FastAPI(title="Claims desk", version="1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.session_factory = factory
    install_error_handlers(app)

    def current_actor(authorization: Annotated[str | None, Header()] = None) -> Actor:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send 'Authorization: Bearer <token>' (get one from POST /auth/login)")
        with factory.begin() as session:
            return services.authenticate(session, token.strip())

    CurrentActor = Annotated[Actor, Depends(current_actor)]

    @app.get("/health")
    def health() -> dict[str, str]:
        with factory() as session:
            session.execute(text("SELECT 1"))
        return {"status": "ok"}

    @app.post("/auth/login")
    def login(body: LoginRequest) -> dict[str, Any]:
        with factory.begin() as session:
            return services.login(session, settings, body.username, body.password)

    @app.get("/claims")
    def list_claims(
        actor: CurrentActor,
        status: Literal["submitted", "triaged", "approved", "denied", "paid"] | None = None,
        q: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
        assigned_to_me: bool = False,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> dict[str, Any]:
        with factory.begin() as session:
            return services.list_claims(
                session, actor, status=status, q=q, assigned_to_me=assigned_to_me, limit=limit, offset=offset
            )

    @app.get("/claims/{reference}")
    def get_claim(reference: str, actor: CurrentActor) -> dict[str, Any]:
        with factory.begin() as session:
            return services.get_claim(session, settings, reference)

    @app.post("/claims", status_code=201)
    def submit_claim(body: SubmitClaimRequest, actor: CurrentActor) -> dict[str, Any]:
        with factory.begin() as session:
            return services.submit_claim(session, settings, actor, body)

    @app.post("/claims/{reference}/notes", status_code=201)
    def add_note(reference: str, body: NoteRequest, actor: CurrentActor) -> dict[str, Any]:
        with factory.begin() as session:
            return services.add_note(session, actor, reference, body.body)

    @app.post("/claims/{reference}/documents", status_code=201)
    def upload_document(
        reference: str, actor: CurrentActor, file: Annotated[UploadFile, File()]
    ) -> dict[str, Any]:
        content = _read_limited(file.file, settings.max_upload_bytes)
        with factory.begin() as session:
            return services.upload_document(
                session,
                settings,
                actor,
                reference,
                filename=file.filename or "upload",
                content_type=file.content_type or "application/octet-stream",
                content=content,
            )

    @app.post("/claims/{reference}/triage")
    def triage(reference: str, actor: CurrentActor, body: TriageRequest | None = None) -> dict[str, Any]:
        with factory.begin() as session:
            return services.triage(session, settings, actor, reference, body.priority if body else None)

    @app.post("/claims/{reference}/approve")
    def approve(reference: str, actor: CurrentActor, body: ApproveRequest | None = None) -> dict[str, Any]:
        with factory.begin() as session:
            return services.approve(session, settings, actor, reference, body.reason if body else None)

    @app.post("/claims/{reference}/deny")
    def deny(reference: str, body: DenyRequest, actor: CurrentActor) -> dict[str, Any]:
        with factory.begin() as session:
            return services.deny(session, settings, actor, reference, body.reason)

    @app.post("/claims/{reference}/payment-request", status_code=201)
    def request_payment(reference: str, actor: CurrentActor) -> dict[str, Any]:
        with factory.begin() as session:
            return services.request_payment(session, actor, reference)

    return app


def _read_limited(file: BinaryIO, limit: int) -> bytes:
    """Read an upload, refusing (413) as soon as it grows past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while chunk := file.read(UPLOAD_CHUNK):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"documents are limited to {limit} bytes", code="file_too_large")
        chunks.append(chunk)
    return b"".join(chunks)
