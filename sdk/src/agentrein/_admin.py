"""What an operator does on an AgentRein server beyond :class:`~agentrein.AgentRein`: the organisation's
connector settings and API keys, and rollbacks requested and followed step by step (``agentrein rollback``
shows one advancing). Errors are the same named errors the rest of the SDK raises.

>>> with AdminClient("http://127.0.0.1:8000", "ar_…") as admin:
...     admin.configure_connector("http", enabled=True, config={"allowedHosts": ["api.example.com"]})
"""

from __future__ import annotations

from typing import Any

from agentrein._http import Connection, segment
from agentrein_core.converter import from_wire
from agentrein_core.model import JSON
from agentrein_core.read_models import RollbackInfo
from agentrein_core.statuses import Role


class AdminClient:
    """An operator's API key on the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10.0) -> None:
        self._connection = Connection(base_url, api_key, timeout=timeout)

    # connectors ---------------------------------------------------------------------------------------
    def list_connectors(self) -> list[dict[str, Any]]:
        """Every connector installed in the server, with the organisation's settings for it (``name``,
        ``enabled``, ``config``, ``hasCredentials``, ``updatedAt``; credentials are never returned)."""
        rows: list[dict[str, Any]] = self._connection.call("GET", "/connectors")
        return rows

    def get_connector(self, name: str) -> dict[str, Any]:
        row: dict[str, Any] = self._connection.call("GET", _connector_path(name))
        return row

    def configure_connector(
        self, name: str, *, enabled: bool, config: JSON | None = None, credentials: JSON | None = None
    ) -> dict[str, Any]:
        """Enable or disable the connector for rollbacks run in the server; ``None`` keeps the stored config or
        credentials (which are stored encrypted)."""
        if config is None:
            config = self.get_connector(name)["config"]
        body = {"enabled": enabled, "config": config, "credentials": credentials}
        row: dict[str, Any] = self._connection.call("PUT", _connector_path(name), json=body)
        return row

    # API keys -----------------------------------------------------------------------------------------
    def create_api_key(self, role: Role | str) -> dict[str, Any]:
        """A new key of the organisation (``keyId``, ``role``, ``prefix``, ``createdAt``, ``revokedAt``) with
        its secret in ``key``: in this answer only."""
        row: dict[str, Any] = self._connection.call("POST", "/api-keys", json={"role": str(role)})
        return row

    def list_api_keys(self) -> list[dict[str, Any]]:
        """The organisation's keys, revoked ones too (never their secrets)."""
        rows: list[dict[str, Any]] = self._connection.call("GET", "/api-keys")
        return rows

    def revoke_api_key(self, key_id: str) -> None:
        """The key stops working."""
        self._connection.call("DELETE", f"/api-keys/{segment(key_id)}")

    # rollbacks ----------------------------------------------------------------------------------------
    def request_rollback(self, session_id: str, *, reason: str | None = None) -> RollbackInfo:
        """Start the session's rollback (or get the one under way); the server's workers run it."""
        job = self._connection.call("POST", _rollback_path(session_id), json={"reason": reason})
        return from_wire(job, RollbackInfo)

    def get_rollback(self, session_id: str, *, wait: float = 0.0) -> RollbackInfo:
        """The session's latest rollback; with ``wait`` (seconds) once it has ended or waits for a reviewer,
        or when the wait runs out. ``undo_with_agent`` says which undo it waits on in the agent's process."""
        job = self._connection.call("GET", _rollback_path(session_id), params={"wait": wait}, wait=wait)
        return from_wire(job, RollbackInfo)

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _connector_path(name: str) -> str:
    return f"/connectors/{segment(name)}"


def _rollback_path(session_id: str) -> str:
    return f"/sessions/{segment(session_id)}/rollback"
