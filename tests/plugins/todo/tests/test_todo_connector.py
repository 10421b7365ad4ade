"""The to-do connector's own tests, written as its author writes them: ``pip install agentrein-testing`` brings the
contract kit and the fixtures (``agentrein``: AgentRein embedded on a SQLite file of the test's own)."""

from __future__ import annotations

from typing import Any

import pytest
from agentrein_todo import TodoClient, TodoConnector

from agentrein import ActionStatus, AgentRein
from agentrein_core.connector import Connector, OperationType
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


def test_an_agents_items_are_recorded_and_a_rollback_deletes_them(agentrein: AgentRein) -> None:
    todo = TodoClient()
    session = agentrein.new_session(agent_id="chores", intent="shopping list")
    wrapped = agentrein.wrap(todo, session, connector="todo")
    wrapped.add_item("buy milk")
    wrapped.add_item("buy bread")
    assert [a.api_name for a in agentrein.get_session(session).actions] == ["items.create", "items.create"]
    rolled_back = agentrein.rollback_session(session)
    assert [a.status for a in rolled_back.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert todo.items == {}
