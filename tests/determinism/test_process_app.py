"""The boundary statekit draws around an application process it cannot patch (another interpreter, any
language): the clock it reads is the one statekit writes and moves, no route leads out of it, its host
name and environment are the boundary's, and each part switched off lets the machine through (what a
check of the control would compare). The application is Debian's python3 running a standard-library
server (tests/testing/unix_app.py): nothing of statekit is imported into it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import statekit
from statekit import process_app
from statekit.abandoned import sweep_abandoned
from statekit.determinism.clock import VirtualClock
from statekit.determinism.egress import EgressScope
from statekit.kit import AppProcess, Boundary, Mail, SmtpService

ROOT = Path(__file__).resolve().parents[2]
APP = ["/usr/bin/python3", str(ROOT / "tests" / "testing" / "unix_app.py")]
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
START = datetime(2025, 3, 14, 9, 30, 15, 250000, tzinfo=UTC)

Start = Callable[..., AppProcess]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    started: list[AppProcess] = []

    def make(
        boundary: Boundary | None = None, command: list[str] = APP, services: tuple[int, ...] = ()
    ) -> AppProcess:
        process = AppProcess(command, socket=tmp_path / f"app{len(started)}.sock", environment=ENVIRONMENT,
                             boundary=boundary or Boundary(), services=services)  # fmt: skip
        started.append(process)
        process.start(START)
        return process

    yield make
    for process in started:
        process.close()


def _get(process: AppProcess, path: str) -> Any:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(process.socket)), timeout=10) as client:
        answer = client.get(f"http://app{path}")
        answer.raise_for_status()
        return answer.json()


def _now(process: AppProcess) -> datetime:
    return datetime.fromisoformat(_get(process, "/now")["utc"])


def test_the_process_reads_the_clock_statekit_writes_and_moves_with_it(start: Start) -> None:
    app = start()
    assert _now(app) == START
    assert _now(app) == START, "frozen between moves, as Python's virtual clock is within a step"
    app.set_clock(START + timedelta(days=2))
    assert _now(app) == START + timedelta(days=2)
    episode = VirtualClock(START + timedelta(days=3))
    episode.follow(app.set_clock)
    assert _now(app) == START + timedelta(days=3)
    episode.advance(timedelta(minutes=5))  # a step's tick
    assert _now(app) == START + timedelta(days=3, minutes=5)
    episode.load(START + timedelta(days=4))  # a fork restored
    assert _now(app) == START + timedelta(days=4)


def test_an_unchanged_time_is_not_written_again(start: Start) -> None:
    """A step enters the episode's clock (the time the last step moved it to), then moves it: only the
    move is written."""
    app = start()
    clock_file = app._clock_file
    before = clock_file.stat().st_ino
    app.set_clock(START)
    assert clock_file.stat().st_ino == before, "the same time was written again"
    app.set_clock(START + timedelta(minutes=1))
    assert clock_file.stat().st_ino != before and _now(app) == START + timedelta(minutes=1)


def test_the_clock_file_is_in_memory_and_goes_with_the_process(start: Start) -> None:
    """It is rewritten at every step that moves the clock and read at every time call: a tmpfs, not
    the disk (a write and rename on ext4 cost a Redmine step ~0.4 ms)."""
    app = start()
    clock_dir = app._clock_file.parent
    memory = Path("/dev/shm")
    in_memory = memory.is_dir() and os.access(memory, os.W_OK)  # else the default temporary directory
    assert clock_dir.parent == (memory if in_memory else Path(tempfile.gettempdir())) and clock_dir.is_dir()
    app.close()
    assert not clock_dir.exists()


def test_with_the_clock_off_the_process_reads_the_machines_time(start: Start) -> None:
    app = start(Boundary(clock=False))
    assert abs(_now(app) - datetime.now(UTC)) < timedelta(minutes=5)
    assert "LD_PRELOAD" not in _get(app, "/env")


def test_no_route_leads_out_but_the_boundary_off_lets_it(start: Start) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a real service on this machine's loopback
        to = f"/connect?to=127.0.0.1:{listener.getsockname()[1]}"
        closed = _get(start(), to)
        assert closed["connected"] is False, closed  # its loopback is its own: nothing listens there
        assert _get(start(Boundary(network=False)), to) == {"connected": True}


def _refused(app: AppProcess, count: int) -> list[str]:
    """``app.refused`` once it holds ``count`` attempts (a connection the process drops at once may
    be named just after its answer), or as it is after 5 s."""
    deadline = time.monotonic() + 5
    while len(app.refused) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return app.refused


def test_where_it_tries_to_go_is_named_and_refused(start: Start) -> None:
    """Every name resolves inside the boundary and every connection that would leave it ends at
    statekit's sinkhole, which resets it and names the destination, by host name where the process
    resolved one; the egress guard of the environment in a step hears of it."""
    scope = EgressScope().open()  # what an open environment holds
    try:
        app = start()
        fetched = _get(app, "/fetch?url=http://api.vendor.example:8080/v1/score")
        assert fetched["fetched"] is False and "reset" in fetched["error"].lower(), fetched
        assert app.refused == ["api.vendor.example:8080"], "named before the process saw the reset"
        assert [(r.kind, r.destination) for r in scope.take()] == [("connect", "api.vendor.example:8080")]
    finally:
        scope.close()
    assert _get(app, "/fetch?url=http://api.vendor.example:8080/again")["fetched"] is False
    _get(app, "/connect?to=192.0.2.1:80")  # an address, no name
    assert _refused(app, 3) == ["api.vendor.example:8080", "api.vendor.example:8080", "192.0.2.1:80"]
    assert _get(app, "/fetch?url=http://127.0.0.1:8080/")["fetched"] is False, "its own loopback: no one"
    assert app.refused[3:] == [], "a loopback connection is the process's own business"


def test_the_resolvers_addresses_follow_the_name_not_what_was_asked_before(start: Start) -> None:
    first, second = start(), start()
    _get(first, "/connect?to=api.vendor.example:80")
    _get(second, "/connect?to=other.example:80")
    _get(second, "/connect?to=api.vendor.example:80")
    assert _refused(first, 1) == ["api.vendor.example:80"]
    assert _refused(second, 2) == ["other.example:80", "api.vendor.example:80"]
    assert first._sinkhole is not None and second._sinkhole is not None
    assert (
        first._sinkhole._addresses["api.vendor.example"] == second._sinkhole._addresses["api.vendor.example"]
    )


def test_bad_service_ports_and_a_closed_process_are_clear_errors(start: Start, tmp_path: Path) -> None:
    for ports in ((2525, 2525), (9,), (0,)):
        with pytest.raises(statekit.ConfigError, match=r"service ports|sinkhole"):
            AppProcess(APP, socket=tmp_path / "x.sock", environment=ENVIRONMENT, services=ports)
    app = start(services=(2525,))
    app.close()
    with pytest.raises(RuntimeError, match="not running"):
        app.listener(2525)
    with pytest.raises(RuntimeError, match="was closed"):
        app.start(START)


def test_sockets_not_handed_over_end_the_process_and_leak_nothing(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper that hands over fewer sockets than asked (here: one) is a clear error, and the process,
    its home and the socket it did hand over go."""
    short = process_app.HANDOFF.replace("[each.fileno() for each in sockets]", "[sockets[0].fileno()]")
    monkeypatch.setattr(process_app, "HANDOFF", short)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(statekit.ConfigError, match=r"1 of 3 sockets were handed over"):
        start(services=(2525,))
    assert len(os.listdir("/proc/self/fd")) == before


def test_its_declared_services_are_answered_by_statekit_inside_the_boundary(start: Start) -> None:
    """A port declared a service is bound on the process's own loopback and handed to statekit, which
    accepts the process's connections there; an undeclared port has nothing behind it."""
    app = start(services=(2525, 8080))
    listener = app.listener(2525)
    assert listener is not None and listener.getsockname() == ("127.0.0.1", 2525)
    assert _get(app, "/connect?to=127.0.0.1:2525") == {"connected": True}
    listener.settimeout(5)
    accepted, _ = listener.accept()  # the process's connection, in statekit's hands
    accepted.close()
    assert _get(app, "/connect?to=127.0.0.1:2526")["connected"] is False
    with pytest.raises(statekit.ConfigError, match="not one of this process's services"):
        app.listener(25)
    off = start(Boundary(network=False), services=(2525,))
    assert off.listener(2525) is None, "no boundary: the process reaches the machine's own port"
    app.close()
    assert listener.fileno() == -1, "closing the process closes its service sockets"


def test_its_mail_is_taken_inside_the_boundary_and_a_refusal_reaches_the_sender(start: Start) -> None:
    """The process sends over SMTP to its own loopback; statekit's provider hands each message over in
    order. A message the adapter cannot keep is refused, so the sender's delivery fails."""
    taken: list[Mail] = []

    def keep(mail: Mail) -> None:
        if "refuse" in str(mail.message["Subject"]):
            raise RuntimeError("the outbox is gone")
        taken.append(mail)

    app = start(services=(2525,))
    listener = app.listener(2525)
    assert listener is not None
    with SmtpService(listener, keep):
        sent = _get(app, "/mail?port=2525&subject=first&to=a@example.org&to=b@example.org")
        assert sent == {"sent": True}
        assert _get(app, "/mail?port=2525&subject=second&to=c@example.org") == {"sent": True}
        refused = _get(app, "/mail?port=2525&subject=refuse&to=c@example.org")
        assert refused["sent"] is False and "451" in refused["error"]
    assert [(m.sender, m.recipients, m.message["Subject"]) for m in taken] == [
        ("app@example.org", ("a@example.org", "b@example.org"), "first"),
        ("app@example.org", ("c@example.org",), "second"),
    ]
    assert taken[0].message.get_content().strip() == "Hello."
    with socket.create_server(("127.0.0.1", 0)) as machine:  # nothing of this kind on the machine's port
        port = machine.getsockname()[1]
    off = start(Boundary(network=False), services=(port,))
    assert off.listener(port) is None
    left = _get(off, f"/mail?port={port}&subject=out&to=a@example.org")
    assert left["sent"] is False and "refused" in left["error"], "it left for the machine, where no one is"


def _ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie: ended, not yet reaped) within 5 s."""
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


CRASHING = """
import json, sys
from datetime import datetime, UTC
from pathlib import Path
from statekit.kit import AppProcess
app = AppProcess(sys.argv[1:3], socket=Path(sys.argv[3]), environment={"PATH": "/usr/bin:/bin"})
app.start(datetime(2025, 1, 1, tzinfo=UTC))
print(json.dumps({"pid": app.pid, "home": str(app._home), "clock": str(app._clock_dir)}), flush=True)
raise SystemExit("the script fails without closing its application")
"""


def test_an_application_nobody_closed_ends_with_the_interpreter(tmp_path: Path) -> None:
    """A script that exits without ``close`` (an error, a forgotten environment) leaves no process (its
    group is a session of its own, so nothing else would end it) and no directory."""
    done = subprocess.run(
        [sys.executable, "-c", CRASHING, *APP, str(tmp_path / "app.sock")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1 and "without closing" in done.stderr, done.stderr[-2000:]
    left = json.loads(done.stdout.strip().splitlines()[-1])
    assert _ended(left["pid"]), "the application outlived its script"
    assert not Path(left["home"]).exists() and not Path(left["clock"]).exists()


KILLED = CRASHING.replace(
    'raise SystemExit("the script fails without closing its application")',
    "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
)


def test_what_a_killed_statekit_process_left_is_swept_by_the_next(tmp_path: Path) -> None:
    """Killed outright, a statekit process runs no finalizer: its application keeps running. The next
    application process made on the host ends it and removes its directories."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED, *APP, str(tmp_path / "app.sock")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    left = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(f"/proc/{left['pid']}").exists(), "the application outlived its statekit process"
    swept = sweep_abandoned()
    assert Path(left["home"]).name in swept and Path(left["clock"]).name in swept
    assert _ended(left["pid"]), "the sweep ended the application"
    assert not Path(left["home"]).exists() and not Path(left["clock"]).exists()


def _clock_state(pid: int) -> list[str]:
    return sorted(p.name for p in Path("/dev/shm").glob(f"*faketime_*_{pid}"))


def test_libfaketimes_shared_state_goes_with_the_process(start: Start, tmp_path: Path) -> None:
    """Left behind, it would keep a later process with the same pid from sharing its clock state."""
    app = start()
    pid = app.pid
    assert pid is not None and _clock_state(pid), "libfaketime shares its state under the pid"
    app.close()
    assert _clock_state(pid) == []
    one_off = AppProcess(["/bin/true"], socket=tmp_path / "none.sock", environment=ENVIRONMENT)
    before = _all_clock_state()
    one_off.run(["/bin/sh", "-c", "echo done"], START)
    one_off.close()
    assert _left_since(before) == []


def test_its_host_name_and_environment_are_the_boundarys(start: Start) -> None:
    app = start()
    assert _get(app, "/host") == {"hostname": "statekit-world"}
    env = _get(app, "/env")
    assert set(env) - {"PWD", "SHLVL", "_"} == {  # what sh itself adds, and nothing of the caller's
        *ENVIRONMENT,
        "STATEKIT_SOCKET",
        "LD_PRELOAD",
        "FAKETIME_TIMESTAMP_FILE",
        "FAKETIME_NO_CACHE",
        "FAKETIME_DONT_FAKE_MONOTONIC",
        "FAKETIME_FORCE_MONOTONIC_FIX",
        "FAKETIME_SHARED",  # libfaketime's own (its state shared with the process's children)
    }
    assert _get(start(Boundary(hostname=None)), "/host") == {"hostname": socket.gethostname()}


def test_an_application_that_exits_at_start_is_a_clear_error(start: Start) -> None:
    said = r"exited \(3\) before serving(.|\n)*no database configured"
    before = _all_clock_state()
    with pytest.raises(statekit.ConfigError, match=said):
        start(command=["/bin/sh", "-c", "echo no database configured; exit 3"])
    assert _left_since(before) == [], "a process that exits at start leaves no libfaketime state behind"


def _all_clock_state() -> set[Path]:
    return set(Path("/dev/shm").glob("*faketime_*"))


def _left_since(before: set[Path]) -> list[str]:
    """The libfaketime state made since ``before`` whose process has exited: a leak.

    Another test process's applications (their pids unknown here) make and release state meanwhile,
    so state whose process still runs is not ours to judge.
    """
    return sorted(
        p.name for p in _all_clock_state() - before if not Path("/proc", p.name.rsplit("_", 1)[1]).exists()
    )


def test_a_missing_libfaketime_names_the_package(start: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("statekit.process_app.LIBFAKETIME", ())
    monkeypatch.delenv("STATEKIT_LIBFAKETIME", raising=False)
    with pytest.raises(statekit.ConfigError, match="apt-get install libfaketime"):
        start()


RUBY_WAITS = (  # a second of timed waits in a thread (a condition variable's, then sleep's), and their CPU
    "m = Mutex.new; cv = ConditionVariable.new; cpu = Process::CLOCK_PROCESS_CPUTIME_ID; "
    "c = Process.clock_gettime(cpu); "
    "Thread.new { 5.times { m.synchronize { cv.wait(m, 0.1) } }; 5.times { sleep 0.1 } }.join; "
    "puts Time.now.utc.strftime('%Y-%m-%d %H:%M:%S'), Process.clock_gettime(cpu) - c"
)


def test_a_one_off_command_runs_behind_the_boundary_and_its_timed_waits_sleep(tmp_path: Path) -> None:
    """Ruby (Redmine's migrations) waits on condition variables with timeouts: with libfaketime's
    monotonic fix on, each such wait returned at once and every waiting thread spun (90 s of
    migrations instead of 4). Under the boundary a second of waits costs next to no CPU."""
    process = AppProcess(["unused"], socket=tmp_path / "app.sock", environment=ENVIRONMENT)
    with process:
        printed = process.run(["ruby", "-e", RUBY_WAITS], START).split()
    now, cpu = " ".join(printed[:2]), float(printed[2])
    assert now == START.strftime("%Y-%m-%d %H:%M:%S"), "the one-off command reads statekit's clock"
    assert cpu < 0.3, f"a second of timed waits took {cpu:.2f} s of CPU: the waits spin"
    with pytest.raises(statekit.ConfigError, match=r"exited with 4:\n(.|\n)*gone"):
        process.run(["/bin/sh", "-c", "echo gone; exit 4"], START)
