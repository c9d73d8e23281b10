"""Test infrastructure for statekit and for adapter authors' own suites.

- ``ledger``: a complete in-memory adapter (the smallest example of one; the core's fast tests use it);
- ``strategies``: the public contract suite every reset strategy must pass (``REWIND_CHECKS``);
- ``database``: a database's full logical state, to prove a rewind restored every row and sequence;
- ``loopfs``: loop-device filesystems (XFS, btrfs) for the copy-on-write tests.

The checker itself is ``statekit.checks``.
"""
