"""Layer 2 for real: one container per episode from the offline-built image, ``docker exec`` per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import statekit
import statekit.kit
from statekit_examples.adapters.code_env import CodeEnvAdapter
from statekit_examples.adapters.code_env.sandbox.container import OWNER_LABEL, ContainerSession

from .conftest import (
    LINGERER,
    MEMFD_BOMB,
    NO_LINGERER,
    most_held,
    require_docker,
    require_root,
    solve,
    submit_code,
)

pytestmark = pytest.mark.docker
TASKS = ["fizzbuzz", "median"]


@pytest.fixture(scope="module")
def container_env() -> Iterator[statekit.Environment]:
    require_docker()
    with statekit.make("code_env", strategy="container", tasks=TASKS, limits={"wall_seconds": 3.0}) as env:
        yield env


def _containers() -> list[str]:
    client = statekit.kit.docker_client()
    return [c.id for c in client.containers.list(all=True, filters={"label": OWNER_LABEL})]


def test_the_pool_is_validated_in_the_container_and_the_image_is_pinned(
    container_env: statekit.Environment,
) -> None:
    adapter = container_env.adapter
    assert isinstance(adapter, CodeEnvAdapter)
    assert adapter.pool.rejected == {} and adapter.task_kinds() == TASKS
    _, info = container_env.reset(seed=1, options={"task": "median"})
    image = info["metadata"]["image"]
    assert info["metadata"]["sandbox"] == "container" and image.startswith("sha256:")
    assert statekit.kit.docker_client().images.get(image).labels["org.statekit.image"] == "code-env"


def test_a_container_per_episode_with_no_network_and_a_read_only_view(
    container_env: statekit.Environment,
) -> None:
    container_env.reset(seed=1, options={"task": "median"})
    episode = container_env._live.episode
    assert episode is not None and isinstance(episode.session, ContainerSession)  # type: ignore[attr-defined]
    container = episode.session.container  # type: ignore[attr-defined]
    container.reload()
    config = container.attrs["HostConfig"]
    assert config["NetworkMode"] == "none" and config["ReadonlyRootfs"] is True
    assert config["PidsLimit"] == 64 and config["CapDrop"] == ["ALL"]
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/tmp/work"]["RW"] is False
    before = _containers()
    container_env.reset(seed=2, options={"task": "median"})
    assert container.id not in _containers() and len(_containers()) == len(before)  # the old one is gone


def test_reference_and_doing_nothing_score_as_in_the_process_sandbox(
    container_env: statekit.Environment,
) -> None:
    for task in TASKS:
        assert solve(container_env, 5, task) == 1.0
        container_env.reset(seed=5, options={"task": task})
        assert container_env.step({"tool": "submit"})[1] == 0.0


def test_a_seeds_world_is_the_same_whichever_sandbox_serves_it(container_env: statekit.Environment) -> None:
    require_root()
    script = [{"tool": "write_file", "path": "solution.py", "content": "def median(xs):\n    return 1\n"}]
    with statekit.make("code_env", tasks=TASKS) as process_env:
        for env in (container_env, process_env):
            env.reset(seed=9, options={"task": "median"})
            env.step(script[0])
        assert container_env.state().digest == process_env.state().digest
        assert container_env.reset(seed=9)[1]["digest"] == process_env.reset(seed=9)[1]["digest"]


def test_model_code_is_contained(container_env: statekit.Environment) -> None:
    code = (
        "import os, socket, time\n"
        "def median(xs):\n"
        "    print('uid', os.getuid(), flush=True)\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(600)\n"
        "    try:\n"
        "        socket.create_connection(('1.1.1.1', 80), timeout=2)\n"
        "    except OSError as exc:\n"
        "        print('network', exc.errno, flush=True)\n"
        "    while True:\n"
        "        pass\n"
    )
    reward, tests = submit_code(container_env, 5, "median", code)
    assert reward == 0.0
    assert tests["timed_out"] is True and "uid 10001" in tests["stdout"] and "network 101" in tests["stdout"]
    container = container_env._live.episode.session.container  # type: ignore[union-attr, attr-defined]
    left = container.exec_run(["sh", "-c", "grep -l '^Uid:.*10001' /proc/[0-9]*/status | wc -l"]).output
    assert left.strip() == b"0"  # the daemon and the loop were killed after their run
    assert solve(container_env, 6, "median") == 1.0


def test_a_fork_bomb_meets_the_pid_limit(container_env: statekit.Environment) -> None:
    code = (
        "import os, time\n"
        "def median(xs):\n"
        "    n = 0\n"
        "    try:\n"
        "        while True:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(600)\n"
        "                os._exit(0)\n"
        "            n += 1\n"
        "    except OSError as exc:\n"
        "        print('forks', n, exc.strerror, flush=True)\n"
        "        return 2\n"
    )
    reward, tests = submit_code(container_env, 5, "median", code)
    assert reward == 0.125  # it returned 2 once, after the cap: one case in eight
    forks = int(tests["stdout"].split("forks ")[1].split()[0])
    assert forks < 64 and "Resource temporarily unavailable" in tests["stdout"]
    assert solve(container_env, 6, "median") == 1.0


def _run_tests(env: statekit.Environment, code: str) -> dict[str, object]:
    """Write ``code`` as the visible tests and run them in the episode's container."""
    env.step({"tool": "write_file", "path": "test_visible.py", "content": code})
    observation, *_ = env.step({"tool": "run_tests"})
    return observation


def test_a_daemon_that_kills_its_wrapper_is_gone_before_the_next_run(
    container_env: statekit.Environment,
) -> None:
    """The wrapper's closing ``kill -KILL -1`` runs as the model's uid, so the model can kill the
    wrapper first; the reaper, a separate exec, then kills the daemon the wrapper would have."""
    container_env.reset(seed=5, options={"task": "median"})
    session = container_env._live.episode.session  # type: ignore[union-attr, attr-defined]
    first = _run_tests(container_env, LINGERER)
    assert "lingerer running" in str(first["stdout"]), first
    assert str(first["stdout"]).count("\nkilled ") == 2, first  # the shell, then timeout: nothing ran on
    later = _run_tests(container_env, NO_LINGERER)
    assert "no lingerer" in str(later["stdout"]), later
    assert session.replaced == 0  # the reaper cleaned the container; it was not replaced


def test_a_memfd_bomb_is_held_by_the_containers_memory_limit(container_env: statekit.Environment) -> None:
    """48 memfds of 14 MiB (672 MiB) against the container's 512 MiB: held, and the next episode
    in the same environment is unharmed."""
    container_env.reset(seed=5, options={"task": "median"})
    observation = _run_tests(container_env, MEMFD_BOMB.replace("MIB", "14"))
    assert 0 < most_held(str(observation["stdout"])) < 512, observation
    assert solve(container_env, 6, "median") == 1.0


def test_no_user_namespace_can_be_made_in_the_container(container_env: statekit.Environment) -> None:
    container_env.reset(seed=5, options={"task": "median"})
    code = (
        "import ctypes\n"
        "def test_unshare():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
    )
    observation = _run_tests(container_env, code)
    assert "unshare -1 1\n" in str(observation["stdout"]), observation  # EPERM: Docker's seccomp profile
