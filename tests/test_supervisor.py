"""The core's supervisor as embedded mode runs it: in daemon threads of the agent's process, it expires
approvals, resumes rollbacks left to run and runs only the undos of sessions this process wrapped; closing the
client stops it. The server's workers run it with the server's metrics."""

from __future__ import annotations

import re
import threading
import uuid
from datetime import timedelta

import httpx
from peers import eventually
from serving import RunningServer

from agentrein import AgentRein
from agentrein_core.commands import WriteAhead
from agentrein_core.engine import Engine
from agentrein_core.model import Rollback
from agentrein_core.statuses import ActionStatus, ApprovalStatus, OperationType, Role, SessionStatus, UndoStatus
from agentrein_core.store import Store
from agentrein_testing import FakeService


def organisation() -> str:
    return f"supervised-{uuid.uuid4().hex[:8]}"


def supervisor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentrein-supervisor")]


def started(ar: AgentRein, service: FakeService) -> str:
    """A session of ``ar`` with one order made through a wrapped client; the client is closed."""
    session = ar.new_session(agent_id="agent", intent="make an order")
    with ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http") as client:
        client.post("/v1/orders", json={})
    return session.id


def rollback_left_to_run(database_url: str, organisation: str, session_id: str) -> Rollback:
    """A rollback requested by a process killed before it ran an undo (no supervisor of its own)."""
    engine = Engine(Store(database_url))
    try:
        org_id = engine.accounts.ensure_organisation(organisation).org_id
        return engine.rollbacks.request_rollback(org_id, session_id, caller_role=Role.OPERATOR, requested_by="killed")
    finally:
        engine.store.close()


def test_an_approval_past_its_time_is_expired_by_the_embedded_supervisor_with_no_call_from_the_agent(
    embedded: AgentRein,
) -> None:
    mode = embedded._mode
    session = embedded.new_session(agent_id="agent", intent="wait for a reviewer")
    logged = mode.log_action(
        session.id,
        WriteAhead(
            connector="http",
            api_name="POST /v1/orders",
            operation_type=OperationType.CREATE,
            payload={},
            requires_approval=True,
            approval_timeout=timedelta(milliseconds=300),
        ),
    )
    assert logged.approval is not None
    approval_id = logged.approval.approval_id
    assert embedded.get_approval(approval_id).status is ApprovalStatus.PENDING
    expired = eventually(lambda: embedded.get_approval(approval_id), lambda a: a.status is not ApprovalStatus.PENDING)
    assert expired.status is ApprovalStatus.EXPIRED


def test_a_rollback_left_by_a_killed_process_is_resumed_by_the_next_process_that_wraps_its_session(
    database_url: str, service: FakeService
) -> None:
    org = organisation()
    first = AgentRein(database_url, organisation=org)
    session_id = started(first, service)
    first.close()
    rollback_left_to_run(database_url, org, session_id)
    later = AgentRein(database_url, organisation=org)
    try:
        later.wrap(httpx.Client(base_url=service.base_url), session_id, connector="http")
        session = eventually(lambda: later.get_session(session_id), lambda s: s.status is SessionStatus.ROLLED_BACK)
    finally:
        later.close()
    assert session.status is SessionStatus.ROLLED_BACK
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK]
    assert len(service.calls("DELETE")) == 1


def test_a_process_runs_no_undo_of_a_session_it_did_not_wrap(database_url: str, service: FakeService) -> None:
    org = organisation()
    first = AgentRein(database_url, organisation=org)
    others, own = started(first, service), started(first, service)
    first.close()
    rollback_left_to_run(database_url, org, others)  # the older job: looked at first
    rollback_left_to_run(database_url, org, own)
    later = AgentRein(database_url, organisation=org)
    try:
        later.wrap(httpx.Client(base_url=service.base_url), own, connector="http")
        done = eventually(lambda: later.get_session(own), lambda s: s.status is SessionStatus.ROLLED_BACK)
        left = later.get_session(others)
    finally:
        later.close()
    assert done.status is SessionStatus.ROLLED_BACK
    assert left.status is SessionStatus.ACTIVE
    assert [a.undo_status for a in left.actions] == [UndoStatus.NONE]
    assert len(service.calls("DELETE")) == 1


def test_closing_the_client_stops_its_supervisor_threads(database_url: str) -> None:
    before = supervisor_threads()
    ar = AgentRein(database_url, organisation=organisation())
    running = [t for t in supervisor_threads() if t not in before]
    assert running and all(t.daemon for t in running)
    ar.close()
    assert [t.name for t in running if t.is_alive()] == []


def finished_rollbacks(server: RunningServer) -> float:
    found = re.search(r'^agentrein_rollbacks_finished_total\{outcome="succeeded"\} (\S+)$', metrics(server), re.M)
    return float(found.group(1)) if found else 0.0


def metrics(server: RunningServer) -> str:
    return httpx.get(f"{server.url}/metrics").text


def test_the_servers_supervisor_counts_each_rollback_it_finished_in_the_servers_metrics(
    server: RunningServer, service: FakeService
) -> None:
    before = finished_rollbacks(server)
    ar = server.tenant().client()
    try:
        session = ar.new_session(agent_id="agent", intent="make an order")
        undo = {"POST *": {"type": "none"}}  # the server's supervisor skips it: no connector settings needed
        client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", undo=undo)  # type: ignore[arg-type]
        client.post("/v1/orders", json={})
        ar.rollback_session(session.id)
    finally:
        ar.close()
    assert eventually(lambda: finished_rollbacks(server), lambda n: n > before) == before + 1
