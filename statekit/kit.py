"""The adapter kit: everything an adapter author imports, from one place (see docs/WRAPPING.md).

``statekit`` is the face for users (``make``, ``EnvSpec``, the environment, the errors); this module is
the face for adapter authors, and the two share no name (errors come from ``statekit``). An adapter
implements the core ``Adapter`` and inherits the capabilities it has (``StateDumps``, ``CheckHints``,
``ToolSchemas``, ``AssayHooks``, ``LiveServices``, ``ContainerImage``, ``DatabaseWorld``,
``SchemaStage``). For "a SQL
database plus directories", ``SqlAdapter`` derives strategies, digest, dump and coverage from the digest
spec; other adapters compose the strategies and digest functions below themselves. Nothing an adapter
needs lives in a private module.
"""

from __future__ import annotations

from statekit.adapter import Adapter, AdapterWrapper, EnvSettings, Episode, Outcome
from statekit.builder_code import builder_code
from statekit.capabilities import (
    AssayHooks,
    CheckHints,
    ContainerImage,
    DatabaseWorld,
    LiveServices,
    SchemaStage,
    StateDumps,
    ToolSchemas,
    reference_actions,
)
from statekit.collateral import Allow, Expectation
from statekit.container_mode import serve_command
from statekit.contract import JSON, FixtureSource, Task, Tool, canonical_url
from statekit.determinism.base import Control, Violation
from statekit.determinism.controls import clock
from statekit.determinism.egress import allow_egress
from statekit.determinism.jobs import DrainJobs, JobQueue
from statekit.determinism.replay import Replay, ReplayControl, episode_replay
from statekit.digest.canonical import CANONICALISERS, Canonicaliser, canonical_json, canonical_value, register
from statekit.digest.compute import Digest, TableDigest, combine, hash_rows, merge
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.files import directory_digest, file_dump, file_rows, file_tables
from statekit.digest.postgres import SEQUENCES_PREFIX, postgres_digest, postgres_dump
from statekit.digest.spec import DigestSpec, TableSpec
from statekit.django_project import DjangoProject, databases_entry
from statekit.kept import keep_pooled
from statekit.mail import Mail, SmtpService
from statekit.postgres import PostgresServer, ServerLease
from statekit.postgres.journal import DEFAULT_BOUND as JOURNAL_BOUND
from statekit.postgres.journal import Journal
from statekit.postgres.server import to_conninfo
from statekit.process_app import AppProcess, Boundary
from statekit.settings import statekit_home
from statekit.sql_adapter import DATABASE, SqlAdapter
from statekit.strategies.base import Builder, Capabilities, ResetStrategy, StrategyWrapper
from statekit.strategies.composite import Composite
from statekit.strategies.container import (
    BASE_IMAGE,
    ContainerPerEpisode,
    docker_client,
    exec_in,
    image_on_base,
)
from statekit.strategies.cow_fs import CowCopy, CowFilesystem
from statekit.strategies.memory import InMemory
from statekit.strategies.naming import CopyNamer
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed
from statekit.strategies.rewinding import Rewinding
from statekit.web_app import Route, WebApp
from statekit.world import World

__all__ = [
    "BASE_IMAGE",
    "CANONICALISERS",
    "DATABASE",
    "JOURNAL_BOUND",
    "JSON",
    "SEQUENCES_PREFIX",
    "Adapter",
    "AdapterWrapper",
    "Allow",
    "AppProcess",
    "AssayHooks",
    "Boundary",
    "Builder",
    "Canonicaliser",
    "Capabilities",
    "CheckHints",
    "Composite",
    "ContainerImage",
    "ContainerPerEpisode",
    "Control",
    "CopyNamer",
    "CowCopy",
    "CowFilesystem",
    "DatabaseWorld",
    "Digest",
    "DigestSpec",
    "DjangoProject",
    "DrainJobs",
    "EnvSettings",
    "Episode",
    "Expectation",
    "FixtureSource",
    "InMemory",
    "JobQueue",
    "Journal",
    "LiveServices",
    "Mail",
    "Outcome",
    "PostgresServer",
    "PostgresTemplate",
    "Prewarmed",
    "Replay",
    "ReplayControl",
    "ResetStrategy",
    "Rewinding",
    "Route",
    "SchemaStage",
    "ServerLease",
    "SmtpService",
    "SqlAdapter",
    "StateDump",
    "StateDumps",
    "StrategyWrapper",
    "TableDigest",
    "TableDump",
    "TableSpec",
    "Task",
    "Tool",
    "ToolSchemas",
    "Violation",
    "WebApp",
    "World",
    "allow_egress",
    "builder_code",
    "canonical_json",
    "canonical_url",
    "canonical_value",
    "clock",
    "combine",
    "databases_entry",
    "directory_digest",
    "docker_client",
    "episode_replay",
    "exec_in",
    "file_dump",
    "file_rows",
    "file_tables",
    "hash_rows",
    "image_on_base",
    "keep_pooled",
    "merge",
    "postgres_digest",
    "postgres_dump",
    "reference_actions",
    "register",
    "serve_command",
    "statekit_home",
    "to_conninfo",
]
