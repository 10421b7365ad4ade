"""Use cases of intent verification: taking a due check, asking the verifiers (outside any transaction)
whether what was done matches the session's declared intent, and recording the verdict with what drift leads
to (product reference §6)."""

from __future__ import annotations

import logging
from datetime import datetime

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core import intent, rules
from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import (
    emit,
    may_start_rollback,
    new_approval,
    open_approval,
    queue_check,
    start_rollback,
)
from agentrein_core.engine.records import action_of, session_of
from agentrein_core.model import OrganisationSettings, Verification
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DriftResponse,
    EventType,
    Plan,
    VerificationOutcome,
)
from agentrein_core.store import Tx

log = logging.getLogger("agentrein")


class IntentChecking(UseCases):
    def verify_next(
        self, verifiers: intent.Verifiers, org_id: str | None = None, *, queue: bool = True
    ) -> Verification | None:
        """Take one due intent check (of ``org_id`` only, when given), ask ``verifiers`` outside any
        transaction, and record the outcome; ``None`` when nothing is due. When no verifier could answer with
        an organisation's settings, all its due checks are recorded "no verifier configured" at once (one
        write, not one per action). The checks the calls confirmed since each session's watermark want are
        queued first (:meth:`queue_wanted`), unless ``queue`` is false: the supervisor queues them once a round,
        not before each check it runs (under a steady stream of calls, a look before each check cost the
        server a quarter of its time).

        Whatever goes wrong after the check was taken is recorded as ``UNVERIFIED`` and the check is asked
        again later, so no check is left taken and never answered. Drift has the consequence the organisation
        chose (``onDrift``): none, an after-execution review of the action, or a rollback of the session; and
        a ``drift.detected`` event."""
        if queue:
            self.queue_wanted(org_id)
        now = self.clock()
        with self.store.transaction(write=False) as tx:  # most looks find nothing: no write lock for them
            if not tx.verifications.has_due(now, org_id):
                return None
        with self.store.transaction() as tx:
            claimed = tx.verifications.claim_due(now, now + intent.CHECK_LEASE, org_id)
            if claimed is None:
                return None
            session = session_of(tx, claimed.org_id, claimed.session_id)
            if claimed.action_id is None:
                shown = [
                    a
                    for a in tx.actions.of_session(claimed.session_id)
                    if a.status in rules.UNDOABLE or a.status is ActionStatus.ROLLED_BACK
                ][-intent.MAX_ACTIONS_SHOWN :]
            else:
                shown = [action_of(tx, claimed.org_id, claimed.action_id)]
            settings = tx.settings.get(claimed.org_id) or OrganisationSettings(claimed.org_id)
        verifier_settings = verifiers.settings_of(settings)
        if not verifiers.answerable(verifier_settings):
            with self.store.transaction() as tx:
                # due by the end of the lease: the check taken just now among them
                tx.verifications.settle_due(claimed.org_id, now, now + intent.CHECK_LEASE, intent.NO_VERIFIER)
                return tx.verifications.get(claimed.org_id, claimed.verification_id)
        if not session.intent.strip():
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, intent.NO_INTENT, "", retry=False)
        if not shown:
            return self._record_check(
                claimed,
                VerificationOutcome.VERIFIED,
                "the session did nothing that could go against it",
                "",
                retry=False,
            )
        try:
            check = intent.IntentCheck(
                org_id=claimed.org_id,
                session_id=session.session_id,
                # Redacted when stored, and again on the way out: a record stored before a rule was added.
                agent_id=self.redactors.common.redact_text(session.agent_id),
                intent=self.redactors.common.redact_text(session.intent),
                subject="action" if claimed.action_id else "session",
                actions=[intent.CheckedAction.of(a, verifiers.redact) for a in shown],
                settings=verifier_settings,
            )
            verdict = verifiers.ask(check)
        except intent.VerifierError as exc:
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, str(exc), "", retry=True)
        except Exception as exc:  # a verifier's failure is never the agent's: note it (its kind only), retry
            log.exception("intent check %s failed", claimed.verification_id)
            reason = f"the verifier failed ({type(exc).__name__}); see the server's log"
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, reason, "", retry=True)
        if verdict is None:
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, intent.NO_VERIFIER, "", retry=False)
        return self._record_check(claimed, verdict.outcome, verdict.rationale, verdict.verifier, retry=False)

    def queue_wanted(self, org_id: str | None = None, limit: int = 100) -> int:
        """Queue the intent checks that calls want (of ``org_id`` only, when given), up to ``limit`` sessions at
        a time: a recorded call marks its action and its session (DESIGN §4, "what a recorded call writes is
        kept to the least"), and this finds them from each session's watermark, its ``checked_seq``, a
        transaction per session, off the calls' path. The watermark then moves up to the first action whose
        outcome may still come (:data:`~agentrein_core.rules.OUTCOME_AWAITED`). How many checks were queued."""
        with self.store.transaction(write=False) as tx:  # most looks find nothing: no write lock for them
            due = tx.sessions.checks_due(org_id, limit)
        now = self.clock()
        queued = 0
        for session_id in due:
            # A transaction each: one holding several sessions' rows would deadlock with the group commit's,
            # which holds the rows of the sessions whose calls it records, taken in the order they came.
            with self.store.transaction() as tx:
                claim = tx.sessions.take_checks_due(session_id)
                if claim is None:
                    continue  # another supervisor took them
                org, checked_seq = claim
                actions = tx.actions.wanting_checks(session_id, checked_seq)
                # This holds the session's row; an action another transaction is writing (a rollback writes the
                # action, then its session) is left for the next round rather than waited for: a deadlock.
                wanted = [action_id for action_id, _, _, wants in actions if wants]
                taken = tx.actions.take_unwritten(wanted)
                for action_id in taken:
                    queue_check(tx, now, org, session_id, action_id)
                tx.actions.checks_queued(taken)
                skipped = set(wanted).difference(taken)
                settled = checked_seq
                for action_id, seq, status, _ in actions:
                    if status in rules.OUTCOME_AWAITED or action_id in skipped:
                        break
                    settled = seq
                if settled > checked_seq:
                    tx.sessions.checked_up_to(session_id, settled)
                awaited = [action_id for action_id, _, status, _ in actions if status in rules.OUTCOME_AWAITED]
                if skipped or (awaited and tx.actions.outcome_under_way(awaited)):
                    # Checks left for the next round, or a confirmation that found the mark this round just took.
                    tx.sessions.want_check(session_id)
                queued += len(taken)
        return queued

    def _record_check(
        self, claimed: Verification, outcome: VerificationOutcome, rationale: str, verifier: str, *, retry: bool
    ) -> Verification:
        now = self.clock()
        rationale, verifier = (
            # A model's words are stored text too: one may repeat what it was asked about.
            self.redactors.common.redact_text(intent.printable(rationale, validation.MAX_TEXT)),
            intent.printable(verifier, 200),
        )
        attempts = claimed.attempts + 1
        again = retry and attempts <= len(intent.RETRY_AFTER)
        due = now + intent.RETRY_AFTER[attempts - 1] if again else None
        checked = evolve(
            claimed,
            outcome=outcome,
            rationale=rationale,
            verifier=verifier,
            attempts=attempts,
            due_at=due,
            checked_at=now,
        )
        with self.store.transaction() as tx:
            if not tx.replace(checked, due_at=claimed.due_at):
                return claimed  # held too long: another worker took the check over and records it
            if outcome is VerificationOutcome.DRIFT_DETECTED:
                try:
                    with tx.savepoint():  # the outcome is kept even if its consequence cannot be carried out
                        after_drift(tx, now, checked)
                except Exception:  # any failure at all: the recorded outcome must stand
                    log.exception("the consequence of drift in session %s failed", checked.session_id)
        return checked


def after_drift(tx: Tx, now: datetime, check: Verification) -> None:
    """What drift leads to, as the organisation chose (``onDrift``), and the ``drift.detected`` event."""
    org = tx.organisations.get(check.org_id)
    settings = tx.settings.get(check.org_id) or OrganisationSettings(check.org_id)
    session = session_of(tx, check.org_id, check.session_id)
    action = action_of(tx, check.org_id, check.action_id) if check.action_id else None
    consequence = "recorded only"
    if settings.on_drift is DriftResponse.REVIEW:
        if action is None:
            consequence = "recorded only: a review is opened for an action, and this check was of the session"
        elif org is not None and org.plan is Plan.FREE:
            consequence = "recorded only: the free plan has no approvals"
        elif action.status is not ActionStatus.SUCCESS:
            consequence = f"recorded only: the action is {action.status} already"
        elif any(p.status is ApprovalStatus.PENDING for p in tx.approvals.of_action(action.action_id)):
            consequence = "recorded only: the action already waits for a review"
        else:
            review = new_approval(action, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT)
            open_approval(tx, now, review)
            consequence = "review opened"
    elif settings.on_drift is DriftResponse.ROLLBACK:
        if may_start_rollback(tx, session):
            start_rollback(tx, now, session, "intent verifier", f"intent drift: {check.rationale}"[:200])
            consequence = "rollback started"
        else:
            consequence = "recorded only: nothing to roll back, or a rollback is under way"
    emit(
        tx,
        now,
        check.org_id,
        EventType.DRIFT_DETECTED,
        {
            "sessionId": session.session_id,
            "actionId": check.action_id,
            "agentId": session.agent_id,
            "intent": session.intent,
            "apiName": action.api_name if action else None,
            "rationale": check.rationale,
            "verifier": check.verifier,
            "onDrift": settings.on_drift.value,
            "consequence": consequence,
        },
    )
