"""The claims application as a statekit environment.

The application (``examples/claims_app``) knows nothing of statekit. This adapter builds its world
for a seed with the app's own fixture generator, points the app at a restored copy, exposes its
HTTP API as tools, drains its background jobs inside ``step``, and scores tasks from the database.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import examples.claims_app as app_pkg
from adapters.claims_app.tasks import AGENT, KINDS, ClaimsTask, choose_task
from adapters.claims_app.tools import TOOLS, to_request
from examples.claims_app import fixtures, services
from examples.claims_app.api import create_app
from examples.claims_app.config import Settings
from examples.claims_app.db import create_schema, make_engine, make_session_factory
from examples.claims_app.models import Adjuster, AuthSession
from examples.claims_app.vendors.app import create_vendor_app
from examples.claims_app.worker import Worker
from statekit.adapter import Adapter, Episode, Outcome
from statekit.contract import JSON, Task
from statekit.digest.compute import Digest
from statekit.digest.coverage import coverage_problems, live_columns
from statekit.digest.postgres import connect, postgres_digest
from statekit.digest.spec import DigestSpec
from statekit.errors import ConfigError
from statekit.postgres import ServerLease
from statekit.postgres.server import to_conninfo
from statekit.servers import ThreadedServer
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.pg_template import PostgresTemplate

BUILDER_VERSION = "1"
SPEC_PATH = Path(__file__).resolve().parents[2] / "digests" / "claims_app.toml"
_APP_DIR = Path(app_pkg.__file__).parent


def _fixture_hash() -> str:
    """Worlds change when the schema or the seed script changes: hash both sources."""
    h = hashlib.sha256()
    for name in ("models.py", "fixtures.py"):
        h.update((_APP_DIR / name).read_bytes())
    return h.hexdigest()[:16]


class ClaimsEpisode(Episode):
    """The claims API wired to one restored database, logged in as the agent's adjuster."""

    task: ClaimsTask

    def __init__(self, settings: Settings, task: ClaimsTask, token: str) -> None:
        self.settings = settings
        self.task = task
        self.tools = TOOLS
        self.engine: Engine = make_engine(settings.db_url)
        self.sessions: sessionmaker[Session] = make_session_factory(self.engine)
        self.worker = Worker(self.sessions, settings)
        self.client = TestClient(
            create_app(settings, session_factory=self.sessions), raise_server_exceptions=False
        )
        self.client.headers["Authorization"] = f"Bearer {token}"

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "you_are": AGENT, "tools": [t.name for t in self.tools]}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        method, path, params, body = to_request(tool, arguments)
        response = self.client.request(method, path, params=params, json=body)
        try:
            payload: JSON = response.json()
        except ValueError:
            payload = {"error": {"code": "non_json_response", "message": response.text[:500]}}
        self.worker.run_pending()  # background jobs advance inside step, never between steps
        return Outcome({"status": response.status_code, "body": payload})

    def score(self) -> float:
        with self.sessions() as session:
            return KINDS[self.task.kind].verify(session, self.task.facts)

    def quiesce(self) -> None:
        self.engine.dispose()

    def close(self) -> None:
        self.client.close()
        self.engine.dispose()
        shutil.rmtree(self.settings.upload_dir, ignore_errors=True)


class ClaimsAdapter(Adapter):
    """``statekit.make("claims_app", scale=1)``: scale 1 is ~10 MB of claims data per world."""

    name = "claims_app"
    strategies = ("template",)

    def __init__(self, scale: int = 1) -> None:
        if scale < 1:
            raise ConfigError("scale must be at least 1")
        self.scale = scale
        self.spec = DigestSpec.load(SPEC_PATH)
        self._vendors: ThreadedServer | None = None

    def fingerprint(self) -> dict[str, str]:
        return {
            "app": f"claims_app-{getattr(app_pkg, '__version__', '0')}",
            "fixtures": _fixture_hash(),
            "builder": BUILDER_VERSION,
            "scale": str(self.scale),
        }

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name != "template":
            raise ConfigError(f"claims_app offers strategies {list(self.strategies)}, not {name!r}")
        lease = ServerLease(options.get("db_url"))
        return PostgresTemplate(lease.server, prefix="skclaims", on_close=lease.close)

    def _settings(self, db_url: str, upload_dir: Path) -> Settings:
        if self._vendors is None:
            self._vendors = ThreadedServer(create_vendor_app()).start()
        base = self._vendors.url
        return Settings(
            db_url=db_url,
            upload_dir=upload_dir,
            fraud_url=f"{base}/fraud",
            payment_url=f"{base}/payments",
            address_url=f"{base}/address",
        )

    def build_world(self, world: World, seed: int) -> None:
        engine = make_engine(world.location)
        try:
            create_schema(engine)
            with make_session_factory(engine)() as session, session.begin():
                fixtures.generate(session, seed=seed, scale=self.scale)
            with make_session_factory(engine)() as session, session.begin():
                settings = Settings(db_url=world.location)
                services.login(session, settings, AGENT, fixtures.FIXTURE_PASSWORD)
        finally:
            engine.dispose()

    def start_episode(
        self, world: World, *, seed: int, options: dict[str, JSON], task: Task | None
    ) -> Episode:
        engine = make_engine(world.location)
        try:
            with make_session_factory(engine)() as session:
                token = session.scalar(
                    select(AuthSession.token)
                    .join(Adjuster, AuthSession.adjuster_id == Adjuster.id)
                    .where(Adjuster.username == AGENT)
                    .order_by(AuthSession.expires_at.desc())
                )
                if task is None:
                    requested = options.get("task")
                    try:
                        task = choose_task(session, seed, str(requested) if requested is not None else None)
                    except ValueError as exc:
                        raise ConfigError(str(exc)) from exc
        finally:
            engine.dispose()
        if token is None:
            raise ConfigError("the world has no login session for the agent; rebuild it")
        assert isinstance(task, ClaimsTask)
        upload_dir = Path(tempfile.mkdtemp(prefix="statekit-claims-uploads-"))
        return ClaimsEpisode(self._settings(world.location, upload_dir), task, token)

    def digest(self, world: World) -> Digest:
        return postgres_digest(to_conninfo(world.location), self.spec)

    def check_schema(self, world: World) -> list[str]:
        with connect(to_conninfo(world.location)) as conn:
            uncovered, unknown = coverage_problems(live_columns(conn, self.spec.schema), self.spec)
        return uncovered + unknown

    def task_kinds(self) -> list[str]:
        return sorted(KINDS)

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        assert isinstance(task, ClaimsTask)
        return KINDS[task.kind].reference(task.facts)

    def close(self) -> None:
        if self._vendors is not None:
            self._vendors.stop()
            self._vendors = None
