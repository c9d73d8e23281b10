"""The adapter kit: everything an adapter author imports, from one place (see docs/WRAPPING.md).

``statekit`` itself stays light to import; this module brings in the database and digest machinery.
An adapter for "a SQL database plus directories" subclasses ``SqlAdapter`` and writes its world
builder, its tools and tasks, and its verifiers; other adapters compose the strategies and digest
functions below themselves. Nothing an adapter needs lives in a private module.
"""

from __future__ import annotations

from statekit.adapter import Adapter, Episode, Outcome
from statekit.collateral import Allow, Expectation
from statekit.container_mode import serve_command
from statekit.contract import JSON, FixtureSource, Task, Tool
from statekit.determinism.base import Control, Violation
from statekit.determinism.controls import clock
from statekit.determinism.egress import allow_egress
from statekit.determinism.jobs import DrainJobs
from statekit.determinism.replay import CANONICAL_BASE, Replay, ReplayControl
from statekit.digest.canonical import CANONICALISERS, Canonicaliser, canonical_json, canonical_value, register
from statekit.digest.compute import Digest, TableDigest, combine, hash_rows, merge
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.files import directory_digest, file_dump, file_rows, file_tables
from statekit.digest.postgres import SEQUENCES_PREFIX, postgres_digest, postgres_dump
from statekit.digest.spec import DigestSpec, TableSpec
from statekit.errors import ConfigError, EgressError, ResetError, RewindError, SpecError, StatekitError
from statekit.home import statekit_home
from statekit.postgres import PostgresServer, ServerLease
from statekit.postgres.journal import DEFAULT_BOUND as JOURNAL_BOUND
from statekit.postgres.journal import Journal
from statekit.postgres.server import to_conninfo
from statekit.sql_adapter import DATABASE, SqlAdapter
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.container import ContainerPerEpisode, docker_client, exec_in
from statekit.strategies.cow_fs import CowCopy, CowFilesystem
from statekit.strategies.memory import InMemory
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed
from statekit.strategies.rewinding import Rewinding

__all__ = [
    "CANONICALISERS",
    "CANONICAL_BASE",
    "DATABASE",
    "JOURNAL_BOUND",
    "JSON",
    "SEQUENCES_PREFIX",
    "Adapter",
    "Allow",
    "Builder",
    "Canonicaliser",
    "Composite",
    "ConfigError",
    "ContainerPerEpisode",
    "Control",
    "CowCopy",
    "CowFilesystem",
    "Digest",
    "DigestSpec",
    "DrainJobs",
    "EgressError",
    "Episode",
    "Expectation",
    "FixtureSource",
    "InMemory",
    "Journal",
    "Outcome",
    "PostgresServer",
    "PostgresTemplate",
    "Prewarmed",
    "Replay",
    "ReplayControl",
    "ResetError",
    "ResetStrategy",
    "RewindError",
    "Rewinding",
    "ServerLease",
    "SpecError",
    "SqlAdapter",
    "StateDump",
    "StatekitError",
    "TableDigest",
    "TableDump",
    "TableSpec",
    "Task",
    "Tool",
    "Violation",
    "World",
    "allow_egress",
    "canonical_json",
    "canonical_value",
    "clock",
    "combine",
    "directory_digest",
    "docker_client",
    "exec_in",
    "file_dump",
    "file_rows",
    "file_tables",
    "hash_rows",
    "merge",
    "postgres_digest",
    "postgres_dump",
    "register",
    "serve_command",
    "statekit_home",
    "to_conninfo",
]
