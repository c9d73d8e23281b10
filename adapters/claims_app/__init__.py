"""The claims application as a statekit environment.

The application (``examples/claims_app``) knows nothing of statekit. This adapter builds its world
for a seed with the app's own fixture generator, points the app at a restored copy, exposes its
HTTP API as tools, drains its background jobs inside ``step``, and scores tasks from the database.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.dependencies import models as fastapi_dependencies
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import statekit_examples.apps.claims_app as app_pkg
from statekit import ConfigError
from statekit.kit import (
    JOURNAL_BOUND,
    JSON,
    AssayHooks,
    CheckHints,
    ContainerImage,
    Control,
    DigestSpec,
    DrainJobs,
    EnvSettings,
    Episode,
    Expectation,
    FixtureSource,
    JobQueue,
    LiveServices,
    Outcome,
    Replay,
    ReplayControl,
    SqlAdapter,
    Task,
    Tool,
    ToolSchemas,
    WebApp,
    World,
    episode_replay,
    keep_pooled,
)
from statekit_examples.adapters.claims_app.image import ensure_image
from statekit_examples.adapters.claims_app.tasks import AGENT, KINDS, ClaimsTask, choose_task
from statekit_examples.adapters.claims_app.tools import ROUTES, TOOLS
from statekit_examples.adapters.claims_app.vendors import live_vendors
from statekit_examples.apps.claims_app import fixtures, services
from statekit_examples.apps.claims_app.api import create_app
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.db import create_schema, make_engine, make_session_factory
from statekit_examples.apps.claims_app.models import Adjuster, AuthSession, Base, Job
from statekit_examples.apps.claims_app.worker import RunningWorker, Worker, start_in_thread

BUILDER_VERSION = "3"
VENDORS = "vendors"
"""The one outside service the app calls (fraud scoring, payments, address validation)."""
ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "digests" / "claims_app.toml"
CASSETTE_DIR = ROOT / "replay_cassettes" / "claims_app"
_APP_DIR = Path(app_pkg.__file__).parent


@functools.cache
def _fixture_hash() -> str:
    """Worlds change when the schema or the seed script changes: hash both sources (once a process)."""
    h = hashlib.sha256()
    for name in ("models.py", "fixtures.py"):
        h.update((_APP_DIR / name).read_bytes())
    return h.hexdigest()[:16]


class ClaimsApp:
    """The claims application wired to one world, kept warm across the episodes served on it.

    The engine, the FastAPI app on its in-process transport (``WebApp``: one event loop for the
    app's life, no thread per request) and the agent's login token are built once per world.
    One connection is kept across episodes: each episode's end resets it server-side and names it to
    the world's journal, which spares it through the rewind (``statekit.kit.keep_pooled``); the pool
    pings it before use (``pool_pre_ping``) and reconnects if the rewind ended it after all.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine: Engine = make_engine(settings.db_url)
        self.sessions: sessionmaker[Session] = make_session_factory(self.engine)
        self.web: WebApp | None = None
        try:
            with self.sessions() as session:
                token = session.scalar(
                    select(AuthSession.token)
                    .join(Adjuster, AuthSession.adjuster_id == Adjuster.id)
                    .where(Adjuster.username == AGENT)
                    .order_by(AuthSession.expires_at.desc())
                )
            if token is None:
                raise ConfigError("the world has no login session for the agent; rebuild it")
            app = create_app(settings, session_factory=self.sessions)
            self.web = WebApp.asgi(app, headers={"Authorization": f"Bearer {token}"})
        except BaseException:
            self.close()
            raise
        self.engine.dispose()

    def close(self) -> None:
        web, self.web = self.web, None
        try:
            if web is not None:
                web.close()
        finally:
            _forget_engine(self.engine)
            _forget_fastapi_callables()
            # typing's own caches (128 deep) keep the app's ``Annotated[..., Depends(closure)]``
            # parameters, and through the closures this session factory: unbind the engine from it
            self.sessions.configure(bind=None)


def _forget_engine(engine: Engine) -> None:
    """Be done with an engine: its pool, its compiled SQL, and the ORM's flush statements for its
    dialect. Each engine has a dialect of its own, and each of the app's mappers keeps its flush
    statements in an LRU cache (100 to 150 entries) keyed by dialect, so a worker that made an
    engine per world and per build kept hundreds of dead dialects (some 30 more a minute in the
    soak), and its RSS crept for as long as it ran."""
    engine.dispose()
    engine.clear_compiled_cache()
    for mapper in {m.base_mapper for m in Base.registry.mappers}:  # flushes use the base's cache
        cache = mapper.__dict__.get("_compiled_cache")  # made on first flush; keys (dialect, ...)
        if cache is None:
            continue
        for key in [k for k in list(cache) if k[0] is engine.dialect]:
            with suppress(KeyError):  # another thread's flush may prune it first
                del cache[key]


def _forget_fastapi_callables() -> None:
    """Let a closed app go: FastAPI classifies dependency callables in module-level LRU caches of
    4096 entries keyed by the callable itself, so each app made for a world stayed alive (its route
    closures, settings and session factory) until some 340 later apps pushed it out. A worker's RSS
    grew with its first few hundred sessions and then stopped, a warm-up that lasted minutes of a
    soak. Live apps pay a re-classification of their callables on their next request."""
    for name, cached in vars(fastapi_dependencies).items():
        if name.endswith("_callable_cached") and hasattr(cached, "cache_clear"):
            cached.cache_clear()


class ClaimsEpisode(Episode):
    """One task on a warm ``ClaimsApp``, logged in as the agent's adjuster.

    Its determinism controls (``controls``, applied by statekit around every step): outbound calls
    answered from the seed's cassette (or, with "outbound" off, sent to live vendors), then the app's
    background jobs drained after each tool call (or, with "jobs" off, run by the app's own polling
    worker thread, which is how the removal check shows the control matters).
    """

    task: ClaimsTask

    def __init__(
        self,
        app: ClaimsApp,
        task: ClaimsTask,
        *,
        replay: Replay | None,
        drain_jobs: bool,
        world: World,
    ) -> None:
        self.app = app
        self.task = task
        self.world = world
        self.tools = TOOLS
        if app.web is not None:
            app.web.forget_cookies()  # each episode is a new visitor (the app sets none today)
        self.worker = Worker(app.sessions, app.settings)
        self.submitted = False
        controls: list[Control] = [ReplayControl(replay)] if replay is not None else []
        queue = JobQueue(world, Job.__tablename__, self._next_due)
        self.controls = [*controls, DrainJobs(self._drain, queue=queue)]
        self._stack = ExitStack()
        self.background: RunningWorker | None = None
        try:
            if not drain_jobs:  # the app's own polling worker calls vendors between steps: replay stays on
                if replay is not None:
                    self._stack.enter_context(replay.session())
                self.background = start_in_thread(app.sessions, app.settings)
        except BaseException:
            self.close()  # nothing half-built outlives a failed start: no thread, patch or connection
            raise

    def _drain(self) -> None:
        """Jobs due now run inside the step; once the task is submitted the world stays as it was."""
        if not self.submitted:
            self.worker.run_pending()

    def _next_due(self) -> datetime | None:
        """When the earliest queued job becomes due (the drain's own query, ``Worker._take_next``)."""
        with self.app.sessions() as session:
            return session.scalar(select(func.min(Job.run_after)).where(Job.status == "queued"))

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "you_are": AGENT, "tools": [t.name for t in self.tools]}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            self.submitted = True
            return Outcome({"submitted": True}, done=True)
        if tool == "wait":
            hours = int(float(str(arguments["hours"])))  # the schema admits 2.0 as an integer
            return Outcome({"waited_hours": hours}, advance=timedelta(hours=hours))
        assert self.app.web is not None, "the application is closed"
        return Outcome(self.app.web.call(ROUTES[tool], arguments))

    def score(self) -> float:
        with self.app.sessions() as session:
            return KINDS[self.task.kind].verify(session, self.task.facts)

    def expected_changes(self) -> Expectation:
        with self.app.sessions() as session:
            return KINDS[self.task.kind].expect(session, self.task.facts)

    def quiesce(self) -> None:
        self.app.engine.dispose()

    def close(self) -> None:
        straggler = False
        if self.background is not None:
            self.background.stop()
            straggler = self.background.thread.is_alive()  # still in a job: it may hold a connection
            self.background = None
        self._stack.close()
        if straggler:
            self.app.engine.dispose()
        else:
            keep_pooled(self.app.engine, self.world)  # its connection serves the next episode on the world


class ClaimsAdapter(SqlAdapter, CheckHints, ToolSchemas, AssayHooks, LiveServices, ContainerImage):
    """``statekit.make("claims_app", scale=1)``: scale 1 is ~9 MB per world (mostly PostgreSQL's own).

    ``journal_bound`` caps the row changes an episode may make and still be rewound (past it, the
    world is replaced by a clone).

    Outbound calls to the vendors (one outside service, ``vendors``: fraud scoring, payments, address
    validation) replay ``replay_cassettes/claims_app/seed-N.yaml``; ``statekit record claims_app``
    records them anew from the live vendors (``live_services``) for a range of seeds.
    """

    name = "claims_app"
    database_prefix = "skclaims"
    strategies = ("rewind", "template", "container")
    controls = (ReplayControl, DrainJobs)
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
        cassette_dir: str | Path | None = None,
        journal_bound: int = JOURNAL_BOUND,
    ) -> None:
        if scale < 1:
            raise ConfigError("scale must be at least 1")
        self.scale = scale
        self.cassette_dir = Path(cassette_dir) if cassette_dir else CASSETTE_DIR
        self.journal_bound = journal_bound
        self.spec = DigestSpec.load(SPEC_PATH)
        self.deterministic_start = True  # starting an episode only reads the world

    def fingerprint(self) -> dict[str, str]:
        return {
            "app": f"claims_app-{getattr(app_pkg, '__version__', '0')}",
            "fixtures": _fixture_hash(),
            "builder": BUILDER_VERSION,
            "scale": str(self.scale),
        }

    def container_image(self, client: Any) -> str:
        """The claims image (``images/claims.Dockerfile``): the app, its embedded PostgreSQL and
        ``statekit serve claims_app``; it serves the default world only."""
        if self.scale != 1:
            raise ConfigError("the container strategy runs the default world (scale 1, replayed vendors)")
        return ensure_image(client)

    @contextmanager
    def live_services(self) -> Iterator[dict[str, str]]:
        """The vendor stubs, live, in their own process: one service, ``vendors``."""
        with live_vendors() as url:
            yield {VENDORS: url}

    def cassette(self, seed: int) -> Path:
        return self.cassette_dir / f"seed-{seed}.yaml"

    def cassettes(self) -> list[Path]:
        return sorted(self.cassette_dir.glob("seed-*.yaml"))

    def fixture_sources(self) -> list[FixtureSource]:
        return [
            FixtureSource(
                name="claims seed script",
                origin="examples/claims_app/fixtures.py (seeded Faker)",
                synthetic=True,
            )
        ]

    def build_world(self, world: World, seed: int) -> None:
        engine = make_engine(self.database_url(world))
        try:
            # the database is new: create without probing, since SQLAlchemy's PostgreSQL dialect
            # caches the probe per dialect (128 deep) and would keep each build's dialect alive
            create_schema(engine, checkfirst=False)
            with make_session_factory(engine)() as session, session.begin():
                uploads = self.directory(world, "uploads")
                fixtures.generate(session, seed=seed, scale=self.scale, upload_dir=uploads)
            with make_session_factory(engine)() as session, session.begin():
                # the agent's session must outlive any episode (and a run with the clock control off)
                settings = Settings(db_url=self.database_url(world), token_ttl_hours=24 * 365 * 20)
                services.login(session, settings, AGENT, fixtures.FIXTURE_PASSWORD)
        finally:
            _forget_engine(engine)

    def attach(self, world: World, env: EnvSettings) -> ClaimsApp | None:
        base = env.service_url(VENDORS)
        settings = Settings(
            db_url=self.database_url(world),
            upload_dir=self.directory(world, "uploads"),
            fraud_url=f"{base}/fraud",
            payment_url=f"{base}/payments",
            address_url=f"{base}/address",
            worker_poll_seconds=0.05,
        )
        return ClaimsApp(settings)

    def detach(self, app: Any) -> None:
        if isinstance(app, ClaimsApp):
            app.close()

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        if not isinstance(app, ClaimsApp):
            raise ConfigError("the claims episode needs the application statekit attached to its world")
        if task is None:
            requested = options.get("task")
            with app.sessions() as session:
                try:
                    wanted = str(requested) if requested is not None else None
                    task = choose_task(session, seed, wanted, list(settings.task_pool))
                except ValueError as exc:
                    raise ConfigError(str(exc)) from exc
        assert isinstance(task, ClaimsTask)
        replay = episode_replay(self.cassette(seed), settings)
        return ClaimsEpisode(app, task, replay=replay, drain_jobs=settings.control_on("jobs"), world=world)

    def task_kinds(self) -> list[str]:
        return sorted(KINDS)

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        if not isinstance(task, ClaimsTask):
            raise ConfigError(
                "a claims reference script needs the task's hidden facts, which stay inside the episode's "
                "container: use the rewind or template strategy"
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
