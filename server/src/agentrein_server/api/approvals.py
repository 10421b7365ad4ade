"""Approval requests: the reviewer's queue, one request (long-poll), and decisions."""

from __future__ import annotations

import builtins
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import ResponseHeader
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from agentrein_core.converter import to_wire
from agentrein_core.errors import ForbiddenError, InvalidTransitionError, NotFoundError, ValidationError
from agentrein_core.read_models import EXPLAINED_FIELDS, LISTED_FIELDS, ApprovalInfo, IncludedField
from agentrein_core.statuses import ApprovalStatus
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class ApprovalController(Controller):
    path = "/approvals"
    tags = ("approvals",)

    @get(
        sync_to_thread=True,
        operation_id="listApprovals",
        summary="List approval requests",
        responses=documented(ValidationError),
        response_headers=[
            ResponseHeader(
                name="Link",
                description='The next page, when there is one: `<URL>; rel="next"` (RFC 8288).',
                documentation_only=True,
                required=False,
            )
        ],
    )
    def list(
        self,
        request: Request[Any, Any, Any],
        caller: CallerDep,
        services: ServicesDep,
        status: FromQuery[ApprovalStatus | None] = None,
        include: FromQuery[builtins.list[IncludedField] | None] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
        cursor: bodies.Cursor = None,
    ) -> Response[answers.ListedApprovals]:
        """Pending first, oldest first, with exactly the fields of the status reference §4; each ``include``
        (repeat it: ``include=purpose&include=consequences``) adds a field of ``GET /approvals/{id}``.
        ``timeRemaining`` is in seconds; ``unconfirmed`` flags an approved action whose execution was never
        confirmed within an hour. At most ``limit`` approvals (100 by default); the ``Link`` header's
        ``rel="next"`` URL fetches the next page. An agent key lists those of the sessions it opened."""
        fields = (*LISTED_FIELDS, *(include or ()))
        page = services.engine.reviews.approval_page(
            caller.org_id,
            status,
            limit=limit,
            cursor=cursor,
            explained=not EXPLAINED_FIELDS.isdisjoint(fields),
            agent_key=caller.agent_key,
        )
        listed = [{k: v for k, v in to_wire(info).items() if k in fields} for info in page.approvals]
        if page.next_cursor is None:
            return Response(listed)
        following = f"{request.url.path}?{_with_cursor(request, page.next_cursor)}"  # relative: right behind a proxy
        return Response(listed, headers={"Link": f'<{following}>; rel="next"'})

    @get(
        "/{approval_id:str}",
        sync_to_thread=True,
        operation_id="getApproval",
        summary="Show an approval request (or wait for its decision)",
        responses=documented(ValidationError, NotFoundError),
    )
    def show(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        wait: Annotated[float, QueryParameter(ge=0, le=bodies.MAX_WAIT)] = 0.0,
    ) -> answers.ApprovalInfo:
        """One request, with its ``purpose``, the action in its connector's words (``description``,
        ``targetHost``), its redacted ``payload``, and what deciding it does: while it is pending,
        ``consequences`` (``approve`` and ``reject``, each a ``summary``, the ``steps`` a rollback would take
        last done first, and ``irreversible``); once decided, its ``outcome`` as things stand. ``wait=N``
        long-polls: the answer comes the moment the request is decided (on any replica), or after N seconds
        with it still ``PENDING``. A long-poll on a before-execution request is its agent's presence: without
        one open (or ended moments ago), ``agentStoppedWaitingAt`` says since when nobody waits for it."""
        engine, agent_key = services.engine, caller.agent_key
        if wait > 0:
            return _wire(engine.reviews.wait_for_decision(caller.org_id, approval_id, wait, agent_key=agent_key))
        return _wire(engine.reviews.get_approval(caller.org_id, approval_id, agent_key=agent_key))

    @post(
        "/{approval_id:str}/approve",
        status_code=200,
        sync_to_thread=True,
        operation_id="approveRequest",
        operation_class=bodies.OptionalBody,
        summary="Approve a request",
        responses=documented(ForbiddenError, NotFoundError, InvalidTransitionError, body=True),
    )
    def approve(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Decision | None] = None,
    ) -> answers.ApprovalInfo:
        return self._decide(approval_id, caller, services, data, approve=True)

    @post(
        "/{approval_id:str}/reject",
        status_code=200,
        sync_to_thread=True,
        operation_id="rejectRequest",
        operation_class=bodies.OptionalBody,
        summary="Reject a request",
        responses=documented(ForbiddenError, NotFoundError, InvalidTransitionError, body=True),
    )
    def reject(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Decision | None] = None,
    ) -> answers.ApprovalInfo:
        """What a rejection does depends on the purpose (status reference §4); the server carries it out,
        rolling back where the rules say so. ``409`` if the request was already decided."""
        return self._decide(approval_id, caller, services, data, approve=False)

    @post(
        "/{approval_id:str}/withdraw",
        status_code=200,
        sync_to_thread=True,
        operation_id="withdrawRequest",
        operation_class=bodies.OptionalBody,
        summary="Withdraw a request the agent stopped waiting for",
        responses=documented(NotFoundError, InvalidTransitionError, body=True),
    )
    def withdraw(
        self,
        approval_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.Withdrawal | None] = None,
    ) -> answers.ApprovalInfo:
        """The agent stopped waiting for a before-execution request (interrupted, cancelled): it closes
        ``REJECTED`` as withdrawn, and its action is ``FAILED``; nothing is rolled back. Agent keys may, for
        the sessions they opened. ``409`` if it was decided already."""
        reason = (data or bodies.Withdrawal()).reason
        agent_key = caller.agent_key
        services.engine.reviews.withdraw(caller.org_id, approval_id, f"{reason} ({caller.label})", agent_key=agent_key)
        return _wire(services.engine.reviews.get_approval(caller.org_id, approval_id, agent_key=agent_key))

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
        return _wire(services.engine.reviews.get_approval(caller.org_id, approval_id))


def _with_cursor(request: Request[Any, Any, Any], cursor: str) -> str:
    """The request's query with ``cursor`` in place of any it had."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    return urlencode([*kept, ("cursor", cursor)])


def _wire(info: ApprovalInfo) -> dict[str, Any]:
    return to_wire(info)  # type: ignore[no-any-return]
