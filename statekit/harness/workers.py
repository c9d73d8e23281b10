"""Harness worker processes: sessions run in N processes, each session pinned to one of them.

The determinism controls patch process-wide names (the clock, ``uuid4``, ``random``, httpx) under
one lock, so environments in one process take turns: one process uses one core. ``WorkerPool``
starts ``size`` worker processes (``worker.py``); ``open()`` makes an environment in the least
loaded one and returns a ``HostedEnvironment``, a proxy with ``Environment``'s methods, which the
session pool uses exactly as it would use an in-process environment. The HTTP routes and ``/ws``
are unchanged: they still run in the front process and only the environment calls cross a pipe.

A worker that dies (killed, out of memory, a crash in native code) takes its environments with
it: calls in flight and later calls on them raise ``EnvironmentLost`` (the harness answers 410
``worker_lost``), ``on_lost`` is told, and a new worker takes the dead one's place. The new worker
makes an environment at start, and making a reset strategy sweeps the copies (databases,
directories, mounts) of dead processes on this host, so the dead worker's worlds do not leak.

Each worker is a fresh interpreter (``python -m statekit.harness.worker``) with the serving
process's environment and working directory; it starts in under a second plus its adapter's
imports. A fork of the serving process would inherit its threads' locks; ``multiprocessing``'s
spawn and forkserver would re-import the caller's ``__main__`` (every script embedding the harness
would need a main guard).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from statekit.contract import JSON, State
from statekit.digest.dump import StateDump
from statekit.errors import ConfigError, EnvironmentLost, StatekitError
from statekit.harness.config import HarnessConfig
from statekit.strategies.base import Health
from statekit.tools import transportable

log = logging.getLogger(__name__)

START_TIMEOUT = 300.0
"""Seconds a worker may take to start (its first environment may start the embedded PostgreSQL)."""
MALLOC_ARENAS = 2
"""glibc's malloc arenas per worker (``MALLOC_ARENA_MAX``, unless the environment sets it). A worker
runs a thread per session, and glibc gives each thread an arena of its own (up to 8 per core) whose
freed memory other threads cannot reuse, so a long-running worker's memory would grow with its
sessions (docs/ARCHITECTURE.md has the soak figures)."""
STOP_TIMEOUT = 60.0


def default_workers() -> int:
    """One worker per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class HostedEnvironment:
    """An environment living in a worker process, with ``Environment``'s methods and results."""

    def __init__(self, worker: _Worker, env_id: int) -> None:
        self._worker = worker
        self._id = env_id
        self._closed = False

    @property
    def lost(self) -> bool:
        """Whether the worker holding this environment died."""
        return not self._worker.alive

    @property
    def lost_reason(self) -> str:
        return self._worker.lost_reason

    def reset(self, *, seed: int | None = None, options: dict[str, JSON] | None = None) -> tuple[JSON, dict]:
        result: tuple[JSON, dict] = self._call("reset", seed=seed, options=options)
        return result

    def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]:
        result: tuple[JSON, float, bool, bool, dict] = self._call("step", transportable(action))
        return result

    def state(self) -> State:
        result: State = self._call("state")
        return result

    def snapshot(self) -> str:
        return str(self._call("snapshot"))

    def restore(self, snapshot_id: str) -> tuple[JSON, dict]:
        result: tuple[JSON, dict] = self._call("restore", snapshot_id)
        return result

    def export_episode(self) -> bytes:
        return bytes(self._call("export_episode"))

    def import_episode(self, blob: bytes) -> tuple[JSON, dict]:
        result: tuple[JSON, dict] = self._call("import_episode", blob)
        return result

    def dump(self) -> StateDump:
        result: StateDump = self._call("dump")
        return result

    def health(self) -> Health:
        result: Health = self._call("health")
        return result

    def close(self) -> None:
        """Close the environment in its worker (dropping its worlds). Safe twice, and after a loss."""
        if self._closed:
            return
        self._closed = True
        self._worker.release(self)
        if self._worker.alive:
            with contextlib.suppress(EnvironmentLost):  # died meanwhile: its replacement sweeps the worlds
                self._worker.call(self._id, "close")

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise StatekitError(f"the environment was closed; {method}() needs a new one")
        return self._worker.call(self._id, method, *args, **kwargs)


class _Worker:
    """The front's side of one worker process: its pipe, the calls in flight, its environments."""

    def __init__(self, slot: int, process: subprocess.Popen[bytes], conn: Connection, pid: int) -> None:
        self.slot = slot
        self.process = process
        self.pid = pid
        self.alive = True
        self._envs: set[HostedEnvironment] = set()
        self._opening = 0
        self._conn = conn
        self._send_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        self._ids = itertools.count(1)
        self.lost_reason = ""
        self.reader: threading.Thread | None = None

    def call(self, env_id: int | None, method: str, *args: Any, **kwargs: Any) -> Any:
        future: Future[Any] = Future()
        with self._state_lock:
            if not self.alive:
                raise EnvironmentLost(self.lost_reason)
            call_id = next(self._ids)
            self._pending[call_id] = future
        try:
            with self._send_lock:
                self._conn.send((call_id, env_id, method, args, kwargs))
        except (OSError, ValueError) as exc:
            self._fail(call_id, EnvironmentLost(f"worker {self.pid} cannot be reached: {exc}"))
        return future.result()

    @property
    def load(self) -> int:
        """Environments held, counting those being made."""
        with self._state_lock:
            return len(self._envs) + self._opening

    def reserve(self) -> None:
        """Count an environment about to be made (so concurrent opens spread over workers)."""
        with self._state_lock:
            self._opening += 1

    def open(self) -> HostedEnvironment:
        """Make the environment ``reserve()`` counted."""
        try:
            env = HostedEnvironment(self, self.call(None, "open"))
            with self._state_lock:
                self._envs.add(env)
        finally:
            with self._state_lock:
                self._opening -= 1
        return env

    def release(self, env: HostedEnvironment) -> None:
        with self._state_lock:
            self._envs.discard(env)

    def read_forever(self, on_exit: Callable[[_Worker], None]) -> None:
        """Deliver replies until the pipe closes, then fail what is pending and report the exit."""
        try:
            while True:
                try:
                    call_id, ok, value = pickle.loads(self._conn.recv_bytes())
                except (EOFError, OSError):
                    break
                with self._state_lock:
                    future = self._pending.pop(call_id, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        finally:
            self._died()
            on_exit(self)

    def stop(self) -> None:
        """Ask the worker to close its environments and exit; kill it if it does not."""
        self.ask_to_stop()
        self.wait_stopped()

    def ask_to_stop(self) -> None:
        with self._state_lock:
            was_alive, self.alive = self.alive, False
            self.lost_reason = self.lost_reason or f"harness worker {self.pid} was shut down"
        if was_alive:
            try:
                with self._send_lock:
                    self._conn.send(None)
            except (OSError, ValueError):
                pass

    def wait_stopped(self) -> None:
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("harness worker %d did not stop within %ss; killing it", self.pid, STOP_TIMEOUT)
            self.process.kill()
            self.process.wait(10)
        self._conn.close()
        if self.reader is not None and self.reader is not threading.current_thread():
            self.reader.join(10)

    def _died(self) -> None:
        try:
            code: int | None = self.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        elif code is not None:
            how = f"exited with status {code}"
        else:
            how = "stopped answering"
        with self._state_lock:
            if not self.lost_reason:
                self.lost_reason = (
                    f"harness worker {self.pid} {how}; the sessions it held are gone with their worlds: "
                    "POST /reset without a session_id starts a new one (the seed and the actions taken "
                    "so far replay the episode exactly)"
                )
            self.alive = False
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(EnvironmentLost(self.lost_reason))

    def _fail(self, call_id: int, exc: BaseException) -> None:
        with self._state_lock:
            future = self._pending.pop(call_id, None)
        if future is not None and not future.done():
            future.set_exception(exc)


class WorkerPool:
    """``size`` worker processes hosting the harness's environments; a dead one is replaced.

    ``on_lost`` is called (from a background thread) after a worker died and its environments
    were marked lost, so the session pool can forget their sessions.
    """

    def __init__(
        self, config: HarnessConfig, size: int, *, on_lost: Callable[[], object] | None = None
    ) -> None:
        if size < 1:
            raise ConfigError(f"a worker pool needs at least 1 worker, got {size}")
        self.config = config
        self.size = size
        self.on_lost = on_lost
        self.replaced = 0
        self._slots: list[_Worker | None] = [None] * size
        self._cond = threading.Condition()
        self._closing = False

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids."""
        with self._cond:
            return [w.pid for w in self._slots if w is not None and w.alive]

    def __len__(self) -> int:
        return len(self.pids)

    def start(self) -> None:
        """Start every worker; raises the first worker's start-up error (e.g. a bad adapter)."""
        results: list[BaseException | None] = [None] * self.size

        def start_slot(slot: int) -> None:
            try:
                self._start(slot)
            except BaseException as exc:
                results[slot] = exc

        threads = [threading.Thread(target=start_slot, args=(n,)) for n in range(self.size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = next((exc for exc in results if exc is not None), None)
        if failed is not None:
            self.close()
            raise failed

    def open(self, timeout: float = START_TIMEOUT) -> HostedEnvironment:
        """A new environment in the live worker holding the fewest; waits for a replacement if none.
        A worker that dies while making it is passed over once (nothing was made, so another one
        tries); a second death is the answer: making it may be what kills them."""
        deadline = time.monotonic() + timeout
        for attempt in (1, 2):
            worker = self._least_loaded(deadline, timeout)
            try:
                return worker.open()
            except EnvironmentLost:
                if attempt == 2 or worker.alive or time.monotonic() >= deadline:
                    raise
        raise AssertionError("unreachable")

    def _least_loaded(self, deadline: float, timeout: float) -> _Worker:
        with self._cond:
            while True:
                if self._closing:
                    raise StatekitError("the harness is shutting down; no new environments")
                live = [w for w in self._slots if w is not None and w.alive]
                if live:
                    worker = min(live, key=lambda w: (w.load, w.slot))
                    worker.reserve()
                    return worker
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EnvironmentLost(f"no harness worker came back within {timeout:g} s")
                self._cond.wait(remaining)

    def health(self) -> Health:
        """Whether the workers can serve: the first live one's answer (they share a database server).
        A worker that cannot be asked is not judged here: its loss is reported when it dies."""
        with self._cond:
            live = [w for w in self._slots if w is not None and w.alive]
        for worker in live:
            try:
                seen: Health = worker.call(None, "health")
            except EnvironmentLost:
                continue
            return seen
        return Health(down="no harness worker is alive (each one that starts makes an environment first)")

    def close(self) -> None:
        """Stop every worker (each closes its environments first). Safe twice."""
        with self._cond:
            self._closing = True
            workers = [w for w in self._slots if w is not None]
            self._slots = [None] * self.size
            self._cond.notify_all()
        for worker in workers:  # all at once: each closes its environments in parallel
            worker.ask_to_stop()
        for worker in workers:
            worker.wait_stopped()

    # -- internals ----------------------------------------------------------------------------
    def _start(self, slot: int) -> _Worker:
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            [sys.executable, "-m", "statekit.harness.worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env={"MALLOC_ARENA_MAX": str(MALLOC_ARENAS), **os.environ},
        )
        theirs.close()  # else the socket never reports the worker's end closing
        conn = Connection(ours.detach())
        try:
            conn.send((self.config, self.config.max_sessions + 2, logging.getLogger().getEffectiveLevel()))
            if not conn.poll(START_TIMEOUT):
                raise StatekitError(f"harness worker {process.pid} did not start within {START_TIMEOUT:g} s")
            kind, value = conn.recv()
        except BaseException:
            process.kill()
            process.wait(10)
            conn.close()
            raise
        if kind != "ready":
            process.wait(10)
            conn.close()
            raise value if isinstance(value, BaseException) else StatekitError(str(value))
        worker = _Worker(slot, process, conn, int(value))
        worker.reader = threading.Thread(
            target=worker.read_forever, args=(self._exited,), name=f"statekit-worker-{slot}", daemon=True
        )
        with self._cond:
            if self._closing:
                closing = True
            else:
                closing = False
                self._slots[slot] = worker
                self._cond.notify_all()
        worker.reader.start()
        if closing:
            worker.stop()
            raise StatekitError("the harness is shutting down")
        log.info("harness worker %d started (slot %d)", worker.pid, slot)
        return worker

    def _exited(self, worker: _Worker) -> None:
        """A worker's pipe closed: unless we are shutting down, it died. Tell, and replace it."""
        with self._cond:
            if self._closing or self._slots[worker.slot] is not worker:
                return
            self._slots[worker.slot] = None
        log.error("%s", worker.lost_reason)
        if self.on_lost is not None:
            try:
                self.on_lost()
            except Exception:
                log.exception("the harness's on_lost hook failed")
        while True:
            with self._cond:
                if self._closing:
                    return
            try:
                self._start(worker.slot)
                with self._cond:
                    self.replaced += 1
                return
            except Exception:
                with self._cond:
                    if self._closing:
                        return  # shut down while the replacement started: nothing to replace
                log.exception("replacing harness worker %d failed; trying again in 1 s", worker.pid)
                time.sleep(1)
