"""An httpx.AsyncClient is wrapped the same way and behaves the same, with `await`."""

from __future__ import annotations

import asyncio
import threading
import uuid

import httpx
import pytest

from agentrein import (
    ActionStatus,
    AgentRein,
    ApprovalRejectedError,
    ApprovalStatus,
    AsyncAgentRein,
    DisplayStatus,
    SessionInfo,
    SessionStatus,
    UndoStatus,
    UndoUnavailableError,
)
from agentrein_testing import FakeService


def test_async_calls_are_recorded_and_rolled_back_on_failure(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")

    async def agent() -> None:
        async with ar.wrap(httpx.AsyncClient(base_url=service.base_url), session, connector="http") as client:
            assert isinstance(client, httpx.AsyncClient)
            assert (await client.get("/v1/orders")).status_code == 200
            await client.post("/v1/orders", json={"n": 1})
            await client.post("/v1/things", json={"n": 2})
            with pytest.raises(httpx.HTTPStatusError):
                await client.delete("/v1/orders/missing")

    asyncio.run(agent())
    view = ar.get_session(session)
    assert [a.status for a in view.actions] == [
        ActionStatus.ROLLED_BACK,
        ActionStatus.ROLLED_BACK,
        ActionStatus.FAILED,
    ]
    assert [r.path.split("/")[2] for r in service.calls("DELETE")] == ["orders", "things", "orders"]
    assert view.status is SessionStatus.ROLLED_BACK
    assert service.collection("orders") == {} and service.collection("things") == {}


def test_the_event_loop_keeps_running_while_a_call_waits_for_approval(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    ticks = 0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    def reviewer() -> None:
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.01)
        threading.Event().wait(0.2)
        ar.reject(pending[0].approval_id, reviewer="r", reason="no")

    async def agent() -> None:
        client = ar.wrap(
            httpx.AsyncClient(base_url=service.base_url),
            session,
            connector="http",
            requires_approval=["DELETE *"],
            poll_interval_ms=20,
        )
        await client.post("/v1/orders", json={})
        stop = asyncio.Event()
        task = asyncio.create_task(ticker(stop))
        with pytest.raises(ApprovalRejectedError, match="no"):
            await client.delete("/v1/orders/x")
        stop.set()
        await task
        await client.aclose()

    thread = threading.Thread(target=reviewer)
    thread.start()
    asyncio.run(agent())
    thread.join()
    assert ticks >= 10
    assert [a.status for a in ar.get_session(session).actions] == [
        ActionStatus.ROLLED_BACK,
        ActionStatus.FAILED,
    ]


def test_async_retries_use_one_idempotency_key(ar: AgentRein, service: FakeService) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    service.fail_next("POST", "/v1/orders", status=429)

    async def agent() -> None:
        async with httpx.AsyncClient(base_url=service.base_url) as raw:
            client = ar.wrap(raw, session, connector="http", retryable=["POST *"])
            await client.post("/v1/orders", json={})

    asyncio.run(agent())
    attempts = service.calls("POST")
    assert len(attempts) == 2 and attempts[0].idempotency_key == attempts[1].idempotency_key
    assert ar.get_session(session).actions[0].status is ActionStatus.SUCCESS


def test_a_synchronous_rollback_on_the_async_client_s_own_loop_is_refused_before_anything_changes(
    embedded: AgentRein, service: FakeService
) -> None:
    session = embedded.new_session(agent_id="a", intent="i")

    async def agent() -> None:
        client = embedded.wrap(httpx.AsyncClient(base_url=service.base_url), session, connector="http")
        await client.post("/v1/orders", json={"n": 1})
        with pytest.raises(UndoUnavailableError, match=r"asyncio\.to_thread"):
            embedded.rollback_session(session)  # would block the loop its own inverse needs
        (action,) = embedded.get_session(session).actions
        assert (action.status, action.undo_status) == (ActionStatus.SUCCESS, UndoStatus.NONE)
        assert embedded.get_session(session).display_status is DisplayStatus.ACTIVE
        rolled_back = await asyncio.to_thread(embedded.rollback_session, session)
        assert rolled_back.actions[0].status is ActionStatus.ROLLED_BACK

    asyncio.run(agent())
    assert service.collection("orders") == {}


@pytest.fixture(params=["embedded", "server"])
def async_ar(request: pytest.FixtureRequest, database_url: str) -> AsyncAgentRein:
    """AsyncAgentRein in an organisation of its own: embedded on the database, and through a real server."""
    if request.param == "embedded":
        return AsyncAgentRein(database_url, organisation=f"test-{uuid.uuid4().hex[:8]}")
    tenant = request.getfixturevalue("server").tenant()
    return AsyncAgentRein(base_url=tenant.url, api_key=tenant.key)


def test_an_async_agent_awaits_agentrein_and_rolls_back_on_its_own_event_loop(
    async_ar: AsyncAgentRein, service: FakeService
) -> None:
    async def agent() -> SessionInfo:
        async with async_ar as ar:
            session = await ar.new_session(agent_id="a", intent="i")
            client = ar.wrap(httpx.AsyncClient(base_url=service.base_url), session, connector="http")
            await client.post("/v1/orders", json={"n": 1})
            await client.post("/v1/things", json={"n": 2})
            assert [s.id for s in await ar.list_sessions()] == [session.id]
            return await ar.rollback_session(session)  # on the loop the client's inverses need

    rolled_back = asyncio.run(agent())
    assert [a.status for a in rolled_back.actions] == [ActionStatus.ROLLED_BACK] * 2
    assert [r.path.split("/")[2] for r in service.calls("DELETE")] == ["things", "orders"]


def test_an_async_agent_decides_approvals_and_manages_policies_by_awaiting(
    async_ar: AsyncAgentRein, service: FakeService
) -> None:
    async def agent() -> None:
        async with async_ar as ar:
            policy = await ar.add_policy(name="review orders", effect="REQUIRE_APPROVAL", api_name="POST /v1/orders")
            assert [p.policy_id for p in await ar.list_policies()] == [policy.policy_id]
            session = await ar.new_session(agent_id="a", intent="i")
            client = ar.wrap(httpx.AsyncClient(base_url=service.base_url), session, connector="http")
            await client.post("/v1/orders", json={"n": 1})
            (review,) = await ar.list_approvals(status="PENDING")
            decided = await ar.approve(review.approval_id, reviewer="lead")
            assert decided.status is ApprovalStatus.APPROVED
            assert (await ar.get_approval(review.approval_id)).resolved_by is not None
            assert not (await ar.set_policy_enabled(policy.policy_id, False)).enabled
            await ar.remove_policy(policy.policy_id)
            assert await ar.list_policies() == []
            assert (await ar.complete_session(session)).status is SessionStatus.COMPLETED

    asyncio.run(agent())


def test_an_async_agent_whose_call_is_cancelled_while_it_waits_withdraws_its_request(
    ar: AgentRein, service: FakeService
) -> None:
    session = ar.new_session(agent_id="a", intent="i")

    async def agent() -> None:
        client = ar.wrap(
            httpx.AsyncClient(base_url=service.base_url),
            session,
            connector="http",
            requires_approval=["POST *"],
            poll_interval_ms=50,
        )
        call = asyncio.create_task(client.post("/v1/refunds", json={"amount": 10}))
        while not await asyncio.to_thread(ar.list_approvals, "PENDING"):
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(agent())
    (request,) = ar.list_approvals()
    assert request.status is ApprovalStatus.REJECTED and request.action_status is ActionStatus.FAILED
    assert "withdrawn: the agent stopped waiting (CancelledError)" in (request.reason or "")
    assert service.calls("POST", "/v1/refunds") == []


def test_an_inverse_through_an_async_client_whose_loop_has_ended_is_recorded_done(
    embedded: AgentRein, service: FakeService
) -> None:
    """The DELETE goes out on the pooled connection of the ended loop, then fails: the outcome is unknown, so
    it is tried again under the same key (the repeat finds the order gone), never recorded as not done."""
    session = embedded.new_session(agent_id="a", intent="i")

    async def agent() -> None:
        client = embedded.wrap(httpx.AsyncClient(base_url=service.base_url), session, connector="http")
        await client.post("/v1/orders", json={"n": 1})

    asyncio.run(agent())  # the loop, and the client's connections with it, are gone
    rolled_back = embedded.rollback_session(session)
    assert [(a.status, a.undo_status) for a in rolled_back.actions] == [(ActionStatus.ROLLED_BACK, UndoStatus.DONE)]
    assert service.collection("orders") == {}
    assert len({r.idempotency_key for r in service.calls("DELETE")}) == 1
