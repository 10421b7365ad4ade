"""The TypeScript tests' peers: the loopback fakes and a real ``agentrein serve``, for one test file.

Run from the repository root (``uv run python sdk-ts/test/harness.py``). It starts FakeStripe, FakeGitHub and
FakeService on 127.0.0.1, then ``agentrein serve`` in a process of its own over a temporary SQLite database
on a free port, takes the operator key a fresh server prints, creates an agent key, and stores the stripe,
github and http connector settings that point the server's undo clients at the fakes. It prints one JSON
line (every URL and key) and serves a control API on 127.0.0.1 for the tests:

- ``POST /fakes/<stripe|github|service>/<method>`` with ``{"args": [...], "kwargs": {...}}`` calls that public
  method of the fake (``calls``, ``fail_next``, ``collection``, ``add_repo``...) and answers its result as JSON;
- ``POST /server/stop`` and ``POST /server/start`` stop the server (SIGTERM; ``/server/kill``: SIGKILL) and
  start it again (same port, database and keys), for the failure-mode tests.

With ``--postgresql`` the server's database is a fresh one on ``$AGENTREIN_TEST_POSTGRES_URL``'s cluster, dropped
at the end.

Everything stops when stdin closes (the test process ended, however it ended); the server process is also
killed by Linux if this process dies first.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import httpx
from cryptography.fernet import Fernet

from agentrein_testing import FakeGitHub, FakeService, FakeStripe

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from serving import ServerProcess  # type: ignore[import-not-found]

os.environ["AGENTREIN_ALLOW_PRIVATE_TARGETS"] = "1"  # the server's undo clients reach the fakes on 127.0.0.1

STRIPE_KEY = "sk_test_agentrein"
GITHUB_TOKEN = "ghp_test"


class Server:
    """``agentrein serve`` over one database, on one port, which the tests may stop and start again."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.secret_key = Fernet.generate_key().decode()
        self._parent = ThreadPoolExecutor(max_workers=1, thread_name_prefix="server-parent")
        self.running: ServerProcess | None = ServerProcess(self.database_url, self.secret_key)
        self.url, self.port = self.running.url, self.running.port
        deadline = time.monotonic() + 10  # printed before it listens; read by a thread of its own
        while not self.running.printed_keys:
            if time.monotonic() > deadline:
                raise RuntimeError("agentrein serve printed no key:\n" + "".join(self.running.output))
            time.sleep(0.02)
        self.operator_key: str = self.running.printed_keys[0]

    def start(self) -> None:
        if self.running is None:
            # Started from a thread that lives as long as this harness: Linux kills the server when the thread
            # that made it ends (PR_SET_PDEATHSIG is per thread), and a control request's thread ends when its
            # connection closes, which killed a restarted server a few seconds later.
            made = self._parent.submit(ServerProcess, self.database_url, self.secret_key, port=self.port)
            self.running = made.result()

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None

    def kill(self) -> None:
        if self.running is not None:
            self.running.kill()
            self.running = None


def as_json(value: Any) -> Any:
    """A fake's answer as JSON: its records are attrs classes; bytes are text."""
    if attrs.has(type(value)):
        return as_json(attrs.asdict(value, recurse=False))
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [as_json(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def control(fakes: dict[str, Any], server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            parts = self.path.strip("/").split("/")
            try:
                if parts == ["server", "stop"]:
                    server.stop()
                    self._answer(200, None)
                elif parts == ["server", "kill"]:
                    server.kill()
                    self._answer(200, None)
                elif parts == ["server", "start"]:
                    server.start()
                    self._answer(200, None)
                elif len(parts) == 3 and parts[0] == "fakes" and parts[1] in fakes and not parts[2].startswith("_"):
                    method = getattr(fakes[parts[1]], parts[2])
                    self._answer(200, as_json(method(*body.get("args", []), **body.get("kwargs", {}))))
                else:
                    self._answer(404, {"error": f"no control {self.path}"})
            except Exception as exc:  # the test reads why its control failed
                self._answer(500, {"error": f"{type(exc).__name__}: {exc}"})

        def _answer(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def configure(server: Server, key: str, stripe: FakeStripe, github: FakeGitHub) -> str:
    """Point the server's undo clients at the fakes; returns a new agent key."""
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    settings = {
        "http": {"enabled": True, "config": {"allowedHosts": ["127.0.0.1"], "allowedMethods": ["DELETE", "POST"]}},
        "stripe": {"enabled": True, "config": {"apiBase": stripe.base_url}, "credentials": {"apiKey": STRIPE_KEY}},
        "github": {"enabled": True, "config": {"baseUrl": github.base_url}, "credentials": {"token": GITHUB_TOKEN}},
    }
    for name, body in settings.items():
        api.put(f"/connectors/{name}", json=body).raise_for_status()
    created = api.post("/api-keys", json={"role": "agent"})
    created.raise_for_status()
    return str(created.json()["key"])


@contextlib.contextmanager
def serving(control_handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), control_handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database on the test cluster (as tests/conftest.py makes them), dropped afterwards."""
    from urllib.parse import urlsplit

    from pytest_postgresql.janitor import DatabaseJanitor

    parts = urlsplit(os.environ["AGENTREIN_TEST_POSTGRES_URL"])
    dbname = f"agentrein_ts_{os.getpid()}_{int(time.time())}"
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user = parts.username or "postgres"
    with DatabaseJanitor(user=user, host=host, port=port, dbname=dbname, password=parts.password):
        yield f"postgresql+psycopg://{parts.netloc}/{dbname}"


def main() -> None:
    stripe, github, service = FakeStripe(), FakeGitHub(token=GITHUB_TOKEN), FakeService()
    with (
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="agentrein-ts-") as tmp,
        stripe.running(),
        github.running(),
        service.running(),
    ):
        database = stack.enter_context(postgres_database()) if "--postgresql" in sys.argv else None
        server = Server(database or f"sqlite:///{Path(tmp) / 'agentrein.db'}")
        try:
            key = server.operator_key
            agent_key = configure(server, key, stripe, github)
            fakes = {"stripe": stripe, "github": github, "service": service}
            with serving(control(fakes, server)) as httpd:
                ready = {
                    "serverUrl": server.url,
                    "operatorKey": key,
                    "agentKey": agent_key,
                    "stripeUrl": stripe.base_url,
                    "stripeKey": STRIPE_KEY,
                    "githubUrl": github.base_url,
                    "githubToken": GITHUB_TOKEN,
                    "serviceUrl": service.base_url,
                    "controlUrl": f"http://127.0.0.1:{httpd.server_address[1]}",
                    "directory": tmp,
                }
                print(json.dumps(ready), flush=True)
                sys.stdin.read()  # until the test process closes it, or dies
        finally:
            server.stop()


if __name__ == "__main__":
    main()
