"""An application written the way applications are, and its adapter, which wires none of it.

The app binds its id sources at import (``from uuid import uuid4``, a dataclass default of
``uuid.uuid4``), draws tokens from ``secrets`` and numbers from ``random.SystemRandom``, stamps the
host's and the user's names (``from getpass import getuser``), and has a webhook thread that calls
out whenever it is told to. ``WildAdapter`` exposes it as tools and leaves every one of those to
statekit's own controls: the tests prove each control by switching it off. The ``Shop`` is the
application object an adapter keeps warm across episodes, with a generator of its own.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import platform
import random
import secrets
import socket
import threading
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from getpass import getuser
from typing import Any
from uuid import uuid4

import statekit
import statekit.kit
from statekit.adapter import Adapter, EnvSettings, Episode, Outcome
from statekit.capabilities import CheckHints, StateDumps
from statekit.contract import JSON, Task, Tool
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump, TableDump
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.memory import InMemory
from statekit.strategies.rewinding import Rewinding

# -- the application ---------------------------------------------------------------------------


@dataclass
class Order:
    item: str
    id: uuid.UUID = field(default_factory=uuid.uuid4)  # bound at import, like ``default=uuid.uuid4``
    ref: str = field(default_factory=lambda: uuid4().hex)
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    lucky: int = field(default_factory=lambda: random.SystemRandom().randrange(1_000_000))
    placed_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    host: str = field(default_factory=lambda: socket.gethostname())
    user: str = field(default_factory=getuser)

    def row(self) -> dict[str, JSON]:
        return {**asdict(self), "id": str(self.id)}


class Shop:
    """The application object itself: made once per world and kept warm across episodes (the adapter's
    ``attach``). Like most, it makes its own generator when it starts, seeded from the OS."""

    def __init__(self) -> None:
        self.rng = random.Random()
        self.opened = datetime.now(UTC).isoformat()
        self.host = socket.gethostname()

    def raffle(self) -> dict[str, JSON]:
        return {"ticket": self.rng.randrange(10**9), "opened": self.opened, "host": self.host}


def whoami() -> dict[str, str]:
    return {
        "host": socket.gethostname(),
        "node": platform.node(),
        "nodename": os.uname().nodename,
        "user": getpass.getuser(),
        "env_user": os.environ.get("USER", ""),
    }


class Notifier:
    """Webhooks sent by a daemon thread when ``go`` is set (i.e. whenever, e.g. between steps)."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.outcomes: list[str] = []
        self.threads: list[threading.Thread] = []

    def schedule(self, host: str, port: int) -> None:
        def send() -> None:
            self.go.wait(30)
            try:
                with socket.create_connection((host, port), timeout=5) as conn:
                    self.outcomes.append("sent: " + conn.recv(64).decode())
            except OSError as exc:
                self.outcomes.append(f"failed: {type(exc).__name__}: {exc}")

        thread = threading.Thread(target=send, name="webhook", daemon=True)
        thread.start()
        self.threads.append(thread)


def fetch(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=5) as conn:
        return conn.recv(64).decode()


# -- the adapter ---------------------------------------------------------------------------------

_TEXT = {"type": "string"}
TOOLS = [
    Tool(
        "order",
        "Place an order.",
        {
            "type": "object",
            "properties": {"item": _TEXT},
            "required": ["item"],
            "additionalProperties": False,
        },
    ),
    Tool("whoami", "Host and user.", {"type": "object", "additionalProperties": False}),
    Tool(
        "webhook",
        "Schedule a webhook to host:port.",
        {
            "type": "object",
            "properties": {"host": _TEXT, "port": {"type": "integer"}},
            "required": ["host", "port"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "fetch",
        "Read from host:port now.",
        {
            "type": "object",
            "properties": {"host": _TEXT, "port": {"type": "integer"}},
            "required": ["host", "port"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "resolve",
        "Look a name up.",
        {
            "type": "object",
            "properties": {"name": _TEXT},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    Tool("raffle", "Draw a ticket.", {"type": "object", "additionalProperties": False}),
    Tool("submit", "Finish.", {"type": "object", "additionalProperties": False}),
]


class WildEpisode(Episode):
    def __init__(self, store: dict[str, Any], task: Task, notifier: Notifier, shop: Shop) -> None:
        self.store, self.task, self.tools, self.notifier, self.shop = store, task, TOOLS, notifier, shop

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        if tool == "order":
            order = Order(str(arguments["item"])).row()
            self.store["orders"].append(order)
            return Outcome({"order": order})
        if tool == "raffle":
            return Outcome(self.shop.raffle())
        if tool == "whoami":
            return Outcome(whoami())
        if tool == "webhook":
            self.notifier.schedule(str(arguments["host"]), int(str(arguments["port"])))
            return Outcome({"scheduled": True})
        try:
            if tool == "fetch":
                return Outcome({"read": fetch(str(arguments["host"]), int(str(arguments["port"])))})
            return Outcome({"addresses": len(socket.getaddrinfo(str(arguments["name"]), 80))})
        except OSError as exc:
            return Outcome({"failed": f"{type(exc).__name__}"})

    def score(self) -> float:
        return 1.0 if len(self.store["orders"]) > 2 else 0.0


class WildAdapter(Adapter, StateDumps, CheckHints):
    """In-memory worlds of orders; the build stamps its two orders five virtual minutes apart. The
    ``Shop`` is attached once per world; with ``rewind`` worlds are rewound and reused, so one shop
    serves every episode of a seed."""

    name = "wild"
    strategies = ("memory",)
    probe_tasks = {"clock": "orders", "ids": "orders"}

    def __init__(self, *, build_calls: str = "", allowed: tuple[str, ...] = (), rewind: bool = False) -> None:
        self.build_calls = build_calls
        self.allowed = allowed
        self.rewind = rewind
        self.notifier = Notifier()
        self.attached = 0

    def fingerprint(self) -> dict[str, str]:
        return {"app": "wild-1", "build_calls": self.build_calls}

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        return Rewinding(InMemory()) if self.rewind else InMemory()

    def attach(self, world: World, settings: EnvSettings) -> Shop:
        self.attached += 1
        return Shop()

    def allowed_endpoints(self) -> list[str]:
        return list(self.allowed)

    def build_world(self, world: World, seed: int) -> None:
        first = Order("seed-a")
        statekit.kit.clock().advance(timedelta(minutes=5))
        second = Order(f"seed-{seed}")
        world.handle["orders"] = [first.row(), second.row()]
        if self.build_calls:
            host, port = self.build_calls.rsplit(":", 1)
            with contextlib.suppress(OSError):  # the builder shrugs; statekit must not
                fetch(host, int(port))

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
        task = task or Task(id=f"wild-{seed}", kind="orders", prompt="Place an order.", max_steps=50)
        assert isinstance(app, Shop)
        return WildEpisode(world.handle, task, self.notifier, app)

    def dump(self, world: World) -> StateDump:
        rows = [{"key": [i], "row": order} for i, order in enumerate(world.handle["orders"])]
        return StateDump(tables={"orders": TableDump(key=["position"], ordered=True, rows=rows)})

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        return self.dump(world).digest()

    def task_kinds(self) -> list[str]:
        return ["orders"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        return [{"tool": "order", "item": "tea"}, {"tool": "order", "item": "cake"}, {"tool": "submit"}]
