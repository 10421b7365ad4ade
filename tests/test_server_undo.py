"""The server's undo executor: what stops an undo from running here is said the same way before a rollback
(on the dashboard's confirmation) and when the undo fails."""

from __future__ import annotations

import httpx
import pytest
from serving import RunningServer

from agentrein_core.errors import UndoError
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_core.settings_undo import SettingsUndoExecutor


def test_an_undo_through_a_connector_this_server_lacks_fails_saying_to_install_it(server: RunningServer) -> None:
    tenant = server.tenant()
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
        body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "payload": {}}
        api.post(f"/sessions/{session_id}/actions", json=body)
    (action,) = server.engine.get_session(tenant.org_id, session_id).actions
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
