"""The guarded call: what happens, in order, when a wrapped client makes a side-effecting call.

1. The connector describes the call (:meth:`Connector.prepare`); reads pass straight through.
2. Write-ahead: the action is recorded before anything runs; policies may block it or hold it for approval.
   A record AgentRein refuses or fails to write (or, ``failure_mode="closed"``, cannot be sent) is action
   logging that failed: the call does not run, the session is rolled back, and the recording error raised.
3. A held call waits for the reviewer's decision (rejected or expired: the session is rolled back, and
   :class:`ApprovalRejectedError` / :class:`ApprovalTimeoutError` is raised).
4. The call runs with its idempotency key, retried on transient failures when the caller said it may be.
5. Success is confirmed with the redacted response and the undo the connector derives (through a server, with
   the session's next request: :mod:`agentrein._outbox`); failure is recorded, the session rolled back,
   and the original exception re-raised, at once in either mode.

Async clients follow the same steps; the bookkeeping runs in a worker thread so the event loop never waits.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from attrs import define, evolve

from agentrein._errors import RollbackFailedError
from agentrein._executor import ClientRef, ClientUndoExecutor
from agentrein._options import WrapOptions
from agentrein._outbox import Outbox
from agentrein._outbox_file import CallRecorded, LoggingFailed, OutcomeReported
from agentrein._port import Recorder
from agentrein._waiting import EXPIRY_GRACE
from agentrein_core import nesting
from agentrein_core.commands import Confirmed, ExecutedCall, Failed, WriteAhead
from agentrein_core.connector import PreparedCall
from agentrein_core.errors import (
    AgentReinError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
    ValidationError,
)
from agentrein_core.model import JSON, UNDO_NONE, Action, UndoConfig
from agentrein_core.read_models import ApprovalInfo, LoggedAction, shortened
from agentrein_core.redaction import Redactor
from agentrein_core.runner import run_call, run_call_async
from agentrein_core.statuses import ApprovalStatus

log = logging.getLogger("agentrein")
#: On the log record saying that a call is held for approval, its approval's id; on the one saying the request
#: was decided, None: whoever watches the SDK's log (the MCP proxy) knows whether a call waits on a reviewer.
HELD_FOR = "agentrein_held_for"

#: The attribute a failed call's exception gets when the rollback it caused failed too (a
#: :class:`RollbackFailedError`): ``getattr(err, "agentrein_rollback_failure", None)``.
ROLLBACK_FAILURE = "agentrein_rollback_failure"
#: The longest reason sent when action logging failed (AgentRein keeps the start of it as the rollback's trigger).
MAX_REASON = 1_000


@define
class Guard:
    """Guards every call of one wrapped client: its session, its raw client and its ``wrap()`` options, the
    mode's :class:`Recorder`, the journal for when AgentRein is unreachable, and the clients this process
    holds (an embedded rollback undoes the session's actions through them)."""

    recorder: Recorder
    journal: Outbox
    clients: ClientUndoExecutor
    session_id: str
    client: Any
    options: WrapOptions
    redactor: Redactor

    def rooted_at(self, obj: Any) -> Guard:
        """The guard of an object a call returned (``repo.create_issue(...)`` is prepared on ``repo``)."""
        return evolve(self, client=obj)

    @property
    def connector_name(self) -> str:
        return self.options.connector.name

    def call(
        self, path: tuple[str, ...], method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Entry point of the proxy: ``method`` is the raw client's bound method at ``path``."""
        prepared = self.options.connector.prepare(self.client, path, args, kwargs)
        if prepared is None:
            return method(*args, **kwargs)
        if not isinstance(prepared, PreparedCall):  # described once the service answered (an MCP tool's hints)
            return self._prepared_later(prepared, method, args, kwargs)
        if prepared.is_async:
            return self._call_async(prepared)
        return self._call_sync(prepared)

    async def _prepared_later(
        self,
        preparing: Awaitable[PreparedCall | None],
        method: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        prepared = await preparing
        if prepared is None:
            return await method(*args, **kwargs)
        return await self._call_async(prepared)

    # sync ---------------------------------------------------------------------------------------------
    def _call_sync(self, call: PreparedCall) -> Any:
        key = _call_key()
        logged = self._write_ahead(call, key)
        if logged is None:
            try:
                result = self._execute(call, key)
            except Exception as exc:
                self._journal_call(call, key, error=exc)
                raise
            self._journal_call(call, key, result=result)
            return result
        if logged.approval is not None:
            self._await_approval(logged)
        try:
            result = self._execute(call, logged.action.idempotency_key)
        except Exception as exc:
            self._record_failure(logged.action, exc, rolls_back=self.options.connector.rolls_back(call, exc))
            raise
        self._record_success(call, logged.action, result, ClientRef(self.client))
        return result

    def _execute(self, call: PreparedCall, key: str) -> Any:
        return run_call(self.options.connector, call, key, retryable=self.options.is_retryable(call))

    # async --------------------------------------------------------------------------------------------
    async def _call_async(self, call: PreparedCall) -> Any:
        ref = ClientRef(self.client, asyncio.get_running_loop())
        self.clients.remember_session(self.session_id, self.connector_name, ref)
        key = _call_key()
        logged = await asyncio.to_thread(self._write_ahead, call, key)
        if logged is None:
            try:
                result = await self._execute_async(call, key)
            except Exception as exc:
                await asyncio.to_thread(self._journal_call, call, key, error=exc)
                raise
            await asyncio.to_thread(self._journal_call, call, key, result=result)
            return result
        if logged.approval is not None:
            try:
                await asyncio.to_thread(self._await_approval, logged)
            except asyncio.CancelledError as exc:
                # The task went away; the thread it waited in sees the withdrawal as a decision, and ends.
                self._withdraw(logged.approval.approval_id, exc)
                raise
        try:
            result = await self._execute_async(call, logged.action.idempotency_key)
        except Exception as exc:
            rolls_back = self.options.connector.rolls_back(call, exc)
            await asyncio.to_thread(self._record_failure, logged.action, exc, rolls_back=rolls_back)
            raise
        await asyncio.to_thread(self._record_success, call, logged.action, result, ref)
        return result

    async def _execute_async(self, call: PreparedCall, key: str) -> Any:
        retryable = self.options.is_retryable(call)
        return await run_call_async(self.options.connector, call, key, retryable=retryable)

    # the steps both share -------------------------------------------------------------------------------
    def _write_ahead(self, call: PreparedCall, key: str) -> LoggedAction | None:
        """Record the call before it runs, under ``key``. ``None`` when AgentRein is down and
        ``failure_mode="open"``: the call then runs under ``key`` and is journaled so. That the record may have
        been written all the same (the answer was lost) is why the key is made here: the journal's replay then
        settles that record instead of leaving it beside a second one.

        Action logging that fails rolls the session back, and the call does not run: the agent gets the
        recording error, with the rollback's outcome attached as for a failed call (:meth:`_logging_failed`)."""
        try:
            nesting.check("payload", call.payload)  # before the redactor, which recurses: the call has not run yet
            self.journal.replay()
            write_ahead = WriteAhead(
                connector=self.connector_name,
                api_name=call.api_name,
                operation_type=call.operation_type,
                payload=self.redactor.redact(call.payload),
                requires_approval=self.options.needs_approval(call.api_name),
                approval_timeout=timedelta(seconds=self.options.timeout),
                idempotency_key=key,
            )
            return self.recorder.log_action(self.session_id, write_ahead)
        except AgentReinUnavailableError as exc:
            if self.options.failure_mode == "open":
                self.journal.warn_unavailable(exc)
                return None
            self._logging_failed(exc, exc, call.api_name)
            raise
        except ApprovalRejectedError as exc:
            # The plan has no approval gates: the action is FAILED and the session is being rolled back.
            self._see_rollback_through(exc)
            raise
        except Exception as exc:
            if is_logging_failure(exc):
                self._logging_failed(exc, exc, call.api_name)
            raise

    def _await_approval(self, logged: LoggedAction) -> None:
        approval = logged.approval
        assert approval is not None
        approval_id = approval.approval_id
        left = (approval.timeout_at - approval.requested_at).total_seconds()
        try:  # from the moment the request is known: an interrupt anywhere after it withdraws it
            # A held call is otherwise silent for as long as the request lasts: say what it waits for, once.
            log.warning(
                "AgentRein holds %s for approval %s (%.0f s left to decide it): %s",
                logged.action.api_name,
                approval_id,
                left,
                self.recorder.how_to_decide(approval_id),
                extra={HELD_FOR: approval_id},
            )
            decision = self._decision(approval_id, left)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # interrupted (Ctrl-C) or exiting: nobody will run the call
                self._withdraw(approval_id, exc)
            raise
        status = decision.status if decision is not None else ApprovalStatus.EXPIRED
        runs = "runs now" if status is ApprovalStatus.APPROVED else "does not run"
        decided = (approval_id, status, logged.action.api_name, runs)
        log.warning("AgentRein approval %s is %s: the held %s %s", *decided, extra={HELD_FOR: None})
        if status is ApprovalStatus.APPROVED:
            return
        refusal: ApprovalRejectedError | ApprovalTimeoutError = (
            ApprovalTimeoutError(approval_id, logged.action.action_id)
            if decision is None or status is ApprovalStatus.EXPIRED
            else ApprovalRejectedError(decision.reason, approval_id, logged.action.action_id)
        )
        if decision is None:
            # Nothing to wait for: AgentRein expires the request, and rolls the session back, once it is back.
            refusal.add_note("AgentRein could not be reached until the request's time was up")
            raise refusal
        self._see_rollback_through(refusal)
        raise refusal

    def _decision(self, approval_id: str, left: float) -> ApprovalInfo | None:
        """The request once decided (approved, rejected, expired or withdrawn); ``None`` when AgentRein stayed
        out of reach until its time (``left`` seconds) was up: a wait rides out outages (a server restarted)
        until then, whatever ``failure_mode`` says, for the decision may be made meanwhile."""
        ends = time.monotonic() + left + EXPIRY_GRACE
        while True:
            try:
                wait = max(self.options.poll_interval, ends - time.monotonic())
                decision = self.recorder.wait_for_decision(approval_id, wait)
            except AgentReinUnavailableError as exc:  # out of reach for all of ``wait`` (Recorder says so)
                log.warning("AgentRein could not be reached until approval %s was due: %s", approval_id, exc)
                return None
            if decision.status is not ApprovalStatus.PENDING:
                return decision

    def _withdraw(self, approval_id: str, why: BaseException) -> None:
        """Withdraw the request the caller no longer waits for (best effort: it may be decided already, or
        AgentRein out of reach, and the caller is leaving either way)."""
        try:
            self.recorder.withdraw_approval(approval_id, f"the agent stopped waiting ({type(why).__name__})")
        except Exception as exc:
            log.warning("AgentRein could not withdraw approval request %s: %s", approval_id, exc)

    def _record_success(self, call: PreparedCall, action: Action, result: Any, ref: ClientRef) -> None:
        failure = self.options.connector.failure_in(call, result)
        if failure is not None:  # a failure the agent reads as its result, and chose to only record
            self._record_failure(action, failure, rolls_back=False)
            return
        try:
            response, undo = self._outcome(call, result)
            self.recorder.confirm_action(self.session_id, action.action_id, Confirmed(response, undo))
        except AgentReinUnavailableError as exc:
            # The call did happen: the journal confirms it once AgentRein is back.
            self.journal.warn_unavailable(exc)
            self.journal.append(OutcomeReported(self.session_id, action.action_id, True, response, undo))
            return
        except Exception:
            # The agent's call succeeded; our bookkeeping failing must not say otherwise, and it rolls nothing
            # back: raising would invite the agent to make the call twice, and a rollback could not undo this
            # one (a CLEARED action is never undone), only the well-recorded work before it.
            log.exception("AgentRein could not confirm action %s; it stays CLEARED", action.action_id)
            return
        self.clients.remember(action, ref)

    def _record_failure(self, action: Action, error: BaseException | str, *, rolls_back: bool = True) -> None:
        """``error``: what the call raised, or why a result it returned is a failure; ``rolls_back`` false: a
        failure the agent chose to only record (:meth:`Connector.failure_in`, :meth:`Connector.rolls_back`)."""
        if isinstance(error, BaseException):
            message = _describe(error, self.redactor)
        else:
            message = self.redactor.redact_text(error)
        try:
            self.recorder.fail_action(self.session_id, action.action_id, Failed(message, rolls_back))
        except AgentReinUnavailableError as exc:
            self.journal.warn_unavailable(exc)
            outcome = OutcomeReported(self.session_id, action.action_id, False, error=message, rolls_back=rolls_back)
            self.journal.append(outcome)
            return
        except Exception as exc:  # the agent must see its own error, not ours
            log.exception("AgentRein could not record the failure of action %s", action.action_id)
            if is_logging_failure(exc) and rolls_back and isinstance(error, BaseException):
                self._logging_failed(error, exc, action.api_name)
            return
        if rolls_back and isinstance(error, BaseException):  # a failure only recorded rolls nothing back
            self._see_rollback_through(error)

    def _logging_failed(self, raising: BaseException, cause: BaseException, api_name: str) -> None:
        """Recording ``api_name`` failed with ``cause`` (action logging failed, a rollback trigger): roll the
        session back as a failed call does, before the call raises ``raising``. AgentRein out of reach: the
        request is journaled, made as soon as AgentRein answers, and a note on ``raising`` says so."""
        what = f"{_describe(cause, self.redactor)} ({self.redactor.redact_text(api_name)})"
        reason = shortened(f"action logging failed: {what}", MAX_REASON)  # an api name may be of any length
        try:
            self.recorder.fail_session(self.session_id, reason=reason, connector=self.connector_name)
        except AgentReinUnavailableError:
            try:
                self.journal.append(LoggingFailed(self.session_id, reason, self.connector_name))
            except Exception:
                log.exception("AgentRein could not journal the rollback of session %s", self.session_id)
                return
            raising.add_note(
                f"AgentRein could not be reached to roll the session back; the rollback is journaled in "
                f"{self.journal.path} and requested as soon as AgentRein answers"
            )
            return
        except Exception:
            log.exception("AgentRein could not roll back session %s after action logging failed", self.session_id)
            return
        self._see_rollback_through(raising)

    def _outcome(self, call: PreparedCall, result: Any) -> tuple[JSON, UndoConfig]:
        """What is recorded of a successful call: its redacted result and how to undo it, redacted too (it may
        wait on disk, in the outbox). An undo its own connector refuses, as redacted (what is stored: the
        embedded engine does not check it again, a server does), is recorded as none, so that the call, which
        did run, is never left unconfirmed; the session then shows it as not undone."""
        connector = self.options.connector
        undo = connector.undo_for(call, result, self.options.undo_override(call.api_name))
        try:
            nesting.check("undo", undo.params)  # before the redactor, which recurses
            undo = self.redactor.redact_undo(undo)
            connector.check_undo(undo)
        except ValidationError as exc:
            log.warning("AgentRein cannot undo %s (%s); it is recorded as an action with no undo", call.api_name, exc)
            undo = UndoConfig(UNDO_NONE)
        # Bounded before it is redacted: the redactor recurses too, and an upstream answer may nest any depth.
        response = self.redactor.redact(nesting.bounded(connector.record_result(call, result)))
        return response, undo

    def _journal_call(
        self, call: PreparedCall, key: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        """A call that ran while AgentRein was unavailable: keep it for replay (never fail the agent's call)."""
        try:
            # A failure the agent reads as its result (and chose to only record) is journaled as a failure too.
            failure = self.options.connector.failure_in(call, result) if error is None else None
            response, undo = self._outcome(call, result) if error is None and failure is None else (None, None)
            if error is not None:
                failure = _describe(error, self.redactor)
            executed = ExecutedCall(
                idempotency_key=key,
                connector=self.connector_name,
                api_name=self.redactor.redact_text(call.api_name),  # the journal is on disk: a path's token too
                operation_type=call.operation_type,
                payload=self.redactor.redact(call.payload),
                succeeded=failure is None,
                response=response,
                undo=undo,
                error=self.redactor.redact_text(failure) if failure is not None else None,
                # A failure only recorded rolls nothing back.
                rolls_back=failure is None or (error is not None and self.options.connector.rolls_back(call, error)),
            )
            self.journal.append(CallRecorded(self.session_id, executed))
        except Exception:
            log.exception("AgentRein could not journal the call %s", call.api_name)

    def _see_rollback_through(self, raising: BaseException) -> None:
        """See the session's rollback through before the call raises ``raising``. The agent must see that
        error, not ours: AgentRein's problems here are logged, and a rollback that failed is attached to it
        (:data:`ROLLBACK_FAILURE`, and a note the traceback shows)."""
        try:
            session = self.recorder.follow_rollback(self.session_id, wait=self.options.timeout)
            self.clients.forget_if_ended(session)
        except AgentReinUnavailableError as exc:
            self.journal.warn_unavailable(exc)
            return
        except AgentReinError:
            log.exception("AgentRein could not finish rolling back session %s", self.session_id)
            return
        failure = RollbackFailedError.of(session)
        if failure is not None:
            setattr(raising, ROLLBACK_FAILURE, failure)
            raising.add_note(f"AgentRein then rolled the session back, and that failed too: {failure}")


def is_logging_failure(error: BaseException) -> bool:
    """Whether ``error``, raised by recording a call, means action logging failed: AgentRein's own errors say
    so themselves (``rolls_back``, from the server's answer in served mode); any other exception (a database
    error, a broken connection) is AgentRein failing."""
    if isinstance(error, AgentReinError):
        return error.rolls_back
    return isinstance(error, Exception)


def _call_key() -> str:
    """The idempotency key of a call, made before its write-ahead record is asked for (:meth:`Guard._write_ahead`)."""
    return f"agentrein-{secrets.token_hex(16)}"


def _describe(error: BaseException, redactor: Redactor) -> str:
    """What is recorded of an error: redacted like a payload, for it may echo a URL's token or a card."""
    return redactor.redact_text(f"{type(error).__name__}: {error}")
