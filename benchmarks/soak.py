"""Soak: many sessions against ``statekit serve claims_app`` for minutes, then count what leaked.

    python benchmarks/soak.py [--minutes 10] [--sessions 64] [--cache-bytes 400M] [--json OUT]

What the user pays, end to end: the real server as a subprocess on loopback (its own
``$STATEKIT_HOME``, embedded PostgreSQL and copy-on-write uploads; a bearer token), driven over HTTP
and OpenEnv's ``/ws`` by ``--sessions`` concurrent clients. Each client loops over episodes:
reset (80 % from a hot set of ``--hot`` seeds, 20 % seedless, drawn by the server from
``--num-worlds`` worlds, so the world cache churns at its budget; ``--pinned`` of the hot seeds
are pinned first), steps (list, get, note, triage, wait, submit), forks (snapshot, step, restore:
the digest must come back), bad input (malformed JSON, hostile nesting, lone surrogates, unknown
tools, a refused reset that must keep the episode, unknown sessions) and endings: close, abandon
(the idle reaper must close it), a WebSocket dropped without a close frame, or a client process
killed with SIGKILL mid-episode.

Printed: requests served, p50/p99 latency (overall and per call), errors by kind, the server's RSS,
open fds and threads, PostgreSQL backends and the cache's bytes over time; databases, directories,
mounts and containers before and after (the server is stopped with SIGTERM first). Targets: no 5xx,
nothing leaked, RSS within 10 % from minute 2 to the end, the cache within its budget. Exit status
1 if a target is missed. Bounded: ``--minutes`` and ``--max-requests``; every request times out.
Defaults: 64 sessions, 10 minutes, 400 MiB budget, 16 hot seeds (4 pinned), 120 worlds, idle
timeout 20 s, max sessions 128.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from timing import percentile_ms
from websockets.asyncio.client import connect

REPO = Path(__file__).resolve().parents[1]
STATEKIT = str(Path(sys.executable).with_name("statekit"))
TASKS = ("approve_valid", "deny_late_filing", "triage_overdue", "pay_approved")


@dataclass
class Tally:
    """Every request's latency by call, statuses, errors by kind and the checks that must hold."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    per_minute: Counter[int] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    def record(self, call: str, seconds: float, status: int, code: str = "") -> None:
        self.requests += 1
        self.latencies[call].append(seconds)
        self.statuses[status] += 1
        self.per_minute[int((time.monotonic() - self.started) // 60)] += 1
        if status >= 400:
            self.errors[f"{status} {code}"] += 1


class Client:
    """One simulated trainer: HTTP calls that record latency, status and error code."""

    def __init__(self, http: httpx.AsyncClient, tally: Tally, rng: random.Random) -> None:
        self.http, self.tally, self.rng = http, tally, rng

    async def call(self, name: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        t0 = time.perf_counter()
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.tally.record(name, time.perf_counter() - t0, 0)
            self.tally.errors[f"transport {type(exc).__name__}"] += 1
            return 0, None
        try:
            body = response.json()
        except ValueError:
            body = None
        code = body.get("error", {}).get("code", "") if isinstance(body, dict) and "error" in body else ""
        self.tally.record(name, time.perf_counter() - t0, response.status_code, code)
        return response.status_code, body

    async def episode(self, args: argparse.Namespace) -> None:
        rng = self.rng
        body: dict[str, Any] = {}
        if rng.random() < 0.8:
            body["seed"] = rng.randrange(args.hot)
        if rng.random() < 0.3:
            body["options"] = {"task": rng.choice(TASKS)}
        status, started = await self.call("reset", "POST", "/reset", json=body)
        if status == 422:  # this seed's world has no claim for that task: the server said so
            status, started = await self.call("reset", "POST", "/reset", json={"seed": body.get("seed", 1)})
        if status != 200:
            return
        session = started["session_id"]
        references: list[str] = []
        for _ in range(rng.randrange(3, 14)):
            roll = rng.random()
            if roll < 0.08:
                await self.fork(session, references)
            elif roll < 0.2:
                await self.bad_input(session)
            else:
                action = self.action(references)
                status, result = await self.call(
                    "step", "POST", "/step", json={"session_id": session, "action": action}
                )
                if status == 200:
                    items = (
                        result["observation"].get("body", {})
                        if isinstance(result["observation"], dict)
                        else {}
                    )
                    if isinstance(items, dict) and isinstance(items.get("items"), list):
                        references = [
                            i["reference"] for i in items["items"] if "reference" in i
                        ] or references
                    if result["terminated"] or result["truncated"]:
                        break
                elif status == 409:
                    break
        ending = rng.random()
        if ending < 0.75:
            await self.call("close", "DELETE", "/session", params={"session_id": session})
        else:
            self.tally.checks["abandoned sessions (left to the reaper)"] += 1

    def action(self, references: list[str]) -> dict[str, Any]:
        rng = self.rng
        ref = rng.choice(references) if references else f"CLM-{rng.randrange(1, 400):06d}"
        return rng.choice(
            [
                {"tool": "list_claims", "limit": rng.randrange(1, 20)},
                {"tool": "list_claims", "status": "submitted", "limit": 5},
                {"tool": "get_claim", "reference": ref},
                {"tool": "add_note", "reference": ref, "body": "checked the file"},
                {"tool": "triage", "reference": ref, "priority": "high"},
                {"tool": "wait", "hours": rng.randrange(1, 49)},
                {"tool": "submit"},
            ]
        )

    async def fork(self, session: str, references: list[str]) -> None:
        status, state = await self.call("state", "GET", "/state", params={"session_id": session})
        if status != 200:
            return
        status, snap = await self.call("snapshot", "POST", "/snapshot", json={"session_id": session})
        if status != 200:
            return
        await self.call(
            "step", "POST", "/step", json={"session_id": session, "action": self.action(references)}
        )
        status, _ = await self.call(
            "restore", "POST", "/restore", json={"session_id": session, "snapshot_id": snap["snapshot_id"]}
        )
        status, after = await self.call("state", "GET", "/state", params={"session_id": session})
        same = status == 200 and after["digest"] == state["digest"] and after["clock"] == state["clock"]
        self.tally.checks["forks restored exactly" if same else "FORK MISMATCH"] += 1

    async def bad_input(self, session: str) -> None:
        rng = self.rng
        json_headers = {"content-type": "application/json"}
        kind = rng.randrange(7)
        if kind == 0:
            await self.call("bad", "POST", "/step", content=b'{"session_id": ', headers=json_headers)
        elif kind == 1:
            deep = "[" * 20_000 + "]" * 20_000
            await self.call(
                "bad",
                "POST",
                "/step",
                content=f'{{"session_id": "{session}", "action": {deep}}}'.encode(),
                headers=json_headers,
            )
        elif kind == 2:
            body = f'{{"session_id": "{session}", "action": {{"tool": "list_claims", "q": "\\ud800"}}}}'
            await self.call("bad", "POST", "/step", content=body.encode(), headers=json_headers)
        elif kind == 3:
            await self.call(
                "bad", "POST", "/step", json={"session_id": session, "action": {"tool": "rm -rf /"}}
            )
        elif kind == 4:
            await self.call("bad", "POST", "/step", json={"session_id": "no-such-session", "action": {}})
        elif kind == 5:
            await self.call(
                "bad",
                "POST",
                "/step",
                json={"session_id": session, "action": {"tool": "get_claim", "reference": "CLM-000149\n"}},
            )
        else:  # a refused reset must keep the episode it would have replaced
            status, before = await self.call("state", "GET", "/state", params={"session_id": session})
            refused, _ = await self.call(
                "bad", "POST", "/reset", json={"session_id": session, "options": {"task": "nope"}}
            )
            status_after, after = await self.call("state", "GET", "/state", params={"session_id": session})
            if status == 200 and refused == 422:
                kept = status_after == 200 and after == before
                self.tally.checks[
                    "refused resets kept the episode" if kept else "REFUSED RESET LOST THE EPISODE"
                ] += 1


async def websocket_episode(url: str, token: str, tally: Tally, rng: random.Random, hot: int) -> None:
    """OpenEnv's protocol; the connection is dropped without a close frame (a client that died)."""
    ws_url = url.replace("http://", "ws://") + "/ws"
    t0 = time.perf_counter()
    try:
        async with connect(
            ws_url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=120
        ) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": rng.randrange(hot)}}))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 300))
            tally.record("ws", time.perf_counter() - t0, 200 if reply["type"] == "observation" else 400)
            for _ in range(rng.randrange(1, 6)):
                t0 = time.perf_counter()
                await ws.send(json.dumps({"type": "step", "data": {"tool": "list_claims", "limit": 2}}))
                reply = json.loads(await asyncio.wait_for(ws.recv(), 300))
                tally.record("ws", time.perf_counter() - t0, 200 if reply["type"] == "observation" else 400)
            ws.transport.abort()  # gone, mid-session, no close frame
            tally.checks["websockets dropped without closing"] += 1
    except Exception as exc:
        tally.errors[f"ws {type(exc).__name__}"] += 1


_KILLED_CLIENT = """
import httpx, sys
url, token = sys.argv[1:3]
with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
    session = http.post("/reset", json={"seed": 3}).json()["session_id"]
    print(session, flush=True)
    while True:
        http.post("/step", json={"session_id": session, "action": {"tool": "list_claims", "limit": 5}})
"""


async def killed_clients(url: str, token: str, tally: Tally, deadline: float, rng: random.Random) -> None:
    """Now and then a client process is SIGKILLed mid-request: its session is left to the reaper."""
    while time.monotonic() < deadline - 30:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _KILLED_CLIENT, url, token, stdout=asyncio.subprocess.PIPE
        )
        assert child.stdout is not None
        try:
            await asyncio.wait_for(child.stdout.readline(), 300)
            await asyncio.sleep(rng.uniform(0.5, 4))
        finally:
            if child.returncode is None:  # else it already ended (its request failed): nothing to kill
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGKILL)
            await child.wait()
        tally.checks["client processes killed mid-episode"] += 1
        await asyncio.sleep(rng.uniform(5, 20))


def server_processes(pid: int) -> list[int]:
    """The server and its descendants (``statekit serve`` runs sessions in worker processes)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            command = Path(f"/proc/{current}/cmdline").read_bytes()
            # not a passing cp or mount, nor the embedded server's lingerer (a detached watcher)
            if b"statekit" in command and b"statekit.postgres.linger" not in command:
                found.append(current)
        except OSError:
            continue
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(child) for child in task.read_text().split())
            except OSError:
                continue
    return found


def proc_stats(pid: int) -> dict[str, float]:
    """RSS, threads and open fds of the server, front and workers together (and the front's RSS)."""
    total = {"rss_mb": 0.0, "threads": 0.0, "fds": 0.0, "processes": 0.0}
    for process in server_processes(pid):
        try:
            status = Path(f"/proc/{process}/status").read_text()
            fds = len(os.listdir(f"/proc/{process}/fd"))
        except OSError:  # gone meanwhile (a replaced worker)
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if "VmRSS" not in fields:  # exited, not yet reaped
            continue
        rss = int(fields["VmRSS"].split()[0]) / 1024
        if process == pid:
            total["front_rss_mb"] = rss
        else:  # each worker's own, in the JSON: which process spikes
            total[f"rss_mb_{process}"] = rss
        total["rss_mb"] += rss
        total["threads"] += int(fields["Threads"])
        total["fds"] += fds
        total["processes"] += 1
    return total


class Inventory:
    """Databases, directories, mounts and containers of the soak's own $STATEKIT_HOME, by kind."""

    def __init__(self, home: Path) -> None:
        from statekit.postgres import ServerLease

        self.home = home
        self.lease = ServerLease(None)  # the embedded cluster under this home (it starts it if needed)
        self.files = home / "files" / "claims_app" / "uploads"

    def take(self) -> dict[str, int]:
        from statekit.strategies.cow_fs import mounts_under
        from statekit.strategies.naming import snapshot_owner

        names = self.lease.server.databases("skclaims_")
        counts = {
            "databases: golden": sum(
                n.startswith("skclaims_g_") and not n[11:].startswith("s") for n in names
            ),
            "databases: fork goldens": sum(n.startswith("skclaims_g_s") for n in names),
            "databases: episode copies": sum(n.startswith("skclaims_e_") for n in names),
            "databases: half-built": sum(n.startswith("skclaims_b_") for n in names),
        }
        for folder in ("copies", "upper", "marks", "building", "trash"):
            path = self.files / folder
            counts[f"directories: {folder}"] = len(os.listdir(path)) if path.exists() else 0
        goldens = os.listdir(self.files / "goldens") if (self.files / "goldens").exists() else []
        counts["directories: golden"] = sum(snapshot_owner(g) is None for g in goldens)
        counts["directories: fork goldens"] = sum(snapshot_owner(g) is not None for g in goldens)
        counts["mounts"] = len(mounts_under(self.home))
        counts["containers"] = containers()
        return counts

    def backends(self) -> int:
        with self.lease.server.admin() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            ).fetchone()
        return int(str(row[0])) if row else 0

    def cache_bytes(self) -> tuple[int, int]:
        """(the record's total, measured directly: golden databases + golden trees)."""
        from statekit.cache import CacheIndex

        recorded = CacheIndex(self.home / "cache" / "worlds.sqlite").total()
        with self.lease.server.admin() as conn:
            rows = conn.execute(
                "SELECT coalesce(sum(pg_database_size(datname)), 0) FROM pg_database"
                " WHERE starts_with(datname, 'skclaims_g_') AND NOT starts_with(datname, 'skclaims_g_s')"
            ).fetchone()
        measured = int(str(rows[0])) if rows else 0
        goldens = self.files / "goldens"
        for root, _, files in os.walk(goldens):
            for name in files:
                measured += os.lstat(os.path.join(root, name)).st_blocks * 512
        return recorded, measured

    def close(self) -> None:
        self.lease.close()


def containers() -> int:
    try:
        import docker

        client = docker.from_env()
        return len(client.containers.list(all=True, filters={"label": "statekit.owner"}))
    except Exception:
        return 0


async def drive(
    args: argparse.Namespace, url: str, token: str, server_pid: int, inventory: Inventory
) -> tuple[Tally, list[dict[str, float]]]:
    tally = Tally()
    deadline = time.monotonic() + args.minutes * 60
    samples: list[dict[str, float]] = []
    limits = httpx.Limits(max_connections=args.sessions + 8, max_keepalive_connections=args.sessions + 8)
    headers = {"Authorization": f"Bearer {token}"}

    async def worker(n: int) -> None:
        rng = random.Random(n)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as http:
            client = Client(http, tally, rng)
            while time.monotonic() < deadline and tally.requests < args.max_requests:
                if rng.random() < 0.08:
                    await websocket_episode(url, token, tally, rng, args.hot)
                else:
                    await client.episode(args)

    async def sampler() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            while time.monotonic() < deadline + 1:
                sample: dict[str, float] = {"t": time.monotonic() - tally.started, "requests": tally.requests}
                sample.update(proc_stats(server_pid))
                t0 = time.perf_counter()
                try:
                    sample["sessions"] = (await http.get("/health")).json()["sessions"]
                except httpx.HTTPError as exc:
                    tally.errors[f"health probe {type(exc).__name__}"] += 1
                    sample["sessions"] = -1
                sample["health_ms"] = (time.perf_counter() - t0) * 1000
                sample["pg_backends"] = await asyncio.to_thread(inventory.backends)
                recorded, measured = await asyncio.to_thread(inventory.cache_bytes)
                sample["cache_mb"], sample["goldens_on_disk_mb"] = recorded / 2**20, measured / 2**20
                samples.append(sample)
                print(
                    f"  {sample['t'] / 60:5.1f} min  {tally.requests:7d} requests  "
                    f"RSS {sample['rss_mb']:7.1f} MB ({sample['processes']:.0f} proc., "
                    f"front {sample.get('front_rss_mb', 0):5.1f})  "
                    f"fds {sample['fds']:4.0f}  "
                    f"threads {sample['threads']:3.0f}  "
                    f"sessions {sample['sessions']:3.0f} (/health {sample['health_ms']:5.0f} ms)  "
                    f"pg backends {sample['pg_backends']:3.0f}  "
                    f"cache {sample['cache_mb']:6.1f} MB (on disk {sample['goldens_on_disk_mb']:6.1f})",
                    flush=True,
                )
                await asyncio.sleep(args.sample)

    await asyncio.gather(
        sampler(),
        killed_clients(url, token, tally, deadline, random.Random(-1)),
        *(worker(n) for n in range(args.sessions)),
    )
    return tally, samples


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--max-requests", type=int, default=2_000_000)
    parser.add_argument("--cache-bytes", default="400M")
    parser.add_argument("--hot", type=int, default=16, help="hot seeds: 80 %% of resets name one of 0..hot-1")
    parser.add_argument("--pinned", type=int, default=4, help="pin this many of the hot seeds first")
    parser.add_argument("--num-worlds", type=int, default=120, help="seedless resets draw from this many")
    parser.add_argument("--idle-timeout", type=float, default=20)
    parser.add_argument("--max-sessions", type=int, default=128)
    parser.add_argument("--sample", type=float, default=30, help="seconds between resource samples")
    parser.add_argument("--workers", type=int, default=None, help="serve's --workers (default: its own)")
    parser.add_argument("--home", default=None, help="STATEKIT_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--server-log", default=None, help="the server's whole output (default: a new file in the temp dir)"
    )
    args = parser.parse_args()

    home = Path(args.home or tempfile.mkdtemp(prefix="statekit-soak-"))
    os.environ["STATEKIT_HOME"] = str(home)
    from statekit.cache import parse_size

    budget = parse_size(args.cache_bytes)
    token = os.urandom(16).hex()
    inventory = Inventory(home)
    load = os.getloadavg()
    print(
        f"soak: {args.sessions} sessions for {args.minutes:g} min; home {home}; "
        f"load average before {load[0]:.2f} (1 min) {load[1]:.2f} (5 min) on {os.cpu_count()} cores"
    )
    if args.pinned:
        subprocess.run(
            [STATEKIT, "cache", "pin", "claims_app", f"0-{args.pinned - 1}"],
            check=True,
            cwd=REPO,
            capture_output=True,
        )
    before = inventory.take()
    server = subprocess.Popen(
        [
            STATEKIT,
            "serve",
            "claims_app",
            "--port",
            "0",
            "--max-sessions",
            str(args.max_sessions),
            "--idle-timeout",
            str(args.idle_timeout),
            "--cache-bytes",
            str(budget),
            "--num-worlds",
            str(args.num_worlds),
            *(["--workers", str(args.workers)] if args.workers is not None else []),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "STATEKIT_TOKEN": token},
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if " at http://" not in line:
        print(line + server.stdout.read())
        return 2
    url = line.split(" at ", 1)[1].split()[0]
    log_tail: list[str] = []

    log_path = Path(args.server_log or tempfile.mkstemp(prefix="statekit-soak-server-", suffix=".log")[1])
    print(f"server log: {log_path}")

    def drain() -> None:
        assert server.stdout is not None
        with log_path.open("w") as log:
            for text in server.stdout:
                log.write(text)
                if "ERROR" in text or "Traceback" in text or " 500 " in text:
                    log_tail.append(text)

    import threading

    threading.Thread(target=drain, daemon=True).start()
    httpx.get(f"{url}/health", timeout=300)
    try:
        tally, samples = asyncio.run(drive(args, url, token, server.pid, inventory))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=300)
    after = inventory.take()
    recorded, measured = inventory.cache_bytes()
    inventory.close()
    return report(args, tally, samples, before, after, budget, (recorded, measured), log_tail, load, home)


def report(
    args: argparse.Namespace,
    tally: Tally,
    samples: list[dict[str, float]],
    before: dict[str, int],
    after: dict[str, int],
    budget: int,
    cache: tuple[int, int],
    log_tail: list[str],
    load: tuple[float, float, float],
    home: Path,
) -> int:
    every = [s for values in tally.latencies.values() for s in values]
    elapsed = time.monotonic() - tally.started
    rate = tally.requests / elapsed
    print(f"\nrequests served: {tally.requests} in {elapsed / 60:.1f} min ({rate:.1f}/s)")
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min) {os.getloadavg()[1]:.2f} (5 min)")
    print(
        f"latency, all calls: p50 {percentile_ms(every, 0.5):.0f} ms, p99 {percentile_ms(every, 0.99):.0f} ms"
    )
    for call, values in sorted(tally.latencies.items()):
        p50, p99 = percentile_ms(values, 0.5), percentile_ms(values, 0.99)
        print(f"  {call:9s} n={len(values):6d}  p50 {p50:7.0f} ms  p99 {p99:7.0f} ms")
    print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(tally.statuses.items())))
    print("errors by kind (bad input is deliberate):")
    for kind, n in tally.errors.most_common():
        print(f"  {n:7d}  {kind}")
    print("checks:")
    for kind, n in sorted(tally.checks.items()):
        print(f"  {n:7d}  {kind}")
    print("resources before -> after (server stopped):")
    for kind in before:
        print(f"  {kind:28s} {before[kind]:5d} -> {after[kind]:5d}")
    warm = [s for s in samples if s["t"] >= 120]  # minute 2 onwards: after warm-up
    rss_drift = None
    if len(warm) >= 2:
        rss_base = warm[0]["rss_mb"]
        rss_drift = max(abs(s["rss_mb"] - rss_base) for s in warm) / rss_base
    cache_peak = max(s["cache_mb"] for s in samples) * 2**20
    disk_peak = max(s["goldens_on_disk_mb"] for s in samples) * 2**20
    if rss_drift is not None:
        print(
            f"RSS from minute 2 ({warm[0]['rss_mb']:.1f} MB) to the end: at most {100 * rss_drift:.1f} % away"
        )
        by_minute: dict[int, list[float]] = {}
        for sample in warm:
            by_minute.setdefault(int(sample["t"] // 60), []).append(sample["rss_mb"])
        levels = "  ".join(f"{m}: {statistics.median(v):.0f}" for m, v in sorted(by_minute.items()))
        print(f"RSS level (median MB by minute, shown beside the target, not judged): {levels}")
    print(
        f"cache: budget {budget / 2**20:.0f} MiB, peak recorded {cache_peak / 2**20:.1f} MiB, peak on disk "
        f"{disk_peak / 2**20:.1f} MiB, after {cache[0] / 2**20:.1f} / {cache[1] / 2**20:.1f} MiB"
    )
    leaked = {
        k: after[k] for k in after if k not in ("databases: golden", "directories: golden") and after[k]
    }
    fives = sum(n for status, n in tally.statuses.items() if status >= 500)
    failed_checks = sum(
        n for kind, n in tally.checks.items() if kind.isupper() or kind.startswith(("FORK", "REFUSED"))
    )
    targets: dict[str, bool | None] = {
        "0 5xx": fives == 0,
        "0 leaked databases/directories/mounts/containers": not leaked,
        "RSS within 10 % from minute 2": None if rss_drift is None else rss_drift <= 0.10,
        "disk within the cache budget": max(cache_peak, disk_peak, *cache) <= budget,
        "forks and refused resets exact": failed_checks == 0,
    }
    for name, ok in targets.items():
        verdict = "not checked (the run ended before minute 3)" if ok is None else ("PASS" if ok else "FAIL")
        print(f"  {verdict}  {name}")
    if leaked:
        print(f"  leaked: {leaked}")
    if log_tail:
        print("server errors (first 20 lines; the whole log is kept, see above):\n" + "".join(log_tail[:20]))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "load_before": load,
                    "requests": tally.requests,
                    "statuses": dict(tally.statuses),
                    "errors": dict(tally.errors),
                    "checks": dict(tally.checks),
                    "samples": samples,
                    "before": before,
                    "after": after,
                    "targets": targets,
                    "p50_ms": percentile_ms(every, 0.5),
                    "p99_ms": percentile_ms(every, 0.99),
                    "median_step_ms": statistics.median(tally.latencies["step"]) * 1000
                    if tally.latencies["step"]
                    else None,
                },
                indent=1,
            )
        )
    if not args.home:  # the embedded PostgreSQL lingers after its last user: stop it before its files go
        subprocess.run([STATEKIT, "stop"], cwd=REPO, capture_output=True, check=False, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    return 0 if all(ok is not False for ok in targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
