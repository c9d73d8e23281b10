"""Running and keeping environments: ``serve``, ``cache ls/du/prune/pin``, ``assay``, ``stop``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from statekit.cache import CacheIndex, default_budget
from statekit.cli.render import console, mib, seed_list
from statekit.cli.spec import add_spec_arguments, size, spec_from_args
from statekit.errors import ConfigError
from statekit.settings import settings


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the adapter over HTTP (and OpenEnv's WebSocket protocol) until interrupted."""
    from statekit.harness import HarnessConfig, serve  # only the serve command needs the web stack
    from statekit.harness.workers import default_workers

    token = args.token if args.token is not None else settings().token
    if token is not None and not token.strip():
        source = "--token" if args.token is not None else "$STATEKIT_TOKEN"
        raise ConfigError(
            f"{source} is set but empty; an empty token would serve without auth. Give it a secret "
            "(e.g. openssl rand -hex 16), or unset it to serve without a token on loopback"
        )
    config = HarnessConfig(
        spec_from_args(args),
        token=token,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        workers=default_workers() if args.workers is None else args.workers,
    )
    serve(config, host=args.host, port=args.port, uds=args.uds)
    return 0


def cmd_cache_ls(args: argparse.Namespace) -> int:
    """Every golden in this server's world cache, least recently used first."""
    entries = CacheIndex.shared().entries()
    if args.json:
        print(json.dumps([entry.as_dict() for entry in entries], sort_keys=True))
        return 0
    table = Table(
        "store", "seed", "key", "size", "pinned", "in use", title=f"{len(entries)} goldens (oldest use first)"
    )
    for entry in entries:
        pinned, leased = "pin" if entry.pinned else "", "yes" if entry.leased else ""
        table.add_row(entry.store, str(entry.seed), entry.key, mib(entry.size), pinned, leased)
    console.print(table)
    return 0


def cmd_cache_du(args: argparse.Namespace) -> int:
    """Disk used by the world cache, per store, against the budget."""
    entries = CacheIndex.shared().entries()
    budget = args.budget if args.budget is not None else default_budget()
    stores: dict[str, dict[str, int]] = {}
    for entry in entries:
        row = stores.setdefault(entry.store, {"goldens": 0, "bytes": 0, "pinned": 0, "in_use": 0})
        row["goldens"] += 1
        row["bytes"] += entry.size or 0
        row["pinned"] += entry.pinned
        row["in_use"] += entry.leased
    total = sum(row["bytes"] for row in stores.values())
    if args.json:
        print(json.dumps({"bytes": total, "budget": budget, "stores": stores}, sort_keys=True))
        return 0
    table = Table("store", "goldens", "size", "pinned", "in use", title="world cache")
    for store, row in sorted(stores.items()):
        table.add_row(store, str(row["goldens"]), mib(row["bytes"]), str(row["pinned"]), str(row["in_use"]))
    console.print(table)
    console.print(f"{mib(total)} of a {mib(budget)} budget ({100 * total / max(budget, 1):.0f}%)")
    return 0


def cmd_cache_prune(args: argparse.Namespace) -> int:
    """Evict least recently used goldens of one adapter's store (never pinned or in-use ones)."""
    target = 0 if args.all else args.to
    with spec_from_args(args).replace(cache_bytes=args.budget).make() as env:
        evicted = env.cache.prune(target)
        left = sum(entry.size or 0 for entry in env.cache.entries())
    console.print(f"evicted {len(evicted)} golden(s) of {env.cache.store}; {mib(left)} left in that store")
    return 0


def cmd_cache_pin(args: argparse.Namespace) -> int:
    """Pin (or unpin) seeds' worlds so eviction never removes them."""
    seeds = seed_list(args.seeds)
    with spec_from_args(args).make() as env:
        env.cache.pin(seeds, pinned=not args.unpin)
    console.print(f"{'unpinned' if args.unpin else 'pinned'} {len(seeds)} world(s) of {env.cache.store}")
    return 0


def cmd_assay(args: argparse.Namespace) -> int:
    """May this environment ship? Licences of what ships, fixture sources, recorded traffic."""
    from statekit.assay.policy import Policy
    from statekit.assay.render import render, to_json
    from statekit.assay.run import assay

    report = assay(args.adapter, strategy=args.strategy, policy=Policy.load(args.policy))
    if args.json:
        print(to_json(report))
    else:
        render(report, console)
    return 0 if report.ok else 1


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the embedded PostgreSQL now (it otherwise lingers ``$STATEKIT_PG_LINGER`` seconds)."""
    from statekit.postgres.embedded import EmbeddedPostgres

    if EmbeddedPostgres().stop(force=args.force):
        console.print("stopped the embedded PostgreSQL")
        return 0
    console.print("[yellow]a statekit process still uses the embedded PostgreSQL[/]: not stopped (--force)")
    return 1


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve an environment over HTTP, OpenEnv's protocol and Gymnasium")
    add_spec_arguments(serve, full=True)
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000, help="0 lets the system choose (the URL is printed)")
    serve.add_argument("--token", default=None, help="require this bearer token (or set $STATEKIT_TOKEN)")
    serve.add_argument("--max-sessions", type=int, default=8, help="open sessions at most; more get HTTP 429")
    serve.add_argument("--uds", default=None, help="serve on this Unix socket instead of TCP")
    serve.add_argument("--idle-timeout", type=float, default=600.0, help="close after N idle s; 0: never")
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes running the sessions (default: one per core); 0: in the serving process",
    )
    serve.set_defaults(func=cmd_serve)

    cache = sub.add_parser("cache", help="the world cache of goldens: ls, du, prune, pin")
    verbs = cache.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("ls", help="every golden, least recently used first")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_cache_ls)
    du = verbs.add_parser("du", help="disk used per store, against the budget")
    du.add_argument(
        "--budget", type=size, default=None, help="compare with this (default: $STATEKIT_CACHE_BYTES)"
    )
    du.add_argument("--json", action="store_true")
    du.set_defaults(func=cmd_cache_du)
    prune = verbs.add_parser(
        "prune", help="evict least recently used goldens of an adapter (not pinned, not in use)"
    )
    add_spec_arguments(prune)
    prune.add_argument("--to", type=size, default=None, help="down to this total (default: the budget)")
    prune.add_argument("--all", action="store_true", help="every golden that is neither pinned nor in use")
    prune.add_argument(
        "--budget", type=size, default=None, help="the budget (default: $STATEKIT_CACHE_BYTES)"
    )
    prune.set_defaults(func=cmd_cache_prune)
    pin = verbs.add_parser("pin", help="never evict these seeds' worlds")
    add_spec_arguments(pin)
    pin.add_argument("seeds", help="e.g. 0-15 or 7,8,11")
    pin.add_argument("--unpin", action="store_true", help="remove the pins instead")
    pin.set_defaults(func=cmd_cache_pin)

    assay = sub.add_parser("assay", help="may it ship? licences, fixture sources, recorded traffic")
    assay.add_argument("adapter", help="registered name (claims_app) or package.module:attribute")
    assay.add_argument("--strategy", default=None, help="container: assay the image's content")
    assay.add_argument("--policy", default=None, help="TOML policy (default: statekit's, see docs)")
    assay.add_argument("--json", action="store_true")
    assay.set_defaults(func=cmd_assay)

    stop = sub.add_parser("stop", help="stop the embedded PostgreSQL now instead of letting it linger")
    stop.add_argument("--force", action="store_true", help="even while a statekit process uses it")
    stop.set_defaults(func=cmd_stop)
