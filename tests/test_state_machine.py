"""Hypothesis stateful test of the engine's status machines (DESIGN.md §4, status reference §1-§4).

Random sequences of log / confirm / fail / approve / reject / expire / abandon / policy / rollback / complete
are driven against a real :class:`Engine` on a fresh SQLite file. After every step (and at every inverse call)
everything is read back and checked against the transition tables, the display-status rules (recomputed here
independently), and the rollback guarantees: no inverse runs twice, inverses run last-first, pending and
cleared actions are never undone, one unfinished rollback per session.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agentrein_core import rules, schema
from agentrein_core.engine import Engine
from agentrein_core.errors import InvalidTransitionError, PolicyBlockedError, RollbackRefusedError
from agentrein_core.model import Action, Approval, Rollback, UndoConfig
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
)
from agentrein_core.store import Store
from agentrein_core.views import SessionInfo

A, U, S, P = ActionStatus, UndoStatus, SessionStatus, ApprovalStatus

API_NAMES = ("customers.create", "customers.update", "issues.create", "repos.delete")
POLICY_GLOBS = ("customers.*", "issues.create", "repos.*", "*.create", "customers.update")
UNDO_CONFIGS = (
    UndoConfig("fake-undo"),
    UndoConfig("none"),
    UndoConfig("fake-undo", require_approval=True),
)
TIMEOUTS = (timedelta(minutes=5), timedelta(hours=1), timedelta(hours=30))
# Mostly short steps: a 25-hour one expires every approval and abandons every idle session.
CLOCK_STEPS = (
    timedelta(minutes=1),
    timedelta(minutes=10),
    timedelta(minutes=10),
    timedelta(hours=1),
    timedelta(hours=1),
    timedelta(hours=25),
)
UNDOABLE = (A.SUCCESS, A.ROLLBACK_FAILED)
ACTIVE_JOB = (RollbackStatus.RUNNING, RollbackStatus.WAITING_APPROVAL)


def expected_display(stored: SessionStatus, actions: list[Action], approvals: list[Approval]) -> DisplayStatus | None:
    """DESIGN.md §4, first match wins. ``None``: the documents leave the case open (a ``ROLLED_BACK`` session
    with no ``ROLLED_BACK`` action, e.g. every undo ``SKIPPED``); the engine must still answer something."""
    if any(a.undo_status in (U.IN_PROGRESS, U.AWAITING_APPROVAL) for a in actions):
        return DisplayStatus.ROLLING_BACK
    if any(a.status == A.ROLLBACK_FAILED for a in actions):
        return DisplayStatus.ROLLBACK_FAILED
    if any(p.status == P.PENDING for p in approvals):
        return DisplayStatus.AWAITING_APPROVAL
    rolled_back = any(a.status == A.ROLLED_BACK for a in actions)
    succeeded = any(a.status == A.SUCCESS for a in actions)
    if rolled_back and not succeeded:
        return DisplayStatus.REVERTED
    if rolled_back and succeeded:
        return DisplayStatus.PARTIALLY_REVERTED
    plain = {
        S.ACTIVE: DisplayStatus.ACTIVE,
        S.COMPLETED: DisplayStatus.COMPLETED,
        S.ABANDONED: DisplayStatus.ABANDONED,
        S.FAILED: DisplayStatus.FAILED,
    }
    return plain.get(stored)


def allowed_change(table: Any, old: Any, new: Any) -> bool:
    return old == new or new in table[old]


class UndoBoom(RuntimeError):
    """What the fake inverse raises when told to."""


class FakeExecutor:
    """Records every inverse call; ``fail_at`` makes the n-th call of this run raise, ``reachable`` False makes
    ``can_run`` answer no (the job is then released, still RUNNING)."""

    def __init__(self, machine: EngineMachine, fail_at: int | None, reachable: bool) -> None:
        self.machine = machine
        self.fail_at = fail_at
        self.reachable = reachable
        self.seqs: list[int] = []
        self.raised: str | None = None

    def can_run(self, action: Action) -> bool:
        return self.reachable

    def run_undo(self, action: Action) -> None:
        m = self.machine
        # The engine marks the undo IN_PROGRESS before calling out: look at everything as it stands now.
        m.observe()
        assert action.status in UNDOABLE, action
        assert action.undo_status == U.IN_PROGRESS, action
        assert action.undo is not None and not action.undo.is_none, action
        assert not m.sandbox_of_action[action.action_id], "an inverse ran for a sandbox session"
        assert action.undo_idempotency_key == f"{action.idempotency_key}-undo"
        previous = m.undo_outcomes.get(action.action_id, [])
        assert not previous or previous[-1] == "raised", (
            f"inverse of {action.action_id} ran again after it had succeeded: {previous}"
        )
        if self.seqs:
            assert action.seq < self.seqs[-1], f"inverses out of LIFO order: {[*self.seqs, action.seq]}"
        self.seqs.append(action.seq)
        if self.fail_at is not None and len(self.seqs) - 1 == self.fail_at:
            m.undo_outcomes.setdefault(action.action_id, []).append("raised")
            self.raised = action.action_id
            raise UndoBoom(f"inverse of {action.api_name} failed")
        m.undo_outcomes.setdefault(action.action_id, []).append("ok")


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="agentrein-sm-"))
        self.now = datetime(2025, 1, 1, tzinfo=UTC)
        self.engine = Engine(Store(f"sqlite:///{self.tmp / 'agentrein.db'}"), clock=lambda: self.now)
        self.org_id = self.engine.ensure_organisation("t").org_id
        self.session_ids: list[str] = []
        self.policies: list[tuple[str, str]] = []  # (effect, api_name glob)
        # What was seen at the previous observation.
        self.seen_sessions: dict[str, SessionStatus] = {}
        self.seen_actions: dict[str, Action] = {}
        self.seen_approvals: dict[str, Approval] = {}
        self.ever_failed: set[str] = set()
        self.closed_session_actions: dict[str, frozenset[str]] = {}
        self.sandbox_of_action: dict[str, bool] = {}
        self.undo_outcomes: dict[str, list[str]] = {}
        self.views: dict[str, SessionInfo] = {}
        self.effect_at_log: dict[str, str] = {}
        self.job_list: list[Rollback] = []

    def teardown(self) -> None:
        self.engine.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # reading back ----------------------------------------------------------------------------------------
    def session(self, session_id: str) -> SessionInfo:
        return self.engine.get_session(self.org_id, session_id)

    def jobs(self) -> list[Rollback]:
        t = schema.rollbacks
        with self.engine.store.transaction(write=False) as tx:
            rows = tx.conn.execute(sa.select(t.c.rollback_id).where(t.c.org_id == self.org_id)).scalars()
            return [self.engine.get_rollback(self.org_id, r) for r in rows]

    def active_job(self, session_id: str) -> Rollback | None:
        active = [j for j in self.jobs() if j.session_id == session_id and j.status in ACTIVE_JOB]
        return active[0] if active else None

    def observe(self) -> None:
        """Read everything back and check it against what was seen before."""
        views = {sid: self.session(sid) for sid in self.session_ids}
        listed = {p.approval_id: p for p in self.engine.list_approvals(self.org_id)}
        all_approvals: dict[str, Approval] = {}
        for sid, view in views.items():
            assert view.id == sid
            stored = self.seen_sessions.get(sid)
            assert view.status in SessionStatus
            if stored is not None:
                assert allowed_change(rules.SESSION_TRANSITIONS, stored, view.status), (
                    f"session {sid}: {stored} -> {view.status}"
                )
            self.seen_sessions[sid] = view.status

            want = expected_display(view.status, view.actions, view.approvals)
            if want is not None:
                assert view.display_status == want, (
                    f"display {view.display_status}, rules say {want}: {view.status} {view.actions} {view.approvals}"
                )

            if view.status == S.ROLLED_BACK:
                # "All SUCCESS undone -> session ROLLED_BACK" (§4): a rolled-back session keeps no executed
                # action whose undo was never dealt with (it could never be rolled back again).
                live = [
                    f"{a.api_name}#{a.seq}"
                    for a in view.actions
                    if a.status == A.SUCCESS and a.undo_status != U.SKIPPED
                ]
                assert not live, f"session is ROLLED_BACK but {live} are SUCCESS and were never undone"
            ids = frozenset(a.action_id for a in view.actions)
            if view.status == S.ROLLED_BACK:
                before = self.closed_session_actions.setdefault(sid, ids)
                assert ids == before, f"a ROLLED_BACK session gained actions: {sorted(ids - before)}"
            seqs = [a.seq for a in view.actions]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs

            for action in view.actions:
                self.check_action(action, view)
            for approval in view.approvals:
                all_approvals[approval.approval_id] = approval
                self.check_approval(approval)

        assert set(listed) == set(all_approvals)
        for approval_id, info in listed.items():
            record = all_approvals[approval_id]
            assert info.status == record.status and info.purpose == record.purpose
            action = next(a for a in views[record.session_id].actions if a.action_id == record.action_id)
            assert info.action_status == action.status

        # At most one unfinished rollback per session.
        t = schema.rollbacks
        with self.engine.store.transaction(write=False) as tx:
            doubled = tx.conn.execute(
                sa.select(t.c.session_id, sa.func.count())
                .where(t.c.status.in_([s.value for s in ACTIVE_JOB]))
                .group_by(t.c.session_id)
                .having(sa.func.count() > 1)
            ).all()
        assert not doubled, f"sessions with more than one unfinished rollback: {doubled}"
        self.views = views
        self.job_list = self.jobs()

    def check_action(self, action: Action, view: SessionInfo) -> None:
        assert action.status in ActionStatus and action.undo_status in UndoStatus
        before = self.seen_actions.get(action.action_id)
        self.sandbox_of_action.setdefault(action.action_id, view.sandbox)
        if before is not None:
            assert allowed_change(rules.ACTION_TRANSITIONS, before.status, action.status), (
                f"action {action.api_name}#{action.seq}: {before.status} -> {action.status}"
            )
            assert allowed_change(rules.UNDO_TRANSITIONS, before.undo_status, action.undo_status), (
                f"undo of {action.api_name}#{action.seq}: {before.undo_status} -> {action.undo_status}"
            )
            changed_to_rolled_back = before.status != A.ROLLED_BACK and action.status == A.ROLLED_BACK
            if changed_to_rolled_back and not view.sandbox:
                assert before.status not in (A.PENDING_APPROVAL, A.CLEARED), (
                    f"a {before.status} action was rolled back in a real session"
                )
        if action.status == A.ROLLED_BACK and not view.sandbox:
            assert "ok" in self.undo_outcomes.get(action.action_id, []), (
                f"{action.api_name}#{action.seq} is ROLLED_BACK but its inverse never ran"
            )
            assert action.undo_status == U.DONE
        if action.status == A.FAILED:
            self.ever_failed.add(action.action_id)
        if action.action_id in self.ever_failed:
            assert action.status == A.FAILED, f"a FAILED action became {action.status}"
        self.seen_actions[action.action_id] = action

    def check_approval(self, approval: Approval) -> None:
        assert approval.status in ApprovalStatus
        before = self.seen_approvals.get(approval.approval_id)
        if before is not None:
            assert allowed_change(rules.APPROVAL_TRANSITIONS, before.status, approval.status)
            if before.status != P.PENDING:
                assert approval == before, f"a decided approval changed: {before} -> {approval}"
        if approval.status == P.PENDING:
            assert approval.resolved_at is None and approval.resolved_by is None
        else:
            assert approval.resolved_at is not None and approval.resolved_by
        self.seen_approvals[approval.approval_id] = approval

    @invariant()
    def everything_consistent(self) -> None:
        self.observe()

    # helpers -------------------------------------------------------------------------------------------
    # Ids are random: choices are made among records in a deterministic order (session, seq, purpose), so
    # that hypothesis replays the same run from the same choices.
    def actions_with(self, *statuses: ActionStatus) -> list[Action]:
        return sorted(
            (a for v in self.views.values() for a in v.actions if a.status in statuses),
            key=lambda a: (self.session_ids.index(a.session_id), a.seq),
        )

    def pending_approvals(self) -> list[Approval]:
        seq = {a.action_id: a.seq for v in self.views.values() for a in v.actions}
        return sorted(
            (p for v in self.views.values() for p in v.approvals if p.status == P.PENDING),
            key=lambda p: (self.session_ids.index(p.session_id), seq[p.action_id], p.purpose, p.requested_at),
        )

    def policy_effect(self, api_name: str) -> str:
        effects = {effect for effect, glob in self.policies if fnmatchcase(api_name, glob)}
        for effect in ("BLOCK", "REQUIRE_APPROVAL"):
            if effect in effects:
                return effect
        return "ALLOW"

    def has_session(self, prefer: Any) -> bool:
        return any(prefer(view) for view in self.views.values())

    def pick_session(self, data: st.DataObject, prefer: Any) -> str:
        """A session, usually one for which ``prefer(view)`` holds (so runs do not idle on dead sessions)."""
        preferred = [sid for sid in self.session_ids if prefer(self.views.get(sid) or self.session(sid))]
        anyone = data.draw(st.sampled_from([False, False, False, True]), label="any session")
        pool = self.session_ids if anyone or not preferred else preferred
        return data.draw(st.sampled_from(pool), label="session")

    def covered(self, action: Action) -> bool:
        """Whether an unfinished rollback job of its session will still deal with ``action``."""
        job = self.active_job(action.session_id)
        return (
            job is not None
            and job.action_id in (None, action.action_id)
            and (job.cursor_seq is None or action.seq < job.cursor_seq)
        )

    def check_session_rollback_started(self, session_id: str, why: str) -> None:
        """A failure, a rejected/expired before-execution approval, or a rollback request rolls the whole
        session back (DESIGN.md §4): every executed action is undone at once (sandbox), or an unfinished
        job will deal with it."""
        view = self.session(session_id)
        if view.sandbox:
            left = [a for a in view.actions if a.status == A.SUCCESS]
            assert not left, f"{why} left SUCCESS actions in a sandbox session"
            return
        missed = [
            f"{a.api_name}#{a.seq}"
            for a in view.actions
            if a.status == A.SUCCESS and a.undo_status not in (U.SKIPPED, U.DECLINED) and not self.covered(a)
        ]
        assert not missed, f"{why} started no rollback of {missed} (jobs: {self.jobs()})"

    def run_job(self, job: Rollback, fail_at: int | None, reachable: bool) -> Rollback:
        before = self.session(job.session_id)
        executor = FakeExecutor(self, fail_at, reachable)
        done = self.engine.run_rollback(self.org_id, job.rollback_id, executor)
        after = self.session(job.session_id)
        assert done.rollback_id == job.rollback_id
        assert not (executor.seqs and not reachable)
        if executor.raised is not None:
            # An inverse failed: that action ROLLBACK_FAILED, the chain stops, the session FAILED (§4).
            failed = next(a for a in after.actions if a.action_id == executor.raised)
            assert failed.status == A.ROLLBACK_FAILED and failed.undo_status == U.FAILED, failed
            assert done.status == RollbackStatus.FAILED and after.status == S.FAILED
        elif done.status == RollbackStatus.SUCCEEDED:
            for action in after.actions:
                if job.action_id not in (None, action.action_id) or action.status not in UNDOABLE:
                    continue
                # Finished: nothing in scope is left to undo but what has no inverse, and what the job had
                # already gone past when it was confirmed (see ``session_left_rolled_back_with_live_actions``).
                assert action.undo_status == U.SKIPPED or (
                    job.cursor_seq is not None and action.seq > job.cursor_seq
                ), action
            if job.action_id is None:
                waiting = any(a.status in (A.PENDING_APPROVAL, A.CLEARED) for a in after.actions)
                live = any(a.status == A.SUCCESS and a.undo_status != U.SKIPPED for a in after.actions)
                if waiting or live:
                    assert after.status == before.status, (before.status, after.status)
                else:
                    assert after.status == S.ROLLED_BACK
        return done

    # rules ---------------------------------------------------------------------------------------------
    @initialize()
    def two_sessions(self) -> None:
        self.new_session(sandbox=False)
        self.new_session(sandbox=True)

    @precondition(lambda self: len(self.session_ids) < 5)
    @rule(sandbox=st.booleans())
    def new_session(self, sandbox: bool) -> None:
        session = self.engine.new_session(self.org_id, "agent-1", "do things", sandbox=sandbox)
        assert session.status == S.ACTIVE and session.sandbox == sandbox
        self.session_ids.append(session.session_id)

    @rule(
        data=st.data(),
        api_name=st.sampled_from(API_NAMES),
        requires_approval=st.sampled_from([False, False, True]),
        timeout=st.sampled_from(TIMEOUTS),
        then=st.sampled_from(["confirm", "confirm", "leave", "fail"]),
        undo=st.sampled_from(UNDO_CONFIGS),
    )
    def log_action(
        self,
        data: st.DataObject,
        api_name: str,
        requires_approval: bool,
        timeout: timedelta,
        then: str,
        undo: UndoConfig,
    ) -> None:
        """Log a call; a cleared one is then (usually) confirmed or failed, as the SDK does right after."""
        session_id = self.pick_session(data, lambda v: v.status == S.ACTIVE)
        view = self.session(session_id)
        effect = self.policy_effect(api_name)
        kwargs: dict[str, Any] = {
            "connector": "fake",
            "api_name": api_name,
            "operation_type": OperationType.CREATE,
            "payload": {"n": len(view.actions)},
            "requires_approval": requires_approval,
            "approval_timeout": timeout,
        }
        if view.status != S.ACTIVE:
            try:
                self.engine.log_action(self.org_id, session_id, **kwargs)
            except InvalidTransitionError:
                pass
            else:
                raise AssertionError(f"a {view.status} session accepted a new action")
            assert len(self.session(session_id).actions) == len(view.actions)
            return
        if effect == "BLOCK":
            try:
                self.engine.log_action(self.org_id, session_id, **kwargs)
            except PolicyBlockedError as exc:
                blocked = [a for a in self.session(session_id).actions if a.action_id == exc.action_id]
                assert blocked and blocked[0].status == A.FAILED
            else:
                raise AssertionError("a BLOCK policy matched but the action was cleared")
            return
        logged = self.engine.log_action(self.org_id, session_id, **kwargs)
        self.effect_at_log[logged.action.action_id] = effect
        assert logged.action.seq == max((a.seq for a in view.actions), default=0) + 1
        if requires_approval:
            assert logged.action.status == A.PENDING_APPROVAL
            assert logged.approval is not None and logged.approval.purpose == ApprovalPurpose.BEFORE_EXECUTION
            assert logged.approval.timeout_at == self.now + timeout
            return
        assert logged.action.status == A.CLEARED and logged.approval is None
        if then == "leave":
            return
        self.observe()
        if then == "confirm":
            self.confirm(logged.action, undo)
        else:
            self.fail(logged.action)

    @precondition(lambda self: self.actions_with(A.CLEARED))
    @rule(data=st.data(), undo=st.sampled_from(UNDO_CONFIGS), fail=st.booleans())
    def confirm_or_fail_cleared(self, data: st.DataObject, undo: UndoConfig, fail: bool) -> None:
        action = data.draw(st.sampled_from(self.actions_with(A.CLEARED)), label="action")
        if fail:
            self.fail(action)
        else:
            self.confirm(action, undo)

    def confirm(self, action: Action, undo: UndoConfig) -> None:
        done = self.engine.confirm_action(self.org_id, action.action_id, response={"id": "x"}, undo=undo)
        assert done.status == A.SUCCESS and done.undo == undo
        view = self.session(action.session_id)
        mine = [p for p in view.approvals if p.action_id == action.action_id]
        had_before = any(p.purpose == ApprovalPurpose.BEFORE_EXECUTION for p in mine)
        after = [p for p in mine if p.purpose == ApprovalPurpose.AFTER_EXECUTION]
        # A REQUIRE_APPROVAL match opens an after-execution review, unless a human already reviewed the call
        # before it ran. Whether the policies are read when the call is logged or when it is confirmed is
        # left open by the documents: either reading is accepted.
        at_log = self.effect_at_log.get(action.action_id) == "REQUIRE_APPROVAL"
        at_confirm = self.policy_effect(action.api_name) == "REQUIRE_APPROVAL"
        expected = {int(review and not had_before) for review in (at_log, at_confirm)}
        assert len(after) in expected, (after, expected)
        assert all(p.status == P.PENDING and p.requested_at == self.now for p in after)

    def fail(self, action: Action) -> None:
        before = self.session(action.session_id)
        approved = any(
            p.action_id == action.action_id and p.purpose == ApprovalPurpose.BEFORE_EXECUTION and p.status == P.APPROVED
            for p in before.approvals
        )
        failed = self.engine.fail_action(self.org_id, action.action_id, error="boom")
        assert failed.status == A.FAILED
        after = self.session(action.session_id)
        original = next(a for a in after.actions if a.action_id == action.action_id)
        if approved:
            # Status reference §1: an approved action stays CLEARED; the failure is a separate FAILED action.
            assert original.status == A.CLEARED and failed.action_id != action.action_id
            assert len(after.actions) == len(before.actions) + 1
        else:
            assert original.status == A.FAILED and failed.action_id == action.action_id
        self.check_session_rollback_started(action.session_id, "a failed action")

    @precondition(lambda self: self.actions_with(A.PENDING_APPROVAL, A.SUCCESS, A.FAILED, A.ROLLED_BACK))
    @rule(data=st.data())
    def confirm_not_cleared(self, data: st.DataObject) -> None:
        candidates = self.actions_with(A.PENDING_APPROVAL, A.SUCCESS, A.FAILED, A.ROLLED_BACK, A.ROLLBACK_FAILED)
        action = data.draw(st.sampled_from(candidates), label="action")
        try:
            self.engine.confirm_action(self.org_id, action.action_id, response={}, undo=UndoConfig("fake-undo"))
        except InvalidTransitionError:
            pass
        else:
            raise AssertionError(f"a {action.status} action was confirmed SUCCESS")

    @precondition(lambda self: self.pending_approvals())
    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data: st.DataObject, approve: bool) -> None:
        approval = data.draw(st.sampled_from(self.pending_approvals()), label="approval")
        decide = self.engine.approve if approve else self.engine.reject
        decided = decide(self.org_id, approval.approval_id, "reviewer", "because")
        assert decided.status == (P.APPROVED if approve else P.REJECTED)
        assert decided.resolved_by == "reviewer" and decided.resolved_at == self.now
        self.check_decision_effect(approval, approve)
        # A decided approval cannot be decided again.
        try:
            self.engine.approve(self.org_id, approval.approval_id, "second reviewer")
        except InvalidTransitionError:
            pass
        else:
            raise AssertionError("an approval was decided twice")

    def check_decision_effect(self, approval: Approval, approved: bool) -> None:
        """What a decision means for its action and session (status reference §4)."""
        view = self.session(approval.session_id)
        action = next(a for a in view.actions if a.action_id == approval.action_id)
        if approval.purpose == ApprovalPurpose.BEFORE_EXECUTION:
            assert action.status == (A.CLEARED if approved else A.FAILED)
            if not approved:
                self.check_session_rollback_started(approval.session_id, "a rejected before-execution approval")
        elif approval.purpose == ApprovalPurpose.AFTER_EXECUTION:
            if not approved and not view.sandbox:
                # Single-action rollback of that action: it is undone, or a job that will undo it is open.
                assert action.status not in UNDOABLE or self.covered(action), (
                    f"after-execution rejection of {action.api_name}#{action.seq} started no rollback of it"
                )
            if not approved and view.sandbox:
                assert action.status != A.SUCCESS
        elif approved:
            assert action.undo_status == U.AWAITING_APPROVAL
        else:
            # Undo DECLINED, the action keeps its side effects, the session FAILED (status reference §3).
            assert action.undo_status == U.DECLINED and action.status in UNDOABLE
            assert view.status == S.FAILED

    @rule(step=st.sampled_from(CLOCK_STEPS))
    def advance_clock_and_maintain(self, step: timedelta) -> None:
        due = [p for p in self.pending_approvals() if p.timeout_at <= self.now + step]
        self.now += step
        self.engine.maintain()
        for approval in due:
            view = self.session(approval.session_id)
            current = next(p for p in view.approvals if p.approval_id == approval.approval_id)
            assert current.status == P.EXPIRED, current
            assert current.resolved_at == self.now
        for approval in due:
            self.check_decision_effect(approval, approved=False)
        for view in (self.session(sid) for sid in self.session_ids):
            if view.status == S.ACTIVE:
                assert self.now - view.last_activity_at < rules.ABANDONED_AFTER

    @precondition(lambda self: len(self.policies) < 3)
    @rule(effect=st.sampled_from(["REQUIRE_APPROVAL", "BLOCK"]), glob=st.sampled_from(POLICY_GLOBS))
    def add_policy(self, effect: str, glob: str) -> None:
        self.engine.add_policy(self.org_id, f"p{len(self.policies)}", effect, api_name=glob)
        self.policies.append((effect, glob))

    @precondition(lambda self: self.has_session(lambda v: any(a.status in UNDOABLE for a in v.actions)))
    @rule(
        data=st.data(),
        role=st.sampled_from(["operator", "operator", "agent"]),
        fail_at=st.one_of(st.none(), st.integers(0, 2)),
        reachable=st.sampled_from([True, True, True, False]),
    )
    def request_rollback(self, data: st.DataObject, role: str, fail_at: int | None, reachable: bool) -> None:
        session_id = self.pick_session(data, lambda v: any(a.status in UNDOABLE for a in v.actions))
        view = self.session(session_id)
        running = self.active_job(session_id)
        allowed = rules.ROLLBACK_ALLOWED_FROM[role]
        refused = (
            view.status not in allowed
            or expected_display(view.status, view.actions, view.approvals) == DisplayStatus.REVERTED
            or not any(a.status in UNDOABLE for a in view.actions)
        )
        try:
            job = self.engine.request_rollback(self.org_id, session_id, caller_role=role, requested_by="x")
        except RollbackRefusedError:
            assert running is None and refused, f"rollback refused: {view.status} {view.actions}"
            return
        if running is not None:
            assert job.rollback_id == running.rollback_id, "a second rollback started beside a running one"
        else:
            assert not refused, f"an {role} rolled back a {view.status} session: {view.actions}"
        self.check_session_rollback_started(session_id, "a rollback request")
        if not view.sandbox:
            self.run_job(job, fail_at, reachable)

    @precondition(lambda self: any(j.status == RollbackStatus.RUNNING for j in self.job_list))
    @rule(fail_at=st.one_of(st.none(), st.integers(0, 2)), reachable=st.sampled_from([True, True, False]))
    def run_waiting_rollbacks(self, fail_at: int | None, reachable: bool) -> None:
        """Jobs started by failures, rejections and approved rollback approvals, run by a worker."""
        jobs = self.engine.rollbacks_to_run(self.org_id)
        for job in sorted(jobs, key=lambda j: (self.session_ids.index(j.session_id), j.action_id is None)):
            self.run_job(job, fail_at, reachable)

    @precondition(lambda self: self.has_session(lambda v: v.status == S.ACTIVE and len(v.actions) >= 2))
    @rule(data=st.data())
    def complete_session(self, data: st.DataObject) -> None:
        session_id = self.pick_session(data, lambda v: v.status == S.ACTIVE and len(v.actions) >= 2)
        before = self.session(session_id).status
        try:
            info = self.engine.complete_session(self.org_id, session_id)
        except InvalidTransitionError:
            assert before not in (S.ACTIVE, S.COMPLETED), f"complete refused for a {before} session"
            return
        assert before in (S.ACTIVE, S.COMPLETED), f"a {before} session was completed"
        assert info.status == S.COMPLETED


EngineMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestEngineStateMachine = EngineMachine.TestCase
