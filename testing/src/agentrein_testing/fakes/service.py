"""A small stateful REST service on 127.0.0.1, for the demo, the tests and the benchmarks.

It behaves like a real API an agent would call: resources under ``/v1/<collection>`` are created, read,
updated and deleted for real (a deleted resource is gone and answers 404), an ``Idempotency-Key`` makes a
repeated request replay its first response instead of acting twice, and faults can be injected (an error
status, a dropped connection, or a response lost *after* the effect happened).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from attrs import define, field

from agentrein_testing.fakes.base import serve, url_of


@define
class Fault:
    method: str
    path_glob: str
    status: int | None  # None: drop the connection without answering
    times: int
    after_effect: bool  # apply the request first, then fail: the client never learns it worked


@define
class Recorded:
    method: str
    path: str
    idempotency_key: str | None
    body: Any
    authorization: str | None = None


@define
class FakeService:
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>``."""

    location_collections: frozenset[str] = frozenset()  # collections whose creates answer with Location
    resources: dict[str, dict[str, dict[str, Any]]] = field(factory=dict)
    requests: list[Recorded] = field(factory=list)
    _faults: list[Fault] = field(factory=list)
    _replays: dict[str, tuple[int, dict[str, str], bytes]] = field(factory=dict)
    _counter: int = 0
    _holds: dict[tuple[str, str], tuple[threading.Event, threading.Event]] = field(factory=dict)
    _lock: threading.Lock = field(factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return url_of(self._server)

    @contextmanager
    def running(self) -> Iterator[FakeService]:
        with serve(_handler_for(self), "fake-service") as self._server:
            yield self
        self._server = None

    def fail_next(
        self,
        method: str,
        path_glob: str,
        status: int | None = 503,
        *,
        times: int = 1,
        after_effect: bool = False,
    ) -> None:
        with self._lock:
            self._faults.append(Fault(method.upper(), path_glob, status, times, after_effect))

    def hold(self, method: str, path: str) -> tuple[threading.Event, threading.Event]:
        """Make the next ``method path`` request wait before it takes effect: returns (arrived, release);
        ``arrived`` is set when the request is in, and it goes on once ``release`` is set."""
        gates = (threading.Event(), threading.Event())
        with self._lock:
            self._holds[(method, path)] = gates
        return gates

    def collection(self, name: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self.resources.get(name, {}))

    def calls(self, method: str | None = None, path_glob: str = "*") -> list[Recorded]:
        with self._lock:
            return [
                r for r in self.requests if (method is None or r.method == method) and fnmatchcase(r.path, path_glob)
            ]

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

    def _fault_for(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.method == method and fnmatchcase(path, fault.path_glob) and fault.times > 0:
                fault.times -= 1
                return fault
        return None


def _handler_for(service: FakeService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (delayed ACK)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read service.requests
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            key = self.headers.get("Idempotency-Key")
            method, path = self.command, self.path
            with service._lock:
                held = service._holds.pop((method, path), None)
            if held is not None:
                arrived, release = held
                arrived.set()
                release.wait(timeout=120)
            with service._lock:
                service.requests.append(Recorded(method, path, key, body, self.headers.get("Authorization")))
                fault = service._fault_for(method, path)
                if fault is not None and not fault.after_effect:
                    return self._fail(fault)
                if key is not None and key in service._replays:
                    status, headers, payload = service._replays[key]
                else:
                    status, headers, data = service.handle(method, path, body)
                    payload = json.dumps(data).encode()
                    if key is not None and method != "GET":
                        service._replays[key] = (status, headers, payload)
                if fault is not None:
                    return self._fail(fault)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _fail(self, fault: Fault) -> None:
            if fault.status is None:
                self.close_connection = True
                self.connection.close()
                return
            payload = json.dumps({"error": {"message": "injected fault"}}).encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
