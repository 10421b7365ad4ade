"""Server mode: the SDK's :class:`~agentrein._port.Mode` over the AgentRein REST API (httpx).

Every answer is turned back into the same records embedded mode returns (``agentrein_core.converter.wire``),
and every problem+json error into the same named exception, so agent code cannot tell the modes apart. A
server that cannot be reached, or answers 5xx, is :class:`AgentReinUnavailableError` (``failure_mode``
decides what the agent's call does then). Rollbacks run in the server's workers; this side waits for them.
A successful call's confirmation travels with the session's next request (the local outbox,
:mod:`agentrein._outbox`), and every other request sends the pending ones first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from attrs import frozen

from agentrein._http import Connection
from agentrein._http import segment as _seg
from agentrein._outbox import Outbox
from agentrein._outbox_file import CallConfirmed
from agentrein._waiting import after_decision, outlasting, until_rollback_ends
from agentrein_core import errors
from agentrein_core.commands import Confirmed, ExecutedCall, Failed, NewPolicy, WriteAhead
from agentrein_core.converter import from_wire, to_wire
from agentrein_core.model import Action, Approval, Policy, Rollback, UndoConfig
from agentrein_core.read_models import INCLUDED_FIELDS, ApprovalInfo, LoggedAction, SessionInfo, SessionSummary
from agentrein_core.rules import AGENT_UNDO_LEASE, ROLLBACK_UNDER_WAY
from agentrein_core.statuses import ActionStatus, ApprovalStatus, OperationType

T = TypeVar("T")
log = logging.getLogger("agentrein")

#: The longest single long-poll asked of the server; longer waits are several in a row.
LONG_POLL = 30.0
#: How long a rollback is waited for in one request before the caller's loop looks again.
ROLLBACK_POLL = 10.0
#: The actions read in one request when a session holds more than the server shows with it (the most it gives).
ACTIONS_PAGE = 1000


class ServedMode:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        journal_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self._connection = Connection(base_url, api_key, timeout=timeout)
        self.base_url = self._connection.base_url
        #: Whose records these are, for the outbox: the server and (a digest of) the key.
        self.identity = f"{self.base_url} key {hashlib.sha256(api_key.encode()).hexdigest()[:16]}"
        #: What the server is still to learn: confirmations in transit, and what happened while it was away.
        self.outbox = Outbox(self.identity, journal_path, recorder=self, send=self._send_confirmation)

    def close(self) -> None:
        self.outbox.close()
        self._connection.close()

    def _call(self, method: str, path: str, *, json: Any = None, params: Any = None, wait: float = 0.0) -> Any:
        """One request, once the confirmations still pending have been sent (:mod:`agentrein._outbox`):
        what it reads or changes comes after the outcomes of the calls made before it."""
        self.outbox.flush()
        return self._connection.call(method, path, json=json, params=params, wait=wait)

    # sessions -----------------------------------------------------------------------------------------
    def new_session(self, agent_id: str, intent: str, sandbox: bool, session_id: str | None = None) -> SessionInfo:
        body = {"agentId": agent_id, "intent": intent, "sandbox": sandbox}
        if session_id is not None:
            body["id"] = session_id
        return from_wire(self._call("POST", "/sessions", json=body), SessionInfo)

    def fail_session(self, session_id: str, *, reason: str, connector: str | None) -> SessionInfo:
        body = {"reason": reason, "connector": connector}
        return from_wire(self._call("POST", f"/sessions/{_seg(session_id)}/fail", json=body), SessionInfo)

    def get_session(self, session_id: str) -> SessionInfo:
        """The session with every action: the server shows a long session's first page, and the rest are
        read a page at a time (``GET /sessions/{id}/actions``) from its ``actionsCursor``."""
        shown = self._call("GET", f"/sessions/{_seg(session_id)}")
        cursor, actions = shown.get("actionsCursor"), shown["actions"]
        while cursor is not None:
            params = {"limit": ACTIONS_PAGE, "cursor": cursor}
            page = self._call("GET", f"/sessions/{_seg(session_id)}/actions", params=params)
            actions += page["actions"]
            cursor = page["nextCursor"]
        return from_wire({**shown, "actions": actions, "actionsCursor": None}, SessionInfo)

    def session_approvals(self, session_id: str) -> list[Approval]:
        shown = self._call("GET", f"/sessions/{_seg(session_id)}")  # every approval, whatever the actions
        return from_wire(shown["approvals"], list[Approval])

    def list_sessions(self, limit: int) -> list[SessionSummary]:
        page = self._call("GET", "/sessions", params={"limit": limit})
        return from_wire(page["sessions"], list[SessionSummary])

    def complete_session(self, session_id: str) -> SessionInfo:
        return from_wire(self._call("POST", f"/sessions/{_seg(session_id)}/complete"), SessionInfo)

    # actions ------------------------------------------------------------------------------------------
    def log_action(self, session_id: str, call: WriteAhead) -> LoggedAction:
        body = to_wire(call)
        # The session's earlier successes travel with it, applied first (:mod:`agentrein._outbox`).
        carried = self.outbox.take(session_id)
        try:  # from here on, each taken confirmation is delivered or put back, whatever happens
            if carried:
                body["confirm"] = [outcome.wire() for outcome in carried]
            # Asked again under the call's key, the server answers the record it wrote (its answer was lost).
            idempotent = call.idempotency_key is not None
            path = f"/sessions/{_seg(session_id)}/actions"
            logged = self._connection.call("POST", path, json=body, idempotent=idempotent)
        except (errors.PolicyBlockedError, errors.ApprovalRejectedError, errors.InvalidTransitionError):
            self.outbox.delivered(carried)  # refused after the confirmations were applied
            raise
        except BaseException:
            self.outbox.put_back(carried)  # maybe not applied: sent again (a second time is harmless)
            raise
        # Those refused and not settled already (sent twice) are kept aside with the reason, as a refused entry is.
        refused = {r["actionId"]: r["detail"] for r in logged.get("refusedConfirmations", ()) if not r.get("settled")}
        self.outbox.delivered(carried, refused=refused)
        approval = from_wire(logged["approval"], Approval) if logged["approval"] is not None else None
        return LoggedAction(from_wire(logged["action"], Action), approval)

    def withdraw_approval(self, approval_id: str, reason: str) -> None:
        self._call("POST", f"/approvals/{_seg(approval_id)}/withdraw", json={"reason": reason})

    def confirm_action(self, session_id: str, action_id: str, confirmed: Confirmed) -> None:
        """Kept, and sent with the session's next request or within moments (:mod:`agentrein._outbox`)."""
        self.outbox.keep(session_id, action_id, confirmed.response, confirmed.undo)

    def _send_confirmation(self, outcome: CallConfirmed) -> None:
        body = {"status": "SUCCESS", "response": outcome.response, "undo": to_wire(outcome.undo)}
        self._connection.call("PATCH", _action_path(outcome.session_id, outcome.action_id), json=body)

    def fail_action(self, session_id: str, action_id: str, failed: Failed) -> Action:
        body = {"status": "FAILED", **to_wire(failed)}
        return from_wire(self._call("PATCH", _action_path(session_id, action_id), json=body), Action)

    def record_executed_action(self, session_id: str, call: ExecutedCall) -> Action:
        # The wire says how the call ended as the outcome of a recorded call does (a status).
        body = to_wire(call)
        body["status"] = "SUCCESS" if body.pop("succeeded") else "FAILED"
        return from_wire(self._call("POST", f"/sessions/{_seg(session_id)}/journal", json=body), Action)

    # approvals ----------------------------------------------------------------------------------------
    def get_approval(self, approval_id: str) -> ApprovalInfo:
        return from_wire(self._call("GET", f"/approvals/{_seg(approval_id)}"), ApprovalInfo)

    def wait_for_decision(self, approval_id: str, timeout: float) -> ApprovalInfo:
        """Long-polls: the server answers the moment the approval is decided. A server that goes away (killed,
        restarted, stopping) is reconnected to with backoff until ``timeout`` is up
        (:func:`~agentrein._waiting.outlasting`); each long-poll is also how the dashboard knows the agent waits."""
        deadline = time.monotonic() + max(0.0, timeout)
        path = f"/approvals/{_seg(approval_id)}"

        def look() -> ApprovalInfo:
            wait = min(LONG_POLL, max(0.0, deadline - time.monotonic()))
            return from_wire(self._call("GET", path, params={"wait": round(wait, 3)}, wait=wait), ApprovalInfo)

        while True:
            info = outlasting(deadline, look)
            if info.status is not ApprovalStatus.PENDING or time.monotonic() >= deadline:
                return info

    def how_to_decide(self, approval_id: str) -> str:
        return f"decide it at {self.base_url}/dashboard/approvals#approval-{approval_id}"

    def list_approvals(self, status: ApprovalStatus | None) -> list[ApprovalInfo]:
        params: dict[str, Any] = {"include": list(INCLUDED_FIELDS)}  # every field the embedded mode has too
        if status is not None:
            params["status"] = status
        self.outbox.flush()  # as _call does: the list comes after the outcomes of the calls before it
        return from_wire(self._connection.listed("/approvals", params=params), list[ApprovalInfo])

    def decide(
        self, approval_id: str, status: ApprovalStatus, reviewer: str | None, reason: str | None
    ) -> ApprovalInfo:
        """A decision may start or resume a rollback in the server: wait until it has moved as far as it can,
        so the decision returns with its outcome (problems are logged: the decision was made)."""
        verb = "approve" if status is ApprovalStatus.APPROVED else "reject"
        body = {"reviewer": reviewer, "reason": reason}
        decided = from_wire(self._call("POST", f"/approvals/{_seg(approval_id)}/{verb}", json=body), ApprovalInfo)
        try:
            after_decision(self, decided.session_id, self._wait_for_workers)
        except errors.AgentReinError:
            log.exception("AgentRein could not follow the rollback of session %s", decided.session_id)
            return decided
        return self.get_approval(approval_id)

    # policies -----------------------------------------------------------------------------------------
    def add_policy(self, policy: NewPolicy) -> Policy:
        return from_wire(self._call("POST", "/policies", json=to_wire(policy)), Policy)

    def list_policies(self) -> list[Policy]:
        return from_wire(self._call("GET", "/policies"), list[Policy])

    def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        return from_wire(self._call("PATCH", f"/policies/{_seg(policy_id)}", json={"enabled": enabled}), Policy)

    def remove_policy(self, policy_id: str) -> None:
        self._call("DELETE", f"/policies/{_seg(policy_id)}")

    # rollback -----------------------------------------------------------------------------------------
    def request_rollback(self, session_id: str, *, trigger: str, approval_timeout: timedelta) -> Rollback:
        body = {"reason": trigger, "approvalTimeoutMs": max(1, round(approval_timeout.total_seconds() * 1000))}
        job = self._call("POST", f"/sessions/{_seg(session_id)}/rollback", json=body)
        return from_wire(job, Rollback)

    def active_rollback(self, session_id: str) -> Rollback | None:
        try:
            job = from_wire(self._call("GET", f"/sessions/{_seg(session_id)}/rollback"), Rollback)
        except errors.NotFoundError as exc:
            if exc.kind == "session":
                raise
            return None  # never rolled back
        return job if job.status in ROLLBACK_UNDER_WAY else None

    def follow_rollback(self, session_id: str, *, wait: float) -> SessionInfo:
        """The server's workers run the rollback (and expire its approvals): wait for them."""
        deadline = time.monotonic() + wait
        # Reads only, so the whole look is repeated when the server went away meanwhile.
        outlasting(
            deadline,
            lambda: until_rollback_ends(
                self, session_id, self._wait_for_workers, wait=max(0.0, deadline - time.monotonic())
            ),
        )
        return outlasting(deadline, lambda: self.get_session(session_id))

    def _wait_for_workers(self, job: Rollback) -> Rollback:
        """The job once it has ended or waits for a reviewer, or as it stands after ``ROLLBACK_POLL``."""
        params = {"wait": ROLLBACK_POLL}
        answer = self._call("GET", f"/sessions/{_seg(job.session_id)}/rollback", params=params, wait=ROLLBACK_POLL)
        return from_wire(answer, Rollback)

    # undos handed to this process -------------------------------------------------------------------------
    def claim_undo(self, session_ids: list[str], connectors: list[str], wait: float) -> TakenUndo | None:
        """Take an undo the server hands to this process (of one of these sessions, through one of these
        connectors), waiting up to ``wait`` seconds for one; ``None`` when none was offered."""
        body = {"sessions": session_ids, "connectors": connectors}
        answer = self._connection.call("POST", "/undos/claim", json=body, params={"wait": wait}, wait=wait)["undo"]
        return None if answer is None else TakenUndo.from_wire(answer)

    def renew_undo(self, taken: TakenUndo) -> None:
        """This process is still running the undo it took: its lease runs another ``taken.lease_seconds``
        (:class:`~agentrein_core.errors.LeaseLostError` when it has ended: the undo has failed)."""
        body = {"leaseId": taken.lease_id}
        self._connection.call("POST", f"/undos/{_seg(taken.action.action_id)}/renew", json=body)

    def report_undo(self, taken: TakenUndo, error: str | None) -> None:
        """How the undo this process took went (``error``: why it failed)."""
        body = {"leaseId": taken.lease_id, "succeeded": error is None, "error": error}
        self._connection.call("POST", f"/undos/{_seg(taken.action.action_id)}/outcome", json=body)


@frozen
class TakenUndo:
    """An undo the server handed to this process: the action, as much of it as its undo needs, and the lease
    under which this process runs it and reports."""

    action: Action
    lease_id: str
    #: How long the lease runs from its taking or a renewal (a server older than renewals sends none: its own).
    lease_seconds: float = AGENT_UNDO_LEASE.total_seconds()

    @classmethod
    def from_wire(cls, answer: dict[str, Any]) -> TakenUndo:
        now = datetime.now(UTC)
        action = Action(
            action_id=answer["actionId"],
            session_id=answer["sessionId"],
            org_id="",  # the server's to know; the undo runs in this process's organisation
            seq=0,
            connector=answer["connector"],
            api_name=answer["apiName"],
            operation_type=OperationType.OTHER,
            payload={},
            status=ActionStatus.SUCCESS,
            idempotency_key=answer["idempotencyKey"],
            created_at=now,
            updated_at=now,
            undo=from_wire(answer["undo"], UndoConfig),
        )
        return cls(action, answer["leaseId"], float(answer.get("leaseSeconds", AGENT_UNDO_LEASE.total_seconds())))


def _action_path(session_id: str, action_id: str) -> str:
    return f"/sessions/{_seg(session_id)}/actions/{_seg(action_id)}"
