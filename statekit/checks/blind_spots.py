"""Which ignored tables an episode writes: changes the digest is blind to.

A digest spec's ``[ignored_tables]`` are tables the digest never reads (login sessions, caches), each
with the author's reason. A task that writes one changes the world in a way no digest comparison can
see, so the checker reports, per task kind, the ignored tables its reference script wrote: a finding
for the spec's author to confirm (ignoring a table is a declared decision, so it is not a failure).

How writes are seen, exactly and without the application's help:

- through the world's change journal (``statekit.postgres.journal``) where its database has one:
  every row inserted, updated or deleted between two cuts, whatever connection wrote it;
- otherwise by hashing each ignored table's rows before and after (exact for what changed; a write
  undone within the same episode is not seen, and the answer says so);
- a world with no PostgreSQL database that statekit restores (in memory, in a container), or an
  adapter with no digest spec, cannot be watched: the answer is why, never an empty list.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from statekit.digest.spec import DigestSpec
from statekit.env import Environment
from statekit.postgres.journal import Journal, journals_of
from statekit.postgres.journal_paths import Cut, delta
from statekit.postgres.journal_sql import SESSION_IO

JOURNAL = "journal"
CONTENTS = "contents"
NOTHING_IGNORED = "nothing ignored"
"""How a ``WriteWatch`` sees writes: the change journal, the ignored tables' contents hashed, or not at
all because the spec ignores no table (so nothing can be written unseen)."""


def table_fingerprints(conninfo: str, schema: str, tables: list[str]) -> dict[str, str]:
    """``{table: row count and a hash of its sorted row texts}`` (a table that does not exist: absent)."""
    out: dict[str, str] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(SESSION_IO)  # row texts independent of the session's settings
        for table in tables:
            name = sql.Identifier(schema, table)
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name.as_string(conn)]).fetchone()
            if not exists or not exists[0]:
                continue
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) "
                    "FROM ONLY {} t"
                ).format(name)
            ).fetchone()
            out[table] = f"{row[0]}:{row[1]}" if row else ""
    return out


@dataclass
class WriteWatch:
    """Watches one world's ignored tables from ``start`` until ``written``."""

    spec: DigestSpec
    journal: Journal | None
    method: str
    cut: Cut | None = None
    before: dict[str, str] | None = None

    @classmethod
    def start(cls, env: Environment) -> WriteWatch | str:
        """A watch on the current episode's world from now, or why its writes cannot be watched."""
        if env.adapter.out_of_process:
            return env.adapter.out_of_process
        spec = getattr(env.adapter, "spec", None)
        if not isinstance(spec, DigestSpec):
            return (
                f"adapter {env.adapter.name!r} has no digest spec (a DigestSpec as its `spec`), so which "
                "tables it ignores is not known"
            )
        if not spec.ignored_tables:
            return cls(spec, None, NOTHING_IGNORED)
        journals = list(journals_of(env.world))
        if len(journals) != 1:
            found = "no PostgreSQL database restored by statekit" if not journals else f"{len(journals)}"
            return f"the world holds {found} (a PostgresTemplate copy), so its tables cannot be watched"
        journal = journals[0]
        if journal.dirty() is None:
            with journal.reading() as (_, cut):
                return cls(spec, journal, JOURNAL, cut=cut)
        tables = sorted(spec.ignored_tables)
        return cls(spec, journal, CONTENTS, before=table_fingerprints(journal.conninfo, spec.schema, tables))

    def written(self) -> dict[str, str] | str:
        """``{ignored table: the spec's reason}`` for each one written since ``start``, or why that
        cannot be told (the journal stopped describing the world)."""
        ignored = self.spec.ignored_tables
        if self.journal is None:
            return {}
        if self.method == CONTENTS:
            assert self.before is not None
            after = table_fingerprints(self.journal.conninfo, self.spec.schema, sorted(ignored))
            return {t: ignored[t] for t in sorted(ignored) if self.before.get(t) != after.get(t)}
        assert self.cut is not None
        dirty = self.journal.dirty()
        if dirty:
            return f"the change journal stopped describing the world during the episode: {dirty}"
        with self.journal.reading() as (conn, now):
            moved = delta(self.cut, now)
            if moved is None:
                return "the change journal was emptied during the episode"
            touched = Journal.touched(conn, moved)
            relations = Journal.relations(conn, self.spec.schema)
        return {t: ignored[t] for t in sorted(ignored) if touched & relations.get(t, {}).keys()}


__all__ = ["CONTENTS", "JOURNAL", "NOTHING_IGNORED", "WriteWatch", "table_fingerprints"]
