"""When AgentRein's database cannot be reached: `open` runs the call anyway (warning once), and opens a
session anyway, journaling both until the database answers; `closed` refuses before any side effect, and the
session is rolled back (action logging failed) once the database answers. The
outage is real: PostgreSQL is reached through a loopback relay the test cuts or pauses."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from relay import Relay

from agentrein import ActionStatus, AgentRein, AgentReinUnavailableError, DisplayStatus, SessionStatus
from agentrein_testing import FakeService


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


def test_open_mode_opens_a_session_while_the_database_is_away_and_records_it_once_it_is_back(
    relayed: tuple[AgentRein, Relay], service: FakeService
) -> None:
    ar, relay = relayed
    relay.pause()
    with pytest.warns(RuntimeWarning, match="AgentRein is unavailable"):
        session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    assert client.post("/v1/orders", json={}).status_code == 201
    ar.complete_session(session)
    relay.resume()
    stored = ar.get_session(session)  # replays the journal first
    assert (stored.id, stored.status) == (session.id, SessionStatus.COMPLETED)
    assert [a.status for a in stored.actions] == [ActionStatus.SUCCESS]


def test_closed_mode_refuses_a_call_while_the_database_is_away_and_rolls_the_session_back_once_it_is_back(
    relayed: tuple[AgentRein, Relay], service: FakeService
) -> None:
    ar, relay = relayed
    session = ar.new_session(agent_id="a", intent="i")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", failure_mode="closed")
    client.post("/v1/orders", json={})
    relay.pause()
    with pytest.raises(AgentReinUnavailableError) as raised:
        client.post("/v1/orders", json={})
    assert any("the rollback is journaled" in note for note in raised.value.__notes__)
    assert len(service.calls("POST")) == 1
    relay.resume()
    rolled_back = ar.get_session(session)  # replays the journal first: the rollback runs here
    assert rolled_back.display_status is DisplayStatus.REVERTED
    assert service.collection("orders") == {}
