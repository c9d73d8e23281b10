"""The egress guard: while an environment is open, nothing in its process reaches the outside.

Replay answers an application's HTTP calls before a socket exists, but only where an adapter wires
it, and only inside a step: a client the adapter did not think of, or a daemon thread calling out
between steps, would reach the network. So statekit watches every socket of the process itself, with
a ``sys.addaudithook`` hook (installed once, on the first environment: audit hooks cannot be removed).
CPython raises an audit event in the calling thread before it connects a socket, sends a datagram to
an address or resolves a name, so the hook sees every thread and can refuse by raising
``EgressError`` (a ``PermissionError``, so client libraries report a failed connection). When no
environment is open the hook returns after one flag test.

Allowed while an environment is open:

- anything that is not IPv4/IPv6 (Unix sockets: the database's, Docker's, the harness workers' pipes);
- the world's own services: its database's host and port when it is reached over TCP
  (``world_endpoints``), and what the adapter declares (``Adapter.allowed_endpoints()``, e.g. live
  vendors when replay is switched off);
- a loopback port this very process listens on (the harness serving its own in-process clients; an
  application talking to its own server thread): read from ``/proc/self/net/tcp*`` only for a
  connection that is otherwise refused;
- resolving IP literals, ``localhost`` and the allowed host names;
- destinations allowed with ``statekit.kit.allow_egress(...)`` (a trainer's model API, statekit's own
  client, which allows its harness's URL).

Everything else is refused. A refusal inside a controlled call (a build, a start, a step, the
verifier) belongs to that environment; between steps it is reported to every environment open in
the process (threads carry no owner). ``EgressControl.violations()`` hands them to the next step,
which turns them into an error observation naming the destinations (like a replay miss); a build
that tried to reach out fails.

What the hook cannot see: sockets opened in C without Python's socket module (libpq, libcurl, gRPC
inside Ray), and child processes. Those need a network namespace or a container (the ``container``
strategy runs with no network at all); an application process behind statekit's boundary
(``statekit.process_app``) has one, whose sinkhole names each attempt and reports it here
(``report_refused``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from statekit.determinism.base import Control, Violation
from statekit.errors import ConfigError, EgressError

if TYPE_CHECKING:
    from statekit.world import World

log = logging.getLogger(__name__)

WATCHED = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
    }
)
"""Audit events that reach out (``socket.connect`` is raised by ``connect`` and ``connect_ex``)."""
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "postgresql": 5432, "postgres": 5432}
_DATABASE_URL = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://")
"""A PostgreSQL URL, SQLAlchemy's ``postgresql+psycopg://`` included (what strategies hand out)."""
Endpoint = tuple[str, int | None]
"""A normalised host (IP text or lower-case name) and a port (None: any port)."""


def _normalise(host: str) -> str:
    host = host.strip().strip("[]").lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _show(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def parse_destination(text: str) -> Endpoint:
    """``host:port``, ``[v6]:port``, a bare host (any port) or a URL (its port, or the scheme's)."""
    try:
        if "://" in text:
            parts = urllib.parse.urlsplit(text)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        else:
            parts = urllib.parse.urlsplit("//" + text)
            port = parts.port
    except ValueError as exc:
        raise ConfigError(
            f"cannot read a destination from {text!r} ({exc}): give host:port or a URL"
        ) from None
    if not parts.hostname:
        raise ConfigError(f"cannot read a destination from {text!r}: give host:port or a URL")
    return _normalise(parts.hostname), port


_internal = threading.local()
"""Set while statekit itself resolves an allowed name (the hook lets it through)."""


@lru_cache(maxsize=256)
def _expand(endpoint: Endpoint) -> frozenset[Endpoint]:
    """An endpoint plus the addresses its name resolves to (a client connects to those)."""
    host, port = endpoint
    if _is_ip(host):
        return frozenset({endpoint})
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return frozenset({endpoint, ("127.0.0.1", port), ("::1", port)})
    try:
        with unjudged():
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    return frozenset({endpoint, *((_normalise(str(info[4][0])), port) for info in infos)})


def _listening_here(host: str, port: int) -> bool:
    """Whether a loopback ``host:port`` is a socket this process listens on (Linux ``/proc``)."""
    try:
        if not ipaddress.ip_address(host).is_loopback:
            return False
    except ValueError:
        return False
    ours = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                ours.add(link[8:-1])
    except OSError:
        return False
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines, None)
                for line in lines:
                    fields = line.split()
                    listening = len(fields) > 9 and fields[3] == "0A" and fields[9] in ours  # 0A: LISTEN
                    if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


@dataclass(frozen=True)
class Refusal:
    """One outbound attempt the guard refused."""

    kind: str
    """``connect``, ``send`` (a datagram to an address) or ``resolve`` (a name lookup)."""
    destination: str
    thread: str
    between_steps: bool

    def describe(self) -> str:
        when = "between steps" if self.between_steps else "during a controlled call"
        return f"{self.kind} {self.destination} (thread {self.thread!r}, {when})"


class _Guard:
    """The process's one audit hook and what it allows."""

    def __init__(self) -> None:
        self.on = False
        self._lock = threading.Lock()
        self._scopes: list[EgressScope] = []
        self._allowances: list[Allowance] = []
        self._current: EgressScope | None = None
        self._endpoints: frozenset[Endpoint] = frozenset()
        self._hosts: frozenset[str] = frozenset()
        self._installed = False

    # -- membership ---------------------------------------------------------------------------
    def join(self, member: EgressScope | Allowance) -> None:
        with self._lock:
            if not self._installed:
                sys.addaudithook(_make_hook(self))
                self._installed = True
            if isinstance(member, EgressScope):
                self._scopes.append(member)
            else:
                self._allowances.append(member)
            self._rebuild()

    def leave(self, member: EgressScope | Allowance) -> None:
        with self._lock:
            if member in self._scopes:
                self._scopes.remove(member)
            if member in self._allowances:
                self._allowances.remove(member)
            if self._current is member:
                self._current = None
            self._rebuild()

    def changed(self) -> None:
        with self._lock:
            self._rebuild()

    def _rebuild(self) -> None:
        endpoints: set[Endpoint] = set()
        for scope in self._scopes:
            endpoints |= scope.endpoints
        for allowance in self._allowances:
            endpoints |= allowance.endpoints
        self._endpoints = frozenset(endpoints)
        self._hosts = frozenset(host for host, _ in endpoints)
        self.on = bool(self._scopes)

    @contextmanager
    def attributing(self, scope: EgressScope) -> Iterator[None]:
        """Refusals while this runs belong to ``scope`` (the environment in a controlled call)."""
        with self._lock:
            previous, self._current = self._current, scope
        try:
            yield
        finally:
            with self._lock:
                self._current = previous

    # -- judging --------------------------------------------------------------------------------
    def _allows(self, host: str, port: int) -> bool:
        return (host, port) in self._endpoints or (host, None) in self._endpoints

    def judge(self, event: str, args: tuple[Any, ...]) -> tuple[str, str] | None:
        """``(kind, destination)`` when the event must be refused, else None."""
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            sock, address = args[0], args[1]
            if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
                return None
            if not isinstance(address, tuple) or len(address) < 2:
                return None
            host, port = _normalise(str(address[0])), int(address[1])
            if self._allows(host, port) or _listening_here(host, port):
                return None
            return ("connect" if event == "socket.connect" else "send"), _show(host, port)
        name = args[0] if args else None
        if name is None:
            return None
        host = _normalise(name.decode(errors="replace") if isinstance(name, bytes) else str(name))
        if not host or _is_ip(host) or host in LOCAL_NAMES or host.endswith(".localhost"):
            return None
        if host in self._hosts:
            return None
        return "resolve", host

    def record(self, kind: str, destination: str, *, by: str | None = None) -> None:
        with self._lock:
            current = self._current
            refusal = Refusal(kind, destination, by or threading.current_thread().name, current is None)
            for scope in [current] if current is not None else self._scopes:
                scope.record(refusal)
        log.warning("egress refused: %s", refusal.describe())

    @staticmethod
    def error(kind: str, destination: str) -> EgressError:
        return EgressError(
            f"statekit refused to {kind} {destination}: while a statekit environment is open in this "
            "process, only its world's own services, the adapter's Adapter.allowed_endpoints() and "
            "destinations given to statekit.kit.allow_egress(...) may be reached. Replay the call from a "
            "cassette, declare the destination, or run the environment in a process of its own."
        )


def _make_hook(guard: _Guard) -> Any:
    watched = WATCHED

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in watched and guard.on and not getattr(_internal, "active", False):
            _internal.active = True  # what the guard itself does (read /proc, log) is not judged
            verdict = None
            try:
                verdict = guard.judge(event, args)
                if verdict is not None:
                    guard.record(*verdict)
            finally:
                _internal.active = False
            if verdict is not None:
                raise guard.error(*verdict)

    return hook


_GUARD = _Guard()


def _endpoints_of(destinations: Iterable[str]) -> set[Endpoint]:
    found: set[Endpoint] = set()
    for destination in destinations:
        found |= _expand(parse_destination(destination))
    return found


class EgressScope:
    """One open environment's part of the guard: what it allows, and what was refused meanwhile.

    ``open()`` switches the guard on for the process (unless ``enabled`` is false: the ``egress``
    control was disabled), ``close()`` switches it off when no other scope is open. Safe twice.
    """

    def __init__(self, allowed: Iterable[str] = (), *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.endpoints: set[Endpoint] = _endpoints_of(allowed)
        self._refused: list[Refusal] = []
        self._open = False

    def open(self) -> EgressScope:
        if self.enabled and not self._open:
            _GUARD.join(self)
            self._open = True
        return self

    def allow(self, destinations: Iterable[str]) -> None:
        """Add destinations (a world's database) for as long as the scope is open."""
        new = _endpoints_of(destinations) - self.endpoints
        if new:
            self.endpoints |= new
            _GUARD.changed()

    def record(self, refusal: Refusal) -> None:
        self._refused.append(refusal)  # under the guard's lock

    def take(self) -> list[Refusal]:
        with _GUARD._lock:
            refused, self._refused = self._refused, []
        return refused

    @contextmanager
    def attributing(self) -> Iterator[None]:
        if not self._open:
            yield
            return
        with _GUARD.attributing(self):
            yield

    def close(self) -> None:
        if self._open:
            self._open = False
            _GUARD.leave(self)


class Allowance:
    """Destinations allowed process-wide while held (``statekit.kit.allow_egress``); close() is safe twice."""

    def __init__(self, destinations: Iterable[str]) -> None:
        self.endpoints: set[Endpoint] = _endpoints_of(destinations)
        self._open = True
        _GUARD.join(self)

    def close(self) -> None:
        if self._open:
            self._open = False
            _GUARD.leave(self)

    def __enter__(self) -> Allowance:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@contextmanager
def unjudged() -> Iterator[None]:
    """The calling thread's socket calls go unjudged while this runs: for statekit's own reply to an
    application process inside its namespace (the boundary's resolver answering a query), whose
    address is that namespace's, not this process's."""
    previous, _internal.active = getattr(_internal, "active", False), True
    try:
        yield
    finally:
        _internal.active = previous


def report_refused(destination: str, *, by: str) -> None:
    """An outbound connection to ``destination`` (``host:port``) refused outside this process's
    sockets (an application process's, named by its boundary: ``statekit.sinkhole``), recorded as the
    guard's own refusals are: the environment in a controlled call owns it; between steps, every open
    one. ``by`` names who tried (shown where a thread's name is)."""
    if _GUARD.on:
        _GUARD.record("connect", destination, by=by)


def allow_egress(*destinations: str) -> Allowance:
    """Let this process reach ``destinations`` (``host:port``, a bare host, or a URL) while
    environments are open: a policy's model API, a harness's URL. Use as a context manager, or keep
    it and ``close()`` it."""
    return Allowance(destinations)


def world_endpoints(world: World) -> list[str]:
    """The TCP endpoints a world's own databases listen on (parts of a Composite included)."""
    found: list[str] = []
    handle = world.handle
    if isinstance(handle, dict):
        for part in handle.values():
            if hasattr(part, "location") and hasattr(part, "handle"):
                found += world_endpoints(part)
    location = world.location
    if not isinstance(location, str) or not (_DATABASE_URL.match(location) or "dbname=" in location):
        return found
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(_DATABASE_URL.sub("postgresql://", location, count=1))
    except Exception:  # not a connection string after all: nothing to allow
        return found
    hosts = str(params.get("hostaddr") or params.get("host") or "").split(",")
    ports = str(params.get("port") or "5432").split(",")
    for i, host in enumerate(hosts):
        if host and not host.startswith(("/", "@")):  # a directory is a Unix socket
            found.append(_show(_normalise(host), int(ports[min(i, len(ports) - 1)] or 5432)))
    return found


class EgressControl(Control):
    """The guard's part in an episode: refusals during its calls are its own; refusals seen since the
    last step (between steps included) become that step's error observation."""

    name: ClassVar[str] = "egress"

    def __init__(self, scope: EgressScope | None = None) -> None:
        self.scope = scope

    def bind(self, world: World) -> None:
        if self.scope is not None:
            self.scope.allow(world_endpoints(world))

    @contextmanager
    def active(self) -> Iterator[None]:
        if self.scope is None:
            yield
            return
        with self.scope.attributing():
            yield

    def violations(self) -> list[Violation]:
        refused = self.scope.take() if self.scope is not None else []
        if not refused:
            return []
        destinations = sorted({r.destination for r in refused})
        return [
            Violation(
                control=self.name,
                code="egress_blocked",
                message=(
                    f"refused {len(refused)} outbound attempt(s): "
                    + "; ".join(r.describe() for r in refused[:5])
                    + ". An episode reaches only its world's own services: replay such calls from a "
                    "cassette, or declare the destination (Adapter.allowed_endpoints)."
                ),
                detail={"destinations": list(destinations)},
            )
        ]
