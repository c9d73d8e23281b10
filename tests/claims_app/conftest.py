"""Fixtures for the claims app: vendor stubs on loopback, settings, a seeded database, an API client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app.api import create_app
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.db import create_schema, make_engine, make_session_factory
from statekit_examples.apps.claims_app.fixtures import FIXTURE_PASSWORD, FixtureSummary, generate
from statekit_examples.apps.claims_app.vendors.app import create_vendor_app
from statekit_examples.apps.claims_app.worker import Worker

LoginFn = Callable[..., dict[str, str]]


class ServerThread:
    """A uvicorn server on 127.0.0.1, port chosen by the OS, running in a background thread."""

    def __init__(self, app: object) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="vendor-stubs", daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("vendor stub server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@pytest.fixture(scope="session")
def vendors_url() -> Iterator[str]:
    server = ServerThread(create_vendor_app())
    url = server.start()
    yield url
    server.stop()


def make_settings(db_url: str, upload_dir: Path, vendors_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "db_url": db_url,
        "upload_dir": upload_dir,
        "fraud_url": f"{vendors_url}/fraud",
        "payment_url": f"{vendors_url}/payments",
        "address_url": f"{vendors_url}/address",
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(fresh_db_url: str, tmp_path: Path, vendors_url: str) -> Settings:
    return make_settings(fresh_db_url, tmp_path / "uploads", vendors_url)


@pytest.fixture
def session_factory(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(settings.db_url)
    create_schema(engine)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture
def seeded(session_factory: sessionmaker[Session], settings: Settings) -> FixtureSummary:
    with session_factory.begin() as session:
        return generate(session, seed=1, upload_dir=settings.upload_dir)


@pytest.fixture
def client(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    with TestClient(create_app(settings, session_factory=session_factory)) as test_client:
        yield test_client


@pytest.fixture
def worker(settings: Settings, session_factory: sessionmaker[Session]) -> Worker:
    return Worker(session_factory, settings)


def login_with(client: TestClient) -> LoginFn:
    def login(username: str = "adjuster", password: str = FIXTURE_PASSWORD) -> dict[str, str]:
        response = client.post("/auth/login", json={"username": username, "password": password})
        assert response.status_code == 200, response.text
        return {"Authorization": f"Bearer {response.json()['token']}"}

    return login


@pytest.fixture
def login(client: TestClient, seeded: FixtureSummary) -> LoginFn:
    """Log in (default: the fixture's ``adjuster``) and get the Authorization header."""
    return login_with(client)


@pytest.fixture
def auth(login: LoginFn) -> dict[str, str]:
    return login()
