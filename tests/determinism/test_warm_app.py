"""Controls on an application kept warm across episodes (``Adapter.attach`` and the ``rewind``
strategy): the generator it made when it started is re-seeded at every episode's start, what it made
then was seeded, and a fork carries the generator's state. Proved by removing the ids control."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import statekit
from statekit.determinism.clock import epoch_for
from statekit.determinism.controls import Controls, ControlsState
from statekit.determinism.host import HOSTNAME
from statekit.determinism.ids import HeldGenerators
from statekit.strategies.rewinding import Rewinding
from statekit.transfer import _decode, _encode

from .wild_app import WildAdapter

SCRIPT = [{"tool": "raffle"}, {"tool": "order", "item": "tea"}, {"tool": "raffle"}]


def play(env: statekit.Environment, seed: int) -> list[Any]:
    env.reset(seed=seed)
    return [env.step(action)[0] for action in SCRIPT]


def test_a_warm_app_is_reseeded_every_episode() -> None:
    """Seed 5, then 6, then 5 again on one warm shop: the same as a cold environment's seed 5."""
    adapter = WildAdapter(rewind=True)
    with statekit.make(adapter) as env:
        first, other, again = play(env, 5), play(env, 6), play(env, 5)
        assert isinstance(env.strategy, Rewinding) and env.strategy.stats.rewound >= 1
    assert adapter.attached == 2, "one shop per seed's world, kept warm across that seed's episodes"
    with statekit.make(WildAdapter()) as cold_env:
        cold = play(cold_env, 5)
    assert first == again == cold
    assert first[0]["ticket"] != first[2]["ticket"]
    assert first[0]["ticket"] != other[0]["ticket"], "the shop's generator ignores the seed"


def test_without_the_ids_control_a_warm_app_carries_its_generator_on() -> None:
    with statekit.make(WildAdapter(rewind=True), disable_controls=("ids",)) as env:
        first, again = play(env, 5), play(env, 5)
    assert first[0]["ticket"] != again[0]["ticket"]


def test_the_app_starts_under_the_seeds_controls() -> None:
    """What the shop reads when it opens (the time, the host) is the seed's, not the machine's."""
    with statekit.make(WildAdapter(rewind=True)) as env:
        env.reset(seed=5)
        shop = env.step({"tool": "raffle"})[0]
    assert shop["opened"] == epoch_for(5).isoformat()
    assert shop["host"] == HOSTNAME


def test_a_fork_carries_the_warm_apps_generator() -> None:
    with statekit.make(WildAdapter(rewind=True)) as env:
        env.reset(seed=5)
        env.step({"tool": "raffle"})
        fork = env.snapshot()
        after = env.step({"tool": "raffle"})[0]
        env.step({"tool": "raffle"})
        env.restore(fork)
        again = env.step({"tool": "raffle"})[0]
    assert after == again


def test_a_fork_restored_after_another_seeds_episode_carries_its_own_apps_generator() -> None:
    """Two warm apps made their generators at one site (one per seed's world): a fork's restore gives
    back its own app's state, not the other's."""
    with statekit.make(WildAdapter(rewind=True)) as env:
        env.reset(seed=5)
        env.step({"tool": "raffle"})
        fork = env.snapshot()
        after = env.step({"tool": "raffle"})[0]
        play(env, 6)  # the other seed's world and its warm app, made later at the same site
        env.restore(fork)
        assert env.step({"tool": "raffle"})[0] == after


def _generator() -> random.Random:
    return random.Random()  # made here, so every generator made by this line shares its site


def test_the_controls_state_moves_to_another_process_by_where_generators_were_made() -> None:
    """What an exported episode carries: held generators matched by the site that made them (not by
    the order they were made in one process), and how many each site made."""
    here, there = HeldGenerators(), HeldGenerators()
    source = Controls(5, held=here)
    with source.active():
        app = _generator()  # the application's own, made at its start
        app.random()
    with Controls(9, held=there).active():
        random.Random()  # another generator made first there: numbers differ between the processes
        moved_app = _generator()
    state = source.save()
    travelled = ControlsState(
        tuple((name, _decode(json.loads(json.dumps(_encode(value))))) for name, value in state.states)
    )
    target = Controls(5, held=there)
    target.load(travelled)
    with source.active():
        later = _generator()  # a second generator made at the same site, after the move
        expected = [app.random(), later.random(), uuid.uuid4()]
    with target.active():
        moved_later = _generator()
        assert [moved_app.random(), moved_later.random(), uuid.uuid4()] == expected
