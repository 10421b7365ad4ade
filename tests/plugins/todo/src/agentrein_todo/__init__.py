"""A connector for a to-do list service, written as a third party would: one module, one entry point.

``TodoClient`` stands in for the service's own SDK (it keeps its items in memory, and honours a
``request_id`` the way real services honour idempotency keys); ``TodoConnector`` teaches AgentRein about it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

from attrs import define, field

from agentrein_core.connector import JSON, Connector, OperationType, PreparedCall, UndoConfig, hookimpl, merge_undo

DELETE_ITEM = "todo-delete"


@define
class Item:
    id: str
    title: str


@define
class TodoClient:
    """The service's SDK. ``add_item`` with a ``request_id`` it saw before returns the item it made then."""

    items: dict[str, Item] = field(factory=dict)
    requests: list[str | None] = field(factory=list)
    #: For tests: the next add_item takes effect, then its answer is lost (ConnectionError).
    lose_next_answer: bool = False
    _made: dict[str, Item] = field(factory=dict)
    _ids: Any = field(factory=lambda: itertools.count(1))

    def add_item(self, title: str, *, session_cookie: str | None = None, request_id: str | None = None) -> Item:
        self.requests.append(request_id)
        if request_id is not None and request_id in self._made:
            return self._made[request_id]
        item = Item(f"item-{next(self._ids)}", title)
        self.items[item.id] = item
        if request_id is not None:
            self._made[request_id] = item
        if self.lose_next_answer:
            self.lose_next_answer = False
            raise ConnectionError("the answer was lost on the way back")
        return item

    def get_item(self, item_id: str) -> Item:
        return self.items[item_id]

    def delete_item(self, item_id: str, *, request_id: str | None = None) -> None:
        self.requests.append(request_id)
        self.items.pop(item_id, None)  # deleting what is gone is fine


class TodoConnector(Connector):
    name: ClassVar[str] = "todo"
    sensitive_fields: ClassVar[frozenset[str]] = frozenset({"sessioncookie"})
    undo_types: ClassVar[frozenset[str]] = frozenset({DELETE_ITEM})

    def accepts(self, client: Any) -> bool:
        return isinstance(client, TodoClient)

    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | None:
        if path != ("add_item",):
            return None  # reads and everything else pass through
        return PreparedCall(
            api_name="items.create",
            operation_type=OperationType.CREATE,
            payload={"args": list(args), **kwargs},
            run=lambda key: client.add_item(*args, **kwargs, request_id=key),
        )

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        return {"id": result.id}

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        return merge_undo(UndoConfig(DELETE_ITEM, {"id": result.id}), override)

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(error, ConnectionError)

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> None:
        client.delete_item(undo.params["id"], request_id=idempotency_key)


@hookimpl
def agentrein_register_connectors() -> list[Connector]:
    return [TodoConnector()]
