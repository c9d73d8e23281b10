"""Commands about a world's state: ``digest``, ``dump``, ``diff``, ``diverge``, ``drift``, ``record``,
``spec init``."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.table import Table

from statekit.capabilities import AssayHooks, DatabaseWorld, LiveServices, capability, reference_actions
from statekit.cli.render import console, load_actions, print_diff, seed_list, summary, task_options
from statekit.cli.spec import add_spec_arguments, spec_from_args
from statekit.digest.canonical import canonical_json
from statekit.digest.diff import diff_dumps
from statekit.digest.dump import StateDump
from statekit.digest.spec import DEFAULT_SCHEMA
from statekit.divergence import drift, first_divergence
from statekit.errors import ConfigError
from statekit.make import make
from statekit.settings import settings


def cmd_digest(args: argparse.Namespace) -> int:
    with spec_from_args(args).make() as env:
        env.reset(seed=args.seed)
        report = env.digest_report().as_dict()
    if args.json:
        print(canonical_json(report))
    else:
        table = Table("table", "rows", "sha256", title=f"{args.adapter} seed {args.seed}: {report['digest']}")
        for name, t in report["tables"].items():
            table.add_row(name, str(t["rows"]), t["sha256"])
        console.print(table)
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    """Re-record outside traffic: every task kind's reference script for every seed, against the
    adapter's live services (``LiveServices``), into its cassettes (``AssayHooks.cassette``)."""
    spec = spec_from_args(args)
    probe = spec.resolve_adapter()
    try:
        live = capability(probe, LiveServices, why="recording its outside traffic")
        with live.live_services() as services, make(spec.replace(services=services, record=True)) as env:
            for seed in seed_list(args.seeds):
                cassette = capability(env.adapter, AssayHooks, why="where recordings go").cassette(seed)
                if args.fresh and cassette is not None:
                    cassette.unlink(missing_ok=True)
                for kind in env.adapter.task_kinds():
                    try:
                        env.reset(seed=seed, options={"task": kind})
                    except ConfigError:
                        continue  # this seed's world has nothing fit for that task
                    for action in reference_actions(env.adapter, env.task):
                        env.step(action)
                console.print(f"seed {seed}: recorded")
    finally:
        probe.close()
    return 0


def cmd_dump(args: argparse.Namespace) -> int:
    """The canonical rows plus a per-step digest trace of an action script."""
    actions = load_actions(args.actions)
    with spec_from_args(args).make() as env:
        _, info = env.reset(seed=args.seed, options=task_options(args))
        trace: list[dict[str, Any]] = [{"step": 0, "digest": info["digest"]}]
        for i, action in enumerate(actions, 1):
            _, reward, terminated, truncated, _ = env.step(action)
            trace.append({"step": i, "action": action, "reward": reward, "digest": env.digest_now()})
            if terminated or truncated:
                break
        dump = env.dump()
    dump.trace = trace
    dump.meta = {
        "adapter": args.adapter,
        "seed": args.seed,
        "task": info["task_kind"],
        "steps": len(trace) - 1,
    }
    if args.out:
        dump.save(args.out)
        console.print(f"wrote {args.out}: digest {dump.digest().digest}, {len(trace) - 1} steps")
    else:
        print(json.dumps(dump.as_dict(), sort_keys=True, ensure_ascii=False))
    return 0


def _load_dump(args: argparse.Namespace, which: str) -> StateDump:
    """A dump file, or with ``--url`` the live session of that id on a served environment."""
    if args.url is None:
        return StateDump.load(which)
    from statekit.client import RemoteEnvironment

    client = RemoteEnvironment.attach(args.url, which, token=args.token or settings().token)
    try:
        return client.dump()
    finally:
        client.disconnect()  # inspect only: the session stays open


def cmd_diff(args: argparse.Namespace) -> int:
    diff = diff_dumps(_load_dump(args, args.a), _load_dump(args, args.b))
    if args.json:
        print(json.dumps(diff.as_dict(), sort_keys=True, ensure_ascii=False))
    else:
        print_diff(diff)
    return 0 if diff.equal else 1


def cmd_diverge(args: argparse.Namespace) -> int:
    """Walk two runs (two action scripts, or two builds) step by step to the first step at which
    their worlds differ, and show that step's difference."""
    actions_a = load_actions(args.actions)
    actions_b = load_actions(args.actions_b) if args.actions_b else actions_a
    spec = spec_from_args(args)
    with spec.make() as env_a, make(spec.replace(adapter=args.adapter_b or args.adapter)) as env_b:
        found = first_divergence(
            env_a, env_b, seed=args.seed, actions_a=actions_a, actions_b=actions_b, options=task_options(args)
        )
    if args.json:
        print(json.dumps(found.as_dict(), sort_keys=True, ensure_ascii=False))
    elif found.step is None:
        console.print(f"[green]no divergence[/] over {len(found.digests) - 1} steps")
    else:
        console.print(f"[red]first divergence at step {found.step}[/]")
        console.print(f"  A: {summary(found.actions[0], 90)}\n  B: {summary(found.actions[1], 90)}")
        assert found.diff is not None
        print_diff(found.diff)
    return 0 if found.step is None else 1


def cmd_drift(args: argparse.Namespace) -> int:
    """What a new build of the application changed: schema, spec coverage, initial digests."""
    seeds = seed_list(args.seeds)
    with make(args.old, db_url=args.db_url) as old, make(args.new, db_url=args.db_url) as new:
        report = drift(old, new, seeds)
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        for line in report.schema or ["schema: unchanged"]:
            console.print(line)
        for problem in report.coverage:
            console.print(f"[red]coverage:[/] {problem}")
        for seed, (a, b) in report.digests.items():
            verdict = "[green]same[/]" if a == b else "[red]differs[/]"
            console.print(f"seed {seed}: initial digest {verdict}  {a[:16]} -> {b[:16]}")
    return 1 if report.drifted else 0


def cmd_spec_init(args: argparse.Namespace) -> int:
    """Draft a digest spec from a live schema: an adapter's world (a ``DatabaseWorld``) or a URL."""
    from statekit.digest.draft import draft_spec
    from statekit.digest.postgres import connect
    from statekit.postgres.server import to_conninfo

    with ExitStack() as stack:
        if args.adapter:
            env = stack.enter_context(spec_from_args(args).make())
            database = capability(
                env.adapter, DatabaseWorld, why="spec init reads its database; or pass --url"
            )
            conninfo = database.conninfo(stack.enter_context(env.open_world(args.seed)))
        elif args.url:
            conninfo = to_conninfo(args.url)
        else:
            raise ConfigError("spec init needs an ADAPTER or --url (a database to read the schema of)")
        with connect(conninfo) as conn:
            draft = draft_spec(conn, args.schema)
    text = draft.toml()
    if args.out:
        Path(args.out).write_text(text)
        console.print(
            f"wrote {args.out}: {len(draft.tables)} tables, {len(draft.ignored_tables)} ignored; "
            f"{draft.decisions()} decision(s) marked DECIDE: for you to review"
        )
    else:
        print(text)
    return 0


def register(sub: Any) -> None:
    digest = sub.add_parser("digest", help="the initial-state digest of a seed")
    add_spec_arguments(digest)
    digest.add_argument("--seed", type=int, required=True)
    digest.add_argument("--json", action="store_true")
    digest.set_defaults(func=cmd_digest)

    record = sub.add_parser("record", help="re-record outside traffic into the adapter's cassettes")
    add_spec_arguments(record)
    record.add_argument("--seeds", default="0-15", help="e.g. 0-15 or 7,8,11")
    record.add_argument("--no-fresh", dest="fresh", action="store_false", help="append instead of replacing")
    record.set_defaults(func=cmd_record)

    dump = sub.add_parser("dump", help="canonical state dump plus a per-step digest trace")
    add_spec_arguments(dump)
    dump.add_argument("--seed", type=int, required=True)
    dump.add_argument("--actions", default=None, help="JSON list of actions to play first (- for stdin)")
    dump.add_argument("--task", default=None, help="task kind (default: the seed's)")
    dump.add_argument("--out", default=None, help="write here instead of stdout")
    dump.set_defaults(func=cmd_dump)

    diff = sub.add_parser("diff", help="compare two dumps: tables, rows and columns that differ")
    diff.add_argument("a", help="a dump file (or, with --url, a session id)")
    diff.add_argument("b", help="a dump file (or, with --url, a session id)")
    diff.add_argument("--url", default=None, help="compare two live sessions of the harness at this URL")
    diff.add_argument("--token", default=None, help="the harness's bearer token (or $STATEKIT_TOKEN)")
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=cmd_diff)

    diverge = sub.add_parser(
        "diverge", help="walk two runs step by step to the first step whose worlds differ"
    )
    add_spec_arguments(diverge)
    diverge.add_argument("--seed", type=int, required=True)
    diverge.add_argument("--actions", required=True, help="JSON list of actions (script A)")
    diverge.add_argument("--actions-b", default=None, help="script B (default: script A)")
    diverge.add_argument("--adapter-b", default=None, help="build B's adapter (default: ADAPTER)")
    diverge.add_argument("--task", default=None)
    diverge.add_argument("--json", action="store_true")
    diverge.set_defaults(func=cmd_diverge)

    drift_cmd = sub.add_parser("drift", help="compare two builds: schema, coverage, initial digests")
    drift_cmd.add_argument("old", help="adapter of the current build")
    drift_cmd.add_argument("new", help="adapter of the new build")
    drift_cmd.add_argument("--seeds", default="7,8")
    drift_cmd.add_argument("--db-url", default=None)
    drift_cmd.add_argument("--json", action="store_true")
    drift_cmd.set_defaults(func=cmd_drift)

    spec = sub.add_parser("spec", help="digest specs: draft one from a live schema")
    spec_sub = spec.add_subparsers(dest="spec_command", required=True)
    init = spec_sub.add_parser("init", help="a draft spec with every table and column, noise marked DECIDE:")
    add_spec_arguments(init, adapter="none")
    init.add_argument("adapter", nargs="?", default=None, help="an adapter whose worlds are a database")
    init.add_argument("--url", default=None, help="or a PostgreSQL database URL to read the schema of")
    init.add_argument("--seed", type=int, default=0)
    init.add_argument("--schema", default=DEFAULT_SCHEMA)
    init.add_argument("--out", default=None, help="write the draft here (default: print it)")
    init.set_defaults(func=cmd_spec_init)
