"""PostgreSQL plumbing: private clusters, database administration, and choosing a server."""

from __future__ import annotations

from statekit.postgres.embedded import EmbeddedPostgres
from statekit.postgres.server import PostgresServer


class ServerLease:
    """A server to use until ``close()``: a given URL, or the shared embedded cluster."""

    def __init__(self, url: str | None = None) -> None:
        self._shared: EmbeddedPostgres | None = None
        if url:
            self.server = PostgresServer(url)
        else:
            self._shared = EmbeddedPostgres()
            self.server = self._shared.acquire()

    def close(self) -> None:
        self.server.close()
        if self._shared is not None:
            self._shared.release()
            self._shared = None


__all__ = ["EmbeddedPostgres", "PostgresServer", "ServerLease"]
