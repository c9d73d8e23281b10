"""The exception tree. Every message says what was checked and what to do.

StatekitError
├── ConfigError          bad adapter name, spec file, option, or missing dependency
│   └── SpecError        a digest spec that is malformed or disagrees with the live schema
│       └── CoverageError    a live column neither included nor excluded by the spec
├── ResetError           a reset strategy could not build or restore a world
│   ├── RewindError      a world cannot be rewound in place (``reason``); it is discarded instead
│   └── ServerDown       the server holding the worlds cannot be reached now (retry later)
├── ResetNeeded          step()/state() called before reset()
├── EnvironmentClosed    any call on an Environment after close()
├── ActionError          an action that is malformed, unknown, or fails its tool's schema
├── ReplayMissError      an outbound request that no cassette recorded
├── EgressError          an outbound connection the egress guard refused (also a PermissionError)
├── RemoteError          a statekit harness answered a client's call with an error
└── EnvironmentLost      the process holding an environment died (a harness worker, a Ray actor)
    └── WorldLost        the current episode's world died with its database server
"""

from __future__ import annotations


class StatekitError(Exception):
    """Base of every error statekit raises on purpose."""


class ConfigError(StatekitError):
    """Configuration is wrong: unknown adapter, bad option, missing optional dependency."""


class SpecError(ConfigError):
    """A digest spec is malformed or names a table or column the schema lacks."""


class CoverageError(SpecError):
    """Live columns that the digest spec neither includes nor excludes."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = sorted(missing)
        by_table: dict[str, list[str]] = {}
        for name in self.missing:
            table, _, column = name.partition(".")
            by_table.setdefault(table, []).append(column)
        lines = "".join(f"\n  {table}: {', '.join(columns)}" for table, columns in sorted(by_table.items()))
        super().__init__(
            f"digest spec does not cover {len(self.missing)} column(s) in {len(by_table)} table(s):{lines}\n"
            "Add each to the table's `include` list, or to `exclude` with a reason "
            "(`statekit spec init` drafts a spec with every table and column)."
        )


class ResetError(StatekitError):
    """A reset strategy failed; whatever it had created was dropped."""


class RewindError(ResetError):
    """A world cannot be put back in place (DDL, journal overflow, no journal...): ``reason`` says why.

    Never fatal for a reset: the world is discarded and a fresh copy cloned instead.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ServerDown(ResetError):
    """The server holding the worlds cannot be reached now (it died, or is being restarted). Nothing
    was created; retry the call once ``Environment.health()`` (or the harness's ``/health``) is clear."""


class ResetNeeded(StatekitError):
    """The environment has no episode yet: call reset(seed=...) first."""


class EnvironmentClosed(StatekitError):
    """The environment was closed; it holds no strategy or server any more, so it creates nothing."""


class ActionError(StatekitError):
    """An action is malformed, names an unknown tool, or fails the tool's input schema."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class ReplayMissError(StatekitError):
    """An outbound request that no cassette recorded; no packet left the process."""


class EgressError(StatekitError, PermissionError):
    """An outbound connection, datagram or name lookup refused while an environment is open.

    A ``PermissionError`` (an ``OSError``), so client libraries report it as the failed connection it
    is; the step that follows names the destination in its error observation.
    """


class RemoteError(StatekitError):
    """A harness (``statekit serve``) answered with an error; ``status`` and ``code`` say which."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"{message} (HTTP {status}, {code})" if status else f"{message} ({code})")


class EnvironmentLost(StatekitError):
    """The process that held an environment died (a harness worker, a Ray actor or its node).

    Its episode is gone with it. Episodes are deterministic, so replaying the seed and the actions
    taken so far in a new environment continues exactly where it stopped: ``statekit.rollout``
    does that.
    """


class WorldLost(EnvironmentLost):
    """The current episode's world died with its database server (killed, crashed, restarted): its
    connections, transactions and warm application are gone and its state cannot be vouched for.

    The environment itself lives on: the next ``reset`` starts a new episode (once the server is back).
    Like any lost environment, replaying the seed and the actions taken so far continues exactly
    where the episode stopped; ``statekit.rollout`` does that.
    """


_ENDED_CONNECTION = (
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly",
    "the connection is closed",
)
STALE_CONNECTION_HINT = (
    "The application used a database connection from before the last reset: statekit ends every "
    "connection to a world when it rewinds it (nothing of an episode's sessions may outlive it). "
    "Reconnect per episode: close the application's connections in Adapter.on_rewind(app), which runs "
    "before an app kept warm serves the next episode (Django: statekit.kit.DjangoProject, and "
    "project.rewound(url) there; it reconnects every thread), or "
    "make its pool test a connection before use (SQLAlchemy: create_engine(..., pool_pre_ping=True))."
)


def stale_connection_hint(exc: BaseException) -> str | None:
    """``STALE_CONNECTION_HINT`` when ``exc`` (or what caused it) is a database connection ended under
    the application, as a rewind ends them; else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(text in str(current) for text in _ENDED_CONNECTION):
            return STALE_CONNECTION_HINT
        current = current.__cause__ or current.__context__
    return None


def stale_connection_error(exc: BaseException) -> ResetError | None:
    """An episode's start that failed on an ended connection, as a ResetError that says what to do (to
    raise ``from exc``)."""
    hint = stale_connection_hint(exc)
    if hint is None:
        return None
    return ResetError(f"starting the episode failed: {type(exc).__name__}: {exc}. {hint}")
