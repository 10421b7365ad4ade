"""Rolling back after the agent closed its clients (``with httpx.Client(...) as raw:``), and, embedded, which
client undoes an action: its own while open, else the session's newest open one, else its own reopened, else
(a process that wrapped none) the organisation's stored connector settings."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from agentrein import ActionStatus, AgentRein, AsyncAgentRein, RollbackFailedError, SessionInfo, UndoStatus
from agentrein_cli.main import app
from agentrein_core.vault import SECRET_KEY_ENV
from agentrein_testing import FakeService

#: A loopback address nothing listens on: were a mocked client's transport ever lost, its requests would be
#: refused here rather than go anywhere else.
NOWHERE = "http://127.0.0.1:9"


def undone(session: SessionInfo) -> list[tuple[ActionStatus, UndoStatus]]:
    return [(a.status, a.undo_status) for a in session.actions]


def test_a_session_wrapped_inside_a_with_block_rolls_back_after_the_block(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    with httpx.Client(base_url=service.base_url) as raw:
        api = ar.wrap(raw, session, connector="http")
        order = api.post("/v1/orders", json={"sku": "A1"}).json()
    rolled_back = ar.rollback_session(session)
    assert undone(rolled_back) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert [r.path for r in service.calls("DELETE")] == [f"/v1/orders/{order['id']}"]
    assert service.collection("orders") == {}


def test_an_async_client_closed_by_its_async_with_block_rolls_back_after_it(
    ar: AgentRein, service: FakeService
) -> None:
    session = ar.new_session(agent_id="a", intent="i")

    async def agent() -> None:
        async with httpx.AsyncClient(base_url=service.base_url) as raw:
            api = ar.wrap(raw, session, connector="http")
            await api.post("/v1/orders", json={"sku": "A1"})
            await api.post("/v1/things", json={"name": "t"})

    asyncio.run(agent())
    rolled_back = ar.rollback_session(session)
    assert undone(rolled_back) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)] * 2
    assert [r.path.split("/")[2] for r in service.calls("DELETE")] == ["things", "orders"]


def test_an_async_agent_rolls_back_on_its_own_loop_after_its_async_with_block(
    database_url: str, service: FakeService
) -> None:
    async def agent() -> SessionInfo:
        async with AsyncAgentRein(database_url, organisation="async-agents") as ar:
            session = await ar.new_session(agent_id="a", intent="i")
            async with httpx.AsyncClient(base_url=service.base_url) as raw:
                await ar.wrap(raw, session, connector="http").post("/v1/orders", json={"sku": "A1"})
            return await ar.rollback_session(session)  # the reopened client's inverse runs on this loop

    assert undone(asyncio.run(agent())) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert service.collection("orders") == {}


class MockedService:
    """A service answered by an ``httpx.MockTransport`` (no socket), which keeps every request it got."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "POST":
            return httpx.Response(201, json={"id": "ord_1"})
        return httpx.Response(204)

    def deletes(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "DELETE"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_closed_client_is_reopened_on_its_own_transport(embedded: AgentRein, kind: str) -> None:
    mocked = MockedService()
    session = embedded.new_session(agent_id="a", intent="i")
    if kind == "sync":
        with httpx.Client(base_url=NOWHERE, transport=mocked.transport) as raw:
            embedded.wrap(raw, session, connector="http").post("/v1/orders", json={})
    else:

        async def agent() -> None:
            async with httpx.AsyncClient(base_url=NOWHERE, transport=mocked.transport) as raw:
                await embedded.wrap(raw, session, connector="http").post("/v1/orders", json={})

        asyncio.run(agent())
    assert undone(embedded.rollback_session(session)) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert [str(r.url) for r in mocked.deletes()] == [f"{NOWHERE}/v1/orders/ord_1"]


def test_a_reopened_client_sends_the_closed_ones_headers_auth_cookies_and_params(embedded: AgentRein) -> None:
    mocked = MockedService()
    session = embedded.new_session(agent_id="a", intent="i")
    settings = {
        "headers": {"X-Tenant": "acme"},
        "auth": ("agent", "s3cret"),
        "cookies": {"sid": "c-1"},
        "params": {"region": "eu"},
    }
    with httpx.Client(base_url=NOWHERE, transport=mocked.transport, **settings) as raw:  # type: ignore[arg-type]
        embedded.wrap(raw, session, connector="http").post("/v1/orders", json={})
    embedded.rollback_session(session)
    (delete,) = mocked.deletes()
    assert delete.headers["X-Tenant"] == "acme"
    assert delete.headers["Authorization"] == "Basic " + base64.b64encode(b"agent:s3cret").decode()
    assert delete.headers["Cookie"] == "sid=c-1"
    assert delete.url.params["region"] == "eu"


def bearer(service: FakeService, token: str) -> httpx.Client:
    return httpx.Client(base_url=service.base_url, headers={"Authorization": f"Bearer {token}"})


def undo_tokens(service: FakeService) -> list[str | None]:
    return [r.authorization for r in service.calls("DELETE")]


def ordered_by_a_closed_client(ar: AgentRein, service: FakeService, token: str) -> SessionInfo:
    """A session whose order was created inside a ``with`` block, its client closed since."""
    session = ar.new_session(agent_id="a", intent="i")
    with bearer(service, token) as closing:
        ar.wrap(closing, session, connector="http").post("/v1/orders", json={})
    return session


def test_an_action_is_undone_with_its_own_client_while_it_is_open(embedded: AgentRein, service: FakeService) -> None:
    session = embedded.new_session(agent_id="a", intent="i")
    embedded.wrap(bearer(service, "a"), session, connector="http").post("/v1/orders", json={})
    with bearer(service, "b") as closing:
        embedded.wrap(closing, session, connector="http").post("/v1/things", json={})
    embedded.wrap(bearer(service, "c"), session, connector="http")  # newer, and open
    embedded.rollback_session(session)
    assert undo_tokens(service) == ["Bearer c", "Bearer a"]  # the thing (its client closed), then the order


def test_once_a_session_is_completed_its_actions_are_undone_through_its_newest_open_client(
    embedded: AgentRein, service: FakeService
) -> None:
    session = embedded.new_session(agent_id="a", intent="i")
    embedded.wrap(bearer(service, "a"), session, connector="http").post("/v1/orders", json={})
    embedded.wrap(bearer(service, "b"), session, connector="http")  # newer, and open
    embedded.complete_session(session)  # which client made each action is forgotten: nothing kept per call
    embedded.rollback_session(session)
    assert undo_tokens(service) == ["Bearer b"]


def test_the_newest_open_client_of_the_session_undoes_what_a_closed_client_did(
    embedded: AgentRein, service: FakeService
) -> None:
    session = ordered_by_a_closed_client(embedded, service, "a")
    embedded.wrap(bearer(service, "b"), session, connector="http")
    embedded.wrap(bearer(service, "c"), session, connector="http")
    embedded.rollback_session(session)
    assert undo_tokens(service) == ["Bearer c"]


def test_a_closed_client_is_reopened_when_the_session_has_no_open_one(
    embedded: AgentRein, service: FakeService
) -> None:
    session = ordered_by_a_closed_client(embedded, service, "a")
    with bearer(service, "b") as closing:
        embedded.wrap(closing, session, connector="http")  # newer, but closed too: the action's own wins
    embedded.rollback_session(session)
    assert undo_tokens(service) == ["Bearer a"]


# The organisation's stored settings ----------------------------------------------------------------------


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The key the command line stores credentials with, and embedded agents read them with."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv(SECRET_KEY_ENV, key)
    return key


def enable_http(database_url: str, organisation: str, allowed_hosts: list[str]) -> None:
    """What an operator does once: ``agentrein connectors enable http`` on the agents' database."""
    result = CliRunner().invoke(
        app,
        [
            "connectors",
            "enable",
            "http",
            "--config",
            json.dumps({"allowedHosts": allowed_hosts}),
            "--credentials",
            json.dumps({"headers": {"Authorization": "Bearer org-token"}}),
            "--database-url",
            database_url,
            "--org",
            organisation,
        ],
        env={"COLUMNS": "160", "AGENTREIN_URL": None, "AGENTREIN_DATABASE_URL": None},
    )
    assert result.exit_code == 0, result.output


def an_order(ar: AgentRein, service: FakeService) -> SessionInfo:
    """A session in which the agent created an order, through a client it leaves open."""
    session = ar.new_session(agent_id="a", intent="i")
    ar.wrap(bearer(service, "agent"), session, connector="http").post("/v1/orders", json={})
    return session


@pytest.fixture
def another_process(embedded: AgentRein, database_url: str) -> Iterator[AgentRein]:
    """AgentRein of another process on the same records: it has wrapped no client."""
    later = AgentRein(database_url, organisation=embedded.organisation)
    yield later
    later.close()


@pytest.mark.usefixtures("secret_key")
def test_a_process_that_wrapped_no_client_rolls_back_through_the_organisation_s_stored_settings(
    embedded: AgentRein, another_process: AgentRein, database_url: str, service: FakeService
) -> None:
    session = an_order(embedded, service)
    enable_http(database_url, embedded.organisation, ["127.0.0.1"])
    rolled_back = another_process.rollback_session(session)
    assert undone(rolled_back) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert undo_tokens(service) == ["Bearer org-token"]


@pytest.mark.usefixtures("secret_key")
def test_stored_settings_refuse_an_undo_outside_their_allowed_hosts(
    embedded: AgentRein, another_process: AgentRein, database_url: str, service: FakeService
) -> None:
    session = an_order(embedded, service)
    enable_http(database_url, embedded.organisation, ["api.example.com"])
    with pytest.raises(RollbackFailedError) as raised:
        another_process.rollback_session(session)
    (action,) = raised.value.session.actions
    assert action.status is ActionStatus.ROLLBACK_FAILED
    assert "not in the http connector's allowedHosts" in (action.error or "")
    assert service.calls("DELETE") == []


@pytest.mark.usefixtures("secret_key")
def test_a_closed_client_of_the_session_is_reopened_rather_than_the_stored_settings_used(
    embedded: AgentRein, database_url: str, service: FakeService
) -> None:
    enable_http(database_url, embedded.organisation, ["127.0.0.1"])
    session = ordered_by_a_closed_client(embedded, service, "agent")
    embedded.rollback_session(session)
    assert undo_tokens(service) == ["Bearer agent"]


def test_stored_credentials_are_read_with_the_key_file_the_command_line_made_beside_the_database(
    tmp_path: Path, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    with AgentRein(url) as agent:
        session, organisation = an_order(agent, service), agent.organisation
    enable_http(url, organisation, ["127.0.0.1"])  # makes the key file
    with AgentRein(url) as later:
        assert undone(later.rollback_session(session)) == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert undo_tokens(service) == ["Bearer org-token"]


def test_stored_credentials_without_their_secret_key_fail_the_undo_saying_where_the_key_was_looked_for(
    tmp_path: Path, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    with AgentRein(url) as agent:
        session, organisation = an_order(agent, service), agent.organisation
    enable_http(url, organisation, ["127.0.0.1"])
    monkeypatch.delenv(SECRET_KEY_ENV)  # the agent's process was not given the key, and no key file was made
    with AgentRein(url) as later, pytest.raises(RollbackFailedError) as raised:
        later.rollback_session(session)
    (action,) = raised.value.session.actions
    assert f"no secret key (set {SECRET_KEY_ENV}" in (action.error or "")
    assert "agentrein.db.secret-key" in (action.error or "")
    assert service.calls("DELETE") == []
    assert not (tmp_path / "agentrein.db.secret-key").exists()
