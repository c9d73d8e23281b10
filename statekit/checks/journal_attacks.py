"""The attack pass on the change journal, replayed: what an application, or an agent with a SQL tool,
might do to a world through the connection the application gets.

Each case runs between two resets of one environment, on the application's own connection string
(``World.location`` of each journaled part), and must keep one promise: the next episode starts from
exactly the golden. The world is either rewound to it (every row, sequence and catalog entry equal
to the golden's fingerprints, ``_statekit.unlike_golden``) or, when the journal cannot vouch for it,
replaced by a clone; never a rewound world that differs while reporting the golden's digest. Most
cases are refused outright: the application's role owns nothing and may not take the replica role
(``statekit.postgres.roles``). A case whose statement is refused stops there (what ran before it
stays done), and the report lists the refusal.

The cases are written for any schema: they aim at the first table with rows, a primary key and a
text column outside every key, index and constraint (``Target``), and the first sequence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from statekit.postgres.journal import Journal
from statekit.postgres.roles import GROUP
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import World

if TYPE_CHECKING:
    from statekit.env import Environment

_TARGET = """
SELECT format('%I.%I', n.nspname, c.relname), a.attname, a.atttypid::regtype::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
WHERE c.relkind = 'r' AND c.relpersistence = 'p'
  AND n.nspname NOT IN ('information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
  AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype, 'int2'::regtype,
                     'int4'::regtype, 'int8'::regtype, 'numeric'::regtype, 'bool'::regtype)
  AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
  AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND a.attnum = ANY (i.indkey))
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND a.attnum = ANY (k.conkey))
  AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal
                  AND g.tgname NOT LIKE 'statekit\\_%')
ORDER BY c.oid, a.atttypid IN ('bool'::regtype), a.attnum
"""
_SEQUENCE = """
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND n.nspname NOT IN ('information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY c.oid LIMIT 1
"""


@dataclass
class Target:
    """Where the cases aim, in one journaled part of the world, and the connections they opened."""

    app: str
    """The application's connection string (psycopg)."""
    database: str
    table: str
    """Qualified and quoted (``format('%I.%I')``)."""
    column: str
    sequence: str | None
    others: list[str] = field(default_factory=list)
    """Other databases on the server (``_other_databases`` tries them): statekit's own, ``postgres``
    and ``template1``."""
    refused: list[str] = field(default_factory=list)
    """``statement: SQLSTATE message`` for each statement the server refused."""
    breaches: list[str] = field(default_factory=list)
    """What the application reached that it must not: each is a failure of the case."""
    kept: list[psycopg.Connection[Any]] = field(default_factory=list)
    """Connections a case leaves open across the reset (open transactions, session state)."""

    kind: str = "text"
    """The column's type: a one-letter text fits any text column, a number goes up by one."""

    @property
    def write(self) -> str:
        """An update of one row that changes it."""
        column = sql.Identifier(self.column).as_string(None)
        if self.kind == "boolean":
            value = f"NOT coalesce({column}, false)"
        elif self.kind in ("smallint", "integer", "bigint", "numeric"):
            value = f"coalesce({column}, 0) + 1"
        else:
            value = f"CASE WHEN {column} = 'x' THEN 'y' ELSE 'x' END"
        return (
            f"UPDATE {self.table} SET {column} = {value} "
            f"WHERE ctid = (SELECT ctid FROM {self.table} ORDER BY ctid LIMIT 1)"
        )

    def names(self) -> dict[str, str]:
        """What a case's statements may name (identifiers quoted)."""
        return {
            "table": self.table,
            "column": sql.Identifier(self.column).as_string(None),
            "write": self.write,
            "sequence": self.sequence or "",
            "database": sql.Identifier(self.database).as_string(None),
        }

    def connect(self, *, keep: bool = False, conninfo: str | None = None) -> psycopg.Connection[Any]:
        conn = psycopg.connect(conninfo or self.app, autocommit=True)
        if keep:
            self.kept.append(conn)
        return conn

    def run(self, conn: psycopg.Connection[Any], *statements: str) -> bool:
        """Run ``statements`` in order; at the first the server refuses, note it and stop (False)."""
        for statement in statements:
            try:
                conn.execute(statement.encode())  # the cases' own SQL, not a query from outside
            except psycopg.Error as exc:
                if not conn.autocommit and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
                state = exc.sqlstate or "?"
                self.refused.append(f"{statement[:80]}: {state} {str(exc).strip().splitlines()[0][:120]}")
                return False
        return True

    def once(self, *statements: str) -> bool:
        with self.connect() as conn:
            return self.run(conn, *statements)


@dataclass(frozen=True)
class Attack:
    """One case: ``tries``, each a list of statements run in order on a new connection of the
    application (a refused statement ends its try), or ``play`` for a case that keeps connections
    open across the reset. Statements name their target as ``{table}``, ``{column}``, ``{write}`` (an
    update that changes one row), ``{sequence}`` and ``{database}``."""

    name: str
    doc: str
    tries: tuple[tuple[str, ...], ...] = ()
    play: Callable[[Target], None] | None = None

    def run(self, target: Target) -> None:
        for statements in self.tries:
            if target.sequence is None and any("{sequence}" in s for s in statements):
                target.refused.append("no sequence in this world: nothing to try")
                continue
            target.once(*(s.format(**target.names()) for s in statements))
        if self.play is not None:
            self.play(target)


def _open_transaction(t: Target) -> None:
    t.run(t.connect(keep=True), "BEGIN", t.write)  # left open: the rewind must end it


def _session_state(t: Target) -> None:
    t.run(
        t.connect(keep=True),
        f"CREATE TEMP TABLE {t.table.rsplit('.', 1)[-1]} (shadow int)",  # pg_temp is searched first
        "SET timezone = 'Pacific/Apia'",
        "SELECT pg_advisory_lock(4242)",
        "LISTEN statekit_attack",
        "PREPARE statekit_attack AS SELECT 1",
    )


def _other_databases(t: Target) -> None:
    """Every database statekit made (goldens, builds, other worlds) is closed to other roles, and so
    are ``postgres`` and ``template1`` of a server statekit runs: a write there would reach a golden,
    another episode or every later build, where no rewind of this world could undo it."""
    for name in t.others:
        try:
            with t.connect(conninfo=psycopg.conninfo.make_conninfo(t.app, dbname=name)) as conn:
                t.breaches.append(f"the application connected to database {name!r}")
                t.run(conn, t.write)
        except psycopg.OperationalError as exc:
            t.refused.append(f"connect to {name}: {str(exc).strip().splitlines()[-1][:120]}")


REPLICA = "SET session_replication_role = replica"
_FUNCTION = (
    "CREATE FUNCTION {schema}.statekit_attack() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$"
)
_TRIGGER = (
    "CREATE TRIGGER statekit_attack BEFORE UPDATE ON {table} FOR EACH ROW "
    "EXECUTE FUNCTION {schema}.statekit_attack()"
)

ATTACKS: tuple[Attack, ...] = (
    Attack("update", "a plain write", (("{write}",),)),
    Attack(
        "delete",
        "a row deleted (where its foreign keys allow)",
        (
            (
                "DO $$ BEGIN DELETE FROM {table} WHERE ctid = "
                "(SELECT ctid FROM {table} ORDER BY ctid LIMIT 1); "
                "EXCEPTION WHEN foreign_key_violation THEN NULL; END $$",
            ),
        ),
    ),
    Attack("truncate", "TRUNCATE ... CASCADE, journaled row by row", (("TRUNCATE {table} CASCADE",),)),
    Attack(
        "sequences",
        "nextval and setval",
        (("SELECT nextval('{sequence}')", "SELECT setval('{sequence}', 100000)"),),
    ),
    Attack("rolled_back", "a write rolled back", (("BEGIN", "{write}", "ROLLBACK"),)),
    Attack("open_transaction", "a write left uncommitted across the reset", play=_open_transaction),
    Attack(
        "prepared_transaction",
        "a two-phase transaction left prepared",
        (("BEGIN", "{write}", "PREPARE TRANSACTION 'statekit_attack'"),),
    ),
    Attack(
        "session_state",
        "a temp table shadowing a table, settings, a lock, LISTEN, a prepared statement",
        play=_session_state,
    ),
    Attack("large_object", "a large object, which the journal cannot capture", (("SELECT lo_create(0)",),)),
    Attack(
        "moving_flag",
        "SET statekit.moving = 'on', then a write (the flag that once silenced capture)",
        (("SET statekit.moving = 'on'", "{write}"),),
    ),
    Attack(
        "database_setting",
        "ALTER DATABASE <world> SET statekit.moving = on, then a write on a new connection",
        (("ALTER DATABASE {database} SET statekit.moving = 'on'",), ("{write}",)),
    ),
    Attack(
        "role_setting",
        "ALTER ROLE CURRENT_USER SET timezone (a role's own defaults)",
        (("ALTER ROLE CURRENT_USER SET timezone = 'Pacific/Apia'",),),
    ),
    Attack(
        "role_setting_in_database",
        "ALTER ROLE CURRENT_USER IN DATABASE <world> SET search_path",
        (("ALTER ROLE CURRENT_USER IN DATABASE {database} SET search_path = pg_temp, public",),),
    ),
    Attack(
        "password",
        "ALTER ROLE CURRENT_USER PASSWORD (the application locking the next episode out)",
        (("ALTER ROLE CURRENT_USER PASSWORD 'attack'",),),
    ),
    Attack(
        "journal_delete",
        "a write, then DELETE FROM _statekit.journal",
        (("{write}", "DELETE FROM _statekit.journal"),),
    ),
    Attack(
        "journal_functions",
        "statekit's own functions called by the application",
        (("SELECT _statekit.taint('attack')",), ("SELECT _statekit.sequence_positions()",)),
    ),
    Attack("replica_role", "session_replication_role = replica, then a write", ((REPLICA, "{write}"),)),
    Attack(
        "disable_trigger",
        "ALTER TABLE ... DISABLE TRIGGER statekit_capture (in the replica role, then without), a write",
        (
            (REPLICA, "ALTER TABLE {table} DISABLE TRIGGER statekit_capture", "{write}"),
            ("ALTER TABLE {table} DISABLE TRIGGER statekit_capture", "{write}"),
        ),
    ),
    Attack(
        "create_index",
        "CREATE INDEX (in the replica role, then without)",
        (
            (REPLICA, "CREATE INDEX statekit_attack ON {table} ({column})"),
            ("CREATE INDEX statekit_attack ON {table} ({column})",),
        ),
    ),
    Attack(
        "create_trigger",
        "CREATE FUNCTION and CREATE TRIGGER, a trigger that would outlive the episode (replica role, "
        "then a temporary function)",
        (
            (REPLICA, _FUNCTION.replace("{schema}", "public"), _TRIGGER.replace("{schema}", "public")),
            (_FUNCTION.replace("{schema}", "pg_temp"), _TRIGGER.replace("{schema}", "pg_temp")),
        ),
    ),
    Attack(
        "alter_sequence",
        "ALTER SEQUENCE ... INCREMENT BY 7 (in the replica role, then without)",
        (
            (REPLICA, "ALTER SEQUENCE {sequence} INCREMENT BY 7"),
            ("ALTER SEQUENCE {sequence} INCREMENT BY 7",),
        ),
    ),
    Attack(
        "create_table",
        "CREATE TABLE and ALTER TABLE ADD COLUMN",
        (
            ("CREATE TABLE public.statekit_attack (x int)",),
            ("ALTER TABLE {table} ADD COLUMN statekit_attack int",),
        ),
    ),
    Attack(
        "grant_and_comment",
        "GRANT to PUBLIC, COMMENT ON TABLE, ALTER DEFAULT PRIVILEGES",
        (
            ("GRANT SELECT ON {table} TO PUBLIC",),
            ("COMMENT ON TABLE {table} IS 'attack'",),
            ("ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC",),
        ),
    ),
    Attack(
        "set_role",
        f"SET ROLE {GROUP} (the group that holds the rights), then a write and a setting on the group",
        ((f"SET ROLE {GROUP}", "{write}", f"ALTER ROLE {GROUP} SET timezone = 'Pacific/Apia'"),),
    ),
    Attack(
        "maintenance",
        "ANALYZE, VACUUM FULL and CLUSTER of a table the application does not own",
        (("ANALYZE {table}",), ("VACUUM FULL {table}",), ("CLUSTER {table}",)),
    ),
    Attack("other_databases", "connecting to a golden, a build or another world", play=_other_databases),
    Attack(
        "terminate_statekit",
        "ending statekit's own connection to the world",
        (
            (
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'statekit' AND datname = current_database()",
            ),
        ),
    ),
)
"""The attack pass's cases, the seven it found failing among them (``moving_flag``,
``database_setting``, ``journal_delete``, ``disable_trigger``, ``create_index``, ``create_trigger``,
``alter_sequence``)."""


@dataclass
class AttackResult:
    name: str
    doc: str
    refused: list[str]
    world: str
    """How the next reset served the world: ``rewound`` (in place), ``recopied`` (cloned again in place)
    or a new clone (``restored``, ``pooled``)."""
    problem: str | None
    """None when the next episode started from exactly the golden; else what differed."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "doc": self.doc,
            "refused": self.refused,
            "world": self.world,
            "problem": self.problem,
        }


def journaled_parts(world: World) -> Iterator[World]:
    """The parts of ``world`` (itself, or a composite's) that are PostgreSQL worlds with a journal."""
    if isinstance(world.handle, Journal):
        yield world
    elif isinstance(world.handle, dict):
        for part in world.handle.values():
            if isinstance(part, World):
                yield from journaled_parts(part)


def _target(part: World) -> Target:
    journal = part.handle
    assert isinstance(journal, Journal)
    with psycopg.connect(journal.conninfo, autocommit=True) as conn:
        found = None
        for table, column, kind in conn.execute(_TARGET).fetchall():
            row = conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.SQL(table))).fetchone()
            if row and row[0]:
                found = (str(table), str(column), str(kind))
                break
        sequence = conn.execute(_SEQUENCE).fetchone()
        database = str(conn.info.dbname)
        prefix = database.split("_e_", 1)[0] + "_"
        others = conn.execute(
            "(SELECT datname FROM pg_database WHERE starts_with(datname, %s) AND datname <> %s "
            "ORDER BY datname LIMIT 5) UNION ALL SELECT 'postgres' UNION ALL SELECT 'template1'",
            (prefix, database),
        ).fetchall()
    if found is None:
        raise LookupError(
            f"world {part.id} has no table with rows, a primary key and a text, number or boolean column "
            "outside every key, index and constraint: the cases have nothing to write"
        )
    table, column, kind = found
    return Target(
        to_conninfo(part.location),
        database,
        table,
        column,
        str(sequence[0]) if sequence else None,
        [str(r[0]) for r in others],
        kind=kind,
    )


def _unlike_golden(part: World) -> str | None:
    journal = part.handle
    assert isinstance(journal, Journal)
    with psycopg.connect(journal.conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT _statekit.unlike_golden(), _statekit.outside(%s), (SELECT dirty FROM _statekit.meta)",
            (journal.role,),
        ).fetchone()
    assert row is not None
    differs, outside, dirty = row
    if differs:
        return f"the world is not its golden: {differs}"
    if outside != journal.outside:
        return f"the episode's changes outside the journal survived: {outside}"
    if dirty:
        return f"the served world's journal is tainted: {dirty}"
    return None


def check_journal_attacks(
    env: Environment, seed: int, attacks: tuple[Attack, ...] = ATTACKS
) -> list[AttackResult]:
    """Play every case between two resets of ``env`` to ``seed`` and judge the second reset's world.

    Raises LookupError when the environment's worlds have no journal to attack (nothing to judge)."""
    _, first = env.reset(seed=seed)
    if not list(journaled_parts(env.world)):
        raise LookupError(f"strategy {env.strategy.name} serves no journaled PostgreSQL world")
    golden = first["digest"]
    results = []
    for attack in attacks:
        targets = [_target(part) for part in journaled_parts(env.world)]
        for target in targets:
            attack.run(target)
        try:
            _, info = env.reset(seed=seed)
        finally:
            for target in targets:
                for conn in target.kept:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
        breaches = [line for target in targets for line in target.breaches]
        problem = "; ".join(breaches) or None
        problem = problem or next(filter(None, (_unlike_golden(p) for p in journaled_parts(env.world))), None)
        if problem is None and info["digest"] != golden:
            problem = f"reset reported digest {info['digest'][:12]}, the golden's is {golden[:12]}"
        if problem is None and env.digest_report(full=True).digest != golden:
            problem = "a full digest of the reset world differs from the golden's"
        refused = [line for target in targets for line in target.refused]
        results.append(AttackResult(attack.name, attack.doc, refused, str(info["world"]), problem))
    return results
