"""A small stateful REST service on 127.0.0.1, for the demo, the tests and the benchmarks.

It behaves like a real API an agent would call: resources under ``/v1/<collection>`` are created, read,
updated and deleted for real (a deleted resource is gone and answers 404), an ``Idempotency-Key`` makes a
repeated request replay its first response instead of acting twice (and answer 409 while the first is still
running), and faults can be injected (an error
status, a dropped connection, or a response lost *after* the effect happened).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

from attrs import define, field

from agentrein_testing.fakes.base import Fault, LoopbackFake, Reply, Request


@define
class Recorded:
    method: str
    path: str  # with its query string
    idempotency_key: str | None
    body: Any
    authorization: str | None = None
    status: int | None = None  # what the fake answered; None: the connection was dropped
    host: str | None = None  # the Host header: the name the caller used for the fake


@define
class FakeService(LoopbackFake[Recorded, Fault]):
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>``."""

    thread_name: ClassVar[str] = "fake-service"

    location_collections: frozenset[str] = frozenset()  # collections whose creates answer with Location
    resources: dict[str, dict[str, dict[str, Any]]] = field(factory=dict)
    _counter: int = field(default=0, init=False)

    def fail_next(
        self,
        method: str,
        path_glob: str,
        status: int | None = 503,
        *,
        times: int = 1,
        after_effect: bool = False,
    ) -> None:
        """Fail the next ``times`` requests of ``method`` whose path (with its query) matches ``path_glob``:
        with ``status``, or, when it is None, by dropping the connection. ``after_effect``: the request takes
        effect first (and is saved for its idempotency key); only the answer is lost."""
        self._inject(Fault(method.upper(), path_glob, status, times, after_effect))

    def collection(self, name: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self.resources.get(name, {}))

    # the API ----------------------------------------------------------------------------------------
    def handle(self, method: str, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
        parts = [p for p in path.split("?")[0].split("/") if p]
        if len(parts) < 2 or parts[0] != "v1":
            return 404, {}, {"error": {"message": f"no route {method} {path}"}}
        collection, rest = parts[1], parts[2:]
        items = self.resources.setdefault(collection, {})
        if not rest:
            if method == "GET":
                return 200, {}, {"data": list(items.values())}
            if method == "POST":
                if not isinstance(body, dict):
                    return 400, {}, {"error": {"message": "expected a JSON object"}}
                self._counter += 1
                item = {**body, "id": f"{collection[:3]}_{self._counter}"}
                items[item["id"]] = item
                headers = {}
                if collection in self.location_collections:
                    headers["Location"] = f"/v1/{collection}/{item['id']}"
                return 201, headers, item
            return 405, {}, {"error": {"message": f"{method} not allowed here"}}
        item_id = rest[0]
        if item_id not in items:
            return 404, {}, {"error": {"message": f"no such {collection[:-1]}: {item_id}"}}
        if len(rest) == 2 and rest[1] == "cancel" and method == "POST":
            items[item_id] = {**items[item_id], "status": "cancelled"}
            return 200, {}, items[item_id]
        if len(rest) > 1:
            return 404, {}, {"error": {"message": f"no route {method} {path}"}}
        if method == "GET":
            return 200, {}, items[item_id]
        if method in ("PUT", "PATCH"):
            if not isinstance(body, dict):
                return 400, {}, {"error": {"message": "expected a JSON object"}}
            items[item_id] = {**items[item_id], **body, "id": item_id} if method == "PATCH" else {**body, "id": item_id}
            return 200, {}, items[item_id]
        if method == "DELETE":
            del items[item_id]
            return 200, {}, {"id": item_id, "deleted": True}
        return 405, {}, {"error": {"message": f"{method} not allowed here"}}

    # serving ----------------------------------------------------------------------------------------------
    def _record(self, request: Request) -> Recorded:
        headers = request.headers
        return Recorded(
            request.method,
            request.target,
            headers.get("idempotency-key"),
            request.json_body(),
            headers.get("authorization"),
            host=headers.get("host"),
        )

    def _idempotency_scope(self, record: Recorded) -> Hashable | None:
        return record.idempotency_key if record.method != "GET" else None

    def _key_in_use(self, record: Recorded) -> Reply:
        message = f"a request with the Idempotency-Key {record.idempotency_key} is still in progress"
        return Reply.json(409, {"error": {"message": message}})

    def _effect(self, request: Request, record: Recorded) -> tuple[Reply, bool]:
        status, headers, data = self.handle(record.method, record.path, record.body)
        return Reply.json(status, data, headers), True

    def _fault_reply(self, fault: Fault, status: int, record: Recorded) -> Reply:
        return Reply.json(status, {"error": {"message": "injected fault"}})
