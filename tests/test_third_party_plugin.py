"""A connector shipped as its own distribution (tests/plugins/todo, installed like any plugin) is found through
the entry point, keeps the contract, and is recorded and undone like the built-in ones."""

from __future__ import annotations

from typing import Any

import pytest
from agentrein_todo import TodoClient, TodoConnector

from agentrein import ActionStatus, AgentRein
from agentrein_core.connector import Connector
from agentrein_core.plugins import installed_connectors
from agentrein_core.statuses import OperationType
from agentrein_testing import ConnectorContract, Sample

CREATE = Sample(
    ("add_item",),
    ("buy milk",),
    api_name="items.create",
    operation_type=OperationType.CREATE,
    undo_type="todo-delete",
)


class TestTodoConnector(ConnectorContract):
    samples = (CREATE, Sample(("get_item",), ("item-1",)))
    create = CREATE
    transient_errors = (ConnectionError("reset"),)
    permanent_errors = (KeyError("item-9"),)
    secret = Sample(("add_item",), ("x",), {"session_cookie": "s3cr3t"}, api_name="items.create")
    secret_value = "s3cr3t"

    @pytest.fixture
    def connector(self) -> Connector:
        return TodoConnector()

    @pytest.fixture
    def service(self) -> TodoClient:
        return TodoClient()

    @pytest.fixture
    def client(self, service: TodoClient) -> TodoClient:
        return service  # the toy SDK is its own service

    def exists(self, service: Any, result: Any) -> bool:
        return result.id in service.items

    def idempotency_keys(self, service: Any) -> list[str | None]:
        return list(service.requests)

    def count(self, service: Any) -> int:
        return len(service.items)

    def lose_next_answer(self, service: Any) -> None:
        service.lose_next_answer = True


def test_the_plugin_is_found_through_its_entry_point_alone() -> None:
    assert "todo" in installed_connectors().names()
    assert type(installed_connectors().get("todo")).__module__ == "agentrein_todo"


def test_an_agent_wraps_the_plugins_client_like_any_other(ar: AgentRein) -> None:
    todo = TodoClient()
    session = ar.new_session(agent_id="chores", intent="shopping list")
    wrapped = ar.wrap(todo, session, connector="todo")
    wrapped.add_item("buy milk")
    wrapped.add_item("buy bread")
    assert [a.api_name for a in ar.get_session(session).actions] == ["items.create", "items.create"]
    if ar.base_url is not None:
        return  # through a server, the undo would need the service's credentials: the plugin has none to give
    rolled_back = ar.rollback_session(session)
    assert [a.status for a in rolled_back.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert todo.items == {}
