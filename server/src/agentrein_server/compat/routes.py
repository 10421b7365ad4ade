"""The routes of the compatible API, each a translation onto the engine's use cases: their bodies in, every
answer wrapped as ``{"data": …}`` (contract/compat/WIRE.md), errors as the native API's problem+json (RFC
9457, which their SDKs parse: ``type``'s slug, ``detail``)."""

from __future__ import annotations

import functools
import logging
from datetime import timedelta
from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, get, patch, post
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT, Confirmed, Failed, WriteAhead
from agentrein_core.errors import (
    AgentReinError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    ValidationError,
)
from agentrein_core.model import FAILURE_KEY_SUFFIX, JSON, Action, Approval
from agentrein_core.read_models import SessionSummary
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus, OperationType, Role
from agentrein_server import metrics
from agentrein_server.api.bodies import TimeoutMs
from agentrein_server.auth import Caller
from agentrein_server.compat.calls import (
    CAPTURE_FAILED,
    PRECAPTURE_OTHER_CALL,
    PRECAPTURE_UNKNOWN,
    ReportedCall,
    call_about_to_run,
    json_object,
    registry_entries,
    reported_call,
)
from agentrein_server.compat.tokens import Tokens
from agentrein_server.services import CallerDep, Services, ServicesDep

Answer = dict[str, Any]

log = logging.getLogger(__name__)

#: Their SDKs take every answer as 200 (a creation too); every route's work is the engine's, run off the loop.
_post = functools.partial(post, status_code=HTTP_200_OK, sync_to_thread=True)

#: What a precapture that could not read the object tells the agent, whatever the cause.
PRECAPTURE_FAILED = "the object could not be read before the call; the server's log says why"
#: Why a precapture in a session opened on the native API is refused.
PRECAPTURE_NATIVE_SESSION = (
    "a before-state is read only in a session a published SDK opened (POST /compat/sessions): the agent key reads "
    "the records of its other sessions whole, and they would show it what the server read"
)


class TokenRequest(msgspec.Struct, rename="camel"):
    api_key: str


class NewSession(msgspec.Struct, rename="camel"):
    #: The Python SDK sends a random UUID when the agent gives none; ``intent`` may be null.
    agent_id: str
    intent: str | None = None


class SessionChange(msgspec.Struct, rename="camel"):
    status: str


class Precapture(msgspec.Struct, rename="camel"):
    api_name: str
    payload: Any = None


class ActionOutcome(msgspec.Struct, rename="camel"):
    status: str
    response: Any = None


class ReportedAction(msgspec.Struct, rename="camel"):
    """A call as their SDKs log it. ``operationType`` is theirs (CREATE for any verb they do not know, reads
    too), so the connector's own classification is recorded instead."""

    api_name: str
    status: Literal["SUCCESS", "FAILED", "PENDING_APPROVAL"]
    operation_type: str | None = None
    payload: Any = None
    response: Any = None
    timeout_ms: TimeoutMs | None = None
    precapture_id: str | None = None
    capture_failed: bool = False


def recorded_with(request: Request) -> str:  # type: ignore[type-arg]
    """The mark of a session one of their SDKs opens, told apart by its HTTP library."""
    agent = request.headers.get("user-agent", "").lower()
    if agent.startswith("python-httpx"):
        return "published SDK (Python)"
    if agent.startswith("axios"):
        return "published SDK (npm)"
    return "published SDK"


def session_answer(org_id: str, session: SessionSummary) -> Answer:
    """A session as their SDKs read it (``updatedAt``: its last activity), with this server's own fields."""
    return {
        "data": {
            "id": session.id,
            "organizationId": org_id,
            "agentId": session.agent_id,
            "intent": session.intent or None,
            "status": session.status,
            "displayStatus": session.display_status,
            "isSandbox": session.sandbox,
            "createdAt": session.created_at.isoformat(),
            "updatedAt": session.last_activity_at.isoformat(),
            "recordedWith": session.recorded_with,
        }
    }


class CompatController(Controller):
    tags = ("published SDKs (/compat)",)

    @_post("/auth/token", operation_id="compatToken")
    def token(self, data: JSONBody[TokenRequest], services: ServicesDep) -> Answer:
        """Exchange an agent key for the token every other ``/compat`` request carries."""
        key = services.engine.accounts.authenticate(data.api_key)
        return {"data": {"token": Tokens(services.vault).issue(key)}}

    @_post("/sessions", operation_id="compatStartSession")
    def start_session(
        self,
        request: Request,  # type: ignore[type-arg]
        data: JSONBody[NewSession],
        caller: CallerDep,
        services: ServicesDep,
    ) -> Answer:
        recording = services.engine.recording
        session = recording.new_session(
            caller.org_id,
            data.agent_id,
            data.intent or "",
            opened_by_key=caller.key_id,
            recorded_with=recorded_with(request),
        )
        return session_answer(caller.org_id, recording.get_session(caller.org_id, session.session_id))

    @get("/sessions/{session_id:str}", sync_to_thread=True, operation_id="compatGetSession")
    def show_session(self, session_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> Answer:
        shown = services.engine.recording.get_session(caller.org_id, session_id, agent_key=caller.agent_key)
        return session_answer(caller.org_id, shown)

    @patch("/sessions/{session_id:str}", sync_to_thread=True, operation_id="compatCompleteSession")
    def change_session(
        self, session_id: FromPath[str], data: JSONBody[SessionChange], caller: CallerDep, services: ServicesDep
    ) -> Answer:
        """Their SDKs complete a session this way (``{"status": "COMPLETED"}``), the only change they make."""
        if data.status != "COMPLETED":
            raise ValidationError("status", f"a session can be set COMPLETED only, not {data.status!r}")
        completed = services.engine.recording.complete_session(caller.org_id, session_id, agent_key=caller.agent_key)
        return session_answer(caller.org_id, completed)

    @_post("/sessions/{session_id:str}/rollback", operation_id="compatRollBackSession")
    def roll_back(self, session_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> Answer:
        """Start the session's rollback (or return the one under way): the server's workers run it with the
        organisation's stored connector settings."""
        job = services.engine.rollbacks.request_rollback(
            caller.org_id,
            session_id,
            caller_role=Role.AGENT,
            requested_by=caller.label,
            agent_key=caller.agent_key,
        )
        return {"data": {"id": job.rollback_id, "sessionId": job.session_id, "status": job.status}}

    @_post("/sessions/{session_id:str}/actions", operation_id="compatLogAction")
    def log_action(
        self, session_id: FromPath[str], data: JSONBody[ReportedAction], caller: CallerDep, services: ServicesDep
    ) -> Answer:
        """A call that ran, with its outcome (``SUCCESS``, ``FAILED``), or one the agent holds for a reviewer
        before it runs (``PENDING_APPROVAL``). One that ran is recorded as such, its undo derived here by its
        connector: a ``BLOCK`` policy answers ``403 policy-blocked`` and undoes it; a ``FAILED`` one rolls the
        session back. A successful read is not recorded (their SDKs log reads too)."""
        before, unread = None, CAPTURE_FAILED if data.capture_failed else None
        if data.precapture_id is not None and data.status == "SUCCESS":
            before, unread = _kept_before(services, caller, session_id, data, data.precapture_id)
        call = _reported(services, data, before, unread)
        if data.status == "PENDING_APPROVAL":
            return _hold(services, caller, session_id, call, data.timeout_ms, data.precapture_id)
        if data.status == "FAILED":
            ended = _ended_held_call(services, caller, session_id, call)
            if ended is not None:
                return _action_answer(ended)
        elif call.operation_type is OperationType.READ:
            return {"data": {"id": None, "recorded": False}}
        try:
            action = _record_ran(
                services, caller, session_id, data, call, data.precapture_id if before is not None else None
            )
        except PolicyBlockedError:
            metrics.ACTIONS_LOGGED.labels(status="FAILED").inc()
            raise
        metrics.ACTIONS_LOGGED.labels(status=action.status).inc()
        return _action_answer(action)

    @_post("/sessions/{session_id:str}/actions/precapture", operation_id="compatPrecapture")
    def precapture(
        self, session_id: FromPath[str], data: JSONBody[Precapture], caller: CallerDep, services: ServicesDep
    ) -> Answer:
        """Before an update: the object it changes, read now through the connector's server client with the
        organisation's stored settings and kept (redacted) until the call is reported, whose undo then restores
        it. ``captureFailed`` when it cannot be read, with one fixed ``reason`` whatever the cause (the service's
        own words could tell the agent which objects exist): the cause goes to the server's log. No
        ``precaptureId`` when the call's undo needs nothing read. Only in a session a published SDK opened, whose
        records its agent key reads without what the server read
        (:meth:`~agentrein_core.engine.recording.Recording.get_session`)."""
        shown = services.engine.recording.get_session(caller.org_id, session_id, agent_key=caller.agent_key)
        if shown.recorded_with is None:  # refused before anything is read: whether it could be would say too much
            raise InvalidTransitionError(PRECAPTURE_NATIVE_SESSION)
        connector, call = call_about_to_run(services.connectors, data.api_name, data.payload)
        try:
            state = services.undo.read_before(caller.org_id, connector, call) if call is not None else None
        except AgentReinError as exc:  # its words may come from the service: whether the object exists, say
            log.warning("precapture of %s for session %s could not read the object: %s", data.api_name, session_id, exc)
            return {"data": {"precaptureId": None, "captureFailed": True, "reason": PRECAPTURE_FAILED}}
        if state is None or call is None:
            return {"data": {"precaptureId": None, "captureFailed": False}}
        kept = services.engine.recording.keep_before_state(
            caller.org_id, session_id, connector, call.api_name, state, agent_key=caller.agent_key
        )
        return {"data": {"precaptureId": kept.precapture_id, "captureFailed": False}}

    @get("/registry", sync_to_thread=True, operation_id="compatRegistry")
    def registry(self, caller: CallerDep, services: ServicesDep) -> Answer:
        """Which updates and deletes need a before-state (:func:`~agentrein_server.compat.calls.registry_entries`),
        so that their SDKs ask ``precapture`` only before those (and before calls not listed, which answers at
        once, with no ``precaptureId``, when the call's undo needs nothing read)."""
        return {"data": registry_entries(services.connectors)}

    @patch(
        "/sessions/{session_id:str}/actions/{action_id:str}",
        sync_to_thread=True,
        operation_id="compatConfirmAction",
    )
    def confirm_action(
        self,
        session_id: FromPath[str],
        action_id: FromPath[str],
        data: JSONBody[ActionOutcome],
        caller: CallerDep,
        services: ServicesDep,
    ) -> Answer:
        """An approved call ran and succeeded: its response, and the undo its connector derives from it. (Their
        SDKs report a failure as a new ``FAILED`` log instead.) A confirmation sent again (their SDKs resend
        on a 5xx, whose first may have been recorded) is answered with the action it confirmed."""
        if data.status != "SUCCESS":
            raise ValidationError("status", "only SUCCESS is reported this way; a failure is logged as a FAILED call")
        engine = services.engine
        held = _action_of(services, caller, session_id, action_id)
        if held.status is ActionStatus.SUCCESS:
            return _action_answer(held)
        kept = engine.recording.before_state_of(caller.org_id, session_id, action_id, agent_key=caller.agent_key)
        before = kept.state if kept is not None else None
        api_name = f"{held.connector}.{held.api_name}"
        call = reported_call(
            services.connectors, services.engine.redactors, api_name, held.payload, data.response, before
        )
        confirmed = Confirmed(json_object(data.response), call.undo)
        try:
            action = engine.recording.confirm_action(
                caller.org_id, action_id, confirmed, session_id=session_id, agent_key=caller.agent_key
            )
        except InvalidTransitionError:
            action = _action_of(services, caller, session_id, action_id)  # a concurrent resend won
            if action.status is not ActionStatus.SUCCESS:
                raise
        return _action_answer(action)

    @get("/approvals/{approval_id:str}", sync_to_thread=True, operation_id="compatGetApproval")
    def show_approval(self, approval_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> Answer:
        """The decision their SDKs poll for: ``APPROVED``, ``REJECTED`` (with the reviewer's ``reason``),
        ``PENDING`` or ``EXPIRED`` (they keep waiting until their own timeout, then give up)."""
        approval = services.engine.reviews.get_approval(caller.org_id, approval_id, agent_key=caller.agent_key)
        return {
            "data": {
                "id": approval.approval_id,
                "actionId": approval.action_id,
                "status": approval.status,
                "reason": approval.reason,
            }
        }

    @get("/settings/credentials/validate", sync_to_thread=True, operation_id="compatValidateCredentials")
    def validate_credentials(
        self,
        caller: CallerDep,
        services: ServicesDep,
        connectors: Annotated[str, QueryParameter(min_length=1, max_length=1000)],
    ) -> Answer:
        """Whether the server can undo each named connector's calls with the organisation's stored settings:
        ``{"stripe": {"valid": true}, "github": {"valid": false, "reason": "…what to fix…"}}``."""
        named = [name.strip() for name in connectors.split(",") if name.strip()]
        if not named:
            raise ValidationError("connectors", "name the connectors to check, such as 'stripe,github'")
        checked: dict[str, Any] = {}
        for name in dict.fromkeys(named):
            obstacle = services.undo.obstacle(caller.org_id, name)
            checked[name] = {"valid": True} if obstacle is None else {"valid": False, "reason": obstacle.reason}
        return {"data": checked}


def _action_of(services: Services, caller: Caller, session_id: str, action_id: str) -> Action:
    """The action ``action_id`` of the caller's session ``session_id`` (:class:`NotFoundError` if none)."""
    shown = services.engine.recording.get_session(caller.org_id, session_id, agent_key=caller.agent_key)
    found = next((a for a in shown.actions if a.action_id == action_id), None)
    if found is None:
        raise NotFoundError("action", action_id)
    return found


def _action_answer(action: Action) -> Answer:
    return {"data": {"id": action.action_id, "status": action.status, "apiName": action.api_name}}


def _kept_before(
    services: Services, caller: Caller, session_id: str, data: ReportedAction, precapture_id: str
) -> tuple[JSON | None, str | None]:
    """The before-state a call that ran names, if the server kept it for this session and this call; else
    ``None`` and why its undo cannot restore the object (the call ran: it is recorded whatever its log names)."""
    try:
        kept = services.engine.recording.before_state(
            caller.org_id, session_id, precapture_id, agent_key=caller.agent_key
        )
    except NotFoundError as exc:
        if exc.kind != "before-state":  # the session itself
            raise
        return None, PRECAPTURE_UNKNOWN
    _, described = call_about_to_run(services.connectors, data.api_name, data.payload)
    # Read for another call, or taken by one (a held call, an earlier log): not the state before this call.
    if described is None or kept.api_name != described.api_name or kept.action_id is not None:
        return None, PRECAPTURE_OTHER_CALL
    return kept.state, None


def _reported(services: Services, data: ReportedAction, before: JSON | None, unread: str | None) -> ReportedCall:
    """The call ``data`` logs, its undo derived from ``before`` (else none, saying ``unread``)."""
    connectors, redactors = services.connectors, services.engine.redactors
    return reported_call(connectors, redactors, data.api_name, data.payload, data.response, before, unread=unread)


def _record_ran(
    services: Services,
    caller: Caller,
    session_id: str,
    data: ReportedAction,
    call: ReportedCall,
    precapture_id: str | None,
) -> Action:
    """Record ``call``, which ran, tied to the before-state ``precapture_id`` its undo restores (so that no other
    call's does). If a concurrent log took that one first, or retention pruned it meanwhile, the call is recorded
    without it, its undo none saying so: a call that ran is never refused."""
    recording = services.engine.recording
    ran = call.ran(session_id, data.status == "SUCCESS", data.response)
    try:
        return recording.record_reported_action(
            caller.org_id, session_id, ran, agent_key=caller.agent_key, before_state=precapture_id
        )
    except InvalidTransitionError:
        if precapture_id is None:
            raise
        why = PRECAPTURE_OTHER_CALL
    except NotFoundError as exc:
        if precapture_id is None or exc.kind != "before-state":
            raise
        why = PRECAPTURE_UNKNOWN
    unread = _reported(services, data, None, why).ran(session_id, True, data.response)
    return recording.record_reported_action(caller.org_id, session_id, unread, agent_key=caller.agent_key)


def _hold(
    services: Services,
    caller: Caller,
    session_id: str,
    call: ReportedCall,
    timeout_ms: int | None,
    precapture_id: str | None,
) -> Answer:
    """A call held for a reviewer before it runs: an ordinary write-ahead record that waits for its
    approval (``timeoutMs``, their wait, is the approval's timeout), tied to the before-state read for it."""
    ahead = WriteAhead(
        connector=call.connector,
        api_name=call.api_name,
        operation_type=call.operation_type,
        payload=call.payload,
        requires_approval=True,
        approval_timeout=timedelta(milliseconds=timeout_ms) if timeout_ms is not None else DEFAULT_APPROVAL_TIMEOUT,
    )
    # Tied in the write-ahead's own transaction: a precapture refused (unknown, or another call's, even one
    # a concurrent log took) leaves no held call behind.
    logged = services.engine.recording.log_action(
        caller.org_id, session_id, ahead, agent_key=caller.agent_key, before_state=precapture_id
    )
    metrics.ACTIONS_LOGGED.labels(status=logged.action.status).inc()
    held = {"id": logged.approval.approval_id} if logged.approval is not None else None
    return {"data": {"id": logged.action.action_id, "status": logged.action.status, "approvalRequest": held}}


def _ended_held_call(services: Services, caller: Caller, session_id: str, call: ReportedCall) -> Action | None:
    """The held call a ``FAILED`` log ends, if it is one: their SDKs log a held call that does not run as a new
    ``FAILED`` call (rejected, timed out, or failed once approved), with the api name and payload it was held
    with. The latest action of the session that is this call (the same connector, api name and redacted
    payload) is the one: still waiting or cleared, it fails (its approval closes; the session rolls back);
    already ended (refused by a reviewer or expired, or its failure recorded), the log only repeats what is
    recorded, their SDK sending it again on a 5xx, so only while nothing else of the session was recorded since:
    once the agent went on, the same call failing is a new one. ``None``: another call."""
    recording = services.engine.recording
    shown = recording.get_session(caller.org_id, session_id, agent_key=caller.agent_key)
    payload = services.engine.redactors.of(call.connector).redact(call.payload)
    same = (call.connector, call.api_name, payload)
    # An approved call's failure is recorded beside it (its ``…-failed`` record): the held call is the one a
    # repeated log ends again, which answers that record rather than writing another.
    held = (a for a in reversed(shown.actions) if not a.idempotency_key.endswith(FAILURE_KEY_SUFFIX))
    latest = next((a for a in held if (a.connector, a.api_name, a.payload) == same), None)
    if latest is None or _went_on(shown.actions, shown.approvals, latest):
        return None
    if latest.status in (ActionStatus.PENDING_APPROVAL, ActionStatus.CLEARED):
        failure = Failed("the agent reports the held call did not run or failed (published SDK)")
        return recording.fail_action(
            caller.org_id, latest.action_id, failure, session_id=session_id, agent_key=caller.agent_key
        )
    refused = any(
        a.action_id == latest.action_id
        and a.purpose is ApprovalPurpose.BEFORE_EXECUTION
        and a.status in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED)
        for a in shown.approvals
    )
    return latest if latest.status is ActionStatus.FAILED and refused else None


def _went_on(actions: list[Action], approvals: list[Approval], held: Action) -> bool:
    """Whether the session recorded another call after ``held`` ended: after its failure's own record, or after
    a reviewer refused it (or it expired). A held call not ended yet has not."""
    failed = next((a for a in actions if a.idempotency_key == held.failure_idempotency_key), None)
    if failed is not None:
        return any(a.seq > failed.seq for a in actions)
    ended = [
        p.resolved_at
        for p in approvals
        if p.action_id == held.action_id and p.purpose is ApprovalPurpose.BEFORE_EXECUTION and p.resolved_at
    ]
    return bool(ended) and held.status is ActionStatus.FAILED and any(a.created_at > max(ended) for a in actions)
