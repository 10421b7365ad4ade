"""Undo through the organisation's stored connector settings (``PUT /connectors/{name}``, ``agentrein
connectors enable``): inverses run through a client the connector builds from them
(:meth:`~agentrein_core.connector.Connector.server_client`), never through anything an agent sent.

The server undoes every action this way; embedded mode does when no client wrapped in the process can reach
the service (a rollback run by a process that never wrapped one). Either way the settings are the
organisation's, so the connector's own limits on them (the http connector's ``allowedHosts``…) apply alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import define, frozen

from agentrein_core.connector import Connector, PreparedCall, check_settings
from agentrein_core.engine import Engine
from agentrein_core.errors import AgentReinError, UndoError
from agentrein_core.model import JSON, Action
from agentrein_core.plugins import Connectors
from agentrein_core.runner import run_inverse


@frozen
class Obstacle:
    """Why the undos of one connector cannot run through an organisation's settings, in words that say what to
    do; ``in_settings``: an operator fixes it in the connector's settings (the dashboard's Connectors page)."""

    reason: str
    in_settings: bool


@define
class SettingsUndoExecutor:
    """An :class:`~agentrein_core.rollback.UndoExecutor` over the organisations' connector settings.

    It takes on every undo of an installed connector that has a server side (in the server no other process
    could reach the service either, so a job left for one would never end); an undo it cannot run fails with
    its :meth:`obstacle`, which says what to fix, and the action becomes ``ROLLBACK_FAILED``, for an operator to
    see; the dashboard shows the same obstacles before a rollback is confirmed. The undos of a connector with
    no server side here (an MCP server the agent reaches over stdio, a plugin this server lacks) it hands to
    the agent process that holds the client (:attr:`hands_over`). ``decrypt`` reads the stored credentials
    (:class:`~agentrein_core.vault.Vault`)."""

    engine: Engine
    connectors: Connectors
    decrypt: Callable[[str | None], JSON]

    def enabled_for(self, action: Action) -> bool:
        """Whether the organisation of ``action`` has its connector enabled (no side effect)."""
        settings = self.engine.accounts.connector_config(action.org_id, action.connector)
        return settings is not None and settings.enabled

    def can_run(self, action: Action) -> bool:
        name = action.connector
        return name in self.connectors.names() and self.connectors.get(name).undoes_in_server()

    @property
    def hands_over(self) -> bool:
        return True

    def obstacle(self, org_id: str, connector: str) -> Obstacle | None:
        """What stops undos through ``connector`` for ``org_id`` (``None``: nothing does)."""
        reached = self._reach(org_id, connector)
        return reached if isinstance(reached, Obstacle) else None

    def read_before(self, org_id: str, connector: str, call: PreparedCall) -> JSON | None:
        """The object ``call`` is about to change, read through ``connector``'s server client with the
        organisation's settings (:meth:`~agentrein_core.connector.Connector.read_before`): what its undo will
        restore; ``None`` when its undo needs nothing read. :class:`UndoError` says why it cannot be read."""
        made: list[Any] = []

        def server_client() -> Any:
            reached = self._reach(org_id, connector)
            if isinstance(reached, Obstacle):
                raise UndoError(reached.reason)
            found, config, credentials = reached
            try:
                made.append(found.server_client(config, credentials))
            except AgentReinError as exc:
                raise UndoError(str(exc)) from exc
            return made[-1]

        try:
            return self.connectors.get(connector).read_before(call, server_client)
        finally:
            for client in made:
                close = getattr(client, "close", None)
                if callable(close):
                    close()

    def run_undo(self, action: Action) -> None:
        reached = self._reach(action.org_id, action.connector)
        if isinstance(reached, Obstacle):
            raise UndoError(reached.reason)
        connector, config, credentials = reached
        try:
            client = connector.server_client(config, credentials)
        except AgentReinError as exc:
            raise UndoError(str(exc)) from exc
        run_inverse(connector, action, client, close_after=True)

    def _reach(self, org_id: str, name: str) -> Obstacle | tuple[Connector, JSON, JSON]:
        """The connector and the organisation's settings (credentials decrypted) its undos run with, or what
        stops them, in the order an operator would fix it."""
        if name not in self.connectors.names():
            return Obstacle(
                f"connector {name!r} is not installed on this server; install its plugin where the server runs",
                in_settings=False,
            )
        connector = self.connectors.get(name)
        if not connector.undoes_in_server():
            return Obstacle(
                f"connector {name!r} cannot run undos in the server: each is handed to the agent process that "
                "holds the client it wrapped, and fails if no such process takes it (the agent has ended); "
                "undo those by hand",
                in_settings=False,
            )
        settings = self.engine.accounts.connector_config(org_id, name)
        if settings is None or not settings.enabled:
            return Obstacle(
                f"connector {name!r} is not enabled for this organisation; an operator enables it on the "
                f"dashboard's Connectors page, with PUT /connectors/{name} or `agentrein connectors enable {name}`",
                in_settings=True,
            )
        try:
            credentials = self.decrypt(settings.credentials)
        except AgentReinError as exc:  # stored under another secret key
            return Obstacle(str(exc), in_settings=True)
        try:  # again: a host's address may have changed, or the settings were stored when private ones were allowed
            check_settings(connector, settings.config, credentials)
        except AgentReinError as exc:
            return Obstacle(
                f"the stored settings of connector {name!r} are refused ({exc}); an operator corrects them on "
                "the dashboard's Connectors page",
                in_settings=True,
            )
        return connector, settings.config, credentials
