"""An application that runs as a process of its own, in any language: started for a world behind a
boundary statekit draws at the process, since it cannot patch the interpreter inside.

statekit's Python controls patch the interpreter the application runs in. A Rails, Java or Go
application is a separate process, so ``AppProcess`` controls what that process can see instead:

- **the clock**: libfaketime (``LD_PRELOAD``) makes every time call of the process (``clock_gettime``,
  ``gettimeofday``, ``time``) read a timestamp file that statekit writes, frozen between writes as
  Python's virtual clock is between steps; ``follow`` it to the episode's clock and the process sees
  the episode's time and moves when statekit moves it. Chosen over a time namespace (it shifts only
  the monotonic clocks, never the wall clock) and over a patched libc (per language, per build);
- **the network**: a network namespace of its own whose only device is a loopback, so nothing leads
  out; the world's PostgreSQL is reached through its unix socket (a file, not a route) and statekit
  reaches the application through the unix socket it serves on. Every address is routed to that
  loopback, where every name it looks up and every connection it opens to an address off the
  loopback end at statekit's sinkhole, which names the destination and refuses it
  (``statekit.sinkhole``; a one-off command, ``run``, has no sinkhole: its attempts are refused
  unnamed, no route);
- **the host**: a UTS namespace with a fixed host name, and an environment given in full (nothing of
  statekit's own environment leaks in);
- **its outside services** (``services``: a mail provider, an API): TCP ports on the namespace's
  loopback that statekit answers. A helper started inside the namespace binds each port and hands
  the listening socket to statekit over a unix socket (``SCM_RIGHTS``), so statekit's own server
  accepts the process's connections without a relay process or a route out.

Randomness the process draws from the kernel (``getrandom``) is not covered: a column it feeds must
stay out of the digest and the observations (``statekit check`` finds it by replaying).

Each part can be switched off (``Boundary``), only to prove it matters. Needs Linux, root or
unprivileged user namespaces (``unshare``), and libfaketime (Debian: ``libfaketime``).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from statekit.abandoned import (
    CLOCKS,
    HOMES,
    LEADER,
    SHARED_MEMORY,
    abandon,
    private_dir,
    release_clock_state,
    sweep_abandoned,
)
from statekit.determinism.egress import report_refused
from statekit.errors import ConfigError
from statekit.sinkhole import NAT_RULES, RESOLVER_PORT, SINK_PORT, Sinkhole
from statekit.strategies.naming import process_start

LIBFAKETIME = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
"""Where libfaketime is looked for (``$STATEKIT_LIBFAKETIME`` first)."""
HANDOFF = (
    "import socket, sys\n"
    "def bound(kind, port):\n"
    "    if kind == 'tcp':\n"
    "        return socket.create_server(('127.0.0.1', int(port)))\n"
    "    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "    udp.bind(('127.0.0.1', int(port)))\n"
    "    return udp\n"
    "sockets = [bound(*each.split(':')) for each in sys.argv[2:]]\n"
    "statekit = socket.socket(socket.AF_UNIX)\n"
    "statekit.connect(sys.argv[1])\n"
    "socket.send_fds(statekit, [b'ports'], [each.fileno() for each in sockets])\n"
)
"""Run inside the namespace before the application: binds ports on its loopback and hands the sockets
to statekit (``argv``: the handoff socket, then ``tcp:PORT`` or ``udp:PORT`` each)."""
Listener = socket.socket
"""A listening TCP socket (the parameter named ``socket`` hides the module in ``AppProcess``)."""
HOSTNAME = "statekit-world"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Boundary:
    """What an application process sees instead of the machine; each part on unless proven otherwise."""

    clock: bool = True
    """Its time is the timestamp statekit writes (libfaketime), not the machine's."""
    network: bool = True
    """Its network is a namespace whose only device is a loopback, where statekit's sinkhole names
    and refuses whatever would leave (unix sockets still work)."""
    hostname: str | None = HOSTNAME
    """Its host name (a UTS namespace of its own); None: the machine's."""


def libfaketime() -> str:
    """The libfaketime shared object to preload, or a ConfigError saying how to install it."""
    wanted = os.environ.get("STATEKIT_LIBFAKETIME")
    for path in (wanted, *LIBFAKETIME) if wanted else LIBFAKETIME:
        if path and Path(path).is_file():
            return path
    raise ConfigError(
        "an application process's clock needs libfaketime, which is not installed: apt-get install "
        "libfaketime (or set STATEKIT_LIBFAKETIME to its libfaketime.so.1)"
    )


def faketime_stamp(now: datetime) -> str:
    """``now`` as libfaketime's absolute, frozen timestamp (UTC, microseconds kept)."""
    return now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


class AppProcess:
    """One application process behind a ``Boundary``, serving HTTP on a unix socket.

    ``command`` must serve on ``socket`` (its path is passed as ``$STATEKIT_SOCKET`` too);
    ``environment`` is the process's whole environment (``PATH`` included). Start it with the clock's
    first time; move its clock with ``set_clock`` (``follow`` a virtual clock to do it as the episode
    moves). ``close`` ends its process group. ``services`` are TCP ports of the namespace's loopback
    that statekit answers: once started, ``listener(port)`` is the listening socket to serve.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        socket: Path,
        environment: Mapping[str, str],
        boundary: Boundary = Boundary(),
        workdir: Path | None = None,
        start_timeout: float = 60.0,
        services: Sequence[int] = (),
    ) -> None:
        if not command:
            raise ConfigError("an application process needs a command")
        if any(not 0 < port < 65536 for port in services) or len(set(services)) != len(services):
            raise ConfigError(f"service ports are distinct and from 1 to 65535: {list(services)}")
        if SINK_PORT in services:
            raise ConfigError(f"port {SINK_PORT} is the boundary's sinkhole (statekit.sinkhole): use another")
        self.services = tuple(services)
        self._listeners: dict[int, Listener] = {}
        self._sinkhole: Sinkhole | None = None
        self._lock = threading.Lock()
        self.refused: list[str] = []
        """Where the process tried to go outside its boundary (``host:port``), in order: each such
        connection was reset, and reported to the egress guard (the step's ``egress_blocked``)."""
        self.command = list(command)
        self.socket = Path(socket)
        self.environment = dict(environment)
        self.boundary = boundary
        self.workdir = workdir
        self.start_timeout = start_timeout
        sweep_abandoned()
        self._home = private_dir(Path(tempfile.gettempdir()) / HOMES.episode())
        memory = SHARED_MEMORY if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK) else None
        self._clock_dir = private_dir(Path(memory or tempfile.gettempdir()) / CLOCKS.episode())
        self._clock_file = self._clock_dir / "faketime"
        self._clock_stamp = ""
        """What the clock file holds: a step enters the episode's clock and then moves it, and each
        write is a rename the process's reads contend with, so an unchanged time is not written
        again."""
        self._log = self._home / "output.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._started: list[int] = []
        """The running process group's leader (empty when none): what ``_abandon`` ends."""
        self._abandoned = weakref.finalize(self, abandon, self._started, self._home, self._clock_dir)
        """Run when this object is collected or the interpreter exits without ``close`` (a script that
        crashed, an environment never closed): the process group would outlive it otherwise, being a
        session of its own."""

    def start(self, now: datetime) -> None:
        """Start the process with its clock at ``now``; return once its socket accepts connections.
        A process that exits first, or never serves, is a ConfigError with the end of its output."""
        if self._process is not None:
            raise RuntimeError("the application process is already started")
        if not self._home.exists():
            raise RuntimeError("the application process was closed: make a new AppProcess to start again")
        self.socket.unlink(missing_ok=True)
        binds = [f"tcp:{port}" for port in self.services] if self.boundary.network else []
        if self.boundary.network and _network_tools():
            binds += [f"tcp:{SINK_PORT}", f"udp:{RESOLVER_PORT}"]
        with ExitStack() as stack:
            handoff = stack.enter_context(socket.socket(socket.AF_UNIX)) if binds else None
            if handoff is not None:  # where the helper inside the namespace hands over its sockets
                handoff.bind(str(self._home / "handoff.sock"))
                handoff.listen(1)
            with open(self._log, "wb") as log:
                self._process = subprocess.Popen(
                    self._wrapped(self.command, handoff=self._home / "handoff.sock", binds=binds),
                    env=self._environment(now),
                    cwd=self.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: close ends everything it started
                )
            self._started[:] = [self._process.pid]
            leader = f"{self._process.pid} {process_start(self._process.pid) or 0}\n"
            (self._home / LEADER).write_text(leader)  # for the sweep, should this process be killed
            if handoff is not None:
                self._take_sockets(handoff, binds)
        self._wait_until_serving()

    def listener(self, port: int) -> Listener | None:
        """The listening socket of service ``port`` inside the boundary, for statekit to serve, once
        the process is started; None when the boundary's network is off (the process then reaches the
        machine's own port)."""
        if port not in self.services:
            raise ConfigError(f"port {port} is not one of this process's services {list(self.services)}")
        if self.boundary.network and self.pid is None:
            raise RuntimeError("the application process is not running: its service sockets are gone")
        return self._listeners.get(port)

    def _refused_attempt(self, destination: str) -> None:
        """The sinkhole ended a connection to ``destination``: remember it and tell the egress guard."""
        with self._lock:
            self.refused.append(destination)
        report_refused(destination, by=f"application process {self.command[0]}")

    def _take_sockets(self, handoff: socket.socket, binds: Sequence[str]) -> None:
        """Receive the sockets the helper inside the namespace bound (``HANDOFF``): the services'
        listeners, then the sinkhole's."""
        process = self._process
        assert process is not None
        handoff.settimeout(0.05)
        deadline = time.monotonic() + self.start_timeout
        fds: list[int] = []
        problem = "the helper that binds them did not hand them over"
        while time.monotonic() < deadline and process.poll() is None:
            try:
                connection, _ = handoff.accept()
            except TimeoutError:
                continue
            try:
                with connection:
                    connection.settimeout(self.start_timeout)
                    _, fds, flags, _ = socket.recv_fds(connection, 16, len(binds))
                if len(fds) != len(binds) or flags & socket.MSG_CTRUNC:
                    problem = f"{len(fds)} of {len(binds)} sockets were handed over"
                    break
                sockets = [socket.socket(fileno=fd) for fd in fds]
                fds = []
                self._listeners = dict(zip(self.services, sockets[: len(self.services)], strict=True))
                if len(sockets) > len(self.services):
                    tcp, udp = sockets[len(self.services) :]
                    self._sinkhole = Sinkhole(tcp, udp, self._refused_attempt)
                return
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                break
        for fd in fds:
            os.close(fd)
        output = self.output()
        self.close()
        raise ConfigError(
            f"the application process's ports {list(binds)} were not bound ({problem}):\n{output}"
        )

    @property
    def pid(self) -> int | None:
        """The process group's leader while the process runs (``os.killpg`` ends all it started)."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def run(self, command: Sequence[str], now: datetime, *, timeout: float = 600.0) -> str:
        """Run a one-off ``command`` (a migration, a task of the application's) behind the same boundary,
        with the same environment and its clock at ``now`` (moved with ``set_clock`` meanwhile, as for
        the served process); return its output. A failure is a ConfigError with the end of its output."""
        with subprocess.Popen(
            self._wrapped(list(command)),
            env=self._environment(now),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as done:
            try:
                stdout, stderr = done.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:  # as subprocess.run does
                done.kill()
                done.communicate()
                raise
            finally:
                self._release_clock_state(done.pid)
        output = (stdout + stderr).decode(errors="replace")
        if done.returncode != 0:
            tail = "\n".join(output.splitlines()[-40:])
            raise ConfigError(f"{' '.join(command)} exited with {done.returncode}:\n{tail}")
        return output

    def _release_clock_state(self, pid: int) -> None:
        """``release_clock_state`` for a process this boundary's clock preloaded libfaketime into."""
        if self.boundary.clock:
            release_clock_state(pid)

    def _environment(self, now: datetime) -> dict[str, str]:
        env = {**self.environment, "STATEKIT_SOCKET": str(self.socket)}
        if self.boundary.clock:
            self.set_clock(now)
            env |= {
                "LD_PRELOAD": libfaketime(),
                "FAKETIME_TIMESTAMP_FILE": str(self._clock_file),
                "FAKETIME_NO_CACHE": "1",  # read the file at every call: statekit moves it per step
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # timeouts and sleeps keep working
                # ... and timed waits too: with the fix on (0.9.10's default on this glibc) a condition
                # variable's timed wait returns at once, so every sleeping thread spins (Ruby's sleep
                # and ActiveRecord's reaper: Redmine's migrations took 90 s instead of 4)
                "FAKETIME_FORCE_MONOTONIC_FIX": "0",
            }
        return env

    def set_clock(self, now: datetime) -> None:
        """The process's time from now on: ``now``, frozen (atomic: a reader sees old or new). A closed
        process's clock is not kept (a clock it followed may outlive it)."""
        stamp = faketime_stamp(now)
        if not self.boundary.clock or stamp == self._clock_stamp or not self._clock_dir.exists():
            return
        fresh = self._clock_file.with_suffix(".new")
        fresh.write_text(stamp + "\n")
        os.replace(fresh, self._clock_file)
        self._clock_stamp = stamp

    def output(self, lines: int = 40) -> str:
        """The last ``lines`` of what the process printed."""
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def close(self) -> None:
        """End the process group (SIGTERM, then SIGKILL after 10 s). Safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(process.pid, sig)
                    process.wait(wait)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
        if process is not None:
            self._release_clock_state(process.pid)
        self._started.clear()  # ended: the finalizer must not signal a pid the kernel may reuse
        for listening in self._listeners.values():
            listening.close()
        self._listeners = {}
        if self._sinkhole is not None:
            self._sinkhole.close()
            self._sinkhole = None
        self.socket.unlink(missing_ok=True)
        self._abandoned()  # removes its home and clock directory (nothing left to end)

    def _wrapped(
        self, command: list[str], *, handoff: Path | None = None, binds: Sequence[str] = ()
    ) -> list[str]:
        """``command`` inside the boundary's namespaces (``unshare``), loopback up, host name set, the
        ports in ``binds`` bound on the loopback and handed to statekit at ``handoff`` (and, with the
        sinkhole's among them, every outbound attempt sent to it: ``statekit.sinkhole``)."""
        namespaces = []
        setup = []
        if self.boundary.network:
            namespaces.append("--net")
            tools = _network_tools()
            ip = tools[0] if tools else shutil.which("ip")
            if ip:
                setup.append(f"{_quote(ip)} link set lo up")
            if f"tcp:{SINK_PORT}" in binds and tools:
                ip, nft = tools
                rules = self._home / "nat.nft"
                rules.write_text(NAT_RULES)
                setup += [
                    f"{_quote(ip)} route add default dev lo src 127.0.0.1",
                    f"{_quote(nft)} -f {_quote(str(rules))}",
                ]
            if binds:
                env = shutil.which("env") or "/usr/bin/env"
                python = " ".join(_quote(part) for part in (env, "-u", "LD_PRELOAD", sys.executable))
                arguments = " ".join(_quote(str(part)) for part in (handoff, *binds))
                setup.append(f"{python} -I -S -c {_quote(HANDOFF)} {arguments}")
        if self.boundary.hostname is not None:
            namespaces.append("--uts")
            setup.append(f"hostname {_quote(self.boundary.hostname)}")
        if not namespaces:
            return command
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ConfigError("an application process's boundary needs unshare (Debian: util-linux)")
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        script = " && ".join([*setup, 'exec "$@"'])
        return [unshare, *user, *namespaces, "sh", "-c", script, "sh", *command]

    def _wait_until_serving(self) -> None:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                output = self.output()
                self.close()  # as after a timeout: its clock state and home go with it
                raise ConfigError(
                    f"the application process exited ({process.returncode}) before serving on "
                    f"{self.socket}:\n{output}"
                )
            if _accepts(self.socket):
                return
            time.sleep(0.02)
        output = self.output()
        self.close()
        raise ConfigError(
            f"the application process did not serve on {self.socket} within {self.start_timeout} s:\n{output}"
        )

    def __enter__(self) -> AppProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def _network_tools() -> tuple[str, str] | None:
    """``ip`` and ``nft`` (full paths: the process's ``PATH`` is the application's), with which the
    boundary names what a process tries to reach; without them its outbound attempts are still
    refused, unnamed (said once)."""
    ip, nft = shutil.which("ip"), shutil.which("nft")
    if ip and nft:
        return ip, nft
    log.warning(
        "nft or ip is not installed (Debian: nftables, iproute2): an application process's outbound "
        "attempts are refused, but not named"
    )
    return None


def _accepts(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
