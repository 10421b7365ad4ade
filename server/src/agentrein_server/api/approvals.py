"""Approval requests: the reviewer's queue, one request (long-poll), and decisions."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from agentrein_core.converter import to_wire
from agentrein_core.errors import ValidationError
from agentrein_core.statuses import ApprovalStatus
from agentrein_core.views import ApprovalInfo, IncludedField
from agentrein_server.api import bodies
from agentrein_server.services import CallerDep, ServicesDep

#: The fields of ``GET /approvals``, exactly as the status reference §4 lists them.
LISTED_FIELDS = (
    "approvalId",
    "actionId",
    "apiName",
    "operationType",
    "sessionId",
    "agentId",
    "payloadSummary",
    "requestedAt",
    "timeoutAt",
    "timeRemaining",
    "status",
    "resolvedAt",
    "resolvedBy",
    "reason",
    "actionStatus",
    "unconfirmed",
)


class ApprovalController(Controller):
    path = "/approvals"
    tags = ("approvals",)

    @get(sync_to_thread=True)
    def list(
        self,
        caller: CallerDep,
        services: ServicesDep,
        status: FromQuery[ApprovalStatus | None] = None,
        include: FromQuery[list[IncludedField] | None] = None,
    ) -> list[dict[str, Any]]:
        """Pending first, oldest first, with exactly the fields of the status reference §4; each ``include``
        (repeat it: ``include=purpose&include=consequences``) adds a field of ``GET /approvals/{id}``.
        ``timeRemaining`` is in seconds; ``unconfirmed`` flags an approved action whose execution was never
        confirmed within an hour."""
        fields = (*LISTED_FIELDS, *(include or ()))
        infos = services.engine.list_approvals(caller.org_id, status)
        return [{k: v for k, v in to_wire(info).items() if k in fields} for info in infos]

    @get("/{approval_id:str}", sync_to_thread=True)
    def show(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        wait: Annotated[float, QueryParameter(ge=0, le=bodies.MAX_WAIT)] = 0.0,
    ) -> dict[str, Any]:
        """One request, with its ``purpose``, the action in its connector's words (``description``,
        ``targetHost``), its redacted ``payload``, and what deciding it does: while it is pending,
        ``consequences`` (``approve`` and ``reject``, each a ``summary``, the ``steps`` a rollback would take
        last done first, and ``irreversible``); once decided, its ``outcome`` as things stand. ``wait=N``
        long-polls: the answer comes the moment the request is decided (on any replica), or after N seconds
        with it still ``PENDING``."""
        engine = services.engine
        if wait > 0:
            return _wire(engine.wait_for_decision(caller.org_id, approval_id, wait))
        return _wire(engine.get_approval(caller.org_id, approval_id))

    @post("/{approval_id:str}/approve", status_code=200, sync_to_thread=True, responses=bodies.JSON_ONLY)
    def approve(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Decision | None] = None,
    ) -> dict[str, Any]:
        return self._decide(approval_id, caller, services, data, approve=True)

    @post("/{approval_id:str}/reject", status_code=200, sync_to_thread=True, responses=bodies.JSON_ONLY)
    def reject(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Decision | None] = None,
    ) -> dict[str, Any]:
        """What a rejection does depends on the purpose (status reference §4); the server carries it out,
        rolling back where the rules say so. ``409`` if the request was already decided."""
        return self._decide(approval_id, caller, services, data, approve=False)

    @post("/{approval_id:str}/withdraw", status_code=200, sync_to_thread=True, responses=bodies.JSON_ONLY)
    def withdraw(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Withdrawal | None] = None,
    ) -> dict[str, Any]:
        """The agent stopped waiting for a before-execution request (interrupted, cancelled): it closes
        ``REJECTED`` as withdrawn, and its action is ``FAILED``; nothing is rolled back. Agent keys may.
        ``409`` if it was decided already."""
        reason = (data or bodies.Withdrawal()).reason
        services.engine.withdraw(caller.org_id, approval_id, f"{reason} ({caller.label})")
        return _wire(services.engine.get_approval(caller.org_id, approval_id))

    @staticmethod
    def _decide(
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: bodies.Decision | None,
        *,
        approve: bool,
    ) -> dict[str, Any]:
        caller.require_operator("decide approval requests")
        decision = data or bodies.Decision()
        if decision.reviewer is not None and not decision.reviewer.strip():
            raise ValidationError("reviewer", "must not be empty (leave it out to be named by your API key)")
        # The record names the key as well as whoever the caller says decided, so it cannot be forged.
        reviewer = f"{decision.reviewer} ({caller.label})" if decision.reviewer else caller.label
        services.decide(caller.org_id, approval_id, reviewer, decision.reason, approve=approve)
        return _wire(services.engine.get_approval(caller.org_id, approval_id))


def _wire(info: ApprovalInfo) -> dict[str, Any]:
    return to_wire(info)  # type: ignore[no-any-return]
