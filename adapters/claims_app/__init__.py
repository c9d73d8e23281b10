"""The claims application as a statekit environment.

The application (``examples/claims_app``) knows nothing of statekit. This adapter builds its world
for a seed with the app's own fixture generator, points the app at a restored copy, exposes its
HTTP API as tools, drains its background jobs inside ``step``, and scores tasks from the database.
"""

from __future__ import annotations

import hashlib
import warnings
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

with warnings.catch_warnings():  # starlette deprecates httpx in its TestClient; it still works
    warnings.filterwarnings("ignore", message=".*starlette.testclient.*")
    from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import examples.claims_app as app_pkg
from adapters.claims_app.image import ensure_image
from adapters.claims_app.remote import RemoteEpisode, harness_ready
from adapters.claims_app.tasks import AGENT, KINDS, ClaimsTask, choose_task
from adapters.claims_app.tools import TOOLS, to_request, upload_of
from adapters.claims_app.vendors import live_vendors
from examples.claims_app import fixtures, services
from examples.claims_app.api import create_app
from examples.claims_app.config import Settings
from examples.claims_app.db import create_schema, make_engine, make_session_factory
from examples.claims_app.models import Adjuster, AuthSession
from examples.claims_app.worker import RunningWorker, Worker, start_in_thread
from statekit.adapter import Adapter, Episode, Outcome
from statekit.contract import JSON, Task, Tool
from statekit.determinism.replay import CANONICAL_BASE, Replay
from statekit.digest.compute import Digest, combine
from statekit.digest.coverage import coverage_problems, live_columns
from statekit.digest.dump import StateDump
from statekit.digest.files import TABLE_PREFIX as FILES_PREFIX
from statekit.digest.files import file_dump, file_tables
from statekit.digest.postgres import connect, postgres_digest, postgres_dump
from statekit.digest.spec import DigestSpec
from statekit.errors import ConfigError, SpecError
from statekit.postgres import ServerLease
from statekit.postgres.embedded import statekit_home
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.container import ContainerPerEpisode, docker_client, exec_in
from statekit.strategies.cow_fs import CowFilesystem
from statekit.strategies.pg_template import PostgresTemplate

BUILDER_VERSION = "3"
ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "digests" / "claims_app.toml"
CASSETTE_DIR = ROOT / "replay_cassettes" / "claims_app"
_APP_DIR = Path(app_pkg.__file__).parent


def _fixture_hash() -> str:
    """Worlds change when the schema or the seed script changes: hash both sources."""
    h = hashlib.sha256()
    for name in ("models.py", "fixtures.py"):
        h.update((_APP_DIR / name).read_bytes())
    return h.hexdigest()[:16]


class ClaimsEpisode(Episode):
    """The claims API wired to one restored database, logged in as the agent's adjuster.

    Determinism controls wired here: background jobs are drained after each tool call (or, with the
    "jobs" control off, run by the app's own polling worker thread), and outbound calls are answered
    from the seed's cassette (or, with "outbound" off, sent to live vendors).
    """

    task: ClaimsTask

    def __init__(
        self, settings: Settings, task: ClaimsTask, token: str, *, replay: Replay | None, drain_jobs: bool
    ) -> None:
        self.settings = settings
        self.task = task
        self.tools = TOOLS
        self.replay = replay
        self.engine: Engine = make_engine(settings.db_url)
        self.sessions: sessionmaker[Session] = make_session_factory(self.engine)
        self.worker = Worker(self.sessions, settings)
        self._stack = ExitStack()
        self.background: RunningWorker | None = None
        self.client: TestClient | None = None
        try:
            if not drain_jobs:  # the app's own polling worker calls vendors between steps: replay stays on
                if replay is not None:
                    self._stack.enter_context(replay.session())
                self.background = start_in_thread(self.sessions, settings)
            self.client = TestClient(
                create_app(settings, session_factory=self.sessions), raise_server_exceptions=False
            )
            self.client.headers["Authorization"] = f"Bearer {token}"
        except BaseException:
            self.close()  # nothing half-built outlives a failed start: no thread, patch or connection
            raise

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "you_are": AGENT, "tools": [t.name for t in self.tools]}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        with self.replay.session() if self.replay and not self.background else nullcontext():
            if tool == "wait":
                hours = int(float(str(arguments["hours"])))  # the schema admits 2.0 as an integer
                observation: JSON = {"waited_hours": hours}
                advance: timedelta | None = timedelta(hours=hours)
            else:
                observation, advance = self._request(tool, arguments), None
            if self.background is None:
                self.worker.run_pending()  # jobs advance inside step, never between steps
        misses = self.replay.take_misses() if self.replay else []
        if misses:
            observation = {
                "error": {
                    "code": "replay_miss",
                    "message": misses[0].message(),
                    "requests": [f"{m.method} {m.uri}" for m in misses],
                },
                "response": observation,
            }
        return Outcome(observation, advance=advance)

    def _request(self, tool: str, arguments: dict[str, JSON]) -> JSON:
        method, path, params, body = to_request(tool, arguments)
        assert self.client is not None, "the episode is closed"
        response = self.client.request(
            method, path, params=params, json=body, files=upload_of(tool, arguments)
        )
        try:
            payload: JSON = response.json()
        except ValueError:
            payload = {"error": {"code": "non_json_response", "message": response.text[:500]}}
        return {"status": response.status_code, "body": payload}

    def score(self) -> float:
        with self.sessions() as session:
            return KINDS[self.task.kind].verify(session, self.task.facts)

    def quiesce(self) -> None:
        self.engine.dispose()

    def close(self) -> None:
        if self.background is not None:
            self.background.stop()
            self.background = None
        self._stack.close()
        if self.client is not None:
            self.client.close()
        self.engine.dispose()
        # FastAPI's callable caches (4096 entries each) keep this episode's route functions, and through
        # their closures its session factory, for thousands of episodes: unbind the engine from it.
        self.engine.clear_compiled_cache()
        self.sessions.configure(bind=None)


class ClaimsAdapter(Adapter):
    """``statekit.make("claims_app", scale=1)``: scale 1 is ~9 MB per world (mostly PostgreSQL's own).

    Outbound calls replay ``replay_cassettes/claims_app/seed-N.yaml``. ``record=True`` (with live
    vendors at ``vendors_url``) records new interactions into those cassettes instead;
    ``statekit record claims_app`` does that for a range of seeds.
    """

    name = "claims_app"
    strategies = ("template", "container")
    controls = ("jobs", "outbound")
    probe_tasks = {  # filing a claim makes new ids, a fraud job and two vendor calls; triage writes times
        "clock": "triage_overdue",
        "ids": "file_new_claim",
        "jobs": "file_new_claim",
        "outbound": "file_new_claim",
    }

    def __init__(
        self,
        scale: int = 1,
        *,
        vendors_url: str | None = None,
        record: bool = False,
        cassette_dir: str | Path | None = None,
    ) -> None:
        if scale < 1:
            raise ConfigError("scale must be at least 1")
        if record and not vendors_url:
            raise ConfigError("record=True needs vendors_url: the live vendors to record from")
        self.scale = scale
        self.vendors_url = vendors_url.rstrip("/") if vendors_url else None
        self.record = record
        self.cassette_dir = Path(cassette_dir) if cassette_dir else CASSETTE_DIR
        self.spec = DigestSpec.load(SPEC_PATH)
        self.mode = "template"
        self.image_id: str | None = None
        self._remote: weakref.WeakValueDictionary[str, RemoteEpisode] = weakref.WeakValueDictionary()

    def fingerprint(self) -> dict[str, str]:
        made = {
            "app": f"claims_app-{getattr(app_pkg, '__version__', '0')}",
            "fixtures": _fixture_hash(),
            "builder": BUILDER_VERSION,
            "scale": str(self.scale),
        }
        if self.image_id:  # a golden image carries the code that serves it: a new image, new goldens
            made["image"] = self.image_id
        return made

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name == "template":  # the database and the upload directory, reset together
            lease = ServerLease(options.get("db_url"))
            database = PostgresTemplate(lease.server, prefix="skclaims", on_close=lease.close)
            uploads = CowFilesystem(statekit_home() / "files" / self.name)
            return Composite({"db": database, "uploads": uploads})
        if name == "container":
            if self.scale != 1 or self.record or self.vendors_url:
                raise ConfigError("the container strategy runs the default world (scale 1, replayed vendors)")
            client = docker_client()
            self.mode = "container"
            self.image_id = ensure_image(client)
            return ContainerPerEpisode(self.image_id, ready=harness_ready, client=client)
        raise ConfigError(f"claims_app offers strategies {list(self.strategies)}, not {name!r}")

    def metadata(self) -> dict[str, JSON]:
        meta: dict[str, JSON] = dict(self.fingerprint())
        if self.image_id:
            meta["image"] = self.image_id  # the digest every episode container was started from
        return meta

    @contextmanager
    def live_services(self) -> Iterator[dict[str, Any]]:
        """The vendor stubs, live, in their own process."""
        with live_vendors() as url:
            yield {"scale": self.scale, "vendors_url": url, "cassette_dir": str(self.cassette_dir)}

    def cassette(self, seed: int) -> Path:
        return self.cassette_dir / f"seed-{seed}.yaml"

    def _outbound(self, seed: int) -> tuple[str, Replay | None]:
        """(vendor base URL the app is given, the replay in force)."""
        if "outbound" in self.disabled_controls:
            if not self.vendors_url:
                raise ConfigError(
                    "with the outbound control off the app needs live vendors: pass vendors_url="
                )
            return self.vendors_url, None
        if self.record:
            assert self.vendors_url is not None
            return self.vendors_url, Replay(self.cassette(seed), record=True, live_base=self.vendors_url)
        return CANONICAL_BASE, Replay(self.cassette(seed))

    @staticmethod
    def _db_url(world: World) -> str:
        return str(world.handle["db"].location)

    @staticmethod
    def _uploads(world: World) -> Path:
        return Path(world.handle["uploads"].location)

    def build_world(self, world: World, seed: int) -> None:
        if self.mode == "container":  # build the seed's golden inside; the container is then committed
            exec_in(
                world, ["python", "-m", "statekit.cli", "digest", self.name, "--seed", str(seed), "--json"]
            )
            return
        engine = make_engine(self._db_url(world))
        try:
            create_schema(engine)
            with make_session_factory(engine)() as session, session.begin():
                fixtures.generate(session, seed=seed, scale=self.scale, upload_dir=self._uploads(world))
            with make_session_factory(engine)() as session, session.begin():
                # the agent's session must outlive any episode (and a run with the clock control off)
                settings = Settings(db_url=self._db_url(world), token_ttl_hours=24 * 365 * 20)
                services.login(session, settings, AGENT, fixtures.FIXTURE_PASSWORD)
        finally:
            engine.dispose()

    def start_episode(
        self, world: World, *, seed: int, options: dict[str, JSON], task: Task | None
    ) -> Episode:
        if self.mode == "container":
            if task is not None:
                raise ConfigError("forks (snapshot/restore) need the template strategy")
            remote = RemoteEpisode(world, seed=seed, options=options)
            self._remote[world.id] = remote
            return remote
        engine = make_engine(self._db_url(world))
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
        base, replay = self._outbound(seed)
        settings = Settings(
            db_url=self._db_url(world),
            upload_dir=self._uploads(world),
            fraud_url=f"{base}/fraud",
            payment_url=f"{base}/payments",
            address_url=f"{base}/address",
            worker_poll_seconds=0.05,
        )
        return ClaimsEpisode(
            settings, task, token, replay=replay, drain_jobs="jobs" not in self.disabled_controls
        )

    def digest(self, world: World) -> Digest:
        if self.mode == "container":
            return Digest(digest=self._remote[world.id].digest(), tables={})
        database = postgres_digest(to_conninfo(self._db_url(world)), self.spec)
        return combine({**database.tables, **file_tables(self._directories(world))})

    def _directories(self, world: World) -> dict[str, Path]:
        known = {"uploads": self._uploads(world)}
        missing = sorted(set(self.spec.directories or {}) - set(known))
        if missing:
            raise SpecError(
                f"{self.spec.source}: unknown directories {missing}; claims_app has {sorted(known)}"
            )
        return {name: known[name] for name in self.spec.directories or {}}

    def dump(self, world: World) -> StateDump:
        if self.mode == "container":
            raise ConfigError("dumps are taken with the template strategy")
        dump = postgres_dump(to_conninfo(self._db_url(world)), self.spec)
        for name, path in self._directories(world).items():
            dump.tables[f"{FILES_PREFIX}{name}"] = file_dump(path)
        return dump

    def live_schema(self, world: World) -> dict[str, dict[str, str]]:
        with connect(to_conninfo(self._db_url(world))) as conn:
            return live_columns(conn, self.spec.schema)

    def check_schema(self, world: World) -> list[str]:
        if self.mode == "container":
            return []  # the harness inside checks coverage with every digest
        with connect(to_conninfo(self._db_url(world))) as conn:
            uncovered, unknown = coverage_problems(live_columns(conn, self.spec.schema), self.spec)
        return uncovered + unknown

    def task_kinds(self) -> list[str]:
        return sorted(KINDS)

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        if not isinstance(task, ClaimsTask):
            raise ConfigError(
                "reference scripts need the template strategy (a task's facts stay in its container)"
            )

        return KINDS[task.kind].reference(task.facts)

    def declared_tools(self) -> list[Tool]:
        return list(TOOLS)

    def observation_schema(self) -> dict[str, JSON]:
        """The start (the task), an API response, a wait, the submit, or a replay miss."""
        text, obj = {"type": "string"}, {"type": "object"}
        return {
            "anyOf": [
                {
                    "title": "start",
                    **obj,
                    "properties": {"task": text, "you_are": text, "tools": {"type": "array", "items": text}},
                    "required": ["task", "you_are", "tools"],
                },
                {
                    "title": "api_response",
                    **obj,
                    "properties": {"status": {"type": "integer"}, "body": {}},
                    "required": ["status", "body"],
                },
                {
                    "title": "waited",
                    **obj,
                    "properties": {"waited_hours": {"type": "integer"}},
                    "required": ["waited_hours"],
                },
                {
                    "title": "submitted",
                    **obj,
                    "properties": {"submitted": {"const": True}},
                    "required": ["submitted"],
                },
                {
                    "title": "replay_miss",
                    **obj,
                    "properties": {"error": obj, "response": {}},
                    "required": ["error"],
                },
            ]
        }
