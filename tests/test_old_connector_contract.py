"""A third-party connector written to the contract before ``check_config`` and ``server_client`` took the
organisation's id (``(config, credentials)``) keeps working: the engine calls it as it was written, with a
DeprecationWarning that says what to add, rather than a TypeError (a 500 when its settings are stored)."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any, ClassVar

import attrs
import pytest
from serving import RunningServer, Tenant

from agentrein_core.connector import (
    JSON,
    Action,
    Connector,
    OperationType,
    UndoConfig,
    ValidationError,
    check_settings,
    hookimpl,
)
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.statuses import ActionStatus
from agentrein_server.services import Services


class Chores:
    """The service's client the connector builds from the stored settings: it notes what it is asked to undo."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.removed: list[str] = []


class OldContract(Connector):
    """``check_config`` and ``server_client`` as CONTRIBUTING.md described them before they took ``org_id``."""

    name: ClassVar[str] = "chores"
    undo_types: ClassVar[frozenset[str]] = frozenset({"chores-remove"})

    def __init__(self) -> None:
        self.made: list[Chores] = []

    def prepare(self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        return None

    def check_config(self, config: JSON, credentials: JSON) -> None:  # type: ignore[override]
        if not isinstance(credentials.get("token"), str):
            raise ValidationError("credentials.token", "needs the service's token")

    def server_client(self, config: JSON, credentials: JSON) -> Chores:  # type: ignore[override]
        self.made.append(Chores(credentials["token"]))
        return self.made[-1]

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> None:
        client.removed.append(undo.params["id"])


class OldPlugin:
    @hookimpl
    def agentrein_register_connectors(self) -> list[Connector]:
        return [OldContract()]


@pytest.fixture
def services(server: RunningServer) -> Services:
    """The server's services with the old connector installed (alone)."""
    manager = new_plugin_manager(load_entry_points=False)
    manager.register(OldPlugin())
    connectors = Connectors(manager)
    configuration = attrs.evolve(server.services.configuration, connectors=connectors)
    undo = SettingsUndoExecutor(server.engine, connectors, server.services.vault.decrypt)
    return attrs.evolve(server.services, configuration=configuration, undo=undo)


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


def test_settings_of_a_connector_written_before_org_id_are_judged_by_its_own_check(
    services: Services, tenant: Tenant
) -> None:
    with pytest.deprecated_call(match=r"OldContract\.check_config takes no org_id"):
        services.configuration.configure_connector(
            tenant.org_id, "chores", enabled=True, config={}, credentials={"token": "t"}
        )
    with pytest.raises(ValidationError) as refused, pytest.deprecated_call():
        services.configuration.configure_connector(tenant.org_id, "chores", enabled=True, config={}, credentials={})
    assert refused.value.field == "credentials.token"


def test_an_undo_through_a_connector_written_before_org_id_runs_through_the_client_it_builds(
    services: Services, tenant: Tenant
) -> None:
    with pytest.deprecated_call():
        services.configuration.configure_connector(
            tenant.org_id, "chores", enabled=True, config={}, credentials={"token": "t"}
        )
    now = datetime.now(UTC)
    done = Action(
        action_id="act_1",
        session_id="ses_1",
        org_id=tenant.org_id,
        seq=1,
        connector="chores",
        api_name="chores.create",
        operation_type=OperationType.CREATE,
        payload={},
        status=ActionStatus.SUCCESS,
        idempotency_key="key-1",
        created_at=now,
        updated_at=now,
        undo=UndoConfig("chores-remove", {"id": "chore_7"}),
    )
    with pytest.deprecated_call() as warned:
        services.undo.run_undo(done)  # its settings judged again, then its client built
    assert {str(w.message).split()[0] for w in warned} == {"OldContract.check_config", "OldContract.server_client"}
    connector = services.undo.connectors.get("chores")
    assert isinstance(connector, OldContract)
    assert [(client.token, client.removed) for client in connector.made] == [("t", ["chore_7"])]


def test_a_connector_taking_org_id_by_keyword_is_given_it_without_a_warning() -> None:
    seen: list[str] = []

    class KeywordOnly(OldContract):
        def check_config(self, config: JSON, credentials: JSON, *, org_id: str) -> None:  # type: ignore[override]
            seen.append(org_id)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        check_settings(KeywordOnly(), {}, {"token": "t"}, "org_1")
    assert seen == ["org_1"]
