"""The files digest: one canonical row per entry, in byte order, blind to owners, modes and times."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from statekit.digest.compute import combine, hash_rows
from statekit.digest.files import file_rows, file_tables
from statekit.errors import SpecError


def _tree(root: Path) -> Path:
    (root / "a-b").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "a" / "z.txt").write_bytes(b"zed")
    (root / "empty").mkdir()
    (root / "link").symlink_to("a/z.txt")
    return root


def test_rows_are_sorted_by_path_bytes_and_describe_each_entry(tmp_path: Path) -> None:
    rows = list(file_rows(_tree(tmp_path / "t")))
    assert rows == [
        {"path": "a", "type": "dir"},
        {"path": "a-b", "type": "dir"},  # sorted as whole paths: "a-b" < "a/z.txt" ('-' < '/')
        {"path": "a/z.txt", "type": "file", "size": 3, "sha256": hashlib.sha256(b"zed").hexdigest()},
        {"path": "empty", "type": "dir"},
        {"path": "link", "type": "symlink", "target": "a/z.txt"},
    ]


def test_metadata_does_not_change_the_digest_but_content_does(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    before = file_tables({"uploads": root})
    os.chmod(root / "a" / "z.txt", 0o600)
    os.utime(root / "a" / "z.txt", (0, 0))
    assert file_tables({"uploads": root}) == before
    (root / "a" / "z.txt").write_bytes(b"ZED")
    assert file_tables({"uploads": root}) != before
    (root / "a" / "z.txt").write_bytes(b"zed")
    (root / "empty").rmdir()
    assert file_tables({"uploads": root}) != before


def test_tables_are_named_and_merge_into_a_digest(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    tables = file_tables({"uploads": root})
    assert tables == {"files:uploads": hash_rows(file_rows(root))}
    assert tables["files:uploads"].rows == 5
    assert "files:uploads" in combine(tables).as_dict()["tables"]


def test_special_files_are_refused_by_name(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "app.sock"))
        with pytest.raises(SpecError, match=r"app\.sock is a device, socket or pipe"):
            list(file_rows(root))


def test_a_missing_directory_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not a directory"):
        list(file_rows(tmp_path / "nope"))
