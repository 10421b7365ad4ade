"""The runner of inverses: an async client's inverse is awaited on the loop the client belongs to, refused on
that loop's own thread, and every attempt of it carries the action's undo key."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentrein import ActionStatus, AgentRein
from agentrein_core.errors import AgentReinError
from agentrein_core.model import Action
from agentrein_core.plugins import installed_connectors
from agentrein_core.runner import run_inverse
from agentrein_testing import FakeService

HTTP = installed_connectors().get("http")


def created_order(ar: AgentRein, service: FakeService) -> Action:
    """The recorded action of an order created through a wrapped client: what the tests undo."""
    session = ar.new_session(agent_id="a", intent="i")
    with ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http") as client:
        client.post("/v1/orders", json={})
    (action,) = ar.get_session(session).actions
    return action


def test_an_async_clients_inverse_runs_on_the_clients_loop_when_rolled_back_from_a_worker_thread(
    embedded: AgentRein, service: FakeService
) -> None:
    session = embedded.new_session(agent_id="a", intent="i")
    loops: dict[str, asyncio.AbstractEventLoop] = {}

    async def note_loop(request: httpx.Request) -> None:
        loops[request.method] = asyncio.get_running_loop()

    async def agent() -> asyncio.AbstractEventLoop:
        raw = httpx.AsyncClient(base_url=service.base_url, event_hooks={"request": [note_loop]})
        async with embedded.wrap(raw, session, connector="http") as client:
            await client.post("/v1/orders", json={})
            await asyncio.to_thread(embedded.rollback_session, session)
        return asyncio.get_running_loop()

    loop = asyncio.run(agent())
    assert loops == {"POST": loop, "DELETE": loop}
    assert embedded.get_session(session).actions[0].status is ActionStatus.ROLLED_BACK
    assert service.collection("orders") == {}


def test_an_async_clients_inverse_is_refused_on_its_loops_own_thread_before_anything_is_sent(
    embedded: AgentRein, service: FakeService
) -> None:
    action = created_order(embedded, service)

    async def on_the_loop() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(AgentReinError, match=r"await asyncio\.to_thread\(ar\.rollback_session, session\)"):
                run_inverse(HTTP, action, client, loop=asyncio.get_running_loop())

    asyncio.run(on_the_loop())
    assert service.calls("DELETE") == []
    assert len(service.collection("orders")) == 1


def test_an_async_clients_inverse_runs_on_a_fresh_loop_when_its_own_is_not_running(
    embedded: AgentRein, service: FakeService
) -> None:
    action = created_order(embedded, service)
    stopped = asyncio.new_event_loop()
    try:
        run_inverse(HTTP, action, httpx.AsyncClient(), loop=stopped)
    finally:
        stopped.close()
    assert [r.idempotency_key for r in service.calls("DELETE")] == [action.undo_idempotency_key]
    assert service.collection("orders") == {}


def test_every_retry_of_a_transient_undo_failure_carries_the_actions_undo_key(
    embedded: AgentRein, service: FakeService
) -> None:
    action = created_order(embedded, service)
    service.fail_next("DELETE", "/v1/orders/*", status=503, times=2)

    async def from_a_worker_thread() -> None:
        async with httpx.AsyncClient() as client:
            await asyncio.to_thread(run_inverse, HTTP, action, client, loop=asyncio.get_running_loop())

    asyncio.run(from_a_worker_thread())
    assert [r.idempotency_key for r in service.calls("DELETE")] == [action.undo_idempotency_key] * 3
    assert service.collection("orders") == {}
