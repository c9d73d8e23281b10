"""CowFilesystem on real filesystems: the public contract suite for every method, crashes, auto choice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from statekit.digest.files import file_rows
from statekit.errors import ConfigError, ResetError, RewindError
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.cow_fs import CowFilesystem, filesystem_type, mounts_under
from statekit.strategies.prewarmed import Prewarmed
from statekit.testing.strategies import REWIND_CHECKS, STRATEGY_CHECKS, Probe
from tests.strategies.conftest import CASES, case_id, make_cow, unavailable

REPO = Path(__file__).resolve().parents[2]


def _build(world: World) -> None:
    root = Path(world.location)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.bin").write_bytes(bytes(range(256)) * 64)
    (root / "empty").mkdir()
    (root / "link").symlink_to("a.txt")


def _mutate(world: World) -> None:
    root = Path(world.location)
    with (root / "a.txt").open("a") as f:
        f.write("more\n")
    (root / "sub" / "b.bin").unlink()  # on overlay this is a whiteout over the golden's file
    (root / "new").mkdir()
    (root / "new" / "c.txt").write_text("gamma\n")
    (root / "link").unlink()
    (root / "link").symlink_to("sub")  # same path, another target
    (root / "a.txt").chmod(0o600)
    (root / "empty").rmdir()


FILES_PROBE = Probe(build=_build, mutate=_mutate, read=lambda w: list(file_rows(w.location)))

cases = pytest.mark.parametrize(("fs_root", "method"), CASES, indirect=["fs_root"], ids=map(case_id, CASES))


@cases
@pytest.mark.parametrize(
    "check", [*STRATEGY_CHECKS, *REWIND_CHECKS], ids=lambda c: c.__name__.removeprefix("check_")
)
def test_contract(check: Callable[[ResetStrategy, Probe], None], fs_root: Path, method: str) -> None:
    strategy = make_cow(fs_root, method)
    assert strategy.name == f"cow({method})"
    try:
        check(strategy, FILES_PROBE)
    finally:
        strategy.close()
        strategy.close()  # close() is safe twice
    assert mounts_under(fs_root) == [], "close() must unmount everything"
    assert os.listdir(fs_root / "copies") == []


@pytest.mark.parametrize("check", STRATEGY_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_contract_prewarmed(check: Callable[[ResetStrategy, Probe], None], tmp_path: Path) -> None:
    """A pool restores from its own thread while the caller discards: the same contract must hold."""
    inner = make_cow(tmp_path / "cow", "auto")
    with Prewarmed(inner, depth=2) as strategy:
        check(strategy, FILES_PROBE)
    assert mounts_under(tmp_path / "cow") == []
    assert os.listdir(tmp_path / "cow" / "copies") == []


@cases
def test_close_discards_live_copies(fs_root: Path, method: str) -> None:
    strategy = make_cow(fs_root, method)
    strategy.capture("k1", FILES_PROBE.build)
    worlds = [strategy.restore("k1") for _ in range(3)]
    strategy.close()
    assert not any(os.path.exists(w.location) for w in worlds)
    assert mounts_under(fs_root) == []
    assert os.listdir(fs_root / "upper") == []


@cases
def test_same_state_same_digest_whatever_the_method(fs_root: Path, method: str, tmp_path: Path) -> None:
    """A copy's digest does not depend on how it was made (owners, times and modes are not digested)."""
    reference = CowFilesystem(tmp_path / "reference", method="copy")
    strategy = make_cow(fs_root, method)
    with reference, strategy:
        for s in (reference, strategy):
            s.capture("k1", FILES_PROBE.build)
        expected, got = reference.restore("k1"), strategy.restore("k1")
        assert FILES_PROBE.read(got) == FILES_PROBE.read(expected)
        FILES_PROBE.mutate(got)
        FILES_PROBE.mutate(expected)
        assert FILES_PROBE.read(got) == FILES_PROBE.read(expected)


def _tree(root: str) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``root``: its kind, permission bits and content (or link target)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if os.path.islink(path):
                entry = ("link", 0, os.readlink(path))
            elif os.path.isdir(path):
                entry = ("dir", st.st_mode & 0o7777, "")
            else:
                entry = ("file", st.st_mode & 0o7777, Path(path).read_bytes().hex())
            out[os.path.relpath(path, root)] = entry
    return out


def _replace_dir(world: World) -> None:
    """A directory removed and made again: on overlay, an opaque one hiding the golden's entries."""
    root = Path(world.location)
    for entry in (root / "sub").iterdir():
        entry.unlink()
    (root / "sub").rmdir()
    (root / "sub").mkdir(mode=0o700)
    (root / "sub" / "d.txt").write_text("delta\n")
    (root / "a.txt").rename(root / "renamed.txt")


@cases
def test_changes_read_from_one_copy_bring_another_to_the_same_tree(fs_root: Path, method: str) -> None:
    with make_cow(fs_root, method) as strategy:
        strategy.capture("k1", FILES_PROBE.build)
        source, other = strategy.restore("k1"), strategy.restore("k1")
        golden = _tree(other.location)
        FILES_PROBE.mutate(source)
        _replace_dir(source)
        if method == "btrfs":
            with pytest.raises(RewindError, match="btrfs"):
                strategy.changes(source)
            return
        changes = json.loads(json.dumps(strategy.changes(source)))  # as it travels
        strategy.apply_changes(other, changes)
        assert _tree(other.location) == _tree(source.location)
        assert FILES_PROBE.read(other) == FILES_PROBE.read(source)
        strategy.rewind(other)
        assert _tree(other.location) == golden
        for escape in ("../outside.txt", "/etc/statekit-test", "link/../../x"):
            with pytest.raises(RewindError, match="not a path inside the copy"):
                strategy.apply_changes(other, [["file", escape, 0o644, ""]])
        with pytest.raises(RewindError, match="not a path inside the copy"):  # a link made on the way
            escape = [["link", "out", "/tmp"], ["file", "out/statekit-escape", 0o600, ""]]
            strategy.apply_changes(other, escape)
        assert not os.path.lexists("/tmp/statekit-escape")
        strategy.rewind(other)
        assert _tree(other.location) == golden
        strategy.apply_changes(other, [["file", "link", 0o640, "eA=="]])  # the golden's link -> a.txt
        assert Path(other.location, "a.txt").read_text() == "alpha\n", "written through the link"
        assert _tree(other.location)["link"] == ("file", 0o640, "78")


@pytest.mark.parametrize(
    ("fs_root", "expected"), [("xfs", "reflink"), ("btrfs", "btrfs")], indirect=["fs_root"]
)
def test_auto_picks_the_cheapest_method_that_works(fs_root: Path, expected: str) -> None:
    with make_cow(fs_root, "auto") as strategy:
        assert isinstance(strategy, CowFilesystem)
        assert (strategy.method, strategy.name) == (expected, f"cow({expected})")


def test_auto_on_the_default_filesystem_says_why_it_passed_over_a_method(tmp_path: Path) -> None:
    if filesystem_type(tmp_path) == "btrfs":
        pytest.skip("the default filesystem is btrfs: nothing is passed over")
    strategy = make_cow(tmp_path / "cow", "auto")
    with strategy:
        assert "btrfs" in strategy.rejected
        assert "not a btrfs filesystem" in strategy.rejected["btrfs"]


def test_an_unsupported_method_is_a_config_error_saying_what_it_needs(tmp_path: Path) -> None:
    if filesystem_type(tmp_path) == "btrfs":
        pytest.skip("the default filesystem is btrfs")
    with pytest.raises(ConfigError, match=r"method 'btrfs' does not work at .*btrfs-progs.*method='auto'"):
        CowFilesystem(tmp_path / "cow", method="btrfs")
    with pytest.raises(ConfigError, match="unknown CowFilesystem method 'zfs'"):
        CowFilesystem(tmp_path / "cow", method="zfs")


@pytest.mark.parametrize("fs_root", ["default"], indirect=True)
def test_dropping_a_golden_keeps_mounted_overlay_copies_readable(fs_root: Path) -> None:
    """Deleting an overlay's lower layer would empty its copies: drop() defers it to the last unmount."""
    strategy = make_cow(fs_root, "overlay")
    with strategy:
        strategy.capture("k1", FILES_PROBE.build)
        world = strategy.restore("k1")
        before = FILES_PROBE.read(world)
        strategy.drop("k1")
        assert not strategy.has("k1")
        assert FILES_PROBE.read(world) == before
        assert len(os.listdir(fs_root / "trash")) == 1
        strategy.discard(world)
        assert os.listdir(fs_root / "trash") == []


def test_discard_refuses_a_world_it_did_not_make(tmp_path: Path) -> None:
    with (
        CowFilesystem(tmp_path / "cow", method="copy") as strategy,
        pytest.raises(ResetError, match="not restored by a CowFilesystem"),
    ):
        strategy.discard(World(id="../../etc", location="/etc"))


_CRASHER = """
import json, sys, threading, time
from pathlib import Path
from statekit.strategies.cow_fs import CowFilesystem

strategy = CowFilesystem(sys.argv[1], method=sys.argv[2])
strategy.capture("k1", lambda w: (Path(w.location) / "a.txt").write_text("golden"))
copies = [strategy.restore("k1").location for _ in range(3)]
building = threading.Event()

def build_forever(world):
    (Path(world.location) / "half.txt").write_text("half-built")
    building.set()
    time.sleep(3600)

threading.Thread(target=strategy.capture, args=("k2", build_forever), daemon=True).start()
building.wait()
print(json.dumps({"copies": copies}), flush=True)
time.sleep(3600)
"""


@cases
def test_a_killed_process_leaves_nothing_after_the_next_start(fs_root: Path, method: str) -> None:
    """SIGKILL mid-episode and mid-build: the next CowFilesystem on the root unmounts and deletes it all."""
    make_cow(fs_root, method).close()  # skip/fail here, not in the child, if the method is unavailable
    child = subprocess.Popen(
        [sys.executable, "-c", _CRASHER, str(fs_root), method], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line:
            unavailable(f"the child process failed before restoring (exit {child.wait()})")
        copies = json.loads(line)["copies"]
        assert all(os.path.isdir(c) for c in copies)
        if method == "overlay":
            assert sorted(mounts_under(fs_root)) == sorted(copies)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()  # reaped: a zombie's pid still looks alive
    half_built = os.listdir(fs_root / "building")
    assert len(half_built) == 1

    after = CowFilesystem(fs_root, method=method)
    with after:
        assert sorted(after.swept) == sorted([*(os.path.basename(c) for c in copies), *half_built])
        assert mounts_under(fs_root) == []
        for folder in ("copies", "upper", "building"):
            assert os.listdir(fs_root / folder) == [], f"{folder}/ still holds orphans"
        assert after.has("k1"), "the golden is the cache: a crash must not remove it"
        assert not after.has("k2"), "a half-built golden must never be published"
        world = after.restore("k1")
        assert (Path(world.location) / "a.txt").read_text() == "golden"
