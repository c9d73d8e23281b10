"""The world cache: each seed's golden world, built once, kept within a byte budget per server.

A golden (the database and files of one seed's initial world) costs a build (about half a second
for the claims app) and about 9 MB of disk; every later reset of that seed clones it. Without a
bound, a long run of seedless resets (each draws a new seed) fills the disk. ``WorldCache`` is the
one object that decides which goldens exist:

- ``ensure(seed)`` returns the seed's key, building the golden on a miss, and marks it used;
- before a build (counting the golden being built at the size of the store's largest) and after it, it
  evicts the least recently used goldens until the total is within the budget,
  skipping *pinned* worlds and *leased* ones (the golden of a live episode, or of a seed announced
  with ``prefetch``, in any process);
- ``pin``/``prune``/``entries`` serve ``statekit cache pin|prune|ls|du``.

The record is shared by every process on the server, so the budget is one budget: a SQLite file,
``$STATEKIT_HOME/cache/worlds.sqlite`` (WAL; writers serialise on ``BEGIN IMMEDIATE``), holding
each golden's size (PostgreSQL's ``pg_database_size``, directory trees counted like ``du``), its
last use and its pin, plus the leases of live holders, keyed by owner (host + pid + process start
time) so a crashed process's leases are ignored. An eviction drops the golden while it holds the
write lock, so no process can lease a key between the decision and the drop. Strategies whose
goldens live in process memory (``persistent = False``) keep a private in-memory record.

Eviction never breaks a world already handed out: a database copy is independent of its
template, a copy-on-write overlay's golden is deleted only once no overlay reads it
(``CowFilesystem.drop``), and a pool's ready copies stay valid worlds (rebuilding an evicted seed
makes a byte-identical golden). A ``Rewinding`` strategy's parked copies lease their goldens: a parked
overlay still reads its golden, and the strategy serves a parked copy without asking for the golden.

What the budget counts: goldens. The worlds in use are not in it: each environment's live copy and
up to ``Rewinding.max_parked`` parked copies (``rewind``), and a pool's ready copies. On PostgreSQL 18
with ``file_copy_method=clone`` a copy shares its golden's blocks, so a golden's
``pg_database_size`` (what is counted) overstates what evicting it frees while copies of it live.

The budget: ``budget=`` (bytes), else ``$STATEKIT_CACHE_BYTES`` (``500M``, ``4G``...), else
``DEFAULT_BUDGET`` (2 GiB: about 200 claims worlds, sized for a laptop). A budget no eviction can
meet (pins, leases, or another application's goldens, which only that application can drop) is
logged, never refused: the cache then holds what is in use.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from statekit.builder_code import builder_code
from statekit.builds import build_golden
from statekit.determinism.egress import EgressScope
from statekit.digest.canonical import canonical_json
from statekit.entropy import true_token
from statekit.errors import ConfigError
from statekit.settings import parse_size as parse_size
from statekit.settings import settings, statekit_home
from statekit.strategies.base import ResetStrategy
from statekit.strategies.naming import Owner

if TYPE_CHECKING:
    from statekit.adapter import Adapter

log = logging.getLogger(__name__)

GiB = 1 << 30
INDEX_FORMAT = 1
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


WORLD_FORMAT = "8"
"""Part of every world key: goldens built before the journal (2), the world roles (3), quiet()'s
millisecond wait (4), its sparing of statekit's auditor (5), the comparison the auditor runs (6) and
a move's plpgsql ``outside``, one-statement sequences and the sessions it keeps (7), and quiet() not
waiting out the exit of an idle backend holding nothing (8) are not reused."""


def world_key(fingerprint: dict[str, str], seed: int) -> str:
    """The snapshot-cache key: (app version, fixture hash, builder version, ..., seed)."""
    body = canonical_json({"fingerprint": fingerprint, "seed": seed, "statekit": WORLD_FORMAT})
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def default_budget() -> int:
    """``$STATEKIT_CACHE_BYTES``, else ``DEFAULT_BUDGET`` (``statekit.settings``)."""
    return settings().cache_bytes


@dataclass(frozen=True)
class CacheEntry:
    """One golden in the record. ``size`` is None while it is being built (or only pinned)."""

    store: str
    key: str
    seed: int
    size: int | None
    last_used: int
    """A counter shared by every process: higher is more recent."""
    pinned: bool
    leased: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "store": self.store,
            "key": self.key,
            "seed": self.seed,
            "bytes": self.size,
            "last_used": self.last_used,
            "pinned": self.pinned,
            "leased": self.leased,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS goldens (
    store TEXT NOT NULL, key TEXT NOT NULL, seed INTEGER NOT NULL, bytes INTEGER,
    used INTEGER NOT NULL, pinned INTEGER NOT NULL DEFAULT 0, code TEXT, PRIMARY KEY (store, key));
CREATE TABLE IF NOT EXISTS leases (
    holder TEXT NOT NULL, owner TEXT NOT NULL, store TEXT NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (holder, key));
CREATE INDEX IF NOT EXISTS leases_by_key ON leases (store, key);
"""


class CacheIndex:
    """The shared record of goldens and leases: a SQLite file, or private memory (``path=None``).

    A process keeps one connection per file (opening one costs milliseconds, a transaction
    microseconds), shared by its threads under a lock; a forked child opens its own.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        if path is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.executescript(_SCHEMA)
            self._db = _Connection(conn)
        else:
            self._db = _Connection.open(path)

    @classmethod
    def shared(cls) -> CacheIndex:
        """The server's record, under ``$STATEKIT_HOME/cache``."""
        return cls(statekit_home() / "cache" / "worlds.sqlite")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: every process's writers wait for it (``BEGIN IMMEDIATE``)."""
        with self._db.lock:
            conn = self._db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def entries(self, store: str | None = None) -> list[CacheEntry]:
        """Every golden (of one store, or all), least recently used first."""
        with self.transaction() as db:
            forget_dead_leases(db)
            rows = db.execute(
                "SELECT store, key, seed, bytes, used, pinned,"
                " EXISTS (SELECT 1 FROM leases l WHERE l.store = g.store AND l.key = g.key)"
                " FROM goldens g WHERE ? IS NULL OR store = ? ORDER BY used",
                (store, store),
            ).fetchall()
        return [CacheEntry(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6])) for r in rows]

    def total(self) -> int:
        """Bytes of every golden in the record."""
        with self.transaction() as db:
            return int(db.execute("SELECT coalesce(sum(bytes), 0) FROM goldens").fetchone()[0])


class _Connection:
    """One SQLite connection and the lock its threads take turns on."""

    _open: dict[tuple[int, Path], _Connection] = {}
    _registry_lock = threading.Lock()

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.lock = threading.RLock()

    @classmethod
    def open(cls, path: Path) -> _Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        where = (os.getpid(), path.parent.resolve() / path.name)
        with cls._registry_lock:
            made = cls._open.get(where)
            if made is None:
                conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, INDEX_FORMAT):
                    conn.close()
                    raise ConfigError(
                        f"{path} has cache index format {version}, this statekit reads {INDEX_FORMAT}: "
                        "delete the file (the goldens are re-indexed as they are used)"
                    )
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # a cache record: losing a last commit is harmless
                conn.executescript(_SCHEMA)
                if "code" not in {row[1] for row in conn.execute("PRAGMA table_info(goldens)")}:
                    try:  # a record made before it (another process may be adding it too)
                        conn.execute("ALTER TABLE goldens ADD COLUMN code TEXT")
                    except sqlite3.OperationalError as exc:
                        if "duplicate column" not in str(exc):
                            raise
                conn.execute(f"PRAGMA user_version={INDEX_FORMAT}")
                made = cls._open[where] = cls(conn)
            return made


USE_REFRESH = 1.0
"""Seconds a golden's last use and a holder's unchanged leases go unrecorded: back-to-back resets
wrote the shared record every time, and its periodic checkpoint (an fsync) was a mode of
``env.reset`` at three times its median; eviction order needs no finer clock than this."""


def forget_dead_leases(db: sqlite3.Connection) -> None:
    """Leases of processes that are gone (crashed, or never released) protect nothing."""
    for (label,) in db.execute("SELECT DISTINCT owner FROM leases").fetchall():
        owner = Owner.from_label(label)
        if owner is None or not owner.is_alive():
            db.execute("DELETE FROM leases WHERE owner = ?", (label,))


class WorldCache:
    """The goldens of one adapter in one strategy's store, within the server's budget.

    ``ensure(seed)`` is what ``Environment.reset`` calls; a benchmark that needs a seed's golden
    calls it too. Each instance is one *holder*: it leases the golden of its current seed (and of
    the seeds it was asked to prefetch, and the seed before, in case the reset is refused) until its
    next ``ensure`` or ``close``.
    """

    def __init__(
        self,
        adapter: Adapter,
        strategy: ResetStrategy,
        *,
        budget: int | None = None,
        index: CacheIndex | None = None,
    ) -> None:
        self.adapter = adapter
        self.strategy = strategy
        storage = self._storage = strategy.storage
        self.store = f"{adapter.name}:{storage.name}"
        self.index = index or (CacheIndex.shared() if storage.persistent else CacheIndex())
        self.budget = default_budget() if budget is None else budget
        if self.budget < 0:
            raise ConfigError(f"the cache budget must be >= 0 bytes, got {self.budget}")
        self.last = ""
        """How the last ``ensure`` went: "hit" (the golden existed) or "miss" (it was built)."""
        self.evicted: list[str] = []
        """Keys this instance evicted, oldest first (for benchmarks and tests)."""
        self.egress: EgressScope | None = None
        """Where a build may reach out (the Environment's guard); None: no guard."""
        self._fingerprint = adapter.fingerprint()
        self._code = builder_code(adapter)
        """The code that builds this adapter's worlds, recorded beside each golden built here."""
        self._token = true_token(8)
        self._current: str | None = None
        self._previous: str | None = None
        self._prefetched: list[str] = []
        self._warned: set[str] = set()
        self._written: tuple[frozenset[str], str] | None = None
        """The leases (and their owner) ``_use`` last wrote; ``_marked``: when it marked each key used."""
        self._marked: dict[str, float] = {}

    def key(self, seed: int) -> str:
        return world_key(self._fingerprint, seed)

    @property
    def _holder(self) -> str:
        """This holder in this process: a forked child's leases are its own, never its parent's."""
        return f"{self._token}-{os.getpid()}"

    def ensure(self, seed: int) -> str:
        """The seed's golden key; build the golden if it is missing. Leases it until the next call.

        The golden leased before stays leased until the call after: a reset that is refused once its
        world is restored keeps the episode it would have replaced, and that episode's golden.
        """
        key = self.key(seed)
        if key != self._current:
            self._previous, self._current = self._current, key
        return self._get(seed)

    def prefetch(self, seeds: Sequence[int]) -> list[str]:
        """Ensure each seed's golden and lease them all (a pool is about to clone them); their keys."""
        self._prefetched = [self.key(seed) for seed in seeds]
        return [self._get(seed) for seed in seeds]

    def _get(self, seed: int) -> str:
        key = self.key(seed)
        unsized = self._use({key: seed})
        if self.strategy.has(key):
            self.last = "hit"
            if unsized:  # a golden made before this record, or by a crash between build and record
                self._record_size(key)
                self._evict()
            return key
        self.last = "miss"
        self._reserve(key)
        self._evict()  # make room first: a golden being built already takes disk
        try:
            self._build(seed, key)
        except BaseException:
            self._forget_unbuilt(key)
            raise
        self._record_size(key, code=self._code)
        self._evict()
        return key

    def pin(self, seeds: Sequence[int], *, pinned: bool = True) -> None:
        """Never evict these seeds' worlds (pins are per world: re-pin after the application changes)."""
        with self.index.transaction() as db:
            for seed in seeds:
                key = self.key(seed)
                db.execute(
                    "INSERT INTO goldens (store, key, seed, bytes, used, pinned) VALUES (?, ?, ?, NULL, 0, ?)"
                    " ON CONFLICT (store, key) DO UPDATE SET pinned = excluded.pinned",
                    (self.store, key, seed, int(pinned)),
                )

    def prune(self, target: int | None = None) -> list[str]:
        """Evict least recently used goldens of this store (not pinned, not leased) down to ``target``
        bytes in total (default: the budget). Returns the evicted keys."""
        return self._evict(self.budget if target is None else target)

    def entries(self) -> list[CacheEntry]:
        return self.index.entries(self.store)

    def close(self) -> None:
        """Release this holder's leases. Safe to call twice."""
        self._current = self._previous = None
        self._prefetched = []
        self._written, self._marked = None, {}
        with self.index.transaction() as db:
            db.execute("DELETE FROM leases WHERE holder = ?", (self._holder,))

    # -- internals ----------------------------------------------------------------------------
    def _use(self, seeds_by_key: dict[str, int]) -> bool:
        """Mark keys used now and renew this holder's leases; True if a key's size is unknown."""
        leased = {k for k in (self._current, self._previous, *self._prefetched) if k is not None}
        leased |= self.strategy.parked_keys()  # a parked copy may read its golden (an overlay's lower)
        unsized = False
        owner = Owner.current().label
        now = time.monotonic()
        if self._written == (frozenset(leased), owner) and all(
            now - self._marked.get(key, -USE_REFRESH) < USE_REFRESH for key in seeds_by_key
        ):
            return False  # the same leases, and each key marked used (and sized) a moment ago
        with self.index.transaction() as db:
            (clock,) = db.execute("SELECT coalesce(max(used), 0) + 1 FROM goldens").fetchone()
            for key, seed in seeds_by_key.items():
                db.execute(
                    "INSERT INTO goldens (store, key, seed, bytes, used) VALUES (?, ?, ?, NULL, ?)"
                    " ON CONFLICT (store, key) DO UPDATE SET used = excluded.used",
                    (self.store, key, seed, clock),
                )
                size, code = db.execute(
                    "SELECT bytes, code FROM goldens WHERE store = ? AND key = ?", (self.store, key)
                ).fetchone()
                unsized = unsized or size is None
                if code not in (None, self._code) and key not in self._warned:
                    self._warned.add(key)
                    log.warning(
                        "the world of seed %d (golden %s) was built by other code of %s than runs now, under "
                        "the same fingerprint(): it is served as it was built. If the builder changed, make "
                        "fingerprint() change with it (the default one does) or `statekit cache prune` the "
                        "old worlds",
                        seed, key, type(self.adapter).__name__,
                    )  # fmt: skip
            db.execute("DELETE FROM leases WHERE holder = ?", (self._holder,))
            db.executemany(
                "INSERT INTO leases (holder, owner, store, key) VALUES (?, ?, ?, ?)",
                [(self._holder, owner, self.store, key) for key in sorted(leased)],
            )
        self._written = (frozenset(leased), owner)
        self._marked.update({} if unsized else dict.fromkeys(seeds_by_key, now))
        return unsized

    def _build(self, seed: int, key: str) -> None:
        schema = world_key({**self._fingerprint, "statekit stage": "schema"}, 0)
        staged = build_golden(self.adapter, self.strategy, seed, key, schema_key=schema, egress=self.egress)
        if staged and self._use({schema: -1}):  # the stage's golden (builds.py): used by every build,
            self._record_size(schema)  # budgeted like a seed's (seed -1), measured once

    def _record_size(self, key: str, code: str | None = None) -> None:
        size = self._storage.footprint(key)
        if size is None:
            if self.store not in self._warned:
                self._warned.add(self.store)
                log.warning("%s cannot measure its goldens: the cache budget does not count them", self.store)
            size = 0
        with self.index.transaction() as db:
            db.execute(
                "UPDATE goldens SET bytes = ?, code = coalesce(?, code) WHERE store = ? AND key = ?",
                (size, code, self.store, key),
            )

    def _reserve(self, key: str) -> None:
        """Count a golden being built at the size of this store's largest, so the budget holds for the
        disk while builds run (in every process), not only once each is measured."""
        with self.index.transaction() as db:
            (estimate,) = db.execute(
                "SELECT max(bytes) FROM goldens WHERE store = ? AND key != ? AND bytes > 0", (self.store, key)
            ).fetchone()
            if estimate is not None:
                db.execute(
                    "UPDATE goldens SET bytes = ? WHERE store = ? AND key = ? AND bytes IS NULL",
                    (int(estimate), self.store, key),
                )

    def _forget_unbuilt(self, key: str) -> None:
        """A failed build leaves no golden: drop its row (and reservation) unless it is pinned."""
        if self.strategy.has(key):  # another holder published it meanwhile
            return
        with self.index.transaction() as db:
            db.execute("DELETE FROM goldens WHERE store = ? AND key = ? AND pinned = 0", (self.store, key))

    def _evict(self, target: int | None = None) -> list[str]:
        limit = self.budget if target is None else target
        evicted: list[str] = []
        with self.index.transaction() as db:
            forget_dead_leases(db)
            (total,) = db.execute("SELECT coalesce(sum(bytes), 0) FROM goldens").fetchone()
            if total <= limit:
                return evicted
            candidates = db.execute(
                "SELECT key, coalesce(bytes, 0) FROM goldens g WHERE store = ? AND pinned = 0"
                " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.store = g.store AND l.key = g.key)"
                " ORDER BY used",
                (self.store,),
            ).fetchall()
            for key, size in candidates:
                if total <= limit:
                    break
                try:
                    self.strategy.drop(key)  # under the write lock: nobody leases it meanwhile
                except Exception:
                    log.exception("evicting golden %s of %s failed; it stays", key, self.store)
                    continue
                db.execute("DELETE FROM goldens WHERE store = ? AND key = ?", (self.store, key))
                total -= size
                evicted.append(key)
        self.evicted.extend(evicted)
        if total > limit:
            report = log.debug if "budget" in self._warned else log.warning  # once per holder, not per reset
            self._warned.add("budget")
            report(
                "the world cache holds %d bytes, over its budget of %d: the rest is pinned, in use, or "
                "another application's (statekit cache ls shows which; statekit cache prune ADAPTER evicts)",
                total,
                limit,
            )
        return evicted
