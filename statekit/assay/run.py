"""``statekit assay``: the three questions of document 000 (the engine brief), asked of any adapter
before anything ships.

1. May the application and everything shipped with it be redistributed? The adapter's own
   distribution and the Python closure it runs; with an image strategy (``container``), instead of
   the host's closure, what is inside the image: every Debian package and every installed wheel.
2. Whose data is in the fixtures? The adapter's ``fixture_sources()``.
3. May the recorded responses ship? Every host in the adapter's ``cassettes()`` needs provenance,
   and no cassette may hold a credential (or, unconfirmed, personal data).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statekit.adapter import Adapter, resolve_adapter
from statekit.assay import debian, fixtures, leaks, python_dists, traffic
from statekit.assay.image import DIST_METADATA, read_files
from statekit.assay.policy import Policy
from statekit.assay.report import AssayReport, Finding, Shipped
from statekit.capabilities import AssayHooks, capability, replay_control
from statekit.container_mode import adapter_for
from statekit.errors import ConfigError
from statekit.strategies.base import ResetStrategy

IMAGE_STRATEGIES = ("container",)
"""Strategies whose worlds run from an image: what ships is the image's content, not the host's."""
STATEKIT = "statekit"


def _images(strategy: ResetStrategy) -> list[str]:
    """The image ids a strategy (or the parts of a composite) starts its worlds from."""
    image = getattr(strategy, "image_id", None)
    found = [str(image)] if image else []
    for part in getattr(strategy, "parts", {}).values():
        found += _images(part)
    return found


def _application(adapter: Adapter) -> list[str]:
    """The distributions the adapter's code comes from, plus statekit (which runs it)."""
    return sorted({*python_dists.distribution_of(type(adapter).__module__), STATEKIT})


def _shipped_from_images(adapter: Adapter, name: str) -> tuple[list[Shipped], list[str]]:
    from statekit.strategies.container import docker_client

    strategy = adapter.make_strategy(name)
    try:  # the strategy's own images, and those the adapter says its application runs in
        images = _images(strategy) + capability(adapter, AssayHooks).shipped_images(name)
    finally:
        strategy.close()
    if not images:
        raise ConfigError(f"adapter {adapter.name!r}: strategy {name!r} names no image to assay")
    client = docker_client()
    found: list[Shipped] = []
    for image in images:
        content = read_files(client, image, lambda p: debian.wanted(p) or bool(DIST_METADATA.fullmatch(p)))
        wheels = {p: b for p, b in content.files.items() if DIST_METADATA.fullmatch(p)}
        found += debian.shipped(content.files, content.doc_links)
        found += python_dists.from_metadata_files(wheels)
    return found, images


def assay(
    adapter: Adapter | str, *, strategy: str | None = None, policy: Policy | None = None
) -> AssayReport:
    """Assay ``adapter`` as it would ship with ``strategy`` (default: its first) under ``policy``."""
    policy = policy or Policy.load()
    resolved = resolve_adapter(adapter)
    try:
        name = strategy or resolved.strategies[0]
        if name not in resolved.strategies:
            raise ConfigError(
                f"adapter {resolved.name!r} offers strategies {list(resolved.strategies)}, not {name!r}"
            )
        report = AssayReport(adapter=resolved.name, strategy=name, policy=policy.source)
        roots = _application(resolved)
        if not python_dists.distribution_of(type(resolved).__module__):
            report.findings.append(
                Finding(
                    "licence",
                    type(resolved).__module__,
                    "unknown",
                    "the adapter's module belongs to no installed distribution, so its licence "
                    "cannot be read: install it (pip install -e .) with License-Expression in its metadata",
                )
            )
        apps, deps = python_dists.closure(roots)
        shipped: list[Shipped] = list(apps)
        if name in IMAGE_STRATEGIES:
            inside, report.images = _shipped_from_images(adapter_for(resolved, name), name)
            shipped += inside
        else:
            shipped += deps
        report.components = [policy.judge(item) for item in shipped]
        report.findings += [
            Finding(
                "licence",
                f"{c.kind}:{c.name} {c.version}".strip(),
                c.verdict,
                f"{c.licence or 'no licence'}: {c.reason}",
            )
            for c in report.components
            if c.verdict != "yes"
        ]
        hooks = resolved if isinstance(resolved, AssayHooks) else None
        sources = hooks.fixture_sources() if hooks else []
        report.fixtures, found = fixtures.assess(sources, resolved.name, policy)
        report.findings += found
        cassettes = sorted(Path(p) for p in (hooks.cassettes() if hooks else []))
        recorded: dict[Path, Any] = {path: traffic.read_cassette(path) for path in cassettes}
        report.cassettes = [traffic.label(p) for p in cassettes]
        report.hosts, found = traffic.assess(cassettes, recorded, resolved.name, replay_control(resolved))
        report.findings += found
        report.findings += leaks.scan(recorded, policy)
        return report
    finally:
        resolved.close()
