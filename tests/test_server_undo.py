"""The server's undo executor: what stops an undo from running here is said the same way before a rollback
(on the dashboard's confirmation) and when the undo fails."""

from __future__ import annotations

import httpx
import pytest
from serving import RunningServer

from agentrein_core.errors import UndoError
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.targets import ALLOW_PRIVATE_ENV


def test_an_undo_through_a_connector_this_server_lacks_fails_saying_to_install_it(server: RunningServer) -> None:
    tenant = server.tenant()
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
        body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "payload": {}}
        api.post(f"/sessions/{session_id}/actions", json=body)
    (action,) = server.engine.recording.get_session(tenant.org_id, session_id).actions
    bare = SettingsUndoExecutor(
        server.engine, Connectors(new_plugin_manager(load_entry_points=False)), server.services.vault.decrypt
    )
    obstacle = bare.obstacle(tenant.org_id, "http")
    assert obstacle is not None and not obstacle.in_settings
    assert (
        obstacle.reason == "connector 'http' is not installed on this server; install its plugin where the server runs"
    )
    with pytest.raises(UndoError) as failed:
        bare.run_undo(action)
    assert str(failed.value) == obstacle.reason


def test_an_api_address_no_longer_allowed_is_an_obstacle_in_the_settings_naming_the_variable(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored while the server allowed private targets; it no longer does."""
    tenant = server.tenant()
    settings = {"apiBase": "http://127.0.0.1:18204"}
    server.services.configuration.configure_connector(
        tenant.org_id, "stripe", enabled=True, config=settings, credentials={"apiKey": "sk_test_1"}
    )
    assert server.services.undo.obstacle(tenant.org_id, "stripe") is None
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    obstacle = server.services.undo.obstacle(tenant.org_id, "stripe")
    assert obstacle is not None and obstacle.in_settings
    assert "config.apiBase" in obstacle.reason and ALLOW_PRIVATE_ENV in obstacle.reason
