"""Undo through the organisation's stored connector settings (``PUT /connectors/{name}``, ``agentrein
connectors enable``): inverses run through a client the connector builds from them
(:meth:`~agentrein_core.connector.Connector.server_client`), never through anything an agent sent.

The server undoes every action this way; embedded mode does when no client wrapped in the process can reach
the service (a rollback run by a process that never wrapped one). Either way the settings are the
organisation's, so the connector's own limits on them (the http connector's ``allowedHosts``…) apply alike.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import define

from agentrein_core.engine import Engine
from agentrein_core.errors import AgentReinError, UndoError
from agentrein_core.model import JSON, Action
from agentrein_core.plugins import Connectors
from agentrein_core.runner import run_inverse


@define
class SettingsUndoExecutor:
    """An :class:`~agentrein_core.rollback.UndoExecutor` over the organisations' connector settings.

    It takes every undo on: one it cannot run (connector not installed or not enabled, bad credentials) fails
    with an error that says what to fix, and the action becomes ``ROLLBACK_FAILED``, for an operator to see.
    ``decrypt`` reads the stored credentials (:class:`~agentrein_core.vault.Vault`)."""

    engine: Engine
    connectors: Connectors
    decrypt: Callable[[str | None], JSON]

    def enabled_for(self, action: Action) -> bool:
        """Whether the organisation of ``action`` has its connector enabled (no side effect)."""
        settings = self.engine.connector_config(action.org_id, action.connector)
        return settings is not None and settings.enabled

    def can_run(self, action: Action) -> bool:
        return True

    def run_undo(self, action: Action) -> None:
        settings = self.engine.connector_config(action.org_id, action.connector)
        if settings is None or not settings.enabled:
            raise UndoError(
                f"connector {action.connector!r} is not enabled for this organisation; an operator enables it "
                f"with PUT /connectors/{action.connector} (or `agentrein connectors enable {action.connector}`)"
            )
        try:
            connector = self.connectors.get(action.connector)
            client = connector.server_client(settings.config, self.decrypt(settings.credentials))
        except AgentReinError as exc:
            raise UndoError(str(exc)) from exc
        run_inverse(connector, action, client, close_after=True)
