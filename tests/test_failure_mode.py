"""When AgentRein's database cannot be reached: `open` runs the call anyway (warning once), `closed` refuses
before any side effect. The outage is real: PostgreSQL is reached through a loopback relay the test cuts."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from agentrein import AgentRein, AgentReinUnavailableError
from agentrein_server.demo.fake_service import FakeService


class Relay:
    """A TCP relay on 127.0.0.1 to PostgreSQL; `cut()` closes it and every connection through it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        self.listener.close()
        for s in self.sockets:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


@pytest.fixture
def relayed(postgres_url: str) -> Iterator[tuple[AgentRein, Relay]]:
    parts = urlsplit(postgres_url)
    relay = Relay((parts.hostname or "127.0.0.1", parts.port or 5432))
    netloc = f"{parts.username}:{parts.password}@127.0.0.1:{relay.port}"
    ar = AgentRein(urlunsplit(parts._replace(netloc=netloc)), organisation="relayed")
    yield ar, relay
    relay.cut()
    ar.close()


def test_open_mode_warns_once_and_runs_the_call(relayed: tuple[AgentRein, Relay], service: FakeService) -> None:
    ar, relay = relayed
    session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", failure_mode="open")
    relay.cut()
    with pytest.warns(RuntimeWarning, match="AgentRein is unavailable"):
        assert client.post("/v1/orders", json={}).status_code == 201
    assert len(service.calls("POST")) == 1
    assert service.calls("POST")[0].idempotency_key is not None


def test_closed_mode_refuses_before_any_side_effect(relayed: tuple[AgentRein, Relay], service: FakeService) -> None:
    ar, relay = relayed
    session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", failure_mode="closed")
    relay.cut()
    with pytest.raises(AgentReinUnavailableError):
        client.post("/v1/orders", json={})
    assert service.calls() == []
