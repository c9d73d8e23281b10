"""One Redmine (Debian's ``redmine`` package: Rails 6.1 on PostgreSQL) pointed at one world, run behind
statekit's process boundary (``statekit.kit.AppProcess``): puma serving its REST API on a unix socket,
its clock libfaketime's, no network but a loopback, a fixed host name.

Debian runs several Redmines from one installation as *instances*: ``REDMINE_INSTANCE=<name>`` makes
Redmine read ``/usr/share/redmine/instances/<name>/config/database.yml`` and keep its cache, logs,
files and session secret there. statekit makes one instance per world (a temporary directory linked
from Debian's instances directory), so worlds share nothing but the installed code.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from statekit import ConfigError
from statekit.kit import AppProcess, Boundary, CopyNamer

REDMINE = Path(os.environ.get("STATEKIT_REDMINE", "/usr/share/redmine"))
"""Debian's Redmine (``apt-get install redmine redmine-pgsql puma``)."""
ADMIN_KEY = "5d41402abc4b2a76b9719d911017c592statekit"
"""The REST API key of the world's admin, which statekit writes into the schema stage: the world is
reached only through a unix socket inside its boundary, so the key guards nothing a key could."""
SECRET = "statekit-redmine-world-" * 4
"""Rails' secret_key_base: fixed, so a session or signed value is the same in every build."""
INSTANCES = CopyNamer("statekit-redmine")
"""An instance's name (its directory's and its link's), naming the statekit process that made it."""
MAIL_PORT = 2525
"""Where Redmine sends its e-mail: a port of its boundary's own loopback, answered by statekit's mail
provider (``statekit.kit.SmtpService``) when the world is attached; nothing answers while it is built."""
MAIL_PROVIDER = ("127.0.0.1", MAIL_PORT)


def configuration(smtp: tuple[str, int] = MAIL_PROVIDER) -> str:
    """Redmine's configuration.yml for a world, its mail sent by SMTP to ``smtp`` (host, port). Redmine
    renders it through ERB first, which sets its mail job's queue: mail is delivered within the request
    that sends it (ActiveJob's inline adapter), not later on a thread of its own (Rails' default,
    async), so a step's mail is in the world when the step returns."""
    host, port = smtp
    return f"""production:
  email_delivery:
    delivery_method: :smtp
    smtp_settings:
      address: {_yaml(host)}
      port: {int(port)}
      domain: "redmine.statekit.invalid"
      open_timeout: 5
      read_timeout: 5
<% ActionMailer::MailDeliveryJob.queue_adapter = :inline %>
"""


ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
    "RAILS_ENV": "production",
    "REDMINE_LANG": "en",
}


def installed() -> str:
    """Redmine's version, or a ConfigError saying how to install it."""
    version = REDMINE / "lib" / "redmine" / "version.rb"
    if not version.is_file() or shutil.which("puma") is None:
        raise ConfigError(
            "the Redmine world needs Debian's Redmine and puma: apt-get install --no-install-recommends "
            "redmine redmine-pgsql puma (preseed redmine/instances/default/dbconfig-install false: "
            "scripts/test.sh does both)"
        )
    numbers = {}
    for line in version.read_text().splitlines():
        parts = line.split("=")
        if len(parts) == 2 and parts[0].strip() in ("MAJOR", "MINOR", "TINY"):
            numbers[parts[0].strip()] = parts[1].strip()
    return ".".join(numbers.get(k, "?") for k in ("MAJOR", "MINOR", "TINY"))


def puma(socket: Path) -> list[str]:
    """The command that serves Redmine's REST API on the unix ``socket``: one puma thread, production."""
    return ["puma", "--bind", f"unix://{socket}", "--threads", "1:1", "--environment", "production",
            "--dir", str(REDMINE), str(REDMINE / "config.ru")]  # fmt: skip


def database_yml(url: str) -> str:
    """Rails' database.yml for the world at SQLAlchemy ``url`` (reached through its unix socket)."""
    parsed = make_url(url)
    host = parsed.query.get("host") or parsed.host
    if not isinstance(host, str) or not host.startswith("/"):
        raise ConfigError(
            f"a Redmine world reaches its database through a unix socket (its boundary has no network), "
            f"but the world's URL names host {host!r}"
        )
    entries = {
        "adapter": "postgresql",
        "database": parsed.database,
        "host": host,
        "port": parsed.port or 5432,
        "username": parsed.username,
        "password": parsed.password or "",
        "encoding": "utf8",
        "pool": 2,
        "reaping_frequency": 0,  # no reaper thread waking up
    }
    lines = "".join(f"  {key}: {_yaml(value)}\n" for key, value in entries.items())
    return f"production:\n{lines}"


def _yaml(value: object) -> str:
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _remove(link: Path, root: Path) -> None:
    link.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)


def _sweep() -> None:
    """Remove the instances of statekit processes that died without closing them (killed outright:
    no finalizer ran), their links in Debian's instances directory and their directories."""
    for link in (REDMINE / "instances").glob(f"{INSTANCES.prefix}_e_*"):
        if INSTANCES.is_orphan(link.name):
            _remove(link, Path(tempfile.gettempdir()) / link.name)


class RedmineInstance:
    """Redmine for the world at ``url``: ``rake`` tasks run, and ``serve`` starts puma; ``close`` ends
    the process and removes the instance."""

    def __init__(
        self,
        url: str,
        *,
        boundary: Boundary | None = None,
        services: Sequence[int] = (),
        smtp: tuple[str, int] = MAIL_PROVIDER,
    ) -> None:
        installed()
        self.url = url
        _sweep()
        self.root = Path(tempfile.gettempdir()) / INSTANCES.episode()
        self.root.mkdir(mode=0o700)
        self.name = self.root.name
        for part in ("config", "files", "log", "tmp"):
            (self.root / part).mkdir()
        (self.root / "config" / "database.yml").write_text(database_yml(url))
        (self.root / "config" / "secret_key.txt").write_text(SECRET)
        (self.root / "config" / "configuration.yml").write_text(configuration(smtp))
        self.link = REDMINE / "instances" / self.name
        self._removed = weakref.finalize(self, _remove, self.link, self.root)
        """Also run when the instance is collected or the interpreter exits without ``close``: Debian's
        instances directory would keep a link to a removed directory otherwise."""
        try:
            self.link.symlink_to(self.root)
        except OSError as exc:
            self._removed()
            raise ConfigError(
                f"cannot add a Redmine instance at {self.link} ({exc}): Debian keeps instances there "
                "(/var/lib/redmine); run as a user who may write it"
            ) from exc
        self.process = AppProcess(
            puma(self.root / "app.sock"),
            socket=self.root / "app.sock",
            # SCHEMA: where ``db:migrate`` dumps the schema it made (Rails' default is Redmine's own
            # db/ directory, a file of Debian's package every instance would write)
            environment={
                **ENVIRONMENT,
                "HOME": str(self.root),
                "REDMINE_INSTANCE": self.name,
                "SCHEMA": str(self.root / "schema.rb"),
            },
            boundary=boundary or Boundary(),
            workdir=REDMINE,
            services=services,
        )  # fmt: skip
        self._client: httpx.Client | None = None

    def rake(self, now: datetime, *tasks: str) -> str:
        """Run Redmine's rake ``tasks`` behind the boundary, the clock at ``now``."""
        return self.process.run(["rake", *tasks], now)

    def serve(self, now: datetime) -> httpx.Client:
        """Start puma with the clock at ``now``; a client of its REST API as the world's admin."""
        self.process.start(now)
        self._client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.process.socket)),
            base_url="http://redmine.world",
            headers={"X-Redmine-API-Key": ADMIN_KEY, "Content-Type": "application/json"},
            timeout=60.0,
        )
        return self._client

    def call(self, method: str, path: str, *, user: str | None = None, body: Any = None) -> httpx.Response:
        """One REST call as the admin, or as ``user`` (Redmine's ``X-Redmine-Switch-User``)."""
        if self._client is None:
            raise RuntimeError("the Redmine instance is not serving")
        headers = {"X-Redmine-Switch-User": user} if user else {}
        return self._client.request(method, path, headers=headers, json=body)

    def close(self) -> None:
        """End puma and remove the instance. Safe to call twice."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self.process.close()
        self._removed()

    def __enter__(self) -> RedmineInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
