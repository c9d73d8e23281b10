"""An ``EnvSpec`` from the command line: every command that makes an environment takes these flags."""

from __future__ import annotations

import argparse
import json
from typing import Any

from statekit.envspec import EnvSpec
from statekit.errors import StatekitError
from statekit.settings import parse_size


def size(text: str) -> int:
    """``4G``, ``512M``, ``1000000``: bytes (an argparse type)."""
    try:
        return parse_size(text)
    except StatekitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def names(text: str) -> tuple[str, ...]:
    """``a,b`` to ``("a", "b")`` (an argparse type)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` to ``(key, value)``, the value read as JSON where it is JSON (``scale=2``: 2),
    else kept as text (an argparse type)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"an adapter option is KEY=VALUE, not {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def add_spec_arguments(
    parser: argparse.ArgumentParser, *, adapter: str = "required", full: bool = False
) -> None:
    """The flags that make an ``EnvSpec``. ``adapter``: "required", "optional" (default claims_app) or
    "none" (no positional); ``full`` adds what only long-running commands (serve) need."""
    if adapter == "required":
        parser.add_argument("adapter", help="registered name (claims_app) or package.module:attribute")
    elif adapter == "optional":
        parser.add_argument("adapter", nargs="?", default="claims_app", help="default: claims_app")
    parser.add_argument("--strategy", default=None, help="reset strategy (default: the adapter's first)")
    parser.add_argument("--db-url", default=None, help="PostgreSQL admin URL (default: embedded cluster)")
    parser.add_argument(
        "--exclude-tasks", type=names, default=(), help="task kinds left out of the pool, e.g. a,b"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="override every task's step cap")
    parser.add_argument(
        "--adapter-option",
        dest="adapter_options",
        type=option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the adapter's constructor (VALUE as JSON where it parses), repeatable",
    )
    if full:
        parser.add_argument("--prewarm", type=int, default=0, help="restored copies kept ready per world")
        parser.add_argument(
            "--cache-bytes",
            type=size,
            default=None,
            help="world cache budget, e.g. 4G (or $STATEKIT_CACHE_BYTES)",
        )
        parser.add_argument(
            "--num-worlds", type=int, default=None, help="seedless resets draw from N worlds only"
        )
        parser.add_argument("--start-seed", type=int, default=0, help="the first seed of that world set")


def spec_from_args(args: argparse.Namespace) -> EnvSpec:
    """The spec the flags of ``add_spec_arguments`` describe."""
    return EnvSpec(
        args.adapter,
        strategy=args.strategy,
        db_url=args.db_url,
        exclude_tasks=getattr(args, "exclude_tasks", ()),
        max_steps=getattr(args, "max_steps", None),
        prewarm=getattr(args, "prewarm", 0),
        cache_bytes=getattr(args, "cache_bytes", None),
        num_worlds=getattr(args, "num_worlds", None),
        start_seed=getattr(args, "start_seed", 0),
        adapter_options=dict(getattr(args, "adapter_options", [])),
    )
