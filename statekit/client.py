"""A Python client for a statekit harness: ``Environment``'s methods, over HTTP.

``RemoteEnvironment(url)`` returns what ``Environment`` returns (the same observations, rewards,
infos and ``State``), so code written against one runs against the other. Like ``Environment``,
``step`` or ``state`` before ``reset`` raise ``ResetNeeded``; a session whose worker process died
raises ``EnvironmentLost``, one whose world died with its database ``WorldLost`` (replay the episode
in a new session: ``statekit.rollouts`` does); a reset while that database is down raises
``ServerDown`` (retry); any other refusal by the server raises ``RemoteError`` carrying its status,
code and message.
"""

from __future__ import annotations

import base64
from types import TracebackType
from typing import Any

import httpx

from statekit.contract import JSON, State
from statekit.determinism.egress import allow_egress
from statekit.digest.dump import StateDump
from statekit.errors import EnvironmentLost, RemoteError, ResetNeeded, ServerDown, WorldLost


class RemoteEnvironment:
    """One session on a harness. ``close()`` ends the session and drops its worlds; safe twice.

    ``token`` is the harness's ``--token``. ``transport`` is httpx's seam (e.g. a proxy or a custom
    transport); by default requests go over the network.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 300.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._egress = allow_egress(self.url)  # statekit's own client: never refused by its egress guard
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self.session_id: str | None = None
        self._tools: list[dict[str, JSON]] = []

    # -- the contract -------------------------------------------------------------------------
    @property
    def tools(self) -> list[dict[str, JSON]]:
        """The actions on offer, as ``[{"name", "description", "input_schema"}]`` (known after reset)."""
        if not self._tools:
            raise ResetNeeded("tools are known once an episode exists: call reset(seed=...) first")
        return self._tools

    def reset(self, *, seed: int | None = None, options: dict[str, JSON] | None = None) -> tuple[JSON, dict]:
        """Start an episode; the first reset opens this client's session, later ones reuse it."""
        body: dict[str, JSON] = {"seed": seed, "options": options}
        if self.session_id is not None:
            body["session_id"] = self.session_id
        data = self._call("POST", "/reset", json=body)
        return self._started(data)

    def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]:
        """Apply one action. Bad actions become error observations with reward 0, as in-process."""
        data = self._call("POST", "/step", json={"session_id": self._session(), "action": action})
        return data["observation"], float(data["reward"]), data["terminated"], data["truncated"], data["info"]

    def state(self) -> State:
        return State(**self._call("GET", "/state", params={"session_id": self._session()}))

    def snapshot(self) -> str:
        return str(self._call("POST", "/snapshot", json={"session_id": self._session()})["snapshot_id"])

    def restore(self, snapshot_id: str) -> tuple[JSON, dict]:
        body = {"session_id": self._session(), "snapshot_id": snapshot_id}
        return self._started(self._call("POST", "/restore", json=body))

    def export_episode(self) -> bytes:
        """The session's live episode as bytes ``import_episode`` continues, on any server of the
        same environment or in-process (``Environment.import_episode``)."""
        data = self._call("POST", "/export", json={"session_id": self._session()})
        return base64.b64decode(data["episode"])

    def import_episode(self, blob: bytes) -> tuple[JSON, dict]:
        """Continue an exported episode in this client's session (opening one if it has none)."""
        body: dict[str, JSON] = {"episode": base64.b64encode(blob).decode()}
        if self.session_id is not None:
            body["session_id"] = self.session_id
        return self._started(self._call("POST", "/import", json=body))

    def dump(self) -> StateDump:
        """The canonical rows of this session's world (what its digest is computed from)."""
        return StateDump.from_dict(self._call("GET", "/dump", params={"session_id": self._session()}))

    @classmethod
    def attach(cls, url: str, session_id: str, *, token: str | None = None) -> RemoteEnvironment:
        """A client for an existing session (to inspect it; ``close()`` would end it)."""
        client = cls(url, token=token)
        client.session_id = session_id
        return client

    def schema(self) -> dict[str, JSON]:
        """The environment's action, observation and state JSON Schemas."""
        return dict(self._call("GET", "/schema"))

    def close(self) -> None:
        """End the session on the server (if any) and the connection. Safe to call twice."""
        session_id, self.session_id = self.session_id, None
        try:
            if session_id is not None and not self._http.is_closed:
                try:
                    self._call("DELETE", "/session", params={"session_id": session_id})
                except EnvironmentLost:
                    pass  # its worker died: already gone
                except RemoteError as exc:
                    if exc.status not in (404, 410):  # already gone is fine
                        raise
        finally:
            self._http.close()
            self._egress.close()

    def health(self) -> dict[str, Any]:
        """The harness's ``/health``: ``status`` is "unhealthy" (with a ``reason``) while its worlds'
        database is down. Raises RemoteError when it does not answer."""
        try:
            response = self._http.get("/health")
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RemoteError(0, "unreachable", f"GET {self.url}/health failed: {exc}") from exc
        if response.status_code in (200, 503) and isinstance(data, dict) and "status" in data:
            return data
        raise RemoteError(response.status_code, "bad_response", f"GET /health: {response.text[:300]}")

    def disconnect(self) -> None:
        """Close the connection but leave the session on the server (after ``attach``)."""
        self._http.close()
        self._egress.close()

    def __enter__(self) -> RemoteEnvironment:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def _session(self) -> str:
        if self.session_id is None:
            raise ResetNeeded("step()/state() before reset(): call reset(seed=...) first")
        return self.session_id

    def _started(self, data: dict[str, Any]) -> tuple[JSON, dict]:
        self.session_id = str(data["session_id"])
        info = data["info"]
        self._tools = list(info.get("tools", []))
        return data["observation"], info

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteError(0, "unreachable", f"{method} {self.url}{path} failed: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_success and isinstance(data, dict):
            return data
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            reply = f"{method} {path}: not a harness reply: {response.text[:300]}"
            raise RemoteError(response.status_code, "bad_response", reply)
        code, message = str(error.get("code", "error")), str(error.get("message", ""))
        if code == "reset_needed":
            raise ResetNeeded(message)
        if code == "worker_lost":
            raise EnvironmentLost(message)
        if code == "world_lost":
            raise WorldLost(message)
        if code == "database_unavailable":
            raise ServerDown(message)
        raise RemoteError(response.status_code, code, message)
