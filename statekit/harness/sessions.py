"""Sessions: each owns one Environment and shares nothing; a pool bounds them and reaps idle ones.

An Environment is synchronous and not thread-safe, so every call on a session holds its lock; calls
on different sessions run side by side (the determinism controls still take turns inside them).
The pool's clock is injected so reaping is testable without waiting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from statekit.contract import JSON, State
from statekit.digest.dump import StateDump
from statekit.entropy import true_token
from statekit.errors import (
    ConfigError,
    EnvironmentLost,
    ResetError,
    ResetNeeded,
    ServerDown,
    SpecError,
    StatekitError,
    WorldLost,
)
from statekit.harness.errors import ApiError
from statekit.strategies.base import Health

log = logging.getLogger(__name__)

EXPIRED_MEMORY = 4096
"""How many reaped (or lost) session ids the pool remembers, to answer "expired" rather than "unknown"."""


class SessionEnvironment(Protocol):
    """What a session drives: an in-process ``Environment``, or one hosted in a worker process."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, JSON] | None = None
    ) -> tuple[JSON, dict]: ...

    def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]: ...

    def state(self) -> State: ...

    def snapshot(self) -> str: ...

    def restore(self, snapshot_id: str) -> tuple[JSON, dict]: ...

    def export_episode(self) -> bytes: ...

    def import_episode(self, blob: bytes) -> tuple[JSON, dict]: ...

    def dump(self) -> StateDump: ...

    def health(self) -> Health: ...

    def close(self) -> None: ...


def _unavailable(exc: ServerDown) -> ApiError:
    """The worlds' database is down: the call may be made again once ``/health`` says so."""
    return ApiError(503, "database_unavailable", f"{exc} (GET /health says when)")


class Session:
    """One client's environment plus the snapshot ids it handed out (restore accepts only those)."""

    def __init__(self, session_id: str, env: SessionEnvironment, now: float, *, pinned: bool) -> None:
        self.id = session_id
        self.env = env
        self.lock = threading.Lock()
        self.last_used = now
        self.pinned = pinned
        """Owned by an open WebSocket: it lives as long as the connection, so the reaper skips it."""
        self.closed = False
        self.snapshots: set[str] = set()
        self.tools: list[dict[str, JSON]] = []
        """The current episode's tools (``info["tools"]`` of its reset): MCP's ``tools/list``."""

    def reset(self, seed: int | None, options: dict[str, JSON] | None) -> tuple[JSON, dict[str, JSON]]:
        try:
            observation, info = self.env.reset(seed=seed, options=options)
            self.tools = list(info.get("tools") or [])
            return observation, info
        except SpecError:
            raise  # the server's digest spec is wrong: not the caller's doing
        except ServerDown as exc:
            raise _unavailable(exc) from exc
        except ResetError as exc:
            raise ApiError(503, "reset_failed", f"the world could not be restored: {exc}") from exc
        except (ConfigError, ValueError, TypeError) as exc:
            raise ApiError(
                422, "invalid_reset", f"reset refused seed={seed!r} with options {options!r}: {exc}"
            ) from exc

    def snapshot(self) -> str:
        snapshot_id = self.env.snapshot()
        self.snapshots.add(snapshot_id)
        return snapshot_id

    def restore(self, snapshot_id: str) -> tuple[JSON, dict[str, JSON]]:
        if snapshot_id not in self.snapshots:
            raise ApiError(
                404,
                "unknown_snapshot",
                f"session {self.id} has no snapshot {snapshot_id!r}: use an id POST /snapshot returned "
                "for this session",
            )
        try:
            return self.env.restore(snapshot_id)
        except ServerDown as exc:
            raise _unavailable(exc) from exc
        except ResetError as exc:
            raise ApiError(503, "reset_failed", f"the snapshot could not be restored: {exc}") from exc

    def export_episode(self) -> bytes:
        try:
            return self.env.export_episode()
        except ServerDown as exc:
            raise _unavailable(exc) from exc
        except ConfigError as exc:
            raise ApiError(422, "cannot_export", str(exc)) from exc

    def import_episode(self, blob: bytes) -> tuple[JSON, dict[str, JSON]]:
        """Continue an exported episode in this session (its own episode ends, as with a reset)."""
        try:
            observation, info = self.env.import_episode(blob)
        except ServerDown as exc:
            raise _unavailable(exc) from exc
        except ResetError as exc:
            raise ApiError(409, "import_failed", f"the episode did not continue here: {exc}") from exc
        except (ConfigError, ValueError, TypeError) as exc:
            raise ApiError(422, "invalid_episode", f"not an episode this environment takes: {exc}") from exc
        self.tools = list(info.get("tools") or self.tools)
        return observation, info


class SessionPool:
    """At most ``max_sessions`` sessions; ``reap()`` closes those idle for ``idle_timeout`` seconds."""

    def __init__(
        self,
        factory: Callable[[], SessionEnvironment],
        *,
        max_sessions: int,
        idle_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._opening = 0
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._lost: OrderedDict[str, tuple[str, str]] = OrderedDict()
        """Sessions that ended without being closed: ``(code, why)`` (``worker_lost``, ``world_lost``)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def open(self, *, pinned: bool = False) -> Session:
        """A new session with a fresh environment, or 429 when the pool is full."""
        with self._lock:
            if len(self._sessions) + self._opening >= self.max_sessions:
                raise ApiError(429, "too_many_sessions", self._full_message())
            self._opening += 1
        try:
            env = self._factory()
        except BaseException as exc:
            with self._lock:
                self._opening -= 1
            if isinstance(exc, ServerDown):
                raise _unavailable(exc) from exc
            if isinstance(exc, StatekitError):
                raise ApiError(
                    503, "environment_unavailable", f"could not make an environment for a new session: {exc}"
                ) from exc
            raise
        session = Session(true_token(16), env, self._clock(), pinned=pinned)
        with self._lock:
            self._opening -= 1
            self._sessions[session.id] = session
        return session

    @contextmanager
    def use(self, session_id: str) -> Iterator[Session]:
        """Hold the session for one call; its idle time starts again when the call ends."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise self._gone(session_id)
        with session.lock:
            if session.closed:
                raise self._gone(session_id)
            session.last_used = self._clock()
            try:
                yield session
            except ResetNeeded as exc:
                raise ApiError(409, "reset_needed", str(exc)) from exc
            except ServerDown as exc:  # the episode is kept: the call may be made again
                raise _unavailable(exc) from exc
            except WorldLost as exc:  # the environment lives: close it, dropping what it still holds
                self._lose(session, str(exc), "world_lost")
                self._retire(session)
                raise self._gone(session_id) from exc
            except EnvironmentLost as exc:
                self._lose(session, str(exc))
                raise self._gone(session_id) from exc
            finally:
                session.last_used = self._clock()

    def close(self, session_id: str) -> None:
        """Close one session (waiting for a call in flight) and drop its worlds."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise self._gone(session_id)
        with session.lock:
            self._retire(session)

    def reap(self) -> list[str]:
        """Close sessions idle for longer than ``idle_timeout``; skip any in a call right now."""
        if not self.idle_timeout:
            return []
        cutoff = self._clock() - self.idle_timeout
        with self._lock:
            idle = [s for s in self._sessions.values() if not s.pinned and s.last_used <= cutoff]
        reaped = []
        for session in idle:
            if not session.lock.acquire(blocking=False):
                continue
            try:
                if session.closed or session.last_used > cutoff:
                    continue
                with self._lock:
                    self._sessions.pop(session.id, None)
                    self._expired[session.id] = None
                    while len(self._expired) > EXPIRED_MEMORY:
                        self._expired.popitem(last=False)
                self._retire(session)
                reaped.append(session.id)
            finally:
                session.lock.release()
        if reaped:
            log.info("closed %d session(s) idle for more than %s s", len(reaped), self.idle_timeout)
        return reaped

    def forget_lost(self) -> list[str]:
        """Forget the sessions whose environment died with its worker process; later calls get 410."""
        with self._lock:
            lost = [s for s in self._sessions.values() if getattr(s.env, "lost", False)]
        for session in lost:
            self._lose(session, getattr(session.env, "lost_reason", "its worker process died"))
        return [session.id for session in lost]

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            with session.lock:
                self._retire(session)

    @staticmethod
    def _retire(session: Session) -> None:
        """Close the environment (the caller holds the session's lock). Never raises: it is cleanup."""
        session.closed = True
        try:
            session.env.close()
        except Exception:
            log.exception("closing the environment of session %s failed", session.id)

    def _lose(self, session: Session, reason: str, code: str = "worker_lost") -> None:
        with self._lock:
            self._sessions.pop(session.id, None)
            self._lost.setdefault(session.id, (code, reason))
            while len(self._lost) > EXPIRED_MEMORY:
                self._lost.popitem(last=False)
        session.closed = True

    def _gone(self, session_id: str) -> ApiError:
        with self._lock:
            expired = session_id in self._expired
            lost = self._lost.get(session_id)
        if lost is not None:
            code, reason = lost
            return ApiError(410, code, f"session {session_id} ended: {reason}")
        if expired:
            return ApiError(
                410,
                "session_expired",
                f"session {session_id} was closed after {self.idle_timeout:g} s without use: "
                "POST /reset without a session_id starts a new one",
            )
        return ApiError(
            404,
            "unknown_session",
            f"no session {session_id!r} (never opened, or closed): POST /reset without a session_id "
            "starts a new one",
        )

    def _full_message(self) -> str:
        reaping = (
            f", or for idle ones to be closed after {self.idle_timeout:g} s" if self.idle_timeout else ""
        )
        return (
            f"all {self.max_sessions} sessions this server allows are open: close one with "
            f"DELETE /session?session_id=...{reaping}"
        )
