"""The routes of the compatible API, each a translation onto the engine's use cases: their bodies in, every
answer wrapped as ``{"data": …}`` (contract/compat/WIRE.md), errors as the native API's problem+json (RFC
9457, which their SDKs parse: ``type``'s slug, ``detail``)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from litestar import Controller, Request, get, patch, post
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK

from agentrein_core.errors import PolicyBlockedError, ValidationError
from agentrein_core.read_models import SessionSummary
from agentrein_core.statuses import OperationType, Role
from agentrein_server import metrics
from agentrein_server.compat.calls import reported_call
from agentrein_server.compat.tokens import Tokens
from agentrein_server.services import CallerDep, ServicesDep

Answer = dict[str, Any]


class TokenRequest(msgspec.Struct, rename="camel"):
    api_key: str


class NewSession(msgspec.Struct, rename="camel"):
    #: The Python SDK sends a random UUID when the agent gives none; ``intent`` may be null.
    agent_id: str
    intent: str | None = None


class SessionChange(msgspec.Struct, rename="camel"):
    status: str


class ReportedAction(msgspec.Struct, rename="camel"):
    """A call as their SDKs log it. ``operationType`` is theirs (CREATE for any verb they do not know, reads
    too), so the connector's own classification is recorded instead."""

    api_name: str
    status: Literal["SUCCESS", "FAILED", "PENDING_APPROVAL"]
    operation_type: str | None = None
    payload: Any = None
    response: Any = None
    timeout_ms: int | None = None
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

    @post("/auth/token", status_code=HTTP_200_OK, sync_to_thread=True, operation_id="compatToken")
    def token(self, data: JSONBody[TokenRequest], services: ServicesDep) -> Answer:
        """Exchange an agent key for the token every other ``/compat`` request carries."""
        key = services.engine.accounts.authenticate(data.api_key)
        return {"data": {"token": Tokens(services.vault).issue(key)}}

    @post("/sessions", status_code=HTTP_200_OK, sync_to_thread=True, operation_id="compatStartSession")
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

    @post(
        "/sessions/{session_id:str}/rollback",
        status_code=HTTP_200_OK,
        sync_to_thread=True,
        operation_id="compatRollBackSession",
    )
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

    @post(
        "/sessions/{session_id:str}/actions",
        status_code=HTTP_200_OK,
        sync_to_thread=True,
        operation_id="compatLogAction",
    )
    def log_action(
        self, session_id: FromPath[str], data: JSONBody[ReportedAction], caller: CallerDep, services: ServicesDep
    ) -> Answer:
        """A call that ran, with its outcome: recorded as such, its undo derived here by its connector. A
        ``BLOCK`` policy answers ``403 policy-blocked`` and undoes the call; a ``FAILED`` one rolls the session
        back. A successful read is not recorded (their SDKs log reads too)."""
        if data.status == "PENDING_APPROVAL":
            raise ValidationError("status", "calls held for approval (PENDING_APPROVAL) are not served here yet")
        succeeded = data.status == "SUCCESS"
        call = reported_call(services.connectors, data.api_name, data.payload, data.response)
        if succeeded and call.operation_type is OperationType.READ:
            return {"data": {"id": None, "recorded": False}}
        try:
            action = services.engine.recording.record_reported_action(
                caller.org_id, session_id, call.ran(succeeded, data.response), agent_key=caller.agent_key
            )
        except PolicyBlockedError:
            metrics.ACTIONS_LOGGED.labels(status="FAILED").inc()
            raise
        metrics.ACTIONS_LOGGED.labels(status=action.status).inc()
        return {"data": {"id": action.action_id, "status": action.status, "apiName": action.api_name}}
