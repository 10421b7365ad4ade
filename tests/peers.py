"""Loopback peers for intent verification and notifications: an OpenAI-compatible chat-completions endpoint
that answers as a test scripts it, and a webhook receiver that checks signatures the way the README tells
receivers to (its code is taken from the README itself)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
from attrs import define, field
from serving import Tenant

from agentrein_testing.fakes.base import serve, url_of

README = Path(__file__).parent.parent / "README.md"


def operator(tenant: Tenant) -> httpx.Client:
    """Raw HTTP to the server with the tenant's operator key."""
    return httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=30)


def eventually(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 20) -> Any:
    """``read()`` once ``done`` says so (background work has happened), or as it is after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def readme_signature_check() -> Callable[..., bool]:
    """``verify_agentrein_signature`` exactly as the README shows it."""
    found = re.search(r"```python\n(import hashlib.*?def verify_agentrein_signature.*?)```", README.read_text(), re.S)
    assert found is not None, "the README lost its signature check"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), str(README), "exec"), namespace)
    check: Callable[..., bool] = namespace["verify_agentrein_signature"]
    return check


@define
class FakeModel:
    """``POST /v1/chat/completions``. ``answer`` decides each reply from the request: a verdict dict, or one of
    ``"garbage"``, ``"500"``, ``"hang"`` (no answer until ``release`` is set)."""

    answer: Callable[[dict[str, Any]], Any] = lambda _: {"outcome": "VERIFIED", "rationale": "The calls serve it."}
    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(factory=list)
    release: threading.Event = field(factory=threading.Event)
    _server: Any = None

    @property
    def url(self) -> str:
        return url_of(self._server) + "/v1"

    def user_messages(self) -> list[dict[str, Any]]:
        """What each request asked, decoded: the JSON the verifier put in the user message."""
        return [json.loads(body["messages"][-1]["content"]) for _, body in self.requests]

    @contextmanager
    def running(self) -> Iterator[FakeModel]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                model.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                reply = model.answer(body)
                if reply == "hang":
                    model.release.wait(30)
                    reply = {"outcome": "VERIFIED", "rationale": "late"}
                if reply == "500":
                    self._send(500, {"error": {"message": "overloaded"}})
                elif reply == "garbage":
                    self._send(200, {"choices": [{"message": {"content": "I think it is probably fine?"}}]})
                else:
                    content = json.dumps(reply)
                    self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}]})

            def _send(self, status: int, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        with serve(Handler, "fake-model") as server:
            self._server = server
            yield self


@define
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    accepted: bool


@define
class WebhookReceiver:
    """Accepts deliveries whose signature checks out with ``secret`` (the README's check, ``tolerance``
    seconds); answers 500 to the next ``failures`` deliveries, as a failing endpoint would."""

    secret: str = ""
    tolerance: int = 300
    failures: int = 0
    received: list[Received] = field(factory=list)
    _server: Any = None
    _lock: threading.Lock = field(factory=threading.Lock)

    @property
    def url(self) -> str:
        return url_of(self._server)

    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.accepted]

    @contextmanager
    def running(self) -> Iterator[WebhookReceiver]:
        receiver, check = self, readme_signature_check()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                signed = check(headers.get("agentrein-signature", ""), body, receiver.secret, receiver.tolerance)
                with receiver._lock:
                    failing = signed and receiver.failures > 0
                    if failing:
                        receiver.failures -= 1
                    receiver.received.append(Received(self.path, headers, body, signed and not failing))
                status = 400 if not signed else 500 if failing else 204
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        with serve(Handler, "webhook-receiver") as server:
            self._server = server
            yield self
