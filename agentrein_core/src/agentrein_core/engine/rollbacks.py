"""Use cases of rolling back: starting a session's rollback within the rules (status reference §3), and
advancing a rollback job one step at a time, each step decided by :func:`agentrein_core.rollback.next_step`
and applied here, with the inverses run by an :class:`~agentrein_core.rollback.UndoExecutor` outside any
transaction.

A job is held by one worker at a time through a lease (renewed at every step, and while a slow inverse
runs); a worker that dies leaves the lease to run out, and the next one resumes where it stopped, repeating
an inverse that was under way with the same idempotency key.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

from attrs import fields

import agentrein_core.engine.validation as validation
from agentrein_core import rollback, rules
from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT
from agentrein_core.decisions import Tally
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import (
    MAX_TRIGGER,
    close_reviews,
    finished,
    hold_before_rollback,
    new_approval,
    open_approval,
    rollback_ended,
    rollback_under_way,
    start_rollback,
)
from agentrein_core.engine.records import (
    action_of,
    read_session,
    session_of,
    set_action,
    set_session_status,
)
from agentrein_core.environment import positive_number
from agentrein_core.errors import LeaseLostError, NotFoundError, UndoError, UndoUnavailableError
from agentrein_core.ids import new_id
from agentrein_core.model import Action, Rollback, UndoHandoff
from agentrein_core.read_models import HandedUndo, RollbackInfo, UndoWithAgent
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    HandoffOutcome,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Change, Tx

log = logging.getLogger("agentrein")

#: How long a rollback worker owns a job before another may take it over (renewed at every step)...
ROLLBACK_LEASE = timedelta(seconds=60)
#: ...unless this says otherwise (how soon a rollback left by a crashed server is taken over).
LEASE_ENV = "AGENTREIN_ROLLBACK_LEASE_SECONDS"
#: How long an agent process that took a handed undo holds it between renewals (else
#: :data:`~agentrein_core.rules.AGENT_UNDO_LEASE`): how soon the undo of a process that died fails.
AGENT_UNDO_LEASE_ENV = "AGENTREIN_AGENT_UNDO_LEASE_SECONDS"
#: A rollback job whose advance failed through AgentRein's own fault waits this long before it is retried.
RETRY_AFTER_OWN_FAILURE = timedelta(seconds=5)
#: A rollback waiting for a call's outcome (:class:`~agentrein_core.rollback.WaitForConfirmation`) looks again
#: this often: the SDK sends an outcome within 0.1 s of its call's end.
CONFIRMATION_LOOK = timedelta(milliseconds=200)
#: How many steps done a running rollback's list shows before the one under way (the rest are counted).
STEPS_DONE_SHOWN = 5


def lease_from_environment(name: str = LEASE_ENV, default: timedelta = ROLLBACK_LEASE) -> timedelta:
    """``$name`` (in seconds), else ``default``: by default the lease of the processes that run rollbacks
    through the stored connector settings (the server, the command line on a database)."""
    seconds = positive_number(name, "seconds")
    return timedelta(seconds=seconds) if seconds is not None else default


class Rollbacks(UseCases):
    def request_rollback(
        self,
        org_id: str,
        session_id: str,
        *,
        caller_role: str,
        requested_by: str,
        trigger: str = "requested",
        approval_timeout: timedelta | None = None,
        agent_key: str | None = None,
    ) -> Rollback:
        """Start rolling a session back, within the rules of the status reference §3; a rollback approval it
        opens waits ``approval_timeout`` (default: the runner's).

        A session with a rollback under way gets that rollback back: two requests start one rollback. A
        sandbox session is rolled back at once, in this transaction, with no inverse call."""
        if approval_timeout is not None:
            validation.approval_timeout(approval_timeout, "approval_timeout")
        with self.store.transaction() as tx:
            hold_before_rollback(tx, session_of(tx, org_id, session_id, agent_key=agent_key))
            session = session_of(tx, org_id, session_id, lock=True)
            running = rollback_under_way(tx, session_id)
            if running is not None:
                return running
            view = read_session(tx, session)
            rules.check_rollback_allowed(session, view.actions, view.display_status, caller_role)
            redactor = self.redactors.common  # who asked and why are free text: a reason may quote a secret
            requested_by = validation.redacted_text("requested_by", requested_by, 200, redactor)
            trigger = validation.cut_text("trigger", trigger, MAX_TRIGGER, redactor)
            return start_rollback(tx, self.clock(), session, requested_by, trigger, approval_timeout=approval_timeout)

    def get_rollback(self, org_id: str, rollback_id: str) -> Rollback:
        with self.store.transaction(write=False) as tx:
            job = tx.rollbacks.get(org_id, rollback_id)
            if job is None:
                raise NotFoundError("rollback", rollback_id)
            return job

    def rollbacks_to_run(self, org_id: str | None = None) -> list[Rollback]:
        with self.store.transaction(write=False) as tx:
            return tx.rollbacks.due(org_id, self.clock())

    def active_rollback(self, org_id: str, session_id: str) -> Rollback | None:
        """The session's unfinished rollback (running or waiting for a rollback approval), if any."""
        with self.store.transaction(write=False) as tx:
            session_of(tx, org_id, session_id)
            return tx.rollbacks.active(session_id)

    def latest_rollback(self, org_id: str, session_id: str, *, agent_key: str | None = None) -> Rollback | None:
        with self.store.transaction(write=False) as tx:
            session_of(tx, org_id, session_id, agent_key=agent_key)
            return tx.rollbacks.active(session_id) or tx.rollbacks.latest(session_id)

    def steps_of(self, org_id: str, job: Rollback, shown: int) -> tuple[int, Tally]:
        """The actions ``job`` deals with, done or still to do, tallied (how many there are and how many it is
        through with, counted in SQL however long the session), with ``shown`` of them, last done first: the
        first ones, or, while it runs, from a few before the step under way. How many it leaves out before those."""
        pick = rollback.WALKED if job.whole_session else rollback.WALKED_ASKED
        with self.store.snapshot() as tx:
            session_of(tx, org_id, job.session_id)
            tally = tx.actions.tallies([job.session_id], pick, 0).get(job.session_id, Tally())
            skip = 0
            if job.status in rules.ROLLBACK_UNDER_WAY:
                skip = max(0, min(tally.through - STEPS_DONE_SHOWN, tally.count - shown))
            return skip, tx.actions.tallies([job.session_id], pick, shown, skip=skip).get(job.session_id, Tally())

    def undos_left(self, org_id: str, session_id: str) -> int:
        """How many undos a rollback of the whole session would run now (:data:`~agentrein_core.rollback.PLANNED`),
        counted in SQL however long the session."""
        with self.store.transaction(write=False) as tx:
            session_of(tx, org_id, session_id)
            return tx.actions.tallies([session_id], rollback.PLANNED, 0).get(session_id, Tally()).count

    def handoff_of(self, org_id: str, job: Rollback, action_id: str) -> UndoHandoff | None:
        """Where ``job`` handed the undo of ``action_id`` to the agent's process, if it did."""
        with self.store.transaction(write=False) as tx:
            session_of(tx, org_id, job.session_id)
            return tx.rollbacks.handoff(job.rollback_id, action_id)

    def shown(self, org_id: str, job: Rollback) -> RollbackInfo:
        """``job`` as its readers see it: with the undo it waits on in the agent's process while it runs."""
        handoff = None
        if job.status is RollbackStatus.RUNNING:
            with self.store.transaction(write=False) as tx:
                session_of(tx, org_id, job.session_id)
                handoff = tx.rollbacks.unsettled_handoff(job.rollback_id)
        with_agent = UndoWithAgent.of(handoff) if handoff is not None else None
        return RollbackInfo(**{f.name: getattr(job, f.name) for f in fields(Rollback)}, undo_with_agent=with_agent)

    def wait_for_rollback(
        self, org_id: str, session_id: str, timeout: float, *, agent_key: str | None = None
    ) -> Rollback | None:
        """The session's latest rollback once it has ended or waits for a reviewer, or as it stands after
        ``timeout`` seconds; ``None`` if the session was never rolled back."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            job = self.latest_rollback(org_id, session_id, agent_key=agent_key)
            remaining = deadline - time.monotonic()
            if job is None or job.status is not RollbackStatus.RUNNING or remaining <= 0:
                return job
            self.waiters.wait(remaining)

    def run_rollback(
        self,
        org_id: str,
        rollback_id: str,
        executor: rollback.UndoExecutor,
        approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> Rollback:
        """Advance a rollback job as far as it can go now, undoing actions last-first through ``executor``.

        Returns the job as it then stands: ``SUCCEEDED``/``FAILED`` when finished, ``WAITING_APPROVAL`` when
        an undo waits for a reviewer, ``RUNNING`` when another worker holds it or ``executor`` cannot reach a
        service. Safe to call again at any time: a job resumes where it stopped, and an undo interrupted after
        it was marked ``IN_PROGRESS`` is repeated with the same idempotency key."""
        token = secrets.token_hex(16)
        job = self._claim(org_id, rollback_id, token)
        if job is None:
            return self.get_rollback(org_id, rollback_id)
        return self._advance(job, token, executor, approval_timeout)

    def run_next_rollback(
        self, executor: rollback.UndoExecutor, approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT
    ) -> Rollback | None:
        """Claim any one running rollback whose lease is free (of any organisation) and advance it; ``None``
        when there is none. The server's rollback workers call this; replicas never claim the same job."""
        token = secrets.token_hex(16)
        now = self.clock()
        with self.store.transaction() as tx:
            job = tx.rollbacks.claim_due(now, token, now + self.rollback_lease)
        if job is None:
            return None
        return self._advance(job, token, executor, approval_timeout)

    def _advance(
        self, job: Rollback, token: str, executor: rollback.UndoExecutor, approval_timeout: timedelta
    ) -> Rollback:
        """Run the claimed ``job`` (held by ``token``) until it ends, pauses, or cannot go on here. Each undo
        costs one transaction: it records the previous inverse done, plans the next step and marks its
        action ``IN_PROGRESS``, all committed before that inverse runs."""
        undone: Action | None = None  # an inverse that ran; recorded in the next step's transaction
        try:
            with self._lease_kept(job, token):
                while True:
                    runnable, handed = False, None
                    with self.store.transaction() as tx:
                        if undone is not None:
                            self._record_undone(tx, undone)
                        job, step = self._plan_step(tx, job, token, approval_timeout)
                        handed_over = tx.rollbacks.handoffs_of(step.action.action_id) if step else []
                        handoff = next((h for h in handed_over if h.rollback_id == job.rollback_id), None)
                        if step is None:
                            tx.announce(Change.ROLLBACK)
                        # An undo once handed to the agent, by this job or an earlier one, stays the agent's
                        # (even if this process could now run it, the organisation's settings having changed):
                        # a taker whose lease ended may have run it, and only its process may repeat it.
                        elif runnable := not handed_over and executor.can_run(step.action):
                            action = self._in_progress(tx, step.action)
                        elif executor.hands_over:
                            job, handed = self._hand_over(tx, job, token, step.action, handoff)
                        if step is not None and not isinstance(handed, rollback.Offer | rollback.AwaitAgent):
                            # Last (the lock order), and what this step wrote stands only while the job is held.
                            job = self._renew(tx, job, token)
                    undone = None
                    if step is None or isinstance(handed, rollback.Offer | rollback.AwaitAgent):
                        return job
                    if isinstance(handed, rollback.AgentUndid):
                        undone = handed.action
                        continue
                    if isinstance(handed, rollback.AgentFailed):
                        return self._undo_failed(job, token, handed.action, UndoError(handed.reason))
                    if not runnable:
                        job = self._release(job, token)
                        raise UndoUnavailableError(
                            f"this process cannot reach connector {step.action.connector!r} to undo "
                            f"{step.action.api_name} (seq {step.action.seq}); wrap a client for it in session "
                            f"{job.session_id} and roll back again"
                        )
                    try:
                        executor.run_undo(action)
                    except Exception as exc:  # any failure of the inverse stops the chain (DESIGN.md §4)
                        return self._undo_failed(job, token, action, exc)
                    undone = action
        except (UndoUnavailableError, LeaseLostError):
            raise
        except Exception:
            # Our own failure (not the inverse's): hand the job back after a pause, so that a job that keeps
            # failing does not hold up the jobs queued behind it. An inverse that ran and was not recorded
            # is still IN_PROGRESS, so the resumed job repeats it with the same idempotency key.
            self._release_quietly(job, token, retry_after=RETRY_AFTER_OWN_FAILURE)
            raise

    def _claim(self, org_id: str, rollback_id: str, token: str) -> Rollback | None:
        """Take the job's lease if it is running and nobody holds it (or the holder's lease ran out)."""
        now = self.clock()
        with self.store.transaction() as tx:
            job = tx.rollbacks.get(org_id, rollback_id)
            if job is None:
                raise NotFoundError("rollback", rollback_id)
            if job.status is not RollbackStatus.RUNNING:
                return None
            if job.lease_until is not None and job.lease_until > now:
                return None
            values = {"lease_token": token, "lease_until": now + self.rollback_lease}
            return tx.rollbacks.update(rollback_id, values, lease_token=job.lease_token, status=job.status)

    def _still_held(self, tx: Tx, job: Rollback, token: str) -> Rollback:
        """The job as stored (its scope widened meanwhile, say), read without holding its row, while ``token``
        still holds it (:meth:`_renew` writes it, last, guarded by the same token)."""
        stored = tx.rollbacks.get(job.org_id, job.rollback_id)
        if stored is None or stored.lease_token != token:
            raise LeaseLostError(f"rollback {job.rollback_id} is no longer held by this worker")
        return stored

    def _renew(self, tx: Tx, job: Rollback, token: str, **changes: object) -> Rollback:
        """Write ``changes`` (only those columns) and renew the lease, while ``token`` still holds the job.
        Returns the job as stored, so a scope widened meanwhile by another request is seen at once."""
        now = self.clock()
        renewed = tx.rollbacks.update(
            job.rollback_id, {"lease_until": now + self.rollback_lease, **changes}, lease_token=token
        )
        if renewed is None:
            raise LeaseLostError(f"rollback {job.rollback_id} is no longer held by this worker")
        if renewed.status in (RollbackStatus.SUCCEEDED, RollbackStatus.FAILED) and job.status is not renewed.status:
            rollback_ended(tx, now, renewed)
        return renewed

    def _plan_step(
        self, tx: Tx, job: Rollback, token: str, approval_timeout: timedelta
    ) -> tuple[Rollback, rollback.RunUndo | None]:
        """Apply every step that needs no inverse call; stop at one that does (returned, the job not yet renewed:
        its caller marks the action first) or at a pause. The job's row is written last, after its actions and its
        session (the store's lock order): a reviewer's rejection takes them the same way round."""
        now = self.clock()
        if job.approval_timeout_ms:
            approval_timeout = timedelta(milliseconds=job.approval_timeout_ms)
        paused = {"status": RollbackStatus.WAITING_APPROVAL, "lease_token": None, "lease_until": None}
        job = self._still_held(tx, job, token)
        while True:
            # The chain's head alone, and its approvals: a step costs the same in a session of any length.
            head = tx.actions.next_to_undo(job.session_id, only_requested=not job.whole_session)
            awaited = tx.actions.awaited_confirmations(job.session_id, now - rules.CONFIRMATION_AWAITED)
            approvals = tx.approvals.of_action(head[0].action_id) if head else []
            step = rollback.next_step(job, head, approvals, awaited)
            if isinstance(step, rollback.RunUndo):
                return job, step
            if isinstance(step, rollback.WaitForConfirmation):
                # Handed back, to be taken again once the outcome had time to come; still RUNNING.
                look_again = now + CONFIRMATION_LOOK
                return self._renew(tx, job, token, lease_token=None, lease_until=look_again), None
            if isinstance(step, rollback.Skip):
                set_action(tx, step.action, now, undo_status=UndoStatus.SKIPPED)
            elif isinstance(step, rollback.AskApproval):
                set_action(tx, step.action, now, undo_status=UndoStatus.AWAITING_APPROVAL)
                approval = new_approval(
                    step.action, ApprovalPurpose.ROLLBACK, now, approval_timeout, rollback_id=job.rollback_id
                )
                open_approval(tx, now, approval)
                return self._renew(tx, job, token, **paused), None
            elif isinstance(step, rollback.WaitForApproval):
                return self._renew(tx, job, token, **paused), None
            elif isinstance(step, rollback.Declined):
                error = f"the undo of {step.action.api_name} was declined"
                return self._renew(tx, job, token, **finished(RollbackStatus.FAILED, now), error=error), None
            else:
                if not job.whole_session:
                    # Widened to the whole session meanwhile? A request does so holding the session: held, the
                    # job is read as it now stands, and a widened one goes on.
                    tx.sessions.hold(job.session_id)
                    job = self._still_held(tx, job, token)
                    if job.whole_session:
                        continue
                else:
                    session = session_of(tx, job.org_id, job.session_id)
                    after = rules.session_status_after_rollback(session, tx.actions.of_session(job.session_id))
                    set_session_status(tx, session, after)
                return self._renew(tx, job, token, **finished(RollbackStatus.SUCCEEDED, now)), None

    def _hand_over(
        self, tx: Tx, job: Rollback, token: str, action: Action, handoff: UndoHandoff | None
    ) -> tuple[Rollback, rollback.Handed]:
        """The undo of ``action`` runs in the agent's process: offer it, or see where its offer (``handoff``)
        stands. The job waits meanwhile (still ``RUNNING``, its lease let go until the offer or the lease that
        took it ends; a reported outcome makes it due at once)."""
        now = self.clock()
        handed = rollback.handed_step(action, handoff, now)
        if isinstance(handed, rollback.Offer):
            until = now + self.agent_undo_wait
            tx.rollbacks.offer(
                UndoHandoff(
                    handoff_id=new_id("hnd"),
                    org_id=job.org_id,
                    session_id=job.session_id,
                    rollback_id=job.rollback_id,
                    action_id=action.action_id,
                    connector=action.connector,
                    offered_at=now,
                    claim_by=until,
                )
            )
            self._in_progress(tx, action)
            tx.announce(Change.ROLLBACK)  # wakes the agent processes waiting to take an undo
            return self._renew(tx, job, token, lease_token=None, lease_until=until), handed
        if isinstance(handed, rollback.AwaitAgent):
            return self._renew(tx, job, token, lease_token=None, lease_until=handed.until), handed
        if isinstance(handed, rollback.AgentFailed) and handoff is not None and handoff.outcome is None:
            # Given up on for want of a taker or a report: settle the handoff first. A claim, a renewal or a
            # report that got there meanwhile wins, and the job looks again at once.
            # A renewal that got there meanwhile moved ``leased_until``: the lease is still held.
            expired = {"outcome": HandoffOutcome.EXPIRED}
            held = {"outcome": None, "lease_id": handoff.lease_id, "leased_until": handoff.leased_until}
            if tx.rollbacks.update_handoff(handoff.handoff_id, expired, **held) is None:
                again = rollback.AwaitAgent(action, now)
                return self._renew(tx, job, token, lease_token=None, lease_until=now), again
        return job, handed

    def claim_handed_undo(
        self,
        org_id: str,
        session_ids: Sequence[str],
        connectors: Sequence[str],
        wait: float,
        *,
        agent_key: str | None = None,
    ) -> HandedUndo | None:
        """Take, for the calling agent process, the oldest undo offered for these sessions and connectors (the
        ones it holds clients of), waiting up to ``wait`` seconds for one; it holds it for
        :attr:`agent_undo_lease` to run it and :meth:`report_handed_undo`. An agent key takes the undos of the
        sessions it opened only; the others it names are passed over, as unknown ones are."""
        deadline = time.monotonic() + max(0.0, wait)
        sessions, names = sorted(set(session_ids)), sorted(set(connectors))
        if not sessions or not names:
            return None
        while True:
            with self.store.transaction() as tx:
                now = self.clock()  # read in the transaction: the rollback's decisions are before it or after
                offered = tx.rollbacks.open_handoff(org_id, sessions, names, now, agent_key)
                if offered is not None:
                    values = {"lease_id": secrets.token_hex(16), "leased_until": now + self.agent_undo_lease}
                    taken = tx.rollbacks.update_handoff(offered.handoff_id, values, lease_id=None, outcome=None)
                    if taken is not None:
                        return HandedUndo(taken, action_of(tx, org_id, taken.action_id))
                    continue  # another process took it first: look again
                # Nothing to wait for unless one of these sessions is being rolled back: an idle process's
                # claim holds no server thread.
                rolling_back = tx.rollbacks.any_active(sessions)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not rolling_back:
                return None
            self.waiters.wait(remaining)

    def renew_handed_undo(
        self, org_id: str, action_id: str, lease_id: str, *, agent_key: str | None = None
    ) -> UndoHandoff:
        """The agent process that took a handed undo (holding ``lease_id``) is still running it: its lease runs
        :attr:`agent_undo_lease` from now, so a slow undo is reported within it. Returns the handoff as renewed
        (``leased_until``). :class:`LeaseLostError` when that lease has ended (the undo failed for want of an
        outcome: it may have run, so it is never offered again), was reported, or is not the one held."""
        with self.store.transaction() as tx:
            now = self.clock()
            action = action_of(tx, org_id, action_id, agent_key=agent_key)
            handoff = tx.rollbacks.leased_handoff(org_id, action.action_id, lease_id)
            renewed = None
            if handoff is not None and handoff.leased_until is not None and handoff.leased_until > now:
                # Compare-and-set on the lease as read: the rollback giving up on it meanwhile (EXPIRED) wins.
                values = {"leased_until": now + self.agent_undo_lease}
                held = {"outcome": None, "lease_id": lease_id, "leased_until": handoff.leased_until}
                renewed = tx.rollbacks.update_handoff(handoff.handoff_id, values, **held)
            if renewed is None:
                raise LeaseLostError(
                    f"the lease on the undo of action {action_id} has ended, was reported, or another process holds it"
                )
            return renewed

    def report_handed_undo(
        self,
        org_id: str,
        action_id: str,
        lease_id: str,
        succeeded: bool,
        error: str | None = None,
        *,
        agent_key: str | None = None,
    ) -> UndoHandoff:
        """The agent process that took a handed undo (holding ``lease_id``) reports how it went; the rollback
        job is due at once. The same report again answers as the first did (its answer may have been lost);
        :class:`LeaseLostError` when that lease has ended or is not the one held."""
        with self.store.transaction() as tx:
            now = self.clock()
            action = action_of(tx, org_id, action_id, agent_key=agent_key)
            handoff = tx.rollbacks.leased_handoff(org_id, action.action_id, lease_id)
            outcome = HandoffOutcome.DONE if succeeded else HandoffOutcome.FAILED
            if handoff is not None and handoff.outcome == outcome:
                return handoff
            lost = f"the lease on the undo of action {action_id} has ended, or another process holds it"
            if (
                handoff is None
                or handoff.outcome is not None
                or (handoff.leased_until is not None and handoff.leased_until <= now)
            ):
                raise LeaseLostError(lost)
            if error is not None:
                error = self.redactors.of(handoff.connector).redact_text(
                    validation.text("error", error[: validation.MAX_TEXT], validation.MAX_TEXT)
                )
            reported = tx.rollbacks.update_handoff(
                handoff.handoff_id,
                {"outcome": outcome, "error": None if succeeded else error or "failed"},
                lease_id=lease_id,
                outcome=None,
            )
            if reported is None:
                raise LeaseLostError(lost)
            job = tx.rollbacks.get(org_id, handoff.rollback_id)
            if job is not None and job.status is RollbackStatus.RUNNING and job.lease_token is None:
                tx.rollbacks.update(job.rollback_id, {"lease_until": None}, lease_token=None)
            tx.announce(Change.ROLLBACK)
            return reported

    def _in_progress(self, tx: Tx, action: Action) -> Action:
        """Record that the inverse is about to run: a crash from here on leaves ``IN_PROGRESS``, and the
        resumed job repeats the inverse with the same idempotency key."""
        if action.undo_status is UndoStatus.IN_PROGRESS:
            return action
        return set_action(tx, action, self.clock(), undo_status=UndoStatus.IN_PROGRESS)

    def _record_undone(self, tx: Tx, action: Action) -> None:
        now = self.clock()
        pending = tx.approvals.hold_pending_of(action.action_id)  # before the action, as a decision takes them
        done = set_action(tx, action, now, status=ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE, error=None)
        close_reviews(tx, now, done, "the action was rolled back", pending)

    def _undo_failed(self, job: Rollback, token: str, action: Action, exc: Exception) -> Rollback:
        now = self.clock()
        # An inverse's error may echo its URL and whatever the server added to it (a token): redacted as well.
        error = self.redactors.of(action.connector).redact_text(f"undo failed: {exc}")
        error = validation.text("error", error[: validation.MAX_TEXT], validation.MAX_TEXT)
        with self.store.transaction() as tx:
            set_action(tx, action, now, status=ActionStatus.ROLLBACK_FAILED, undo_status=UndoStatus.FAILED, error=error)
            set_session_status(tx, session_of(tx, job.org_id, job.session_id), SessionStatus.FAILED)
            return self._renew(tx, job, token, **finished(RollbackStatus.FAILED, now), error=error)

    def _release(self, job: Rollback, token: str) -> Rollback:
        with self.store.transaction() as tx:
            return self._renew(tx, job, token, lease_token=None, lease_until=None)

    @contextmanager
    def _lease_kept(self, job: Rollback, token: str) -> Iterator[None]:
        """Renew the job's lease while it runs (a slow inverse too), so no other worker takes it over
        meanwhile: while ``token`` holds it and it is running (a job that paused or ended is left alone)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.rollback_lease.total_seconds() / 3):
                try:
                    with self.store.transaction() as tx:
                        values = {"lease_until": self.clock() + self.rollback_lease}
                        tx.rollbacks.update(job.rollback_id, values, lease_token=token, status=RollbackStatus.RUNNING)
                except Exception:
                    log.exception("could not renew the lease of rollback %s", job.rollback_id)

        heartbeat = threading.Thread(target=renew, name=f"agentrein-lease-{job.rollback_id}", daemon=True)
        heartbeat.start()
        try:
            yield
        finally:
            stop.set()
            heartbeat.join()

    def _release_quietly(self, job: Rollback, token: str, retry_after: timedelta) -> None:
        try:
            with self.store.transaction() as tx:
                self._renew(tx, job, token, lease_token=None, lease_until=self.clock() + retry_after)
        except Exception:
            log.exception("could not release the lease of rollback %s", job.rollback_id)
