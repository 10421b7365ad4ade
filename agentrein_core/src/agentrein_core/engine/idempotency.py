"""What a record found again under its idempotency key answers.

A session's actions are unique by key. The key of a call is made before its write-ahead record is asked for (by
the SDK, :attr:`~agentrein_core.commands.WriteAhead.idempotency_key`), so the same key comes back when an answer
was lost on the way: a write-ahead record asked again (:func:`asked_again`), a call run anyway as with AgentRein
unreachable and replayed from the journal (:func:`replay_found`), or a call that ran reported twice
(:func:`ran_again`). Each answers what the first time did, so that a call is one record.
"""

from __future__ import annotations

from datetime import datetime

from attrs import frozen

from agentrein_core import rules
from agentrein_core.engine.base import PolicySets
from agentrein_core.engine.consequences import NO_GATES_REASON, blocked_by, close_reviews
from agentrein_core.engine.records import action_of, session_of, set_action
from agentrein_core.errors import AgentReinError, ApprovalRejectedError, InvalidTransitionError, PolicyBlockedError
from agentrein_core.model import MAX_WRITE_AHEAD_KEY, Action, Approval
from agentrein_core.policies import Subject, decide
from agentrein_core.statuses import ActionStatus, ApprovalPurpose, ApprovalStatus, PolicyEffect
from agentrein_core.store import Tx


def asked_again(tx: Tx, first: Action, connector: str, api_name: str) -> tuple[Approval | None, AgentReinError | None]:
    """The answer to a write-ahead record asked for again under its key (the client never got the first
    answer): that record, as it was answered if it is still so (``CLEARED``: run it; ``PENDING_APPROVAL``: wait
    for its request), and otherwise the refusal to raise. A key of another call is refused too."""
    key = first.idempotency_key
    if (first.connector, first.api_name) != (connector, api_name):
        return None, InvalidTransitionError(f"idempotency key {key!r} is another call's ({first.api_name})")
    if first.status is ActionStatus.CLEARED:
        return None, None
    waited_for = [
        a
        for a in tx.approvals.of_action(first.action_id)
        if a.purpose is ApprovalPurpose.BEFORE_EXECUTION and a.status is ApprovalStatus.PENDING
    ]
    if first.status is ActionStatus.PENDING_APPROVAL and waited_for:
        return waited_for[0], None
    if first.status is ActionStatus.FAILED and first.policy_name and first.error == blocked_by(first.policy_name):
        return None, PolicyBlockedError(first.action_id, first.policy_name)
    if first.status is ActionStatus.FAILED and first.error == NO_GATES_REASON:
        return None, ApprovalRejectedError(NO_GATES_REASON, None, first.action_id)
    return None, InvalidTransitionError(
        f"the call with idempotency key {key!r} was recorded already, and has gone on: action {first.action_id} "
        f"is {first.status}"
    )


def lost_answer(written: Action, connector: str, api_name: str, succeeded: bool, error: str | None) -> bool:
    """Whether ``written``, the record a journaled call's key names, is that call's write-ahead record, whose
    answer the SDK never got (so it ran the call as with AgentRein unreachable), rather than the record of an
    earlier replay of it: a record still waiting for its outcome, or one that could not run as it was answered
    (``FAILED`` with the engine's words, not the call's own failure, which an earlier replay recorded; or held,
    then flipped ``ROLLED_BACK`` by a sandbox session's rollback)."""
    if (written.connector, written.api_name) != (connector, api_name) or len(
        written.idempotency_key
    ) > MAX_WRITE_AHEAD_KEY:
        return False  # another call's key, or one no write-ahead record has: answered as a repeated replay is
    if written.status in rules.OUTCOME_AWAITED:
        return True
    if written.status is ActionStatus.ROLLED_BACK:  # a held record a sandbox session's rollback flipped never ran:
        return written.undo is None  # a call that ran, confirmed or replayed, has its undo (none at least)
    return written.status is ActionStatus.FAILED and (succeeded or written.error != error)


def withdraw_ran_while_held(tx: Tx, now: datetime, held: Action) -> Action | None:
    """``held`` waited for a decision, but its call ran without it (the agent never got the answer that it is
    held): nobody is left to act on a decision. It fails, and its request closes, saying so; None then. If a
    decision came first (read once its request is held, as a decision holds it), nothing is written and the
    action as it now is comes back."""
    pending = tx.approvals.hold_pending_of(held.action_id)  # before the action, as a decision takes them
    now_held = action_of(tx, held.org_id, held.action_id)
    if now_held.status is not ActionStatus.PENDING_APPROVAL:
        return now_held
    why = (
        "withdrawn: the call ran without waiting for a decision (the agent never got AgentRein's answer that it is "
        "held, and ran it as with AgentRein unreachable); it is recorded beside this action, for review"
    )
    failed = set_action(tx, now_held, now, status=ActionStatus.FAILED, error=why)
    close_reviews(tx, now, failed, why, pending)
    return None


@frozen
class Settle:
    """The replayed call's own write-ahead record, still ``CLEARED``: it takes the call's outcome, as the agent's
    report would have given it."""

    written: Action


@frozen
class RecordBeside:
    """The replayed call is recorded under ``key``, beside its write-ahead record, which could not run as it was
    answered; with an after-execution review, for nobody reviewed it before it ran."""

    key: str


def replay_found(
    tx: Tx, now: datetime, found: Action, connector: str, api_name: str, succeeded: bool, error: str | None
) -> Action | Settle | RecordBeside:
    """What a call replayed from the journal answers when its key names ``found`` already: ``found`` itself (a
    replay sent again), the record made of it beside its write-ahead record, or what to do with that record
    (:class:`Settle`, :class:`RecordBeside`: its held request withdrawn first, unless decided meanwhile, when what
    it is then says). ``api_name`` and ``error``: the call's, checked and redacted."""
    while lost_answer(found, connector, api_name, succeeded, error):
        if found.status is ActionStatus.CLEARED:
            return Settle(found)
        if (beside := tx.actions.by_key(found.org_id, found.session_id, found.ran_idempotency_key)) is not None:
            return beside
        if found.status is not ActionStatus.PENDING_APPROVAL:
            return RecordBeside(found.ran_idempotency_key)
        decided = withdraw_ran_while_held(tx, now, found)
        if decided is None:
            return RecordBeside(found.ran_idempotency_key)
        found = decided
    return found


def ran_again(tx: Tx, existing: Action, refuse_blocked: bool, policy_sets: PolicySets) -> Action:
    """The answer to a call that ran, reported again (same key): its first record, or, when ``refuse_blocked``
    and the policy that decided that record blocks such a call, :class:`PolicyBlockedError` as the first
    report got (their SDKs resend a log answered 5xx: the agent must hear the block, not a success). Judged
    by the policies as they stand, as every report is on arrival; the record keeps the deciding policy's
    name, not its effect then."""
    if not refuse_blocked or existing.policy_name is None or existing.status is ActionStatus.FAILED:
        return existing
    organisation = tx.organisations.get(existing.org_id)
    assert organisation is not None  # its session exists
    agent_id = session_of(tx, existing.org_id, existing.session_id).agent_id
    subject = Subject(existing.connector, existing.api_name, agent_id, existing.operation_type)
    decision = decide(policy_sets.enabled(tx, existing.org_id, organisation.policy_version), subject)
    blocking = decision.policy if decision.effect is PolicyEffect.BLOCK else None
    if blocking is None or blocking.name != existing.policy_name:
        return existing
    undoable = existing.undo is not None and not existing.undo.is_none
    raise PolicyBlockedError(existing.action_id, existing.policy_name, ran=True, undoable=undoable)
