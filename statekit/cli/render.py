"""What the commands share: the console, how values are summarised and verdicts shown, and how
seeds and action scripts are read from the command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from statekit.digest.canonical import canonical_json
from statekit.digest.diff import StateDiff
from statekit.errors import ConfigError

console = Console()


def seed_list(text: str) -> list[int]:
    """``"0-15"`` or ``"7,8,11"`` (or a mix) to a sorted list of seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds.update(range(int(low), int(high or low) + 1))
    return sorted(seeds)


def load_actions(path: str | None) -> list[dict[str, Any]]:
    """An action script: a JSON list of ``{"tool": ..., ...}`` objects (``-`` reads stdin)."""
    if not path:
        return []
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        actions = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise ConfigError(f"{path}: an action script is a JSON list of objects")
    return actions


def task_options(args: Any) -> dict[str, Any] | None:
    return {"task": args.task} if getattr(args, "task", None) else None


def summary(obs: Any, width: int = 100) -> str:
    """One line of JSON, cut to ``width``; an action's ``tool`` comes first so it is never cut off."""
    if isinstance(obs, dict) and "tool" in obs:
        obs = {"tool": obs["tool"], **{k: v for k, v in sorted(obs.items()) if k != "tool"}}
        text = json.dumps(obs, separators=(",", ":"), ensure_ascii=False)
    else:
        text = canonical_json(obs)
    return text if len(text) <= width else text[: width - 1] + "…"


def verdict(ok: bool | None) -> str:
    return "[yellow]not checked[/]" if ok is None else "[green]ok[/]" if ok else "[red]FAIL[/]"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mib(size: int | None) -> str:
    return "building" if size is None else f"{size / (1 << 20):.1f} MiB"


def print_diff(diff: StateDiff) -> None:
    if diff.equal:
        console.print("[green]equal[/]: no table, row or column differs")
        return
    table = Table("table", "change", "key", "column", "A", "B", title="state diff (A → B)")
    for name, t in sorted(diff.tables.items()):
        if t.only_in:
            table.add_row(name, f"only in {t.only_in.upper()}", "", "", "", "")
        for row in t.removed:
            table.add_row(name, "removed", canonical_json(row["key"]), "", summary(row["row"], 40), "")
        for row in t.added:
            table.add_row(name, "added", canonical_json(row["key"]), "", "", summary(row["row"], 40))
        for row in t.changed:
            for column, (left, right) in row["columns"].items():
                key = canonical_json(row["key"])
                table.add_row(name, "changed", key, column, summary(left, 40), summary(right, 40))
    console.print(table)
