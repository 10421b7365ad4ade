"""The SDK's way to the server: its own keep-alive connections, through the proxy the environment names for the
server's address, as an ``httpx.Client`` would go. The proxy here is a loopback relay to the server, which
records each request line it passes on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from relay import Relay
from serving import RunningServer

from agentrein import AgentRein


@pytest.fixture
def proxy(server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Relay]:
    relay = Relay.to_server(server.url)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", relay.url())
    yield relay
    relay.cut()


def test_the_sdk_reaches_the_server_through_the_proxy_the_environment_names(
    server: RunningServer, proxy: Relay
) -> None:
    tenant = server.tenant()
    with AgentRein(base_url=tenant.url, api_key=tenant.key) as ar:
        session = ar.new_session(agent_id="billing", intent="orders")
        assert ar.get_session(session.id).agent_id == "billing"
    assert proxy.requests[:2] == [
        f"POST {tenant.url}/sessions",
        f"GET {tenant.url}/sessions/{session.id}",
    ]


def test_the_sdk_goes_straight_to_a_server_the_environment_exempts_from_the_proxy(
    server: RunningServer, proxy: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    tenant = server.tenant()
    with AgentRein(base_url=tenant.url, api_key=tenant.key) as ar:
        ar.new_session(agent_id="billing", intent="orders")
    assert proxy.requests == []
