"""Server-side undo: inverses run through clients the connectors build from the organisation's stored
settings (``PUT /connectors/{name}``), never through anything an agent sent."""

from __future__ import annotations

from attrs import define

from agentrein_core.engine import Engine
from agentrein_core.errors import AgentReinError, UndoError
from agentrein_core.model import Action
from agentrein_core.plugins import Connectors
from agentrein_core.runner import run_inverse
from agentrein_server.vault import Vault


@define
class ServerUndoExecutor:
    """An :class:`~agentrein_core.rollback.UndoExecutor` over the organisations' connector settings.

    It takes every undo on: one it cannot run (connector not installed or not enabled, bad credentials) fails
    with an error that says what to fix, and the action becomes ``ROLLBACK_FAILED``, for an operator to see."""

    engine: Engine
    connectors: Connectors
    vault: Vault

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
            client = connector.server_client(settings.config, self.vault.decrypt(settings.credentials))
        except AgentReinError as exc:
            raise UndoError(str(exc)) from exc
        try:
            run_inverse(connector, action, client)
        finally:
            close = getattr(client, "close", None)
            if callable(close):
                close()
