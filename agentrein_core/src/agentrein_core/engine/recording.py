"""Use cases of recording what agents do: sessions, and each call's write-ahead record, its outcome, and
the calls that ran while AgentRein could not be reached (replayed from the SDK's journal)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from attrs import evolve

import agentrein_core.engine.cursors as cursors
import agentrein_core.engine.validation as validation
from agentrein_core import rules
from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT, Confirmed, ExecutedCall, Failed, WriteAhead
from agentrein_core.connector import WHY_NOT_UNDONE
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import (
    MAX_TRIGGER,
    NO_GATES_REASON,
    SYSTEM,
    after_agent_failure,
    after_failure,
    blocked_by,
    close_reviews,
    hold_before_rollback,
    new_approval,
    open_approval,
    queue_check,
    undo_alone,
    undo_late_success,
)
from agentrein_core.engine.idempotency import RecordBeside, Settle, asked_again, ran_again, replay_found
from agentrein_core.engine.records import (
    action_of,
    actions_after,
    check_acts_on,
    read_first_actions,
    read_session,
    replace,
    session_of,
    set_session_status,
    undo_row,
)
from agentrein_core.errors import (
    AgentReinError,
    ApprovalRejectedError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    ValidationError,
)
from agentrein_core.ids import new_id
from agentrein_core.model import JSON, MAX_WRITE_AHEAD_KEY, Action, Approval, BeforeState, Session, UndoConfig
from agentrein_core.policies import Subject, decide
from agentrein_core.read_models import (
    ActionPage,
    Confirmation,
    LoggedAction,
    RefusedConfirmation,
    SessionInfo,
    SessionPage,
    checked,
    session_summary,
    shortened,
)
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    Plan,
    PolicyEffect,
    SessionStatus,
)
from agentrein_core.store import SeqTaken, Tx

#: The refusal of a creation whose chosen id is not free for it, the same whichever organisation holds the id:
#: it names neither the id nor a session. (That the id is not free, the refusal itself says: ids are global.)
CHOSEN_ID_REFUSED = "this session cannot be opened with the id it chose; open it with another random id"


class Recording(UseCases):
    # sessions -----------------------------------------------------------------------------------------
    def new_session(
        self,
        org_id: str,
        agent_id: str,
        intent: str = "",
        sandbox: bool = False,
        *,
        session_id: str | None = None,
        opened_by_key: str | None = None,
        recorded_with: str | None = None,
    ) -> Session:
        """Open a session. ``session_id`` is an id the client chose (the SDK chooses one when it opens a session
        while AgentRein is unreachable, and sends the creation once AgentRein answers): of the shape of
        AgentRein's own ids, and accepted once. The same creation sent again (same agent, intent and sandbox)
        returns the session made first, so a replay repeated after a crash makes nothing twice; any other
        creation with a taken id is refused with one answer, :data:`CHOSEN_ID_REFUSED`, whichever organisation
        holds the id: it names neither the id nor its holder, and hands no session over.
        ``opened_by_key``: the API key opening it, the only agent key that may then act on it (the key that
        replays an offline creation opened it: the journal's calls are that agent's). ``recorded_with``: the
        client recording it, when not one of AgentRein's own (a published SDK, through ``/compat``)."""
        now = self.clock()
        chosen = validation.chosen_id("id", session_id, "ses") if session_id is not None else None
        session = Session(
            session_id=chosen or new_id("ses"),
            org_id=org_id,
            agent_id=validation.redacted_text("agent_id", agent_id, 200, self.redactors.common),
            intent=validation.redacted_text(
                "intent", intent, validation.MAX_TEXT, self.redactors.common, allow_empty=True
            ),
            sandbox=validation.boolean("sandbox", sandbox),
            status=SessionStatus.ACTIVE,
            created_at=now,
            last_activity_at=now,
            opened_by_key=opened_by_key,
            recorded_with=None if recorded_with is None else validation.text("recorded_with", recorded_with, 100),
        )
        with self.store.transaction() as tx:
            if tx.organisations.get(org_id) is None:
                raise NotFoundError("organisation", org_id)
            if chosen is None:
                tx.insert(session, last_seq=0)
                return session
            if tx.insert_once(session, last_seq=0):
                return session
            earlier = tx.sessions.get(org_id, chosen)  # this organisation's only: another's is never read
            if earlier is not None and _same_creation(earlier, session):
                return earlier
            raise InvalidTransitionError(CHOSEN_ID_REFUSED)

    def get_session(
        self, org_id: str, session_id: str, *, agent_key: str | None = None, first_actions: int | None = None
    ) -> SessionInfo:
        """The session with its actions, approvals and intent verifications. ``agent_key``, here and in every
        use case of a session: the caller is that agent key, which acts only on the sessions it opened (any
        other is not found, as another organisation's are not). ``first_actions``: only that many actions,
        the first, and where the rest start (:attr:`SessionInfo.actions_cursor`, for :meth:`action_page`), so
        that reading a long session costs what reading a short one does."""
        if first_actions is not None:
            validation.page_size("first_actions", first_actions)
        with self.store.transaction(write=False) as tx:
            session = session_of(tx, org_id, session_id, agent_key=agent_key)
            if first_actions is not None:
                shown = read_first_actions(tx, session, first_actions)
            else:
                shown = read_session(tx, session, verified=True)
        if agent_key is None or session.recorded_with is None:
            return shown
        return evolve(shown, actions=[_as_agents_read(a) for a in shown.actions])

    def action_page(
        self, org_id: str, session_id: str, limit: int = 100, *, cursor: str | None = None, agent_key: str | None = None
    ) -> ActionPage:
        """One page of the session's actions, in ``seq`` order (at most ``limit``, 1 to 1000), each as
        :meth:`get_session` shows it; pass the page's ``next_cursor`` back as ``cursor`` for the next (keyset
        pagination on ``seq``: actions recorded meanwhile come on a later page, none is shown twice). A page
        costs the same however many actions the session holds."""
        validation.page_size("limit", limit)
        (after,) = cursors.decode(cursor, (cursors.position_in_session,)) if cursor else (0,)
        with self.store.transaction(write=False) as tx:
            # Another's (organisation, key): not found.
            session = session_of(tx, org_id, session_id, agent_key=agent_key)
            actions = tx.actions.page(session_id, limit, after)
            actions = checked(actions, tx.verifications.of_actions(session_id, [a.action_id for a in actions]))
        following = actions_after(actions[-1]) if len(actions) == limit else None
        if agent_key is not None and session.recorded_with is not None:
            actions = [_as_agents_read(a) for a in actions]
        return ActionPage(actions, following)

    def list_sessions(
        self,
        org_id: str,
        limit: int = 100,
        *,
        status: SessionStatus | str | None = None,
        display_status: DisplayStatus | str | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        cursor: str | None = None,
        agent_key: str | None = None,
    ) -> SessionPage:
        """One page of the organisation's sessions, newest first (at most ``limit``, 1 to 1000), filtered: each
        as a list shows it, with its action count (:meth:`get_session` reads its actions). Pass the page's
        ``next_cursor`` back as ``cursor`` for the next page (keyset pagination: pages do not shift when
        sessions are added meanwhile). ``agent_key``: only the sessions that agent key opened."""
        validation.page_size("limit", limit)
        stored = validation.enum("status", SessionStatus, status) if status is not None else None
        shown = validation.enum("displayStatus", DisplayStatus, display_status) if display_status is not None else None
        position = cursors.decode(cursor, (cursors.moment, cursors.identifier("ses"))) if cursor else None
        with self.store.transaction(write=False) as tx:
            listed = tx.sessions.page(
                org_id,
                limit,
                status=stored,
                display_status=shown,
                agent_id=self.redactors.common.redact_text(agent_id) if agent_id else agent_id,  # as stored
                created_after=created_after,
                created_before=created_before,
                after=position,
                opened_by=agent_key,
            )
        batch = [session_summary(found.session, found.display_status, found.action_count) for found in listed]
        if len(batch) < limit:
            return SessionPage(batch, None)
        return SessionPage(batch, cursors.encode((batch[-1].created_at, batch[-1].id)))

    def complete_session(self, org_id: str, session_id: str, *, agent_key: str | None = None) -> SessionInfo:
        """The agent is done: ``COMPLETED``, and the session's intent check is queued. Refused while a
        rollback is under way: the agent must not be told "completed" while its work is being undone."""
        now = self.clock()
        with self.store.transaction() as tx:
            session = session_of(tx, org_id, session_id, agent_key=agent_key)
            if tx.rollbacks.active(session_id) is not None:
                raise InvalidTransitionError(
                    f"session {session_id} is being rolled back; it can be completed once the rollback has ended"
                )
            set_session_status(tx, session, SessionStatus.COMPLETED, completed_at=now)
            if session.status is not SessionStatus.COMPLETED:  # a repeated completion asks for no second check
                queue_check(tx, now, org_id, session_id, None)
            return read_session(tx, session_of(tx, org_id, session_id))

    def fail_session(
        self, org_id: str, session_id: str, *, reason: str, connector: str | None = None, agent_key: str | None = None
    ) -> SessionInfo:
        """The agent reports that its run failed outside a recorded call: AgentRein could not record one
        (action logging failed: its write-ahead record was refused or failed, or AgentRein was out of reach
        in ``failure_mode="closed"``). The session is rolled back as a failed call rolls it back: while it is
        ``ACTIVE``, and with nothing to undo it becomes ``FAILED``. ``reason`` is redacted by the rules of
        ``connector`` (the failed call's), as its error would be. Returns the session as it then stands."""
        installed = self.connectors is not None and connector in self.connectors.names()
        redactor = self.redactors.of(connector if installed and connector else "")
        # Any length: a failure's reason is never refused (the rollback it asks for matters more), only cut.
        reason = validation.cut_text("reason", reason, validation.MAX_TEXT, redactor)
        now = self.clock()
        with self.store.transaction() as tx:
            session = session_of(tx, org_id, session_id, agent_key=agent_key)
            after_agent_failure(tx, now, session, shortened(reason, MAX_TRIGGER))
            return read_session(tx, session_of(tx, org_id, session_id))

    # actions ------------------------------------------------------------------------------------------
    def log_action(
        self,
        org_id: str,
        session_id: str,
        call: WriteAhead,
        *,
        confirm: Sequence[Confirmation] = (),
        agent_key: str | None = None,
        redacted: bool = False,
        before_state: str | None = None,
    ) -> LoggedAction:
        """Record a call before it runs and decide whether it may run now (``CLEARED``), must wait for a
        human (``PENDING_APPROVAL``: the agent declared it, or a before-execution policy holds it, for the
        policy's own timeout when it has one), or must not run (``FAILED``, raising :class:`PolicyBlockedError`).

        ``confirm``: earlier calls of the session that succeeded (the SDK's confirmations, carried with its
        next write-ahead record instead of a request each). They are applied first, in the same transaction,
        as :meth:`confirm_action` applies one, and they are applied even when the new record is refused
        (the session is being rolled back, say); one that cannot be applied (already settled, unknown,
        invalid) is skipped and named in the answer's ``refused_confirmations``, never a reason to refuse the new
        record.

        ``redacted``: the caller is this process's own guard (embedded mode), which redacted the payload with the
        connector's redactor already, so it is not redacted twice; whatever comes over the wire always is.

        ``before_state``: the id of a before-state kept for this session (:meth:`keep_before_state`) for this
        call, read before it was held (the published SDKs' precapture): tied to the new record in the same
        transaction (:meth:`before_state_of`), once. One that is not this session's (:class:`NotFoundError`),
        or was read for another call or tied to one already, even by a concurrent request
        (:class:`InvalidTransitionError`), refuses the whole request: nothing is written, not even the
        confirmations carried."""
        operation_type = OperationType(call.operation_type)
        self._check_connector(call.connector)
        validation.json_value("payload", call.payload)
        redactor = self.redactors.of(call.connector)
        api_name = validation.redacted_text("api_name", call.api_name, 500, redactor)
        payload = call.payload if redacted else redactor.redact(call.payload)
        key = call.idempotency_key
        if key is not None:
            key = validation.idempotency_key(key, MAX_WRITE_AHEAD_KEY, None if redacted else redactor)
        checked, refused_confirmations = _checked_all(confirm)
        now = self.clock()
        refused: AgentReinError | None = None
        approval = None
        with self.store.transaction() as tx:
            check_acts_on(tx, org_id, session_id, agent_key)  # before the confirmations it carries
            for confirmation in checked:
                try:
                    self._confirm(tx, now, org_id, confirmation, session_id)
                except AgentReinError as exc:  # raised before it wrote anything
                    settled = _past_confirmation(tx.actions.get(org_id, confirmation.action_id), session_id)
                    refused_confirmations.append(RefusedConfirmation(confirmation.action_id, str(exc), settled))
            first = tx.actions.by_key(org_id, session_id, key) if key is not None else None
            taken = tx.sessions.take_seq(org_id, session_id, now) if first is None else None
            if first is not None:  # asked again: the client never got the first answer
                action = first
                approval, refused = asked_again(tx, first, call.connector, api_name)
            elif taken is None:
                session = session_of(tx, org_id, session_id)  # NotFoundError if it does not exist
                if session.status is SessionStatus.ACTIVE:
                    refused = InvalidTransitionError(
                        f"session {session_id} is being rolled back; it accepts no new actions"
                    )
                else:
                    refused = InvalidTransitionError(
                        f"session {session_id} is {session.status}; only ACTIVE sessions accept new actions"
                    )
            else:
                action, approval, refused = self._write_ahead(
                    tx,
                    now,
                    taken,
                    Subject(call.connector, api_name, taken.agent_id, operation_type),
                    org_id=org_id,
                    session_id=session_id,
                    payload=payload,
                    requires_approval=call.requires_approval,
                    approval_timeout=call.approval_timeout,
                    idempotency_key=key,
                )
                if before_state is not None:  # raised here, the transaction and the record are rolled back
                    _tie_before_state(tx, action, before_state)
        if refused is not None:  # raised after the transaction, so the confirmations carried are kept
            raise refused
        self.recent_connectors.remember(action.action_id, action.connector)
        return LoggedAction(action, approval, refused_confirmations)

    def _write_ahead(
        self,
        tx: Tx,
        now: datetime,
        taken: SeqTaken,
        subject: Subject,
        *,
        org_id: str,
        session_id: str,
        payload: JSON,
        requires_approval: bool,
        approval_timeout: timedelta,
        idempotency_key: str | None,
    ) -> tuple[Action, Approval | None, AgentReinError | None]:
        """The write-ahead record of :meth:`log_action` in ``tx``, its approval, and the refusal to raise once
        ``tx`` is committed (blocked by a policy, or held on a plan without approval gates)."""
        action_id = new_id("act")
        action = Action(
            action_id=action_id,
            session_id=session_id,
            org_id=org_id,
            seq=taken.seq,
            connector=validation.text("connector", subject.connector, 100),
            api_name=subject.api_name,
            operation_type=subject.operation_type,
            payload=payload,
            status=ActionStatus.CLEARED,
            idempotency_key=idempotency_key or f"agentrein-{action_id}",
            created_at=now,
            updated_at=now,
        )
        decision = decide(self.policy_sets.enabled(tx, org_id, taken.policy_version), subject)
        # Held by the agent's own declaration or by a policy, whatever the agent's code declares.
        held = requires_approval or decision.holds
        if decision.policy is not None:
            # A held call has had its human review already; otherwise REQUIRE_APPROVAL reviews it afterwards.
            review_after = decision.effect is PolicyEffect.REQUIRE_APPROVAL and not held
            action = evolve(action, policy_name=decision.policy.name, review_after=review_after)
            if decision.holds and decision.policy.approval_timeout_ms is not None:
                approval_timeout = timedelta(milliseconds=decision.policy.approval_timeout_ms)
        approval = None
        refused: AgentReinError | None = None
        if decision.effect is PolicyEffect.BLOCK:
            assert decision.policy is not None
            action = evolve(action, status=ActionStatus.FAILED, error=blocked_by(decision.policy.name))
            refused = PolicyBlockedError(action_id, decision.policy.name)
        elif held and taken.plan is Plan.FREE:
            action = evolve(action, status=ActionStatus.FAILED, error=NO_GATES_REASON)
            refused = ApprovalRejectedError(NO_GATES_REASON, None, action_id)
        elif held:
            action = evolve(action, status=ActionStatus.PENDING_APPROVAL)
            approval = new_approval(action, ApprovalPurpose.BEFORE_EXECUTION, now, approval_timeout)
        if idempotency_key is None:
            tx.insert(action)
        elif not tx.insert_once(action):  # asked again while the first ask was under way: that one answers
            first = tx.actions.by_key(org_id, session_id, idempotency_key)
            assert first is not None  # the unique key that refused this record is its
            return first, *asked_again(tx, first, subject.connector, subject.api_name)
        if approval is not None:
            open_approval(tx, now, approval)
        if isinstance(refused, ApprovalRejectedError):
            after_failure(tx, now, session_of(tx, org_id, session_id), "approval gate unavailable on plan", SYSTEM)
        return action, approval, refused

    def confirm_action(
        self,
        org_id: str,
        action_id: str,
        confirmed: Confirmed,
        *,
        session_id: str | None = None,
        agent_key: str | None = None,
        redacted: bool = False,
    ) -> Action:
        """The call ran and succeeded: ``CLEARED -> SUCCESS`` with its (redacted) response and undo config.
        If a ``REQUIRE_APPROVAL`` policy matched its write-ahead record, an after-execution approval opens; if
        the session was rolled back after the call was recorded, it is rolled back again, this call included
        (:func:`~agentrein_core.engine.consequences.undo_late_success`). ``session_id``, when given, must be
        the action's session. ``redacted``: the caller is this process's own guard, which redacted the response
        and the undo and had the connector check that undo (:meth:`log_action`)."""
        confirmation = _checked(Confirmation(action_id, confirmed.response, confirmed.undo))
        with self.store.transaction() as tx:
            if agent_key is not None:
                action_of(tx, org_id, action_id, agent_key=agent_key)
            return self._confirm(tx, self.clock(), org_id, confirmation, session_id, redacted=redacted)

    def _confirm(
        self,
        tx: Tx,
        now: datetime,
        org_id: str,
        confirmation: Confirmation,
        session_id: str | None,
        *,
        redacted: bool = False,
    ) -> Action:
        """Apply one checked confirmation in ``tx``; every refusal is raised before anything is written, so a
        write-ahead record can carry confirmations it skips when they are refused."""
        action_id = confirmation.action_id
        # Redacted by the action's connector: known if this process recorded it, else read from its record
        # (which then says at once why it cannot be confirmed).
        connector = self.recent_connectors.take(action_id) or _confirmable(tx, org_id, action_id, session_id).connector
        undo, response = confirmation.undo, confirmation.response
        if not redacted:
            redactor = self.redactors.of(connector)
            undo, response = redactor.redact_undo(undo), redactor.redact(response)
            self._check_undo(connector, undo)
        done = tx.actions.set_outcome(
            org_id, action_id, ActionStatus.CLEARED, ActionStatus.SUCCESS, response, undo_row(undo), now, session_id
        )
        if done is None:  # nothing written: say why
            _confirmable(tx, org_id, action_id, session_id)
            raise InvalidTransitionError(f"action {action_id} changed concurrently; try again")
        if done.review_after:
            open_approval(tx, now, new_approval(done, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT))
        tx.sessions.want_check(done.session_id)  # the action wants one already (set_outcome)
        undo_late_success(tx, now, done)
        return done

    def fail_action(
        self,
        org_id: str,
        action_id: str,
        failure: Failed,
        *,
        session_id: str | None = None,
        agent_key: str | None = None,
    ) -> Action:
        """The call failed: record why and roll the session back (a job the caller then runs), unless
        ``failure.rolls_back`` says the agent only records it.

        An action a reviewer approved stays ``CLEARED`` (status reference §1): its failure is recorded as a
        separate ``FAILED`` action, so the approval's history is never rewritten. An action still waiting for
        its approval (``PENDING_APPROVAL``) fails with it: the approval closes ``REJECTED``, saying why."""
        now = self.clock()
        with self.store.transaction() as tx:
            return self._fail(tx, now, org_id, action_id, failure, session_id=session_id, agent_key=agent_key)

    def _fail(
        self,
        tx: Tx,
        now: datetime,
        org_id: str,
        action_id: str,
        failure: Failed,
        *,
        session_id: str | None = None,
        agent_key: str | None = None,
    ) -> Action:
        """:meth:`fail_action` in ``tx``, which has held no row yet (the lock order)."""
        if failure.rolls_back:  # a sandbox session's rollback, done at once, writes all its actions: held first
            session = session_of(tx, org_id, action_of(tx, org_id, action_id, agent_key=agent_key).session_id)
            hold_before_rollback(tx, session)
        pending = tx.approvals.hold_pending_of(action_id)  # before the action, as a decision takes them
        action = action_of(tx, org_id, action_id, agent_key=agent_key)
        if session_id is not None and action.session_id != session_id:
            raise NotFoundError("action", action_id)
        rules.check("action", rules.ACTION_TRANSITIONS, action.status, ActionStatus.FAILED)
        # Cut, never refused for its length: it only says what happened, and the failure must be recorded.
        redactor = self.redactors.of(action.connector)
        error = validation.cut_text("error", failure.error or "failed", validation.MAX_TEXT, redactor)
        was_approved = any(
            p.purpose is ApprovalPurpose.BEFORE_EXECUTION and p.status is ApprovalStatus.APPROVED
            for p in tx.approvals.of_action(action_id)
        )
        sibling_key = action.failure_idempotency_key
        if was_approved and (reported := tx.actions.by_key(org_id, action.session_id, sibling_key)) is not None:
            return reported  # this failure was reported already (a retried or replayed report)
        if was_approved:
            taken = tx.sessions.take_seq(org_id, action.session_id, now, only_active=False)
            assert taken is not None  # the session exists and only_active=False always takes a seq
            failed = evolve(
                action,
                action_id=new_id("act"),
                seq=taken.seq,
                status=ActionStatus.FAILED,
                idempotency_key=sibling_key,
                error=error,
                created_at=now,
                updated_at=now,
            )
            tx.insert(failed)
        else:
            failed = evolve(action, status=ActionStatus.FAILED, error=error, updated_at=now)
            replace(tx, failed, status=action.status)
            tx.sessions.touch(action.session_id, now)
            if action.status is ActionStatus.PENDING_APPROVAL:  # nobody is left to act on a decision
                close_reviews(tx, now, failed, "the action failed before a decision", pending)
        # Read after the writes above, so the session's new activity time is not written back stale.
        if failure.rolls_back:
            session = session_of(tx, org_id, action.session_id)
            after_agent_failure(tx, now, session, f"action {action.api_name} failed")
        return failed

    def record_executed_action(
        self, org_id: str, session_id: str, call: ExecutedCall, *, agent_key: str | None = None
    ) -> Action:
        """Record a call that already ran without a write-ahead record, because AgentRein was unreachable
        (``failure_mode="open"``): the SDK replays it from its local journal once AgentRein answers again.

        It is recorded as it happened, once: a second replay with the same ``call.idempotency_key`` (the key
        the call itself carried) returns the first record. Policies cannot stop what already ran, so a match is
        noted (``policy_name``) and a ``BLOCK`` or ``REQUIRE_APPROVAL`` match opens an after-execution review.
        A failed call rolls the session back, as it would have online.

        The SDK makes a call's key before it asks for the write-ahead record (:attr:`WriteAhead.idempotency_key`).
        When that record was written but its answer lost, the call ran as with AgentRein unreachable, and its
        replay finds the record under its key: a ``CLEARED`` one takes the outcome, as the agent's own report
        would have given it. One that could not run as it was answered (held for a decision, now withdrawn; or
        refused: blocked, rejected, expired) stays as it is, and the call is recorded beside it
        (:attr:`Action.ran_idempotency_key`), with an after-execution review: nobody reviewed it before."""
        return self._record_ran(org_id, session_id, call, agent_key=agent_key, refuse_blocked=False, replayed=True)

    def record_reported_action(
        self,
        org_id: str,
        session_id: str,
        call: ExecutedCall,
        *,
        agent_key: str | None = None,
        before_state: str | None = None,
    ) -> Action:
        """Record a call its client reports after it ran, awaiting the answer (the hosted product's published
        SDKs log every call so, through ``/compat``): as :meth:`record_executed_action` records one, except that
        a ``BLOCK`` match is not reviewed but refused: the call is undone at once where its undo can be, as a
        rejected after-execution review undoes it, and :class:`PolicyBlockedError` is raised once that is
        committed, and again for each repeat of the report (:func:`~agentrein_core.engine.idempotency.ran_again`).

        ``before_state``: the before-state its undo was derived from (the published SDKs' precapture), tied to
        the new record in the same transaction as :meth:`log_action` ties one, so that no other call's undo
        restores it; one tied meanwhile by a concurrent request refuses the whole request
        (:class:`InvalidTransitionError`), for the call to be recorded without it."""
        return self._record_ran(
            org_id, session_id, call, agent_key=agent_key, refuse_blocked=True, before_state=before_state
        )

    def _record_ran(
        self,
        org_id: str,
        session_id: str,
        call: ExecutedCall,
        *,
        agent_key: str | None,
        refuse_blocked: bool,
        before_state: str | None = None,
        replayed: bool = False,
    ) -> Action:
        connector, idempotency_key, succeeded = call.connector, call.idempotency_key, call.succeeded
        operation_type = OperationType(call.operation_type)
        self._check_connector(connector)
        self._check_undo(connector, call.undo)
        validation.json_value("payload", call.payload)
        validation.json_value("response", call.response)
        validation.undo_params(call.undo)
        redactor = self.redactors.of(connector)
        # Refused rather than redacted: the key is sent again with the undo, and two keys redacted alike
        # would be taken for one call.
        validation.secret_free("idempotency_key", idempotency_key, 100, redactor)
        api_name = validation.redacted_text("api_name", call.api_name, 500, redactor)
        payload, response, undo = (
            redactor.redact(call.payload),
            redactor.redact(call.response),
            redactor.redact_undo(call.undo),
        )
        error = None
        if not succeeded:  # cut, never refused for its length: the call ran, and its record must not be lost
            error = validation.cut_text("error", call.error or "failed", validation.MAX_TEXT, redactor)
        now = self.clock()
        with self.store.transaction() as tx:
            check_acts_on(tx, org_id, session_id, agent_key)
            found = tx.actions.by_key(org_id, session_id, idempotency_key)
            unreviewed = False  # the call ran without the review its record was to have: one after the fact
            while True:  # again when a concurrent request records the key first
                if found is not None and not replayed:
                    return ran_again(tx, found, refuse_blocked, self.policy_sets)
                seen = (
                    replay_found(tx, now, found, connector, api_name, succeeded, error) if found is not None else None
                )
                if isinstance(seen, Action):
                    return seen
                if isinstance(seen, Settle) and succeeded:
                    confirmation = Confirmation(seen.written.action_id, response, undo)
                    return self._confirm(tx, now, org_id, confirmation, session_id, redacted=True)
                if isinstance(seen, Settle):  # the raw error: the record then says what a replay of it would
                    return self._fail(
                        tx, now, org_id, seen.written.action_id, Failed(call.error or "failed", call.rolls_back)
                    )
                if isinstance(seen, RecordBeside):
                    idempotency_key, unreviewed = seen.key, True
                taken = tx.sessions.take_seq(org_id, session_id, now, only_active=False)
                if taken is None:
                    raise NotFoundError("session", session_id)
                subject = Subject(connector, api_name, taken.agent_id, operation_type)
                decision = decide(self.policy_sets.enabled(tx, org_id, taken.policy_version), subject)
                action = Action(
                    action_id=new_id("act"),
                    session_id=session_id,
                    org_id=org_id,
                    seq=taken.seq,
                    connector=validation.text("connector", connector, 100),
                    api_name=api_name,
                    operation_type=operation_type,
                    payload=payload,
                    status=ActionStatus.SUCCESS if succeeded else ActionStatus.FAILED,
                    idempotency_key=idempotency_key,
                    created_at=now,
                    updated_at=now,
                    response=response if succeeded else None,
                    undo=undo if succeeded else None,
                    error=None if succeeded else error,
                    policy_name=decision.policy.name if decision.policy is not None else None,
                )
                if tx.insert_once(action):
                    break
                found = tx.actions.by_key(org_id, session_id, idempotency_key)
                assert found is not None  # the unique key that refused the record is its
            if before_state is not None:  # raised here, the transaction and the record are rolled back
                _tie_before_state(tx, action, before_state)
            if not succeeded and call.rolls_back:
                after_agent_failure(tx, now, session_of(tx, org_id, session_id), f"action {api_name} failed")
                return action
            blocked = succeeded and refuse_blocked and decision.effect is PolicyEffect.BLOCK
            undoable = action.undo is not None and not action.undo.is_none
            if blocked and undoable:
                assert decision.policy is not None
                session = session_of(tx, org_id, session_id)
                undo_alone(tx, now, session, action, SYSTEM, f"{api_name} blocked by policy {decision.policy.name!r}")
            elif unreviewed or decision.effect is not PolicyEffect.ALLOW:  # a blocked call that cannot be undone too
                review = new_approval(action, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT)
                open_approval(tx, now, review)
            if succeeded and not blocked:
                undo_late_success(tx, now, action, recorded_after_it_ran=True)
            tx.actions.want_check(action.action_id)
            tx.sessions.want_check(session_id)
        if blocked:
            assert decision.policy is not None
            raise PolicyBlockedError(action.action_id, decision.policy.name, ran=True, undoable=undoable)
        return action

    # before-states ------------------------------------------------------------------------------------------
    def keep_before_state(
        self, org_id: str, session_id: str, connector: str, api_name: str, state: JSON, *, agent_key: str | None = None
    ) -> BeforeState:
        """Keep ``state``, the object a call of the session is about to change as the server read it (the
        published SDKs' precapture), redacted by the connector's rules, until the call is reported
        (:meth:`before_state`)."""
        self._check_connector(connector)
        validation.json_value("state", state)
        redactor = self.redactors.of(connector)
        kept = BeforeState(
            precapture_id=new_id("pre"),
            org_id=org_id,
            session_id=session_id,
            connector=connector,
            api_name=validation.redacted_text("api_name", api_name, 500, redactor),
            state=redactor.redact(state),
            captured_at=self.clock(),
        )
        with self.store.transaction() as tx:
            check_acts_on(tx, org_id, session_id, agent_key)
            tx.insert(kept)
        return kept

    def before_state(
        self, org_id: str, session_id: str, precapture_id: str, *, agent_key: str | None = None
    ) -> BeforeState:
        """A before-state :meth:`keep_before_state` kept for this session."""
        with self.store.transaction(write=False) as tx:
            check_acts_on(tx, org_id, session_id, agent_key)
            kept = tx.before_states.get(org_id, precapture_id)
        if kept is None or kept.session_id != session_id:
            raise NotFoundError("before-state", precapture_id)
        return kept

    def before_state_of(
        self, org_id: str, session_id: str, action_id: str, *, agent_key: str | None = None
    ) -> BeforeState | None:
        """The before-state tied to a held call (:meth:`log_action`'s ``before_state``), if one was."""
        with self.store.transaction(write=False) as tx:
            check_acts_on(tx, org_id, session_id, agent_key)
            return tx.before_states.of_action(org_id, action_id)

    def _check_connector(self, connector: str) -> None:
        """Only a call of an installed connector is recorded: its record could be neither redacted by the
        connector's rules nor undone."""
        if self.connectors is not None:
            self.connectors.get(validation.text("connector", connector, 100))  # UnknownConnectorError names them

    def _check_undo(self, connector: str, undo: UndoConfig | None) -> None:
        """Undo configs come from agents: each is checked by its connector, when installed here, before it is
        stored (a connector this process does not have is checked where the inverse runs)."""
        if undo is not None and self.connectors is not None and connector in self.connectors.names():
            self.connectors.get(connector).check_undo(undo)


def _as_agents_read(action: Action) -> Action:
    """``action`` of a session a published SDK recorded, as its agent key reads it: its undo without parameters
    but why it is not undone. The server derived them, from what it read with the organisation's stored
    credentials too (a precaptured object's fields, which an update's undo restores): they are for operators,
    who review and run the undo, not for the agent, which names any object to read (README, "no oracle")."""
    undo = action.undo
    if undo is None:
        return action
    why = {k: v for k, v in undo.params.items() if k == WHY_NOT_UNDONE}
    return evolve(action, undo=UndoConfig(undo.type, why, undo.require_approval))


def _tie_before_state(tx: Tx, action: Action, precapture_id: str) -> None:
    """Tie the before-state ``precapture_id`` to ``action``, the call it was read for, compare-and-set: a
    concurrent request tying it to another call wins or loses whole."""
    kept = tx.before_states.get(action.org_id, precapture_id)
    if kept is None or kept.session_id != action.session_id:
        raise NotFoundError("before-state", precapture_id)
    if kept.action_id is not None or kept.api_name != action.api_name:
        raise InvalidTransitionError(f"before-state {precapture_id} was read for another call")
    replace(tx, evolve(kept, action_id=action.action_id), action_id=None)


def _checked(confirmation: Confirmation) -> Confirmation:
    """``confirmation`` if its response and undo are well-formed (:class:`ValidationError` otherwise)."""
    validation.json_value("response", confirmation.response)
    validation.undo_params(confirmation.undo)
    return confirmation


def _checked_all(confirmations: Sequence[Confirmation]) -> tuple[list[Confirmation], list[RefusedConfirmation]]:
    """The well-formed confirmations, and the others as refused."""
    checked: list[Confirmation] = []
    refused: list[RefusedConfirmation] = []
    for confirmation in confirmations:
        try:
            checked.append(_checked(confirmation))
        except ValidationError as exc:
            refused.append(RefusedConfirmation(confirmation.action_id, str(exc)))
    return checked, refused


def _past_confirmation(action: Action | None, session_id: str) -> bool:
    """Whether ``action`` (of ``session_id``) has had its success recorded already: a confirmation refused for
    it was sent twice, and the answer says so (``settled``) so that the SDK lets it go."""
    return action is not None and action.session_id == session_id and action.status in rules.PAST_CONFIRMATION


def _confirmable(tx: Tx, org_id: str, action_id: str, session_id: str | None) -> Action:
    """The action a confirmation names, if it may be confirmed: :class:`NotFoundError` if there is no such
    action (in ``session_id``, when given), :class:`InvalidTransitionError` if it is not ``CLEARED``."""
    action = action_of(tx, org_id, action_id)
    if session_id is not None and action.session_id != session_id:
        raise NotFoundError("action", action_id)
    rules.check("action", rules.ACTION_TRANSITIONS, action.status, ActionStatus.SUCCESS)
    return action


def _same_creation(earlier: Session, again: Session) -> bool:
    """Whether ``again`` asks for the session ``earlier`` already is (a repeated replay of its creation)."""
    # Opened by the same key too: another key's replay of it would be handed a session it did not open.
    first = (earlier.agent_id, earlier.intent, earlier.sandbox, earlier.opened_by_key)
    return first == (again.agent_id, again.intent, again.sandbox, again.opened_by_key)
