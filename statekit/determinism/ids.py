"""Seeded ids and randomness, patched beneath the names applications bind.

An application may write ``uuid.uuid4()``, ``from uuid import uuid4``, ``default=uuid.uuid4`` (bound
when its models are imported), ``secrets.token_hex()`` or ``random.SystemRandom()``: swapping those
names would miss every copy bound before the swap. So, while active, this control replaces what
they all call at call time (read from CPython 3.11's ``Lib/uuid.py``, ``Lib/random.py``,
``Lib/secrets.py``, ``Lib/tempfile.py``):

- ``os.urandom``: ``uuid.uuid4`` is ``UUID(bytes=os.urandom(16), version=4)``, looked up on the ``os``
  module at each call. Its stream is the one ids always had (``uuid:{purpose}:{seed}``, bytes in
  big-endian order), so uuid4 ids are the same as before this control moved beneath the name.
- ``random._urandom``: ``random.SystemRandom``'s ``random``, ``getrandbits`` and ``randbytes`` call
  this module global (``from os import urandom as _urandom``, bound when ``random`` was imported, so
  patching ``os.urandom`` alone would miss it). ``secrets`` draws everything from a module-level
  ``SystemRandom()`` (``token_bytes/hex/urlsafe``, ``randbits``, ``choice``, ``randbelow``), and so do
  numpy's unseeded ``default_rng()`` (through ``secrets.randbits``) and anything else built on it. A
  second stream (``entropy:{purpose}:{seed}``), so a token drawn does not renumber later ids.
- the global ``random`` state, swapped in and out (``random.random``, ``from random import choice``:
  all bound methods of one hidden instance).
- ``random.Random.seed`` and ``random.seed`` with no seed: CPython seeds those from the OS in C,
  beneath ``os.urandom``. The global instance draws its seed from the second stream; any other
  generator (``random.Random()``, an application's ``self.rng``) gets one derived from where it was
  made (module, function, line, and how many were made there in this call's controls), so a
  generator made in a step has the same state whether or not other episodes ran before.
- generators an application keeps (``HeldGenerators``): one made in a controlled call of an
  environment (when the application was attached to a world, at an episode's start, in a step) is
  remembered, and re-seeded the same way at every episode's start. An application kept warm across
  episodes (``Adapter.attach``, the ``rewind`` strategy) therefore starts each episode with the
  generators a cold one would have; a fork carries their states.
- ``tempfile``'s name sequence: reset so temporary file names come from a seeded ``Random()``.

Outside ``active()`` nothing is patched and the caller's ``random`` state is given back, so the
trainer's randomness between steps is untouched. While active the patches are process-wide (like
the clock): another thread drawing entropy at that moment draws from the episode's streams, which
is why statekit's own ids and draws (episodes, sessions, snapshots, a cache holder, a dropped
golden's name in the trash, a seedless reset's seed) come from ``statekit.entropy`` instead: a
cache holder's id drawn from an episode's stream would repeat across sessions, and one session's
close would release another's leases.
"""

from __future__ import annotations

import operator
import os
import random
import sys
import tempfile
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, SupportsIndex

from statekit.determinism.base import Control
from statekit.entropy import true_token

_RANDOM_SEED = random.Random.seed
if not hasattr(random, "_urandom"):  # pragma: no cover - every CPython from 3.2 to 3.13 has it
    raise ImportError("random._urandom is missing: the ids control needs CPython's random module")


class _Stream:
    """Seeded bytes with ``os.urandom``'s signature."""

    def __init__(self, label: str) -> None:
        self.rng = random.Random(label)

    def __call__(self, size: SupportsIndex) -> bytes:
        n = operator.index(size)
        if n < 0:
            raise ValueError("negative argument not allowed")
        return self.rng.getrandbits(8 * n).to_bytes(n, "big") if n else b""


def _site() -> str:
    """Where the generator being seeded was made: the first frame outside ``random`` and this module
    (module, function and line: the same on every machine, unlike a file path)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename in _SKIPPED:
        frame = frame.f_back
    return f"{frame.f_globals.get('__name__')}:{frame.f_code.co_qualname}:{frame.f_lineno}"


_SKIPPED = frozenset({random.__file__, __file__})


HeldStates = tuple[str, list[tuple[int, str, Any]]]
"""A ``HeldGenerators``' token and ``(number, key, state)`` of each generator it holds."""
IdsState = tuple[Any, Any, Any, HeldStates, dict[str, int]]
"""The ids control's saved state: its two streams, the global ``random`` state, the held generators'
states and how many generators each site made."""


class HeldGenerators:
    """``random.Random`` instances an application made under one environment's controls, by the key
    they were seeded with (see the module docstring). Holds them weakly: a dropped one is forgotten."""

    def __init__(self) -> None:
        self._held: weakref.WeakKeyDictionary[random.Random, tuple[int, str]] = weakref.WeakKeyDictionary()
        self._next = 0
        self.token = true_token(8)
        """Names this set in saved states: a state saved from it is matched by number, not by key."""

    def add(self, rng: random.Random, key: str) -> None:
        if rng not in self._held:
            self._held[rng] = (self._next, key)
            self._next += 1

    def reseed(self, label: str) -> None:
        """Every held generator as if made now, under ``label``'s controls."""
        for rng, (_, key) in list(self._held.items()):
            _RANDOM_SEED(rng, f"{label}:{key}")

    def states(self) -> HeldStates:
        """This set's token and ``(number, key, state)`` of each held generator, oldest first."""
        held = sorted(self._held.items(), key=lambda h: h[1][0])
        return self.token, [(number, key, rng.getstate()) for rng, (number, key) in held]

    def set_states(self, saved: HeldStates) -> None:
        """Give each held generator its saved state: by number when saved from this very set (a fork,
        where warm apps of several worlds made generators at one site), else by the key of where it
        was made, since numbers are one process's order (an exported episode); where several share
        a key there, the latest made take the latest saved."""
        token, states = saved
        if token == self.token:
            by_number = {number: state for number, _, state in states}
            for rng, (number, _) in list(self._held.items()):
                if number in by_number:
                    rng.setstate(by_number[number])
            return
        by_key: dict[str, list[Any]] = {}
        for _, key, state in states:
            by_key.setdefault(key, []).append(state)
        for rng, (_, key) in sorted(self._held.items(), key=lambda h: -h[1][0]):
            if by_key.get(key):
                rng.setstate(by_key[key].pop())


class SeededIds(Control):
    """Two byte streams and a ``random`` state, all derived from ``(purpose, seed)``; ``held``: the
    environment's generators, re-seeded when an episode's controls first apply (see the module)."""

    name: ClassVar[str] = "ids"

    def __init__(self, seed: int, purpose: str = "episode", *, held: HeldGenerators | None = None) -> None:
        self._label = f"held:{purpose}:{seed}"
        self._os = _Stream(f"uuid:{purpose}:{seed}")
        self._entropy = _Stream(f"entropy:{purpose}:{seed}")
        self._global = random.Random(f"random:{purpose}:{seed}").getstate()
        self._held = held if held is not None else HeldGenerators()
        self._sites: Counter[str] = Counter()
        self._started = purpose != "episode"  # only an episode's start re-seeds what the app holds

    def _seed(self) -> Callable[..., None]:
        entropy, held, sites, label = self._entropy, self._held, self._sites, self._label
        global_instance = random._inst

        def seed(rng: random.Random, a: Any = None, version: int = 2) -> None:
            if a is None and rng is global_instance:  # CPython would seed from the OS in C
                a = int.from_bytes(entropy(32), "big")
            elif a is None:  # a generator of the application's: keyed by where it was made
                site = _site()
                key = f"{site}#{sites[site]}"
                sites[site] += 1
                held.add(rng, key)
                a, version = f"{label}:{key}", 2
            _RANDOM_SEED(rng, a, version)

        return seed

    def save(self) -> IdsState:
        streams = self._os.rng.getstate(), self._entropy.rng.getstate(), self._global
        return (*streams, self._held.states(), dict(self._sites))

    def load(self, state: IdsState) -> None:
        self._os.rng.setstate(state[0])
        self._entropy.rng.setstate(state[1])
        self._global = state[2]
        self._held.set_states(state[3])
        self._sites = Counter(state[4])  # a generator made later at a site gets the key it would have
        self._started = True  # a fork continues the held generators; it does not re-seed them

    @contextmanager
    def active(self) -> Iterator[None]:
        if not self._started:
            self._started = True
            self._held.reseed(self._label)
        saved = (os.urandom, random._urandom, random.seed, tempfile._name_sequence)  # type: ignore[attr-defined]
        callers_random = random.getstate()
        os.urandom = self._os
        random._urandom = self._entropy  # type: ignore[attr-defined]
        setattr(random.Random, "seed", self._seed())  # noqa: B010 - a method: mypy refuses assignment
        random.seed = random._inst.seed
        tempfile._name_sequence = None  # type: ignore[attr-defined]
        random.setstate(self._global)
        try:
            yield
        finally:
            self._global = random.getstate()
            random.setstate(callers_random)
            setattr(random.Random, "seed", _RANDOM_SEED)  # noqa: B010
            os.urandom, random._urandom, random.seed, tempfile._name_sequence = saved  # type: ignore[attr-defined]
