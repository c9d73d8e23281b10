"""A helpdesk web API wrapped as a user would wrap theirs: FastAPI over SQLAlchemy, tools as routes
(``statekit.kit.WebApp``, ``Route``), the public kit only. The reset benchmark's kit adapter with a web
app: what an episode's reset costs on an application statekit's authors did not shape.

Tables: ``agents``, ``tickets`` (status, priority, assignee), ``comments``. Tools: ``list_tickets``,
``get_ticket``, ``comment``, ``close_ticket``, ``submit``. Task: close every open urgent ticket.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import DateTime, ForeignKey, String, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from statekit.kit import (
    JSON,
    CheckHints,
    DigestSpec,
    EnvSettings,
    Episode,
    Outcome,
    Route,
    SqlAdapter,
    Task,
    Tool,
    WebApp,
    World,
)


class Base(DeclarativeBase):
    pass


class Agent(Base):
    __tablename__ = "agents"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(60), unique=True)


class Ticket(Base):
    __tablename__ = "tickets"
    id: Mapped[int] = mapped_column(primary_key=True)
    subject: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="open")
    priority: Mapped[str] = mapped_column(String(20))
    assignee_id: Mapped[int | None] = mapped_column(ForeignKey("agents.id"))
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=datetime.now, onupdate=datetime.now)


class Comment(Base):
    __tablename__ = "comments"
    id: Mapped[int] = mapped_column(primary_key=True)
    ticket_id: Mapped[int] = mapped_column(ForeignKey("tickets.id"))
    body: Mapped[str] = mapped_column(String(2000))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=datetime.now)


class CommentIn(BaseModel):
    body: str


def create_app(sessions: sessionmaker[Session]) -> FastAPI:
    """The helpdesk's own API (it knows nothing of statekit)."""
    app = FastAPI(title="helpdesk")

    def shown(ticket: Ticket) -> dict[str, Any]:
        return {
            "id": ticket.id,
            "subject": ticket.subject,
            "status": ticket.status,
            "priority": ticket.priority,
        }

    @app.get("/tickets")
    def list_tickets(status: str | None = None, priority: str | None = None) -> list[dict[str, Any]]:
        with sessions() as session:
            query = select(Ticket).order_by(Ticket.id)
            if status:
                query = query.where(Ticket.status == status)
            if priority:
                query = query.where(Ticket.priority == priority)
            return [shown(t) for t in session.scalars(query)]

    @app.get("/tickets/{ticket_id}")
    def get_ticket(ticket_id: int) -> dict[str, Any]:
        with sessions() as session:
            ticket = session.get(Ticket, ticket_id)
            if ticket is None:
                raise HTTPException(404, "no such ticket")
            comments = session.scalars(
                select(Comment.body).where(Comment.ticket_id == ticket_id).order_by(Comment.id)
            )
            return {**shown(ticket), "comments": list(comments)}

    @app.post("/tickets/{ticket_id}/comments", status_code=201)
    def comment(ticket_id: int, body: CommentIn) -> dict[str, Any]:
        with sessions.begin() as session:
            if session.get(Ticket, ticket_id) is None:
                raise HTTPException(404, "no such ticket")
            session.add(Comment(ticket_id=ticket_id, body=body.body))
        return {"ok": True}

    @app.post("/tickets/{ticket_id}/close")
    def close_ticket(ticket_id: int) -> dict[str, Any]:
        with sessions.begin() as session:
            ticket = session.get(Ticket, ticket_id)
            if ticket is None:
                raise HTTPException(404, "no such ticket")
            ticket.status = "closed"
            return shown(ticket)

    return app


SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {
            "agents": {"key": ["id"], "include": ["id", "name"]},
            "tickets": {
                "key": ["id"],
                "include": ["id", "subject", "status", "priority", "assignee_id"],
                "exclude": {"updated_at": "audit timestamp"},
            },
            "comments": {
                "key": ["id"],
                "include": ["id", "ticket_id", "body"],
                "exclude": {"created_at": "audit"},
            },
        },
        "ignored_tables": {},
    }
)
_ID = {"type": "integer", "minimum": 1, "maximum": 10_000}
_OBJ = {"type": "object", "additionalProperties": False}
TOOLS = [
    Tool(
        "list_tickets",
        "Tickets, filtered by status or priority.",
        {
            **_OBJ,
            "properties": {"status": {"enum": ["open", "closed"]}, "priority": {"enum": ["low", "urgent"]}},
        },
        read_only=True,
    ),
    Tool(
        "get_ticket",
        "One ticket with its comments.",
        {**_OBJ, "properties": {"ticket_id": _ID}, "required": ["ticket_id"]},
        read_only=True,
    ),
    Tool(
        "comment",
        "Comment on a ticket.",
        {
            **_OBJ,
            "properties": {"ticket_id": _ID, "body": {"type": "string", "minLength": 1, "maxLength": 2000}},
            "required": ["ticket_id", "body"],
        },
    ),
    Tool(
        "close_ticket",
        "Close a ticket.",
        {**_OBJ, "properties": {"ticket_id": _ID}, "required": ["ticket_id"]},
    ),
    Tool("submit", "Finish the task.", _OBJ),
]
ROUTES = {
    "list_tickets": Route("GET", "/tickets"),
    "get_ticket": Route("GET", "/tickets/{ticket_id}"),
    "comment": Route("POST", "/tickets/{ticket_id}/comments"),
    "close_ticket": Route("POST", "/tickets/{ticket_id}/close"),
}


class Helpdesk:
    """The app on one world, kept warm across its episodes (``attach``)."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(url)
        self.sessions = sessionmaker(self.engine)
        self.web = WebApp.asgi(create_app(self.sessions))

    def close(self) -> None:
        try:
            self.web.close()
        finally:
            self.engine.dispose()


@dataclass(frozen=True)
class UrgentTask(Task):
    facts: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The urgent tickets' ids: hidden from the agent, used by the reference script."""


class HelpdeskEpisode(Episode):
    def __init__(self, desk: Helpdesk, task: Task) -> None:
        self.desk, self.task, self.tools = desk, task, TOOLS
        desk.web.forget_cookies()

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        return Outcome(self.desk.web.call(ROUTES[tool], arguments))

    def score(self) -> float:
        with self.desk.sessions() as session:
            still = session.scalars(
                select(Ticket.id).where(Ticket.priority == "urgent", Ticket.status == "open")
            )
            return 0.0 if list(still) else 1.0

    def quiesce(self) -> None:
        self.desk.engine.dispose()

    def close(self) -> None:
        self.desk.engine.dispose()


class HelpdeskAdapter(SqlAdapter, CheckHints):
    """``statekit.make(HelpdeskAdapter)``: 5 agents, 200 tickets (a seed's share urgent), comments. The
    default fingerprint follows this file. (Its three tables are too cheap for a schema stage: a
    clone of the stage's golden costs more than ``create_all``.)"""

    name = "helpdesk"
    spec = SPEC
    deterministic_start = True

    def build_world(self, world: World, seed: int) -> None:
        engine = create_engine(self.database_url(world))
        try:
            Base.metadata.create_all(engine, checkfirst=False)
            rng = random.Random(seed)
            with Session(engine) as session, session.begin():
                session.add_all(Agent(name=f"agent{i}") for i in range(5))
                session.flush()
                for i in range(200):
                    ticket = Ticket(
                        subject=f"ticket {i}",
                        priority="urgent" if rng.random() < 0.05 else "low",
                        assignee_id=rng.randint(1, 5),
                    )
                    session.add(ticket)
                    session.flush()
                    session.add_all(
                        Comment(ticket_id=ticket.id, body=f"note {j}") for j in range(rng.randint(0, 3))
                    )
        finally:
            engine.dispose()

    def attach(self, world: World, settings: EnvSettings) -> Helpdesk:
        return Helpdesk(self.database_url(world))

    def detach(self, app: Any) -> None:
        if isinstance(app, Helpdesk):
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
        assert isinstance(app, Helpdesk)
        if task is None:
            with app.sessions() as session:
                query = select(Ticket.id).where(Ticket.priority == "urgent").order_by(Ticket.id)
                urgent = list(session.scalars(query))
            app.engine.dispose()
            prompt = "Close every urgent ticket, then submit."
            task = UrgentTask(f"urgent-{seed}", "close_urgent", prompt, 40, {"urgent": urgent})
        return HelpdeskEpisode(app, task)

    def task_kinds(self) -> list[str]:
        return ["close_urgent"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        assert isinstance(task, UrgentTask)
        read: list[dict[str, JSON]] = [{"tool": "list_tickets", "priority": "urgent", "status": "open"}]
        closed: list[dict[str, JSON]] = [
            {"tool": "close_ticket", "ticket_id": i} for i in task.facts["urgent"]
        ]
        return [*read, *closed, {"tool": "comment", "ticket_id": 1, "body": "done"}, {"tool": "submit"}]
