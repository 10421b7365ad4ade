"""Undos the server hands to agent processes (DESIGN §4a): those of a connector with no server side, and those
whose service the organisation's settings do not name (an MCP server they do not list), are undone by the
process that holds the client it wrapped. That process takes an undo
offered for its sessions (``claim``, a long-poll), runs it through its client, and reports the outcome; the
rollback waits meanwhile, and goes on (or stops, on a failure) once it hears."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

import msgspec
from litestar import Controller, post
from litestar.params import FromPath, JSONBody, QueryParameter

from agentrein_core.converter import to_wire
from agentrein_core.errors import LeaseLostError, NotFoundError
from agentrein_core.read_models import HandedUndo
from agentrein_server.api import bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep

#: A session id or a connector's name.
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
#: The most sessions one claim names (a process names those it wrapped clients for most recently).
MAX_CLAIMED_SESSIONS = 1000


class ClaimUndos(bodies.Body):
    """The sessions and connectors the calling process holds clients of."""

    sessions: Annotated[list[Name], msgspec.Meta(max_length=MAX_CLAIMED_SESSIONS)]
    connectors: Annotated[list[Name], msgspec.Meta(max_length=100)]


class HeldLease(bodies.Body):
    """The lease under which the caller took the undo."""

    lease_id: bodies.Text


class UndoOutcome(bodies.Body):
    """How the handed undo went: ``error`` says why it failed."""

    lease_id: bodies.Text
    succeeded: bool
    error: str | None = None


class HandedUndoAnswer(msgspec.Struct, rename="camel"):
    action_id: str
    session_id: str
    connector: str
    api_name: str
    undo: dict[str, Any]
    idempotency_key: str
    undo_idempotency_key: str
    lease_id: str
    lease_expires_at: datetime
    #: How long a lease runs from its taking or renewal: renew it well within this while the undo runs.
    lease_seconds: float


class Renewed(msgspec.Struct, rename="camel"):
    """The lease as renewed."""

    lease_expires_at: datetime


class Claimed(msgspec.Struct):
    """The undo taken, or ``null`` when none was offered within the wait."""

    undo: HandedUndoAnswer | None


class Reported(msgspec.Struct):
    """The outcome as recorded (``DONE`` or ``FAILED``)."""

    outcome: str


class UndoController(Controller):
    path = "/undos"
    tags = ("rollbacks",)

    @post(
        "/claim",
        sync_to_thread=True,
        operation_id="claimUndo",
        summary="Take an undo handed to the agent's process",
        status_code=200,
        responses=documented(body=True),
    )
    def claim(
        self,
        data: JSONBody[ClaimUndos],
        caller: CallerDep,
        services: ServicesDep,
        wait: Annotated[float, QueryParameter(ge=0, le=bodies.MAX_WAIT)] = 0.0,
    ) -> Claimed:
        """The oldest undo offered for one of ``sessions`` through one of ``connectors``, taken by the caller
        under a lease (``leaseExpiresAt``; renewed by ``POST /undos/{actionId}/renew`` while it runs, each renewal
        good for ``leaseSeconds``) to run it and report (``POST /undos/{actionId}/outcome``); with
        ``wait=N``, waits up to N seconds for one. An agent key takes the undos of the sessions it opened only
        (it may name at most 1,000 sessions; others and unknown ones are passed over)."""
        taken = services.engine.rollbacks.claim_handed_undo(
            caller.org_id, data.sessions, data.connectors, wait, agent_key=caller.agent_key
        )
        return Claimed(undo=None if taken is None else _answer(taken, services.engine.rollbacks.agent_undo_lease))

    @post(
        "/{action_id:str}/renew",
        sync_to_thread=True,
        operation_id="renewUndoLease",
        summary="Keep the lease on a handed undo while it runs",
        status_code=200,
        responses=documented(NotFoundError, LeaseLostError, body=True),
    )
    def renew(
        self, action_id: FromPath[str], data: JSONBody[HeldLease], caller: CallerDep, services: ServicesDep
    ) -> Renewed:
        """The caller is still running the undo it took: its lease runs ``leaseSeconds`` from now again, so an
        undo slower than one lease is reported within it. ``409 lease-lost`` when the lease has ended (the undo
        has failed for want of an outcome, and is never offered again: it may have run), was reported, or is
        not the caller's."""
        renewed = services.engine.rollbacks.renew_handed_undo(
            caller.org_id, action_id, data.lease_id, agent_key=caller.agent_key
        )
        assert renewed.leased_until is not None
        return Renewed(lease_expires_at=renewed.leased_until)

    @post(
        "/{action_id:str}/outcome",
        sync_to_thread=True,
        operation_id="reportUndo",
        summary="Report how a handed undo went",
        status_code=200,
        responses=documented(NotFoundError, LeaseLostError, body=True),
    )
    def report(
        self, action_id: FromPath[str], data: JSONBody[UndoOutcome], caller: CallerDep, services: ServicesDep
    ) -> Reported:
        """The caller ran the undo it took (``succeeded``), or could not (``error``): the rollback goes on, or
        stops. ``409 lease-lost`` when the lease has ended (the undo has failed for want of an outcome) or is
        not the caller's."""
        reported = services.engine.rollbacks.report_handed_undo(
            caller.org_id, action_id, data.lease_id, data.succeeded, data.error, agent_key=caller.agent_key
        )
        return Reported(outcome=str(reported.outcome))


def _answer(taken: HandedUndo, lease: timedelta) -> HandedUndoAnswer:
    action, handoff = taken.action, taken.handoff
    assert action.undo is not None and handoff.lease_id is not None and handoff.leased_until is not None
    return HandedUndoAnswer(
        action_id=action.action_id,
        session_id=action.session_id,
        connector=action.connector,
        api_name=action.api_name,
        undo=to_wire(action.undo),
        idempotency_key=action.idempotency_key,
        undo_idempotency_key=action.undo_idempotency_key,
        lease_id=handoff.lease_id,
        lease_expires_at=handoff.leased_until,
        lease_seconds=lease.total_seconds(),
    )
