"""Inside one harness worker process: host environments and answer calls on them over a socket.

The determinism controls patch process-wide names under one lock, so one process advances one
controlled call at a time. The harness therefore runs sessions in worker processes: ``workers.py``
starts each as ``python -m statekit.harness.worker FD`` (a fresh interpreter: nothing of the
serving process's threads or state is inherited, and no ``__main__`` guard is needed anywhere),
and this module is the loop it runs. Messages are pickled ``multiprocessing`` connection messages
over a socket pair whose end is file descriptor FD::

    front                                          worker
    (config, threads, log level)                   ("ready", pid) or ("failed", exception)
    (call_id, None, "open", (), {})                (call_id, True, env_id)
    (call_id, None, "health", (), {})              (call_id, True, Health of the worlds' server)
    (call_id, env_id, "step", (action,), {})       (call_id, True, (obs, reward, ...))
    (call_id, env_id, method, args, kwargs)        (call_id, False, exception)
    None (shut down)                               (closes every environment, exits)

At start the worker makes one environment and keeps it for its life: that resolves the adapter
(so a session's first reset pays no imports), holds the adapter's shared resources (the embedded
PostgreSQL's lease), and, because a reset strategy sweeps the copies of dead processes when it is
made, cleans up after a worker that died before it.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from statekit.env import Environment
from statekit.errors import StatekitError
from statekit.harness.config import HarnessConfig

log = logging.getLogger(__name__)

ENV_METHODS = frozenset(
    {"reset", "step", "state", "snapshot", "restore", "export_episode", "import_episode"}
    | {"dump", "health", "close"}
)
"""What the front may call on a hosted environment: ``Environment``'s contract, nothing else."""


def make_environment(config: HarnessConfig) -> Environment:
    """A session's environment, in a worker or (with no workers) in the serving process."""
    return config.env.make()


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``) once an environment is
    closed: a session's app, engine and connections are megabytes freed among live sessions' memory,
    which glibc otherwise keeps, so a long-running worker's RSS would creep up with its sessions."""
    if _TRIM is not None:
        _TRIM(0)


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else the nearest class in its MRO that does, same message.

    The front maps exception classes to HTTP statuses (``ResetNeeded`` is 409, ``ResetError`` 503,
    ...), so the class must cross the pipe; an exception whose constructor takes other arguments
    than a message would not unpickle as itself. The worker's traceback rides along as a note.
    """
    note = "".join(traceback.format_exception(exc)).rstrip()
    for cls in type(exc).__mro__:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            continue
        candidate = exc if cls is type(exc) else _rebuild(cls, str(exc))
        if candidate is None:
            continue
        try:
            clone = pickle.loads(pickle.dumps(candidate))
        except Exception:
            continue
        if isinstance(clone, BaseException) and type(clone) is cls:
            clone.__traceback__ = None
            clone.add_note(f"in harness worker {os.getpid()}:\n{note}")
            return clone
    return StatekitError(f"{type(exc).__name__}: {exc}")


def _rebuild(cls: type[BaseException], message: str) -> BaseException | None:
    try:
        return cls(message)
    except Exception:
        return None


class Host:
    """The environments of one worker process, by id."""

    def __init__(self, config: HarnessConfig) -> None:
        self.config = config
        self.keeper = make_environment(config)
        self.envs: dict[int, Environment] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def call(self, env_id: int | None, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if env_id is None:
            if method == "health":  # the worker's own environment speaks for its worlds' server
                return self.keeper.health()
            if method != "open":
                raise StatekitError(f"unknown worker request {method!r}")
            env = make_environment(self.config)
            with self._lock:
                new_id = next(self._ids)
                self.envs[new_id] = env
            return new_id
        if method not in ENV_METHODS:
            raise StatekitError(f"{method!r} is not an environment call the harness makes")
        with self._lock:
            held = self.envs.get(env_id)
            if method == "close":
                self.envs.pop(env_id, None)
        if held is None:
            if method == "close":
                return None
            raise StatekitError(f"worker {os.getpid()} holds no environment {env_id}")
        if method != "close":
            return getattr(held, method)(*args, **kwargs)
        held.close()
        del held
        return_freed_memory()
        return None

    def close(self) -> None:
        with self._lock:
            envs, self.envs = list(self.envs.values()), {}
        for env in [*envs, self.keeper]:
            try:
                env.close()
            except Exception:
                log.exception("closing an environment in worker %d failed", os.getpid())


def serve_worker(conn: Connection) -> None:
    """The worker's main loop, until the front says stop or goes away."""
    # Ctrl-C reaches the whole process group; the front decides when workers stop (and closes them).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        config, threads, level = conn.recv()
        logging.basicConfig(level=level, format="%(levelname)s:     %(name)s: %(message)s")
        host = Host(config)
    except BaseException as exc:
        conn.send(("failed", portable(exc)))
        conn.close()
        return
    conn.send(("ready", os.getpid()))
    send_lock = threading.Lock()

    def answer(call_id: int, env_id: int | None, method: str, args: Any, kwargs: Any) -> None:
        try:
            reply: tuple[Any, ...] = (call_id, True, host.call(env_id, method, args, kwargs))
        except BaseException as exc:
            reply = (call_id, False, portable(exc))
        try:
            payload = pickle.dumps(reply)
        except Exception as exc:
            payload = pickle.dumps((call_id, False, portable(exc)))
        with send_lock:
            conn.send_bytes(payload)

    try:
        with ThreadPoolExecutor(threads, thread_name_prefix="statekit-worker") as pool:
            while True:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    break  # the front is gone
                if message is None:
                    break
                pool.submit(answer, *message)
    finally:
        host.close()
        conn.close()


if __name__ == "__main__":
    serve_worker(Connection(int(sys.argv[1])))
