"""Fixed host identity: a world built or an episode played on any machine, by any user, sees the
same host name, user name and kernel.

The set, and what each covers (while active, process-wide, like the clock):

- host name: ``socket.gethostname`` (and through it ``socket.getfqdn``), ``os.uname().nodename``,
  ``platform.node()``/``platform.uname()``/``platform.platform()`` (platform caches ``uname``, so its
  caches are swapped, which also catches ``from platform import node``), and ``uuid.getnode()``, the
  MAC address ``uuid1`` puts in every id (a fixed node with the multicast bit set, as RFC 4122 says
  for a node that is not a MAC; libuuid's own ``uuid1``, which reads the MAC in C, is switched off).
- kernel build: ``os.uname()``'s ``release`` and ``version`` differ from machine to machine; its
  ``sysname`` and ``machine`` are kept (programs may rightly depend on them).
- user name: ``USER`` and ``LOGNAME`` as Python sees the environment (``os.environ``), which is what
  ``getpass.getuser()`` reads first, so ``from getpass import getuser`` is caught too; and
  ``os.getlogin``. The C-level environment is left alone (``setenv`` racing ``getenv`` in other threads
  can crash a process), so child processes inherit the real variables.

Not covered: names bound from C modules before activation (``from socket import gethostname``,
``from os import uname``), ``pwd.getpwuid(os.getuid())`` (the password database), ``HOME`` (paths
the application needs), and anything a child process or C library asks the kernel itself.
"""

from __future__ import annotations

import os
import platform
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from statekit.determinism.base import Control

HOSTNAME = "statekit"
USER = "statekit"
KERNEL_RELEASE = "statekit"
KERNEL_VERSION = "#1 statekit"
NODE = 0x017374617465
"""uuid1's node: the multicast bit (lowest bit of the first octet) set, then ``b"state"``."""
USER_VARIABLES = ("USER", "LOGNAME")

_REAL_UNAME = os.uname


def _fixed_uname() -> os.uname_result:
    real = _REAL_UNAME()
    return os.uname_result((real.sysname, HOSTNAME, KERNEL_RELEASE, KERNEL_VERSION, real.machine))


def _gethostname() -> str:
    return HOSTNAME


def _getlogin() -> str:
    return USER


class HostIdentity(Control):
    """Host name, kernel build and user name fixed (see the module docstring for the set)."""

    name: ClassVar[str] = "host"

    @contextmanager
    def active(self) -> Iterator[None]:
        fixed = _fixed_uname()
        env: Any = os.environ
        data: dict[bytes, bytes] = env._data  # Python's view only: no setenv (see the docstring)
        keys = [env.encodekey(name) for name in USER_VARIABLES]
        saved_env = {key: data.get(key) for key in keys}
        saved = (
            socket.gethostname,
            os.uname,
            os.getlogin,
            platform._uname_cache,  # type: ignore[attr-defined]
            platform._platform_cache,  # type: ignore[attr-defined]
            uuid._node,  # type: ignore[attr-defined]
            uuid._generate_time_safe,  # type: ignore[attr-defined]
        )
        socket.gethostname = _gethostname
        os.uname = lambda: fixed
        os.getlogin = _getlogin
        platform._uname_cache = platform.uname_result(  # type: ignore[attr-defined]
            fixed.sysname, fixed.nodename, fixed.release, fixed.version, fixed.machine
        )
        platform._platform_cache = {}  # type: ignore[attr-defined]
        uuid._node = NODE  # type: ignore[attr-defined]
        uuid._generate_time_safe = None  # type: ignore[attr-defined] # libuuid reads the real MAC
        for key in keys:
            data[key] = env.encodevalue(USER)
        try:
            yield
        finally:
            for key, value in saved_env.items():
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
            (
                socket.gethostname,
                os.uname,
                os.getlogin,
                platform._uname_cache,  # type: ignore[attr-defined]
                platform._platform_cache,  # type: ignore[attr-defined]
                uuid._node,  # type: ignore[attr-defined]
                uuid._generate_time_safe,  # type: ignore[attr-defined]
            ) = saved
