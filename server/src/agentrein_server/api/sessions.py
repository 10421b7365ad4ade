"""Sessions, their actions (write-ahead record and outcome), completion and rollback."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any

import msgspec
from litestar import Controller, get, patch, post
from litestar.openapi.spec import OpenAPIFormat
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.status_codes import HTTP_202_ACCEPTED

from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT, Confirmed, ExecutedCall, Failed, WriteAhead
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.errors import (
    ApprovalRejectedError,
    ForbiddenError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    RollbackRefusedError,
    ValidationError,
)
from agentrein_core.model import Action, UndoConfig
from agentrein_core.read_models import Confirmation, RollbackInfo, SessionInfo
from agentrein_core.statuses import ActionStatus, DisplayStatus, SessionStatus
from agentrein_server import metrics
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep

#: The actions ``GET /sessions/{id}`` shows, the first (``GET /sessions/{id}/actions`` pages through the rest).
FIRST_ACTIONS = 100


class SessionController(Controller):
    path = "/sessions"
    tags = ("sessions",)

    @post(
        operation_id="startSession",
        summary="Start a session",
        responses=documented(InvalidTransitionError, body=True),
    )
    async def create(
        self, data: JSONBody[bodies.NewSession], caller: CallerDep, services: ServicesDep
    ) -> answers.SessionInfo:
        """Open a session. With ``id``: the session a client opened while this server was unreachable (the
        SDK's ``failure_mode="open"``), created once; ``409 invalid-transition`` when the id is taken. An agent
        key acts only on the sessions it opened (others answer ``404``, as another organisation's do)."""
        recording = services.engine.recording

        def create() -> SessionInfo:
            session = recording.new_session(
                caller.org_id, data.agent_id, data.intent, data.sandbox, session_id=data.id, opened_by_key=caller.key_id
            )
            return recording.get_session(caller.org_id, session.session_id)

        return to_wire(await services.writes(create))  # type: ignore[no-any-return]

    @get(
        sync_to_thread=True, operation_id="listSessions", summary="List sessions", responses=documented(ValidationError)
    )
    def list(
        self,
        caller: CallerDep,
        services: ServicesDep,
        status: FromQuery[SessionStatus | None] = None,
        display_status: Annotated[DisplayStatus | None, QueryParameter(name="displayStatus")] = None,
        agent_id: Annotated[str | None, QueryParameter(name="agentId")] = None,
        created_after: Annotated[
            str | None, QueryParameter(name="createdAfter", format=OpenAPIFormat.DATE_TIME)
        ] = None,
        created_before: Annotated[
            str | None, QueryParameter(name="createdBefore", format=OpenAPIFormat.DATE_TIME)
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 50,
        cursor: bodies.Cursor = None,
    ) -> answers.SessionPage:
        """Sessions newest first, each with its ``displayStatus`` and ``actionCount`` (``GET /sessions/{id}``
        has its actions); filters combine; ``nextCursor`` (when not null) fetches the next page. An agent key
        lists the sessions it opened."""
        page = services.engine.recording.list_sessions(
            caller.org_id,
            limit,
            status=status,
            display_status=display_status,
            agent_id=agent_id,
            created_after=_moment("createdAfter", created_after),
            created_before=_moment("createdBefore", created_before),
            cursor=cursor,
            agent_key=caller.agent_key,
        )
        return {"sessions": to_wire(page.sessions), "nextCursor": page.next_cursor}

    @get(
        "/{session_id:str}",
        sync_to_thread=True,
        operation_id="getSession",
        summary="Show a session with its actions",
        responses=documented(ValidationError, NotFoundError),
    )
    def show(self, session_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> answers.SessionInfo:
        """The session with its approvals and its first 100 actions (``actionCount`` says how many it holds):
        when it holds more, ``actionsCursor`` is the ``cursor`` of ``GET /sessions/{id}/actions`` for the rest
        (null: ``actions`` holds them all), so that reading a long session costs what reading a short one does.
        The SDKs' ``get_session`` follows the pages and returns every action."""
        shown = services.engine.recording.get_session(
            caller.org_id, session_id, agent_key=caller.agent_key, first_actions=FIRST_ACTIONS
        )
        return to_wire(shown)  # type: ignore[no-any-return]

    @get(
        "/{session_id:str}/actions",
        sync_to_thread=True,
        operation_id="listActions",
        summary="List a session's actions, a page at a time",
        responses=documented(ValidationError, NotFoundError),
    )
    def actions(
        self,
        session_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
        cursor: bodies.Cursor = None,
    ) -> answers.ActionPage:
        """The session's actions in ``seq`` order, as ``GET /sessions/{id}`` shows them; ``nextCursor`` (when
        not null) fetches the next page. A page costs the same however many actions the session holds."""
        page = services.engine.recording.action_page(
            caller.org_id, session_id, limit, cursor=cursor, agent_key=caller.agent_key
        )
        return {"actions": to_wire(page.actions), "nextCursor": page.next_cursor}

    @post(
        "/{session_id:str}/complete",
        status_code=200,
        operation_id="completeSession",
        summary="Complete a session",
        responses=documented(ValidationError, NotFoundError, InvalidTransitionError),
    )
    async def complete(
        self, session_id: FromPath[str], caller: CallerDep, services: ServicesDep
    ) -> answers.SessionInfo:
        recording = services.engine.recording
        completed = await services.writes(
            lambda: recording.complete_session(caller.org_id, session_id, agent_key=caller.agent_key)
        )
        return to_wire(completed)  # type: ignore[no-any-return]

    @post(
        "/{session_id:str}/fail",
        status_code=200,
        sync_to_thread=True,
        operation_id="failSession",
        summary="Report that recording failed: roll the session back",
        responses=documented(NotFoundError, InvalidTransitionError, body=True),
    )
    def fail(
        self, session_id: FromPath[str], data: JSONBody[bodies.SessionFailure], caller: CallerDep, services: ServicesDep
    ) -> answers.SessionInfo:
        """The agent's run failed outside a recorded call: AgentRein could not record one (action logging
        failed). The session is rolled back as after a failed call, while it is ``ACTIVE`` (the server's
        workers run the rollback); with nothing to undo it becomes ``FAILED``."""
        session = services.engine.recording.fail_session(
            caller.org_id, session_id, reason=data.reason, connector=data.connector, agent_key=caller.agent_key
        )
        return to_wire(session)  # type: ignore[no-any-return]

    @post(
        "/{session_id:str}/actions",
        operation_id="recordAction",
        summary="Record a call before it runs",
        responses=documented(
            NotFoundError, PolicyBlockedError, ApprovalRejectedError, InvalidTransitionError, body=True
        ),
    )
    async def log_action(
        self, session_id: FromPath[str], data: JSONBody[bodies.NewAction], caller: CallerDep, services: ServicesDep
    ) -> answers.LoggedAction:
        """Record a call before it runs. ``403 policy-blocked``: a BLOCK policy matched (the action is stored
        ``FAILED``); ``403 approval-rejected``: approval was required and the plan has no approval gates.

        ``confirm``: earlier calls of this session that succeeded, confirmed first in the same transaction
        (the SDK sends its confirmations this way, saving a ``PATCH`` each); applied even when the new record
        is refused. One that cannot be applied is skipped and listed in ``refusedConfirmations`` with why.

        ``idempotencyKey``: the key the call will run with, made by the client (at most 93 printable ASCII
        characters without spaces, nothing that looks like a secret). Asked again under it, the record written
        is the answer (``409`` if its call has gone on since, or the key is another call's); a call run anyway
        and replayed from the journal under it settles that record."""
        call = WriteAhead(
            connector=data.connector,
            api_name=data.api_name,
            operation_type=data.operation_type,
            payload=data.payload,
            requires_approval=data.requires_approval,
            approval_timeout=bodies.timeout(data.approval_timeout_ms) or DEFAULT_APPROVAL_TIMEOUT,
            idempotency_key=data.idempotency_key,
        )
        confirm = [Confirmation(c.action_id, c.response, _undo(c.undo)) for c in data.confirm]
        recording = services.engine.recording
        try:
            logged = await services.writes(
                lambda: recording.log_action(
                    caller.org_id, session_id, call, confirm=confirm, agent_key=caller.agent_key
                )
            )
        except PolicyBlockedError:
            metrics.ACTIONS_LOGGED.labels(status=ActionStatus.FAILED).inc()
            raise
        metrics.ACTIONS_LOGGED.labels(status=logged.action.status).inc()
        return to_wire(logged)  # type: ignore[no-any-return]

    @patch(
        "/{session_id:str}/actions/{action_id:str}",
        operation_id="recordOutcome",
        summary="Record how a call ended",
        responses=documented(NotFoundError, InvalidTransitionError, body=True),
    )
    async def record_outcome(
        self,
        session_id: FromPath[str],
        action_id: FromPath[str],
        data: JSONBody[bodies.ActionOutcome],
        caller: CallerDep,
        services: ServicesDep,
    ) -> answers.Action:
        """``CLEARED -> SUCCESS`` (with response and undo), or ``FAILED`` (with error; the session is rolled
        back by the server). The SDK sends a success this way only when no write-ahead record of the session
        carried it (``confirm``) within moments, or from its journal."""
        recording = services.engine.recording
        record: Callable[[], Action]
        if data.status == "SUCCESS":
            if data.error is not None:
                raise ValidationError("error", "only a FAILED outcome has an error")
            if not data.rolls_back:
                raise ValidationError("rollsBack", "only a FAILED outcome rolls the session back, or not")
            confirmed = Confirmed(data.response, _undo(data.undo))
            record = partial(
                recording.confirm_action,
                caller.org_id,
                action_id,
                confirmed,
                session_id=session_id,
                agent_key=caller.agent_key,
            )
        else:
            if data.response is not None or data.undo is not None:
                raise ValidationError("status", "a FAILED outcome has an error, not a response or undo")
            failed = Failed(data.error or "failed", data.rolls_back)
            record = partial(
                recording.fail_action,
                caller.org_id,
                action_id,
                failed,
                session_id=session_id,
                agent_key=caller.agent_key,
            )
        return to_wire(await services.writes(record))  # type: ignore[no-any-return]

    @post(
        "/{session_id:str}/journal",
        operation_id="replayAction",
        summary="Record a call that ran while the server was unreachable",
        responses=documented(NotFoundError, InvalidTransitionError, body=True),
    )
    async def replay(
        self, session_id: FromPath[str], data: JSONBody[bodies.ExecutedAction], caller: CallerDep, services: ServicesDep
    ) -> answers.Action:
        """Record a call that already ran while this server was unreachable (the SDK's ``failure_mode="open"``
        journal). Idempotent by ``idempotencyKey``: a repeated replay returns the first record."""
        call = ExecutedCall(
            idempotency_key=data.idempotency_key,
            connector=data.connector,
            api_name=data.api_name,
            operation_type=data.operation_type,
            payload=data.payload,
            succeeded=data.status == "SUCCESS",
            response=data.response,
            undo=_undo(data.undo),
            error=data.error,
            rolls_back=data.rolls_back,
        )
        recording = services.engine.recording
        action = await services.writes(
            lambda: recording.record_executed_action(caller.org_id, session_id, call, agent_key=caller.agent_key)
        )
        return to_wire(action)  # type: ignore[no-any-return]

    @post(
        "/{session_id:str}/rollback",
        status_code=HTTP_202_ACCEPTED,
        sync_to_thread=True,
        operation_id="rollBackSession",
        operation_class=bodies.OptionalBody,
        summary="Roll back a session",
        responses=documented(NotFoundError, RollbackRefusedError, ForbiddenError, body=True),
    )
    def rollback(
        self,
        session_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        data: JSONBody[bodies.RollbackRequest | None] = None,
    ) -> answers.Rollback:
        """Start the session's rollback (or return the one under way); the server's workers run it.
        ``409 invalid-transition`` when the rules of the status reference §3 refuse it."""
        request = data or bodies.RollbackRequest()
        trigger = f"requested: {request.reason}" if request.reason else "requested"
        job = services.engine.rollbacks.request_rollback(
            caller.org_id,
            session_id,
            caller_role=caller.role,
            requested_by=caller.label,
            trigger=trigger,  # the engine redacts it and keeps only as much as a rollback's trigger holds
            approval_timeout=bodies.timeout(request.approval_timeout_ms),
            agent_key=caller.agent_key,
        )
        return _job(services.engine.rollbacks.shown(caller.org_id, job))

    @get(
        "/{session_id:str}/rollback",
        sync_to_thread=True,
        operation_id="getRollback",
        summary="Show a session's rollback",
        responses=documented(ValidationError, NotFoundError),
    )
    def rollback_status(
        self,
        session_id: FromPath[str],
        caller: CallerDep,
        services: ServicesDep,
        wait: Annotated[float, QueryParameter(ge=0, le=bodies.MAX_WAIT)] = 0.0,
    ) -> answers.Rollback:
        """The session's latest rollback; with ``wait=N`` answers once it has ended or waits for a reviewer
        (or after N seconds)."""
        job = services.engine.rollbacks.wait_for_rollback(caller.org_id, session_id, wait, agent_key=caller.agent_key)
        if job is None:
            raise NotFoundError("rollback of session", session_id)
        return _job(services.engine.rollbacks.shown(caller.org_id, job))


def _job(job: RollbackInfo) -> dict[str, Any]:
    """A rollback job as shown: its lease token is the worker's own business."""
    shown: dict[str, Any] = to_wire(job)
    del shown["leaseToken"]
    return shown


def _moment(field: str, text: str | None) -> datetime | None:
    """An RFC 3339 date and time, in UTC; one without a zone is taken as UTC. Read here rather than by
    Litestar, which takes a number for a Unix time (``createdBefore=0.5``: half a second after 1970)."""
    if text is None:
        return None
    try:
        moment = msgspec.convert(text, datetime)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except msgspec.ValidationError:
        raise ValidationError(field, f"{text!r} is not a date and time such as 2026-11-29T14:30:00Z") from None
    except OverflowError:
        raise ValidationError(field, f"{text} is out of range") from None


def _undo(data: dict[str, Any] | None) -> UndoConfig | None:
    if data is None:
        return None
    if not isinstance(data.get("type"), str) or not data["type"]:
        raise ValidationError("undo.type", "an undo config needs a 'type' (such as 'none' or 'http-delete')")
    if not isinstance(data.get("requireApproval", False), bool):
        raise ValidationError("undo.requireApproval", "must be true or false")
    return from_wire(data, UndoConfig)
