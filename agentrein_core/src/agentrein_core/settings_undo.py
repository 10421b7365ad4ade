"""Undo through the organisation's stored connector settings (``PUT /connectors/{name}``, ``agentrein
connectors enable``): inverses run through a client the connector builds from them
(:meth:`~agentrein_core.connector.Connector.server_client`), never through anything an agent sent.

The server undoes every action this way; embedded mode does when no client wrapped in the process can reach
the service (a rollback run by a process that never wrapped one). Either way the settings are the
organisation's, so the connector's own limits on them (the http connector's ``allowedHosts``…) apply alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from attrs import define, frozen

from agentrein_core.connector import Connector, PreparedCall, check_settings, open_server_client
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
    no server side here (a plugin this server lacks), and those whose service the organisation's settings do not
    name (an MCP server they do not list: :meth:`~agentrein_core.connector.Connector.not_reached`), it hands to
    the agent process that holds the client (:attr:`hands_over`); :meth:`_handed` alone decides which. ``decrypt``
    reads the stored credentials (:class:`~agentrein_core.vault.Vault`)."""

    engine: Engine
    connectors: Connectors
    decrypt: Callable[[str | None], JSON]

    def enabled_for(self, action: Action) -> bool:
        """Whether the organisation of ``action`` has its connector enabled, with settings that reach the
        service ``action`` was made on (no side effect)."""
        settings = self.engine.accounts.connector_config(action.org_id, action.connector)
        return settings is not None and settings.enabled and self._handed(action) is None

    def can_run(self, action: Action) -> bool:
        return self._handed(action) is None

    @property
    def hands_over(self) -> bool:
        return True

    def obstacle(self, org_id: str, connector: str) -> Obstacle | None:
        """What stops undos through ``connector`` for ``org_id`` (``None``: nothing does)."""
        reached = self._reach(org_id, connector)
        return reached if isinstance(reached, Obstacle) else None

    def obstacles(self, org_id: str, actions: Iterable[Action]) -> dict[str, Obstacle]:
        """What stops the undo of each of ``actions`` here, by action id (those nothing stops are left out): why it
        is handed to the agent's process, else what stops its connector (judged once per connector)."""
        found: dict[str, Obstacle] = {}
        by_connector: dict[str, Obstacle | None] = {}
        for action in actions:
            obstacle = self._handed(action)
            if obstacle is None:
                if action.connector not in by_connector:
                    by_connector[action.connector] = self.obstacle(org_id, action.connector)
                obstacle = by_connector[action.connector]
            if obstacle is not None:
                found[action.action_id] = obstacle
        return found

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
                made.append(open_server_client(found, config, credentials, org_id))
            except AgentReinError as exc:
                raise UndoError(str(exc)) from exc
            return made[-1]

        try:
            return self.connectors.get(connector).read_before(call, server_client)
        except AgentReinError:
            raise
        except Exception as exc:  # a value the service's library refuses (a malformed account, say): not read
            raise UndoError(f"{call.api_name}: the object could not be read ({type(exc).__name__}: {exc})") from exc
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
            client = open_server_client(connector, config, credentials, action.org_id)
        except AgentReinError as exc:
            raise UndoError(str(exc)) from exc
        run_inverse(connector, action, client, close_after=True)

    def _handed(self, action: Action) -> Obstacle | None:
        """Why the undo of ``action`` is handed to the agent process that holds its client rather than run here
        (``None``: it runs here, or fails with what :meth:`_reach` says)."""
        name = action.connector
        absent = self._absent(name)
        if absent is not None:
            return absent
        settings = self.engine.accounts.connector_config(action.org_id, name)
        config = settings.config if settings is not None and settings.enabled else {}
        why = self.connectors.get(name).not_reached(config, action)
        if why is None:
            return None
        return Obstacle(
            f"{why}: its undo is handed to the agent process that holds the client it wrapped, and fails if no "
            f"such process takes it (the agent has ended); name it in connector {name!r}'s settings to undo it here",
            in_settings=True,
        )

    def _absent(self, name: str) -> Obstacle | None:
        """What keeps every undo of connector ``name`` from running here, whatever the settings say."""
        if name not in self.connectors.names():
            return Obstacle(
                f"connector {name!r} is not installed on this server; install its plugin where the server runs",
                in_settings=False,
            )
        if not self.connectors.get(name).undoes_in_server():
            return Obstacle(
                f"connector {name!r} cannot run undos in the server: each is handed to the agent process that "
                "holds the client it wrapped, and fails if no such process takes it (the agent has ended); "
                "undo those by hand",
                in_settings=False,
            )
        return None

    def _reach(self, org_id: str, name: str) -> Obstacle | tuple[Connector, JSON, JSON]:
        """The connector and the organisation's settings (credentials decrypted) its undos run with, or what
        stops them, in the order an operator would fix it."""
        absent = self._absent(name)
        if absent is not None:
            return absent
        connector = self.connectors.get(name)
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
            check_settings(connector, settings.config, credentials, org_id)
        except AgentReinError as exc:
            return Obstacle(
                f"the stored settings of connector {name!r} are refused ({exc}); an operator corrects them on "
                "the dashboard's Connectors page",
                in_settings=True,
            )
        return connector, settings.config, credentials
