"""Outbound HTTP replayed from vcrpy cassettes: no egress inside an episode.

In an episode the record mode is ``none``: every outbound request is answered from the cassette or
fails inside the process (vcrpy intercepts httpx before a socket is opened). Misses are collected
so the adapter can turn them into an error observation that names the request and the nearest
recorded one.

Recording is statekit's, keyed by service: ``statekit record`` starts an adapter's live services
(``LiveServices``: ``{service: live URL}``) and makes the environment with ``EnvSpec(services=...,
record=True)``. Requests to each live base URL are rewritten to that service's canonical base
(``canonical_url(service)``) so cassettes do not depend on the port a service happened to listen on,
and credentials are scrubbed before anything is written. ``episode_replay`` gives an adapter the
replay its episodes run under, from its settings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from unittest import mock

import vcr
from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.patch import CassettePatcherBuilder

from statekit.contract import canonical_url
from statekit.determinism.base import Control, Violation
from statekit.web_app import BASE_URL as _BINDS_HTTPX_FIRST  # noqa: F401 - see web_app

if TYPE_CHECKING:
    from statekit.adapter import EnvSettings

SECRET_HEADERS = ("authorization", "x-api-key", "cookie", "set-cookie", "proxy-authorization")
NOISE_HEADERS = ("host", "date")
"""Not secret, but they name the recording run (its port, its wall clock): dropped to keep diffs quiet."""
IN_PROCESS_HOSTS = ("testserver",)
"""Hosts that are the application itself driven in-process (Starlette's TestClient), never egress.
(The kit's ``WebApp`` sends through transports of its own that replay does not patch.)"""
MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")


@dataclass
class ReplayMiss:
    """An outbound request no cassette recorded, with vcrpy's account of the nearest ones."""

    method: str
    uri: str
    nearest: str

    def message(self) -> str:
        return f"unrecorded outbound request {self.method} {self.uri}; {self.nearest}"


@dataclass
class Replay:
    """One cassette file. ``session()`` patches httpx for the duration of a step (or a recording)."""

    path: Path
    record: bool = False
    live: Mapping[str, str] = field(default_factory=dict)
    """Live base URL by service, while recording: each is rewritten to the service's canonical base."""
    misses: list[ReplayMiss] = field(default_factory=list)
    _seen: list[Any] = field(default_factory=list, repr=False)
    _depth: int = field(default=0, repr=False)
    _cassette: Any = field(default=None, repr=False)
    _replaying: tuple[Cassette, tuple[_Swap, ...], list[Any]] | None = field(default=None, repr=False)

    def _canonical(self, request: Any) -> Any:
        for service, base in self.live.items():
            if request.uri.startswith(base):
                request.uri = canonical_url(service) + request.uri[len(base) :]
                break
        for header in list(request.headers):
            if header.lower() in SECRET_HEADERS + NOISE_HEADERS:
                del request.headers[header]
        self._seen.append(request)
        return request

    @staticmethod
    def _scrub_response(response: dict[str, Any]) -> dict[str, Any]:
        headers = response.get("headers", {})
        for name in list(headers):
            if name.lower() in SECRET_HEADERS + NOISE_HEADERS:
                del headers[name]
        return response

    @contextmanager
    def session(self) -> Iterator[Replay]:
        """Answer httpx requests from the cassette (or record them when ``record``). A session inside
        another (an episode holding one for its background worker, then a step) is the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                if not self.record:
                    self._collect_misses(self._cassette)
            return
        if self.record and not self.live:
            raise ValueError("recording needs the live services' URLs (EnvSpec.services)")
        self._seen = []
        with ExitStack() as patches:
            if self.record:  # vcrpy writes the cassette when it is left
                recording = self._recorder().use_cassette(str(self.path), allow_playback_repeats=True)
                cassette = patches.enter_context(recording)
            else:  # what use_cassette does on entry, without reading the file and building the patches again
                cassette, swaps, patchers = self._loaded()
                patches.callback(_restore, _swap(swaps))
                for patch in patchers:
                    patches.enter_context(patch)
            self._depth, self._cassette = 1, cassette
            try:
                yield self
            finally:
                self._depth, self._cassette = 0, None
                if not self.record:
                    self._collect_misses(cassette)

    def _recorder(self) -> vcr.VCR:
        return vcr.VCR(
            record_mode="new_episodes" if self.record else "none",
            match_on=MATCH_ON,
            before_record_request=self._canonical,
            before_record_response=self._scrub_response,
            decode_compressed_response=True,
            ignore_hosts=IN_PROCESS_HOSTS,
        )

    def _loaded(self) -> tuple[Cassette, tuple[_Swap, ...], list[Any]]:
        """The cassette and vcrpy's patches for it, made once per replay: a step only enters and leaves
        the patches (reading the cassette and building the patches, which probes a dozen HTTP libraries'
        imports, cost every claims step about 12 ms). Replay never writes the cassette."""
        if self._replaying is None:
            config = self._recorder().get_merged_config(path=str(self.path), allow_playback_repeats=True)
            for key in ("path_transformer", "func_path_generator", "record_on_exception"):
                config.pop(key, None)
            cassette = Cassette.load(**config)
            built = [(_Swap.of(p), p) for p in CassettePatcherBuilder(cassette).build()]
            swaps = tuple(swap for swap, _ in built if swap is not None)
            self._replaying = (cassette, swaps, [p for swap, p in built if swap is None])
        return self._replaying

    def _collect_misses(self, cassette: Any) -> None:
        reported = {(m.method, m.uri) for m in self.misses}
        seen, self._seen = self._seen, []
        for request in seen:
            if request in cassette or (request.method, request.uri) in reported:
                continue
            reported.add((request.method, request.uri))
            nearest = CannotOverwriteExistingCassetteException._get_message(cassette, request)
            self.misses.append(ReplayMiss(request.method, request.uri, _nearest_summary(nearest)))

    def take_misses(self) -> list[ReplayMiss]:
        """Misses since the last call (the adapter reports them in that step's observation)."""
        misses, self.misses = self.misses, []
        return misses


@dataclass(frozen=True)
class _Swap:
    """One of vcrpy's ``mock.patch`` objects as the attribute swap it amounts to. ``mock`` looks up its
    target and the original and checks its options at every enter; vcrpy's 38 patches cost a step
    about 0.2 ms that way (now 0.02 ms with the rest). The target is looked up once; the original is
    read at each swap and put back as ``mock`` would (deleted again where it was inherited rather than
    the target's own)."""

    target: Any
    attribute: str
    new: Any

    @staticmethod
    def of(patch: Any) -> _Swap | None:
        """The swap ``patch`` makes, or None when it is more than a plain swap (left to ``mock``)."""
        try:  # ``mock._patch``'s attributes: a Python that names them otherwise keeps ``mock``'s way
            plain = (
                isinstance(patch, mock._patch)
                and patch.new is not mock.DEFAULT
                and not (patch.create or patch.spec or patch.spec_set or patch.autospec or patch.new_callable)
                and not patch.additional_patchers
                and patch.kwargs == {}
            )
            return _Swap(patch.getter(), patch.attribute, patch.new) if plain else None
        except AttributeError:
            return None


Saved = list[tuple[Any, str, Any, bool]]


def _swap(swaps: tuple[_Swap, ...]) -> Saved:
    """Swap every attribute in; what ``_restore`` needs to put the originals back."""
    saved: Saved = []
    try:
        for swap in swaps:
            target, name = swap.target, swap.attribute
            local = name in getattr(target, "__dict__", {})
            saved.append((target, name, target.__dict__[name] if local else getattr(target, name), local))
            setattr(target, name, swap.new)
    except BaseException:
        _restore(saved)
        raise
    return saved


def _restore(saved: Saved) -> None:
    """The originals back, last swapped first (deleted again where they were inherited)."""
    for target, name, original, local in reversed(saved):
        if local:
            setattr(target, name, original)
            continue
        delattr(target, name)
        if not hasattr(target, name):
            setattr(target, name, original)


def _nearest_summary(vcr_message: str) -> str:
    """vcrpy's message lists the most similar recorded requests and which matchers failed."""
    lines = [line.strip() for line in vcr_message.splitlines() if line.strip()]
    return " ".join(lines[1:])[:800] if len(lines) > 1 else "no similar request was recorded"


def episode_replay(cassette: Path, settings: EnvSettings, control: str = "outbound") -> Replay | None:
    """The replay an episode runs under: ``cassette`` replayed, recorded into (``settings.recording``),
    or None when the replay control ``control`` is off (the application talks to the live services)."""
    if not settings.control_on(control):
        return None
    if settings.recording:
        return Replay(cassette, record=True, live=settings.services)
    return Replay(cassette)


class ReplayControl(Control):
    """Outbound HTTP answered from a cassette during every controlled call; each request no cassette
    recorded becomes the step's error observation (``replay_miss``), naming it and the nearest ones.

    With the control disabled the adapter points the application at live services instead
    (``EnvSettings.service_url``: the ``LiveServices`` the removal check starts first).
    """

    name: ClassVar[str] = "outbound"
    needs_live_services: ClassVar[bool] = True

    def __init__(self, replay: Replay) -> None:
        self.replay = replay

    @contextmanager
    def active(self) -> Iterator[None]:
        with self.replay.session():
            yield

    def violations(self) -> list[Violation]:
        misses = self.replay.take_misses()
        if not misses:
            return []
        return [
            Violation(
                control=self.name,
                code="replay_miss",
                message=misses[0].message(),
                detail={"requests": [f"{m.method} {m.uri}" for m in misses]},
            )
        ]
