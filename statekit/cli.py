"""The ``statekit`` command line: demo, digest, check, record, dump, diff, bisect, drift, serve, cache,
assay, spec, stop.

Exit codes: 0 success, 1 a check failed, 2 bad input or an error (the message names the problem).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import statekit
from statekit.cache import CacheIndex, default_budget, parse_size
from statekit.digest.canonical import canonical_json
from statekit.digest.diff import StateDiff, diff_dumps
from statekit.digest.dump import StateDump
from statekit.divergence import drift, first_divergence
from statekit.errors import StatekitError
from statekit.testing import (
    NOT_CHECKED,
    ProbeSettings,
    check_controls,
    check_env,
    controls_not_checked,
    controls_to_check,
    first_difference,
    reference_script,
    rollout,
)

console = Console()


def _env(args: argparse.Namespace, **extra: Any) -> statekit.Environment:
    return statekit.make(args.adapter, strategy=args.strategy, db_url=args.db_url, **extra)


def cmd_digest(args: argparse.Namespace) -> int:
    with _env(args) as env:
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


def _seed_list(text: str) -> list[int]:
    """``"0-15"`` or ``"7,8,11"`` (or a mix) to a sorted list of seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds.update(range(int(low), int(high or low) + 1))
    return sorted(seeds)


def cmd_record(args: argparse.Namespace) -> int:
    """Re-record outbound traffic: every task kind's reference script for every seed, live vendors."""
    probe = statekit.resolve_adapter(args.adapter)
    try:
        with probe.live_services() as options:
            env = statekit.make(
                args.adapter, strategy=args.strategy, db_url=args.db_url, record=True, **options
            )
            with env:
                for seed in _seed_list(args.seeds):
                    cassette = env.adapter.cassette(seed)
                    if args.fresh and cassette is not None:
                        cassette.unlink(missing_ok=True)
                    for kind in env.adapter.task_kinds():
                        try:
                            env.reset(seed=seed, options={"task": kind})
                        except statekit.ConfigError:
                            continue  # this seed's world has no claim fit for that task
                        for action in env.adapter.reference_actions(env.task):
                            env.step(action)
                    console.print(f"seed {seed}: recorded")
    finally:
        probe.close()
    return 0


def _actions(path: str | None) -> list[dict[str, Any]]:
    """An action script: a JSON list of ``{"tool": ..., ...}`` objects (``-`` reads stdin)."""
    if not path:
        return []
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        actions = json.loads(text)
    except json.JSONDecodeError as exc:
        raise statekit.ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise statekit.ConfigError(f"{path}: an action script is a JSON list of objects")
    return actions


def _task_options(args: argparse.Namespace) -> dict[str, Any] | None:
    return {"task": args.task} if getattr(args, "task", None) else None


def cmd_dump(args: argparse.Namespace) -> int:
    """The canonical rows plus a per-step digest trace of an action script."""
    actions = _actions(args.actions)
    with _env(args) as env:
        _, info = env.reset(seed=args.seed, options=_task_options(args))
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


def _print_diff(diff: StateDiff) -> None:
    if diff.equal:
        console.print("[green]equal[/]: no table, row or column differs")
        return
    table = Table("table", "change", "key", "column", "A", "B", title="state diff (A → B)")
    for name, t in sorted(diff.tables.items()):
        if t.only_in:
            table.add_row(name, f"only in {t.only_in.upper()}", "", "", "", "")
        for row in t.removed:
            table.add_row(name, "removed", canonical_json(row["key"]), "", _summary(row["row"], 40), "")
        for row in t.added:
            table.add_row(name, "added", canonical_json(row["key"]), "", "", _summary(row["row"], 40))
        for row in t.changed:
            for column, (left, right) in row["columns"].items():
                key = canonical_json(row["key"])
                table.add_row(name, "changed", key, column, _summary(left, 40), _summary(right, 40))
    console.print(table)


def _load_dump(args: argparse.Namespace, which: str) -> StateDump:
    """A dump file, or with ``--url`` the live session of that id on a served environment."""
    if args.url is None:
        return StateDump.load(which)
    from statekit.client import RemoteEnvironment

    client = RemoteEnvironment.attach(args.url, which, token=args.token or os.environ.get("STATEKIT_TOKEN"))
    try:
        return client.dump()
    finally:
        client.disconnect()  # inspect only: the session stays open


def cmd_diff(args: argparse.Namespace) -> int:
    diff = diff_dumps(_load_dump(args, args.a), _load_dump(args, args.b))
    if args.json:
        print(json.dumps(diff.as_dict(), sort_keys=True, ensure_ascii=False))
    else:
        _print_diff(diff)
    return 0 if diff.equal else 1


def cmd_bisect(args: argparse.Namespace) -> int:
    """The first step at which two action scripts (or two builds) leave different worlds."""
    actions_a = _actions(args.actions)
    actions_b = _actions(args.actions_b) if args.actions_b else actions_a
    with _env(args) as env_a, statekit.make(args.adapter_b or args.adapter, db_url=args.db_url) as env_b:
        found = first_divergence(
            env_a,
            env_b,
            seed=args.seed,
            actions_a=actions_a,
            actions_b=actions_b,
            options=_task_options(args),
        )
    if args.json:
        print(json.dumps(found.as_dict(), sort_keys=True, ensure_ascii=False))
    elif found.step is None:
        console.print(f"[green]no divergence[/] over {len(found.digests) - 1} steps")
    else:
        console.print(f"[red]first divergence at step {found.step}[/]")
        console.print(f"  A: {_summary(found.actions[0], 90)}\n  B: {_summary(found.actions[1], 90)}")
        assert found.diff is not None
        _print_diff(found.diff)
    return 0 if found.step is None else 1


def cmd_drift(args: argparse.Namespace) -> int:
    """What a new build of the application changed: schema, spec coverage, initial digests."""
    seeds = _seed_list(args.seeds)
    with (
        statekit.make(args.old, db_url=args.db_url) as old,
        statekit.make(args.new, db_url=args.db_url) as new,
    ):
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


def cmd_check(args: argparse.Namespace) -> int:
    seeds = [int(s) for s in args.seeds.split(",")]
    probes = (
        None if args.skip_probes else ProbeSettings(args.probe_budget, args.probe_entities, args.probe_walk)
    )
    with _env(args) as env:
        report = check_env(
            env,
            seeds=seeds,
            repeats=args.repeats,
            task_repeats=args.task_repeats,
            probes=probes,
            probe_seeds=_seed_list(args.probe_seeds) if args.probe_seeds else None,
        )
        probed, unprobed = controls_to_check(env)
        inside = controls_not_checked(env.adapter)
    if report.coverage is False or args.skip_controls or inside:
        why = "--skip-controls" if args.skip_controls else inside or "coverage failed"
        for name in [*probed, *unprobed]:
            report.controls[name] = None
            report.problems.append(f"controls.{name}: {NOT_CHECKED}{why}")
    else:
        probe = statekit.resolve_adapter(args.adapter)
        try:
            with ExitStack() as stack:
                live: dict[str, Any] = {}
                needs_live = {control.name for control in probe.controls if control.needs_live_services}
                if needs_live & set(probed):
                    live = stack.enter_context(probe.live_services())

                def make_env(disabled: tuple[str, ...]) -> statekit.Environment:
                    options = live if needs_live & set(disabled) else {}
                    return _env(args, disable_controls=disabled, **options)

                for name, problem in check_controls(make_env, seed=seeds[0]).items():
                    report.controls[name] = None if str(problem).startswith(NOT_CHECKED) else problem is None
                    if problem:
                        report.problems.append(f"controls.{name}: {problem}")
        finally:
            probe.close()
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        names = ["deterministic", "seeds_differ", "reset_restores_initial", "coverage", "tasks_valid"]
        verdicts: dict[str, bool | None] = {name: getattr(report, name) for name in names}
        verdicts["tasks_robust"] = report.tasks_robust
        verdicts.update({f"control {name}": ok for name, ok in report.controls.items()})
        verdicts["rewind_order"] = report.rewind_order
        verdicts["random_walk"] = report.random_walk
        verdicts["journal_integrity"] = report.journal_integrity
        for name, ok in verdicts.items():
            console.print(f"{name:<24} {_verdict(ok)}")
        for kind, played in report.kinds.items():
            written = played.ignored_writes
            writes = "not checked" if written is None else ", ".join(written) or "none"
            console.print(
                f"task {kind:<19} deterministic {_verdict(played.deterministic)}, reset "
                f"{_verdict(played.reset_restores_initial)}, writes ignored tables: {escape(writes)}"
            )
        for problem in report.problems:
            console.print(f"  [red]-[/] {escape(problem)}")
        for finding in report.findings:
            console.print(f"  [yellow]![/] {escape(finding)}")
        for note in report.notes:
            console.print(f"  [yellow]-[/] {escape(note)}")
        if report.excluded_tasks:
            console.print(f"excluded from the task pool: {', '.join(sorted(report.excluded_tasks))}")
    return 0 if report.ok else 1


def _verdict(ok: bool | None) -> str:
    return "[yellow]not checked[/]" if ok is None else "[green]ok[/]" if ok else "[red]FAIL[/]"


def _summary(obs: Any, width: int = 100) -> str:
    """One line of JSON, cut to ``width``; an action's ``tool`` comes first so it is never cut off."""
    if isinstance(obs, dict) and "tool" in obs:
        obs = {"tool": obs["tool"], **{k: v for k, v in sorted(obs.items()) if k != "tool"}}
        text = json.dumps(obs, separators=(",", ":"), ensure_ascii=False)
    else:
        text = canonical_json(obs)
    return text if len(text) <= width else text[: width - 1] + "…"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cmd_demo(args: argparse.Namespace) -> int:
    """Reset a world, play the reference script, then prove determinism, seed sensitivity and speed."""
    seed, other = args.seed, args.seed + 1
    with _env(args) as env:
        started = time.perf_counter()
        obs, info = env.reset(seed=seed)
        first_reset = time.perf_counter() - started
        built = env.last_reset_cache == "miss"
        console.rule(f"[bold]{args.adapter}[/] seed {seed}: task {info['task_kind']}")
        console.print(f"[bold]task:[/] {env.task.prompt}")
        origin = "built from the seed" if built else "cloned from the cached golden"
        console.print(f"initial digest {str(info['digest'])[:16]}  clock {info['clock']}  (world {origin})")
        script = env.adapter.reference_actions(env.task)
        for i, action in enumerate(script, 1):
            obs, reward, terminated, truncated, _ = env.step(action)
            console.print(f"[cyan]step {i}[/] {_summary(action, 90)}", soft_wrap=True)
            console.print(f"   -> {_summary(obs, 90)}", soft_wrap=True)
            console.print(f"      reward={reward} terminated={terminated} truncated={truncated}")
        final = env.state()
        console.print(f"final digest {final.digest[:16]} after {final.step_count} steps, clock {final.clock}")

        console.rule("determinism")
        a = rollout(env, seed=seed, actions=script)
        b = rollout(env, seed=seed, actions=script)
        diff = first_difference(a, b)
        ok_same = diff is None and a.state_digest == final.digest
        verdict = "[green]yes[/]" if ok_same else "[red]NO[/]"
        console.print(f"replay seed {seed}: same digest, observations, rewards: {verdict}")
        if diff:
            console.print(f"  {diff}")
        c = rollout(env, seed=other, actions=reference_script(env, other))
        differ = c.initial_digest != a.initial_digest
        console.print(f"seed {other} gives a different world: {'[green]yes[/]' if differ else '[red]NO[/]'}")

        console.rule("reset latency")
        samples = []
        for _ in range(args.resets):  # as a trainer calls it: reset, play the episode, reset again
            t0 = time.perf_counter()
            _, info = env.reset(seed=seed)
            samples.append(time.perf_counter() - t0)
            for action in script:
                if any(env.step(action)[2:4]):
                    break
        p50 = statistics.median(samples)
        console.print(
            f"env.reset, back to back over {args.resets} episodes of {len(script)} steps: "
            f"p50 {p50 * 1000:.1f} ms, p99 {_percentile(samples, 0.99) * 1000:.1f} ms "
            f"(strategy {info['strategy']}: worlds {info['world']})"
        )
        if built:
            console.print(
                f"first reset, which built the world: {first_reset * 1000:.0f} ms ({first_reset / p50:.0f}x)"
            )
        else:
            console.print(
                f"first reset: {first_reset * 1000:.0f} ms (its world came from the cache in $STATEKIT_HOME; "
                "a never-seen seed is built once, then cloned)"
            )
    return 0 if ok_same and differ else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the adapter over HTTP (and OpenEnv's WebSocket protocol) until interrupted."""
    from statekit.harness import HarnessConfig, serve  # only the serve command needs the web stack
    from statekit.harness.workers import default_workers

    token = args.token if args.token is not None else os.environ.get("STATEKIT_TOKEN")
    if token is not None and not token.strip():
        source = "--token" if args.token is not None else "$STATEKIT_TOKEN"
        raise statekit.ConfigError(
            f"{source} is set but empty; an empty token would serve without auth. Give it a secret "
            "(e.g. openssl rand -hex 16), or unset it to serve without a token on loopback"
        )
    config = HarnessConfig(
        args.adapter,
        strategy=args.strategy,
        db_url=args.db_url,
        token=token,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        cache_bytes=args.cache_bytes,
        num_worlds=args.num_worlds,
        start_seed=args.start_seed,
        workers=default_workers() if args.workers is None else args.workers,
    )
    serve(config, host=args.host, port=args.port, uds=args.uds)
    return 0


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except StatekitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _mib(size: int | None) -> str:
    return "building" if size is None else f"{size / (1 << 20):.1f} MiB"


def cmd_cache_ls(args: argparse.Namespace) -> int:
    """Every golden in this server's snapshot cache, least recently used first."""
    entries = CacheIndex.shared().entries()
    if args.json:
        print(json.dumps([entry.as_dict() for entry in entries], sort_keys=True))
        return 0
    table = Table(
        "store", "seed", "key", "size", "pinned", "in use", title=f"{len(entries)} goldens (oldest use first)"
    )
    for entry in entries:
        table.add_row(
            entry.store,
            str(entry.seed),
            entry.key,
            _mib(entry.size),
            "pin" if entry.pinned else "",
            "yes" if entry.leased else "",
        )
    console.print(table)
    return 0


def cmd_cache_du(args: argparse.Namespace) -> int:
    """Disk used by the snapshot cache, per store, against the budget."""
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
    table = Table("store", "goldens", "size", "pinned", "in use", title="snapshot cache")
    for store, row in sorted(stores.items()):
        table.add_row(store, str(row["goldens"]), _mib(row["bytes"]), str(row["pinned"]), str(row["in_use"]))
    console.print(table)
    console.print(f"{_mib(total)} of a {_mib(budget)} budget ({100 * total / max(budget, 1):.0f}%)")
    return 0


def cmd_cache_prune(args: argparse.Namespace) -> int:
    """Evict least recently used goldens of one adapter's store (never pinned or in-use ones)."""
    target = 0 if args.all else args.to
    with _env(args, cache_bytes=args.budget) as env:
        evicted = env.cache.prune(target)
        left = sum(entry.size or 0 for entry in env.cache.entries())
    console.print(f"evicted {len(evicted)} golden(s) of {env.cache.store}; {_mib(left)} left in that store")
    return 0


def cmd_cache_pin(args: argparse.Namespace) -> int:
    """Pin (or unpin) seeds' worlds so eviction never removes them."""
    seeds = _seed_list(args.seeds)
    with _env(args) as env:
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


def cmd_spec_init(args: argparse.Namespace) -> int:
    """Draft a digest spec from a live schema: an adapter's world (a SqlAdapter) or a database URL."""
    from statekit.digest.draft import draft_spec
    from statekit.digest.postgres import connect
    from statekit.postgres.server import to_conninfo
    from statekit.sql_adapter import SqlAdapter

    with ExitStack() as stack:
        if args.adapter:
            env = stack.enter_context(_env(args))
            if not isinstance(env.adapter, SqlAdapter):
                raise statekit.ConfigError(
                    f"adapter {args.adapter!r} is not a SqlAdapter: point spec init at its database with "
                    "--url postgresql://... instead"
                )
            conninfo = env.adapter.conninfo(stack.enter_context(env.open_world(args.seed)))
        elif args.url:
            conninfo = to_conninfo(args.url)
        else:
            raise statekit.ConfigError(
                "spec init needs an ADAPTER or --url (a database to read the schema of)"
            )
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


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the embedded PostgreSQL now (it otherwise lingers ``$STATEKIT_PG_LINGER`` seconds)."""
    from statekit.postgres.embedded import SharedCluster

    if SharedCluster().stop(force=args.force):
        console.print("stopped the embedded PostgreSQL")
        return 0
    console.print("[yellow]a statekit process still uses the embedded PostgreSQL[/]: not stopped (--force)")
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="statekit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, adapter: bool = True) -> None:
        if adapter:
            p.add_argument("adapter", help="registered name (claims_app) or package.module:attribute")
        p.add_argument("--strategy", default=None, help="reset strategy (default: the adapter's first)")
        p.add_argument("--db-url", default=None, help="PostgreSQL admin URL (default: embedded cluster)")

    demo = sub.add_parser("demo", help="play a scripted episode and prove determinism")
    demo.add_argument("adapter", nargs="?", default="claims_app")
    common(demo, adapter=False)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--resets", type=int, default=20)
    demo.set_defaults(func=cmd_demo)

    digest = sub.add_parser("digest", help="the initial-state digest of a seed")
    common(digest)
    digest.add_argument("--seed", type=int, required=True)
    digest.add_argument("--json", action="store_true")
    digest.set_defaults(func=cmd_digest)

    record = sub.add_parser("record", help="re-record outbound traffic into the adapter's cassettes")
    common(record)
    record.add_argument("--seeds", default="0-15", help="e.g. 0-15 or 7,8,11")
    record.add_argument("--no-fresh", dest="fresh", action="store_false", help="append instead of replacing")
    record.set_defaults(func=cmd_record)

    dump = sub.add_parser("dump", help="canonical state dump plus a per-step digest trace")
    common(dump)
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

    bisect = sub.add_parser("bisect", help="first step at which two action scripts or two builds diverge")
    common(bisect)
    bisect.add_argument("--seed", type=int, required=True)
    bisect.add_argument("--actions", required=True, help="JSON list of actions (script A)")
    bisect.add_argument("--actions-b", default=None, help="script B (default: script A)")
    bisect.add_argument("--adapter-b", default=None, help="build B's adapter (default: ADAPTER)")
    bisect.add_argument("--task", default=None)
    bisect.add_argument("--json", action="store_true")
    bisect.set_defaults(func=cmd_bisect)

    drift_cmd = sub.add_parser("drift", help="compare two builds: schema, coverage, initial digests")
    drift_cmd.add_argument("old", help="adapter of the current build")
    drift_cmd.add_argument("new", help="adapter of the new build")
    drift_cmd.add_argument("--seeds", default="7,8")
    drift_cmd.add_argument("--db-url", default=None)
    drift_cmd.add_argument("--json", action="store_true")
    drift_cmd.set_defaults(func=cmd_drift)

    check = sub.add_parser("check", help="run the determinism checker")
    common(check)
    check.add_argument("--seeds", default="7,8")
    check.add_argument("--repeats", type=int, default=3)
    check.add_argument("--task-repeats", type=int, default=5)
    check.add_argument("--json", action="store_true")
    check.add_argument("--skip-controls", action="store_true", help="skip the control-removal checks")
    check.add_argument("--skip-probes", action="store_true", help="skip the exploit probes (tasks_robust)")
    check.add_argument("--probe-seeds", default=None, help="seeds for the exploit probes (default: --seeds)")
    defaults = ProbeSettings()
    check.add_argument("--probe-budget", type=int, default=defaults.budget, help="step cap while probing")
    check.add_argument(
        "--probe-entities", type=int, default=defaults.entities, help="entities per tool in every_entity"
    )
    check.add_argument(
        "--probe-walk", type=int, default=defaults.walk_steps, help="steps of the random-walk probe"
    )
    check.set_defaults(func=cmd_check)

    serve = sub.add_parser("serve", help="serve an environment over HTTP, OpenEnv's protocol and Gymnasium")
    common(serve)
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000, help="0 lets the system choose (the URL is printed)")
    serve.add_argument("--token", default=None, help="require this bearer token (or set $STATEKIT_TOKEN)")
    serve.add_argument("--max-sessions", type=int, default=8, help="open sessions at most; more get HTTP 429")
    serve.add_argument("--uds", default=None, help="serve on this Unix socket instead of TCP")
    serve.add_argument("--idle-timeout", type=float, default=600.0, help="close after N idle s; 0: never")
    serve.add_argument(
        "--cache-bytes",
        type=_size,
        default=None,
        help="snapshot cache budget, e.g. 4G (or $STATEKIT_CACHE_BYTES)",
    )
    serve.add_argument("--num-worlds", type=int, default=None, help="seedless resets draw from N worlds only")
    serve.add_argument("--start-seed", type=int, default=0, help="the first seed of that world set")
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes running the sessions (default: one per core); 0: in the serving process",
    )
    serve.set_defaults(func=cmd_serve)

    cache = sub.add_parser("cache", help="the snapshot cache: ls, du, prune, pin")
    verbs = cache.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("ls", help="every golden, least recently used first")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_cache_ls)
    du = verbs.add_parser("du", help="disk used per store, against the budget")
    du.add_argument(
        "--budget", type=_size, default=None, help="compare with this (default: $STATEKIT_CACHE_BYTES)"
    )
    du.add_argument("--json", action="store_true")
    du.set_defaults(func=cmd_cache_du)
    prune = verbs.add_parser(
        "prune", help="evict least recently used goldens of an adapter (not pinned, not in use)"
    )
    common(prune)
    prune.add_argument("--to", type=_size, default=None, help="down to this total (default: the budget)")
    prune.add_argument("--all", action="store_true", help="every golden that is neither pinned nor in use")
    prune.add_argument(
        "--budget", type=_size, default=None, help="the budget (default: $STATEKIT_CACHE_BYTES)"
    )
    prune.set_defaults(func=cmd_cache_prune)
    pin = verbs.add_parser("pin", help="never evict these seeds' worlds")
    common(pin)
    pin.add_argument("seeds", help="e.g. 0-15 or 7,8,11")
    pin.add_argument("--unpin", action="store_true", help="remove the pins instead")
    pin.set_defaults(func=cmd_cache_pin)

    assay = sub.add_parser("assay", help="may it ship? licences, fixture sources, recorded traffic")
    assay.add_argument("adapter", help="registered name (claims_app) or package.module:attribute")
    assay.add_argument("--strategy", default=None, help="container: assay the image's content")
    assay.add_argument("--policy", default=None, help="TOML policy (default: statekit's, see docs)")
    assay.add_argument("--json", action="store_true")
    assay.set_defaults(func=cmd_assay)

    spec = sub.add_parser("spec", help="digest specs: draft one from a live schema")
    spec_sub = spec.add_subparsers(dest="spec_command", required=True)
    init = spec_sub.add_parser("init", help="a draft spec with every table and column, noise marked DECIDE:")
    init.add_argument("adapter", nargs="?", default=None, help="a SqlAdapter (its seed's world is read)")
    init.add_argument("--url", default=None, help="or a PostgreSQL database URL to read the schema of")
    init.add_argument("--seed", type=int, default=0)
    init.add_argument("--schema", default="public")
    init.add_argument("--out", default=None, help="write the draft here (default: print it)")
    init.add_argument("--strategy", default=None)
    init.add_argument("--db-url", default=None, help="PostgreSQL admin URL for the adapter's worlds")
    init.set_defaults(func=cmd_spec_init)

    stop = sub.add_parser("stop", help="stop the embedded PostgreSQL now instead of letting it linger")
    stop.add_argument("--force", action="store_true", help="even while a statekit process uses it")
    stop.set_defaults(func=cmd_stop)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except StatekitError as exc:
        print(f"statekit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
