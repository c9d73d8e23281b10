"""The sandbox interface: open a session on a working directory, run one job in it, close it.

A *job* is one run of the runner (``runner.py``): the visible tests, or the calls of the hidden cases.
Two layers implement it, as the seed describes: ``ProcessSandbox`` (namespaces, resource limits and an
unprivileged uid on this host) and ``ContainerSandbox`` (one container per episode, ``docker exec``
per run). Whatever the model's code does, ``run`` returns a ``RunResult``; a ``SandboxError`` means
the sandbox itself failed (an infrastructure problem, never the model's doing).
"""

from __future__ import annotations

import ast
import marshal
import threading
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from statekit import ConfigError, StatekitError

MiB = 1024 * 1024
DEFENCES = ("cgroup", "hash_seed", "mask", "network", "userns")
"""Defences ``disable_defences`` may switch off, only to prove they matter (the exploit tests).
``cgroup`` (a cgroup per run), ``mask`` and ``userns`` (no new user namespaces) are the process
layer's: the container layer's cgroup and seccomp profile are Docker's, always on."""


class SandboxError(StatekitError):
    """The sandbox could not run a job (namespaces, mounts, the container engine): not the model's fault."""


@dataclass(frozen=True)
class Limits:
    """What one run may use. The defaults suit the small tasks here; every one is enforced per run."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 512 * MiB
    processes: int = 64
    file_bytes: int = 16 * MiB
    open_files: int = 64
    scratch_bytes: int = 64 * MiB
    """Size of each fresh tmpfs (``/tmp`` and friends): all the disk a run can fill."""
    output_bytes: int = 64 * 1024
    """Captured per output stream; the rest is dropped (the head is kept: it is what repeats)."""
    records_bytes: int = 4 * MiB

    @classmethod
    def from_options(cls, options: dict[str, Any] | Limits | None) -> Limits:
        """Limits from a dict of overrides; an unknown name is a ConfigError listing the known ones."""
        if options is None:
            return cls()
        if isinstance(options, Limits):
            return options
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"unknown sandbox limit(s) {unknown}; the limits are {sorted(known)}")
        for name, value in options.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"sandbox limit {name!r} must be a positive number, got {value!r}")
        return cls(**options)

    def rlimits(self) -> dict[str, int]:
        """The per-process resource limits, by name (``launch.RLIMITS``/``runner.apply_limits``)."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "processes": self.processes,
            "file_bytes": self.file_bytes,
            "open_files": self.open_files,
        }

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_defences(names: tuple[str, ...] | list[str] | frozenset[str]) -> frozenset[str]:
    unknown = sorted(set(names) - set(DEFENCES))
    if unknown:
        raise ConfigError(f"unknown defence(s) {unknown}; the defences are {list(DEFENCES)}")
    return frozenset(names)


def sandbox_environment(disabled: frozenset[str]) -> dict[str, str]:
    """The whole environment of a run: nothing of the host's leaks in; the hash seed is fixed."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }
    if "hash_seed" in disabled:
        del env["PYTHONHASHSEED"]
    return env


@dataclass(frozen=True)
class Job:
    """One run: ``visible`` tests, or the ``hidden`` cases' calls (inputs only, already encoded)."""

    mode: str
    now: float
    """The episode's virtual time (seconds since the epoch): the sandbox's frozen wall clock."""
    seed: int
    """Seeds ``random`` and ``uuid4`` in the sandbox; drawn from the episode's seeded stream."""
    module: str = ""
    cases: list[list[dict[str, Any]]] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    """Subdirectories holding variants of the module, all run against the cases (validation only)."""

    def encoded(self, limits: Limits) -> str:
        """The runner's ``argv[1]``: ``marshal``-ed plain data in hex (host to sandbox only)."""
        body: dict[str, Any] = {"mode": self.mode, "now": self.now, "seed": self.seed}
        body["limits"] = {k: v for k, v in limits.rlimits().items() if k != "processes"}
        if self.mode == "hidden":
            body.update(module=self.module, cases=self.cases, variants=self.variants)
        return marshal.dumps(body, 4).hex()  # version 4: readable by any Python 3.4+


@dataclass(frozen=True)
class RunResult:
    """What one run did, as the host saw it (stdout/stderr are the model's: shown, never trusted)."""

    exit_code: int | None
    signal: str | None
    timed_out: bool
    stdout: str
    stderr: str
    truncated: bool
    records: list[dict[str, Any]]
    seconds: float

    def observation(self, max_chars: int) -> dict[str, Any]:
        """The agent's view of a run: exit status and output, each stream cut to ``max_chars``."""
        out, cut_out = _cut(self.stdout, max_chars)
        err, cut_err = _cut(self.stderr, max_chars)
        body: dict[str, Any] = {
            "passed": self.exit_code == 0 and not self.timed_out,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "stdout": out,
            "stderr": err,
        }
        if self.signal:
            body["signal"] = self.signal
        if self.truncated or cut_out or cut_err:
            body["truncated"] = True
        return body


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + "\n[... output truncated]", True


AST_LOCK = threading.Lock()
"""CPython before 3.11.8 tracks the AST validator's recursion depth per interpreter, not per thread:
two threads parsing at once can fail with "AST constructor recursion depth mismatch" (gh-106905).
Tasks are validated in threads, so their code and records are parsed one thread at a time."""


def parse_records(data: bytes) -> list[dict[str, Any]]:
    """The runner's records, one Python literal per line, read with ``ast.literal_eval`` (which
    evaluates no code). The sandbox may have written anything here: a line that is not a literal
    dict (cut off, garbage, absurdly nested) is skipped."""
    records = []
    for line in data.split(b"\n"):
        try:
            with AST_LOCK:
                record = ast.literal_eval(line.decode("utf-8"))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class BoundedBuffer:
    """Keeps the first ``limit`` bytes written to it and remembers whether more came."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.truncated = self.truncated or bool(chunk)
            return
        if len(chunk) > room:
            chunk, self.truncated = chunk[:room], True
        self.parts.append(chunk)
        self.size += len(chunk)

    def data(self) -> bytes:
        return b"".join(self.parts)

    def text(self) -> str:
        return self.data().decode("utf-8", errors="replace")


class SandboxSession(ABC):
    """A sandbox bound to one working directory (one episode, or one validation)."""

    @abstractmethod
    def run(self, job: Job) -> RunResult:
        """Run ``job``; whatever the model's code does, return what happened. SandboxError if the
        sandbox itself failed."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the session holds (a container). Safe twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Sandbox(ABC):
    """One layer of isolation. ``open`` a session per episode; ``describe`` says what runs the code."""

    kind: str = "sandbox"

    @abstractmethod
    def open(self, work_dir: Path) -> SandboxSession:
        """A session whose runs see ``work_dir`` (read-only) as their working directory."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """What executes the model's code (interpreter or image digest, limits): for metadata and for
        keying task validation, which holds only for the sandbox it ran in."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release sandbox-wide resources. Safe twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
