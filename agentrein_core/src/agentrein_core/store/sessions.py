"""Sessions and their actions: the write-ahead record's seq, each call's outcome, the head of a rollback's
chain, and pages of sessions filtered in the database, their display status too, by the rules of
:data:`rules.DISPLAY_RULES` compiled to SQL (the derivation in ``statuses`` reads the same table). A page costs
the same however many sessions and actions the database holds: every filter and order is served by an index
(see ``schema.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core import rules
from agentrein_core.converter import from_columns, from_row
from agentrein_core.decisions import SHOWN_STEPS, Tally
from agentrein_core.model import FAILURE_KEY_SUFFIX, UNDO_NONE, Action, Session
from agentrein_core.rollback import THROUGH, Pick
from agentrein_core.statuses import ActionStatus, DisplayStatus, Plan, SessionStatus, UndoStatus
from agentrein_core.store.prepared import Prepared
from agentrein_core.store.rows import Rows, of_sessions

_S, _A, _P, _O, _R = schema.sessions, schema.actions, schema.approvals, schema.organisations, schema.rollbacks

# The highest seq of each (status, undo status) a rollback's chain still undoes, the highest of them, its action.
# Each is read down its own part of ix_actions_session_status and stopped at the first. The undo status is a range
# of one value, not an equality, so that only that index gives the order asked for: with an equality, a planner
# whose statistics (taken before the rollback) said most actions are still to undo walked down the seq index
# instead, past every action undone so far; and a max() was read through to the part's end.
_HEADS = sa.union_all(
    *(
        sa.select(
            sa.select(_A.c.seq)
            .where(
                _A.c.session_id == sa.bindparam("sid"),
                _A.c.status == status.value,
                _A.c.undo_status.between(undo.value, undo.value),
            )
            .order_by(_A.c.undo_status.desc(), _A.c.seq.desc())
            .limit(1)
            .scalar_subquery()
            .label("seq")
        )
        for status in sorted(rules.UNDOABLE)
        for undo in UndoStatus
        if undo is not UndoStatus.SKIPPED
    )
).subquery()
_NEXT_TO_UNDO = sa.select(_A).where(
    _A.c.session_id == sa.bindparam("sid"), _A.c.seq == sa.select(sa.func.max(_HEADS.c.seq)).scalar_subquery()
)
# Read at every step of a rollback, built once (building a statement cost as much as running it).
_FAILURE = _A.alias("failure")
_FAILURE_OF = sa.exists().where(
    _FAILURE.c.session_id == sa.bindparam("sid"),
    _FAILURE.c.idempotency_key == _A.c.idempotency_key + FAILURE_KEY_SUFFIX,
)
_AWAITED = sa.select(_A).where(
    _A.c.session_id == sa.bindparam("sid"),
    _A.c.status == ActionStatus.CLEARED.value,
    _A.c.updated_at > sa.bindparam("since"),
    ~_FAILURE_OF,
)
_SESSION_HELD = sa.select(_S.c.session_id).where(_S.c.session_id == sa.bindparam("sid"))
# Keyed by the bound organisation, not correlated to sessions.org_id: SQLite renders RETURNING's column names
# unqualified, so a correlated ``org_id = org_id`` would match every organisation.
_ORG_OF_SESSION = sa.select(_O.c.policy_version, _O.c.plan).where(_O.c.org_id == sa.bindparam("org"))
_TAKE_SEQ = (
    _S.update()
    .where(_S.c.session_id == sa.bindparam("sid"), _S.c.org_id == sa.bindparam("org"))
    .values(last_seq=_S.c.last_seq + 1)
    .returning(
        _S.c.last_seq,
        _S.c.agent_id,
        _S.c.last_activity_at,
        _ORG_OF_SESSION.with_only_columns(_O.c.policy_version).scalar_subquery().label("policy_version"),
        _ORG_OF_SESSION.with_only_columns(_O.c.plan).scalar_subquery().label("plan"),
    )
)
# Spelled as ORs: a prepared statement has a fixed parameter list (an IN list would expand per execution).
_NO_ROLLBACK_UNDER_WAY = ~sa.exists().where(
    _R.c.session_id == _S.c.session_id, sa.or_(*(_R.c.status == status for status in sorted(rules.ROLLBACK_UNDER_WAY)))
)
# Prepared, as every recorded call runs them (bench/overhead.py's WRITE rows; figures on SQLite under load, per
# execution, prepared against SQLAlchemy's execute): taking a seq (93 us against 185 us) and confirming the
# outcome (96 us against 328 us). A call logged after it ran (``/compat``, the journal) takes a seq of any session.
#: Take the session's next seq, mark it active ``now``, and read what a write-ahead record needs.
_TAKE_SEQ_ANY = Prepared(_TAKE_SEQ)
#: The same, only for an ACTIVE session that is not being rolled back (the only kind that accepts a new action).
_TAKE_SEQ_ACTIVE = Prepared(_TAKE_SEQ.where(_S.c.status == SessionStatus.ACTIVE, _NO_ROLLBACK_UNDER_WAY))
#: An action's outcome, ``expected -> new_status``, guarded by its current status (and its session, if ``sid``).
_CONFIRM = Prepared(
    _A.update()
    .where(
        _A.c.action_id == sa.bindparam("key"),
        _A.c.org_id == sa.bindparam("org"),
        _A.c.status == sa.bindparam("expected"),
        sa.or_(sa.bindparam("sid", type_=sa.String).is_(None), _A.c.session_id == sa.bindparam("sid")),
    )
    .values(
        status=sa.bindparam("new_status"),
        response=sa.bindparam("response"),
        undo=sa.bindparam("undo"),
        updated_at=sa.bindparam("now"),
        check_wanted=sa.true(),  # its call ran: an intent check is wanted (found from the session's watermark)
    )
    .returning(*_A.c)
)
_BY_KEY = Prepared(
    sa.select(_A).where(
        _A.c.org_id == sa.bindparam("org"),
        _A.c.session_id == sa.bindparam("sid"),
        _A.c.idempotency_key == sa.bindparam("key"),
    )
)
#: A session whose confirmed call wants an intent check: written only when it flips, so most calls find it set
#: and write nothing more (the supervisor clears it when it queues the checks).
_CHECK_DUE = Prepared(
    _S.update().where(_S.c.session_id == sa.bindparam("sid"), _S.c.check_due.is_(False)).values(check_due=True)
)
#: Sessions marked so, written bare as ``ix_sessions_check_due``'s predicate is: the databases use a partial index
#: only for a query whose filter implies its predicate, and neither sees that ``check_due IS true`` does.
_MARKED_CHECK_DUE = sa.text("sessions.check_due")


@frozen
class SeqTaken:
    """What taking a seq learns: the seq, the session's agent, and its organisation's policy version and plan."""

    seq: int
    agent_id: str
    policy_version: int
    plan: Plan


@frozen
class Listed:
    """A session as a page of sessions reads it: the session, its display status and how many actions it has."""

    session: Session
    display_status: DisplayStatus
    action_count: int


@frozen
class Sessions:
    rows: Rows

    def get(self, org_id: str, session_id: str, lock: bool = False) -> Session | None:
        return self.rows.one(Session, session_id, org_id, lock=lock)

    def hold(self, session_id: str) -> None:
        """Hold the session's row until the transaction ends (PostgreSQL; SQLite has one writer): whoever starts
        or widens a rollback does so before it looks for one under way (the store's lock order)."""
        self.rows.hold(_SESSION_HELD, {"sid": session_id})

    def take_seq(self, org_id: str, session_id: str, now: datetime, only_active: bool = True) -> SeqTaken | None:
        """Take the session's next action seq and mark it active now (when its last activity is
        :data:`~agentrein_core.rules.ACTIVITY_GRAIN` old or more); None if there is no such session, or if
        ``only_active`` and it is not ``ACTIVE`` or is being rolled back. One statement takes the seq, so
        concurrent callers never share one; it also reads what the write-ahead record needs of the organisation."""
        stmt = _TAKE_SEQ_ACTIVE if only_active else _TAKE_SEQ_ANY
        row = stmt.run_first(self.rows.conn, {"sid": session_id, "org": org_id})
        if row is None:
            return None
        if now - row["last_activity_at"] >= rules.ACTIVITY_GRAIN:
            self.touch(session_id, now)
        return SeqTaken(row["last_seq"], row["agent_id"], row["policy_version"], Plan(row["plan"]))

    def touch(self, session_id: str, now: datetime) -> None:
        self.rows.conn.execute(_S.update().where(_S.c.session_id == session_id).values(last_activity_at=now))

    def want_check(self, session_id: str) -> None:
        """A call of the session ran (its action is marked ``check_wanted``): its intent check is queued by the
        supervisor (:meth:`checks_due`), not by the call."""
        _CHECK_DUE.run(self.rows.conn, {"sid": session_id})

    def checks_due(self, org_id: str | None, limit: int) -> list[str]:
        """Up to ``limit`` sessions (of ``org_id``, when given) whose calls want intent checks, each to be taken
        (:meth:`take_checks_due`) in a transaction of its own."""
        stmt = sa.select(_S.c.session_id).where(_MARKED_CHECK_DUE)
        if org_id is not None:
            stmt = stmt.where(_S.c.org_id == org_id)
        return [r.session_id for r in self.rows.conn.execute(stmt.limit(limit))]

    def take_checks_due(self, session_id: str) -> tuple[str, int] | None:
        """Take the session's wanted checks to queue: ``check_due`` is cleared (compare-and-set: by one taker
        only), so that a call confirmed while they are queued marks its session again rather than being missed.
        ``(org_id, checked_seq)``, or None when another taker was first."""
        stmt = (
            _S.update()
            .where(_S.c.session_id == session_id, _MARKED_CHECK_DUE)
            .values(check_due=False)
            .returning(_S.c.org_id, _S.c.checked_seq)
        )
        row = self.rows.conn.execute(stmt).first()
        return None if row is None else (row.org_id, row.checked_seq)

    def checked_up_to(self, session_id: str, seq: int) -> None:
        """Every action of the session up to ``seq`` has had its intent check queued (or wants none)."""
        self.rows.conn.execute(_S.update().where(_S.c.session_id == session_id).values(checked_seq=seq))

    def idle_since(self, cutoff: datetime, limit: int = 500) -> list[Session]:
        """Active sessions idle since ``cutoff``, longest idle first. In that order PostgreSQL reads them from
        the (status, last activity) index; without it, it scans every session, once a second, to find none."""
        stmt = sa.select(_S).where(_S.c.status == SessionStatus.ACTIVE, _S.c.last_activity_at <= cutoff)
        return self.rows.all(Session, stmt.order_by(_S.c.last_activity_at).limit(limit))

    def page(
        self,
        org_id: str,
        limit: int = 100,
        *,
        status: SessionStatus | None = None,
        display_status: DisplayStatus | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        opened_by: str | None = None,
    ) -> list[Listed]:
        """The organisation's sessions, newest first, filtered, each with its display status and action count
        read in the same query; ``after`` is the keyset position (``created_at``, ``session_id``) of the last
        session of the previous page; ``opened_by``: only those this API key opened."""
        t = _S
        stmt = sa.select(t).where(t.c.org_id == org_id)
        if status is not None:
            stmt = stmt.where(t.c.status == status)
        if display_status is not None:
            stmt = stmt.where(_shown_as(display_status))
        if agent_id is not None:
            stmt = stmt.where(t.c.agent_id == agent_id)
        if opened_by is not None:
            stmt = stmt.where(t.c.opened_by_key == opened_by)
        if created_after is not None:
            stmt = stmt.where(t.c.created_at >= created_after)
        if created_before is not None:
            stmt = stmt.where(t.c.created_at < created_before)
        if after is not None:
            stmt = stmt.where(sa.tuple_(t.c.created_at, t.c.session_id) < sa.tuple_(*after))
        page = stmt.order_by(t.c.created_at.desc(), t.c.session_id.desc()).limit(limit).subquery("page")
        return self._listed(page)

    def summary(self, org_id: str, session_id: str) -> Listed | None:
        """The session with its display status and action count, worked out in SQL as a list does (a read of a
        long session's first page need not read every action for them)."""
        one = sa.select(_S).where(_S.c.org_id == org_id, _S.c.session_id == session_id).subquery("page")
        return next(iter(self._listed(one)), None)

    def _listed(self, page: sa.Subquery) -> list[Listed]:
        listed = []
        for row in self.rows.conn.execute(_summarised(page)):
            columns = dict(row._mapping)
            shown, count = DisplayStatus(columns.pop("display_status")), columns.pop("action_count")
            listed.append(Listed(from_columns(columns, Session), shown, count))
        return listed


@frozen
class Actions:
    rows: Rows

    def get(self, org_id: str, action_id: str) -> Action | None:
        return self.rows.one(Action, action_id, org_id)

    def by_key(self, org_id: str, session_id: str, idempotency_key: str) -> Action | None:
        """The session's action recorded under ``idempotency_key`` (asked at every write-ahead record the SDK
        makes the key of: prepared)."""
        params = {"org": org_id, "sid": session_id, "key": idempotency_key}
        return self.rows.prepared_first(Action, _BY_KEY, params)

    def recent(self, org_id: str, limit: int) -> list[tuple[Action, str]]:
        """The organisation's latest ``limit`` actions, newest first, each with its session's agent."""
        stmt = (
            sa.select(_A, _S.c.agent_id)
            .join(_S, _S.c.session_id == _A.c.session_id)
            .where(_A.c.org_id == org_id)
            .order_by(_A.c.created_at.desc(), _A.c.action_id.desc())
            .limit(limit)
        )
        return [(from_row(row, Action), row.agent_id) for row in self.rows.conn.execute(stmt)]

    def of_session(self, session_id: str) -> list[Action]:
        return self.rows.all(Action, sa.select(_A).where(_A.c.session_id == session_id).order_by(_A.c.seq))

    def hold_of_session(self, session_id: str) -> None:
        """Hold the rows of the session's actions (PostgreSQL), before the session's: a use case that writes
        them after it holds the session (a sandbox rollback) deadlocked with a decision on one of them."""
        self.rows.hold(sa.select(_A.c.action_id).where(_A.c.session_id == session_id).order_by(_A.c.seq))

    def wanting_checks(self, session_id: str, after_seq: int) -> list[tuple[str, int, ActionStatus, bool]]:
        """The session's actions after ``after_seq``, as ``(action_id, seq, status, check_wanted)``, in ``seq``
        order (read from the unique index on ``(session_id, seq)`` and the rows it points to)."""
        columns = _A.c.action_id, _A.c.seq, _A.c.status, _A.c.check_wanted
        stmt = sa.select(*columns).where(_A.c.session_id == session_id, _A.c.seq > after_seq).order_by(_A.c.seq)
        return [(r.action_id, r.seq, ActionStatus(r.status), r.check_wanted) for r in self.rows.conn.execute(stmt)]

    def outcome_under_way(self, action_ids: Sequence[str]) -> bool:
        """Whether any of these actions, read as awaiting their outcome, has had one written since, committed or
        not. On PostgreSQL (read committed) a confirmation may be writing one right now, and finds its session
        marked already, so it marks nothing: whoever reads the watermark then must mark the session again. Rows
        another transaction is writing are skipped, never waited for."""
        still = 0
        for chunk in (action_ids[i : i + 500] for i in range(0, len(action_ids), 500)):
            stmt = (
                sa.select(_A.c.action_id)
                .where(_A.c.action_id.in_(chunk), _A.c.status.in_(rules.OUTCOME_AWAITED))
                .with_for_update(read=True, skip_locked=True)
            )
            still += len(self.rows.conn.execute(stmt).all())
        return still < len(action_ids)

    def tallies(
        self, session_ids: Sequence[str], pick: Pick, latest: int | None = None, *, skip: int = 0
    ) -> dict[str, Tally]:
        """The tally of the actions ``pick`` picks in each of ``session_ids`` that has any, counted in SQL: the
        counts, and the ``latest`` of each (by default as many as a reviewer's card may list; after the ``skip``
        latest, if given), however many it has. A few queries per 500 sessions: the counts; the picked actions of
        the sessions that have no more than ``latest`` (most), read plainly; the latest of the others, ranked."""
        latest = SHOWN_STEPS + 1 if latest is None else latest
        session = _A.c.session_id
        picked: list[sa.ColumnElement[bool]] = [_A.c.status.in_(sorted(pick.statuses))]
        if pick.asked_only:
            picked.append(_A.c.undo_requested.is_(True))
        if pick.unskipped_only:
            picked.append(_A.c.undo_status != UndoStatus.SKIPPED)
        without_inverse = sa.or_(_A.c.undo.is_(None), _A.c.undo["type"].as_string() == UNDO_NONE)
        undone = _A.c.status == ActionStatus.ROLLED_BACK
        through = sa.or_(undone, _A.c.undo_status.in_(sorted(THROUGH)))  # rollback.is_through
        counted = sa.select(
            session,
            sa.func.count(),
            sa.func.sum(sa.case((without_inverse, 1), else_=0)),
            sa.func.sum(sa.case((undone, 1), else_=0)),
            sa.func.sum(sa.case((through, 1), else_=0)),
        ).group_by(session)
        ranked = (  # over the few columns that rank: the rows it lists are read after, alone
            sa.select(
                _A.c.action_id,
                sa.func.row_number().over(partition_by=session, order_by=_A.c.seq.desc()).label("tally_rank"),
            )
            .where(session.in_(sa.bindparam("ids", expanding=True)), *picked)
            .subquery()
        )
        reads = (
            sa.select(_A).where(session.in_(sa.bindparam("ids", expanding=True)), *picked),
            sa.select(_A)
            .join(ranked, ranked.c.action_id == _A.c.action_id)
            .where(ranked.c.tally_rank > skip, ranked.c.tally_rank <= skip + latest),
        )
        tallies: dict[str, Tally] = {}
        for i in range(0, len(session_ids), 500):
            chunk = list(session_ids[i : i + 500])
            for sid, *counts in self.rows.conn.execute(counted.where(session.in_(chunk), *picked)):
                tallies[sid] = Tally([], *counts)
            if not latest:
                continue
            few = [sid for sid in chunk if sid in tallies and tallies[sid].count <= latest and not skip]
            many = [sid for sid in chunk if sid in tallies and sid not in few]
            for read, ids in zip(reads, (few, many), strict=True):
                if ids:
                    for action in self.rows.all(Action, read.order_by(session, _A.c.seq.desc()), {"ids": ids}):
                        tallies[action.session_id].latest.append(action)
        return tallies

    def take_unwritten(self, action_ids: Sequence[str]) -> list[str]:
        """Those of these actions no other transaction is writing, in the given order, locked until this one
        ends. Rows another transaction is writing are skipped, never waited for (PostgreSQL; SQLite has one
        writer at a time, so it takes them all)."""
        free: set[str] = set()
        for chunk in (action_ids[i : i + 500] for i in range(0, len(action_ids), 500)):
            stmt = sa.select(_A.c.action_id).where(_A.c.action_id.in_(chunk)).with_for_update(skip_locked=True)
            free.update(self.rows.conn.execute(stmt).scalars())
        return [action_id for action_id in action_ids if action_id in free]

    def checks_queued(self, action_ids: Sequence[str]) -> None:
        """These actions' intent checks are queued: no longer wanted."""
        for chunk in (action_ids[i : i + 500] for i in range(0, len(action_ids), 500)):
            self.rows.conn.execute(_A.update().where(_A.c.action_id.in_(chunk)).values(check_wanted=False))

    def want_check(self, action_id: str) -> None:
        """This action's call ran (recorded only once it had run): an intent check is wanted."""
        self.rows.conn.execute(_A.update().where(_A.c.action_id == action_id).values(check_wanted=True))

    def page(self, session_id: str, limit: int, after_seq: int = 0) -> list[Action]:
        """At most ``limit`` of the session's actions after ``after_seq``, in ``seq`` order (the unique index
        on ``(session_id, seq)`` reads them, so a page costs the same however long the session)."""
        stmt = sa.select(_A).where(_A.c.session_id == session_id, _A.c.seq > after_seq).order_by(_A.c.seq).limit(limit)
        return self.rows.all(Action, stmt)

    def of_sessions(self, session_ids: Sequence[str]) -> dict[str, list[Action]]:
        """The actions of each session, in ``seq`` order, in one query."""
        return of_sessions(self.rows, Action, _A, session_ids, _A.c.session_id, _A.c.seq)

    def set_outcome(
        self,
        org_id: str,
        action_id: str,
        expected: ActionStatus,
        status: ActionStatus,
        response: Any,
        undo: Any,
        now: datetime,
        session_id: str | None = None,
    ) -> Action | None:
        """``expected -> status`` with the response and undo config, in one guarded statement (the hot path
        of every confirmed call); None if the action is missing (from ``session_id``, when given) or no longer
        ``expected``: nothing is written then."""
        params = {
            "key": action_id,
            "org": org_id,
            "expected": expected,
            "new_status": status,
            "response": response,
            "undo": undo,
            "now": now,
            "sid": session_id,
        }
        return self.rows.prepared_first(Action, _CONFIRM, params)

    def next_to_undo(self, session_id: str, only_requested: bool) -> list[Action]:
        """The head of a rollback's chain (:func:`agentrein_core.rollback.chain`), read alone, so that each
        step of a long rollback reads one action rather than the whole session: the executed action (or
        one whose undo failed) of the highest seq that is neither undone nor skipped (among those whose undo
        was asked for one by one, if ``only_requested``: read down the seq index past those not asked for, which a
        one-action rollback, after a rejected review, walks once or twice).

        A session's rollback finds it as the highest seq of each undoable pair of statuses, one probe each of
        the index of ``(session_id, status, undo_status, seq)``: read down the seq index instead, each step
        passed over every action undone before it, and a rollback of n actions read n²/2 of them."""
        if only_requested:
            undoable = _A.c.status.in_(sorted(rules.UNDOABLE)), _A.c.undo_status != UndoStatus.SKIPPED
            stmt = sa.select(_A).where(_A.c.session_id == session_id, _A.c.undo_requested.is_(True), *undoable)
            return self.rows.all(Action, stmt.order_by(_A.c.seq.desc()).limit(1))
        return self.rows.all(Action, _NEXT_TO_UNDO, {"sid": session_id})

    def awaited_confirmations(self, session_id: str, cleared_since: datetime) -> list[Action]:
        """The session's calls cleared to run since ``cleared_since`` whose outcome is not in yet
        (:func:`agentrein_core.rollback.next_step` waits for them): ``CLEARED``, and no failure recorded for
        them (an approved action's failure is a record of its own, under a suffixed key, the action staying
        ``CLEARED``)."""
        return self.rows.all(Action, _AWAITED, {"sid": session_id, "since": cleared_since})


def _holds(clue: rules.Clue, sessions: sa.FromClause = _S) -> sa.ColumnElement[bool]:
    """``clue`` of a session as SQL over the listed session's row (of ``sessions``). Its values are written into
    the SQL, not bound, so that an index of the actions that give the clue (a partial index, ``schema.py``) can
    be used where the planner cannot see bound values: SQLite's plans, and the generic plan PostgreSQL keeps for
    a prepared statement."""
    values = [sa.literal(value.value, literal_execute=True) for value in sorted(clue.values)]
    if clue.field == "stored":
        return sessions.c.status.in_(values)
    if clue.field == "approval":
        found = sa.select(1).where(_P.c.session_id == sessions.c.session_id, _P.c.status.in_(values))
    else:
        found = sa.select(1).where(_A.c.session_id == sessions.c.session_id, _A.c[clue.field].in_(values))
    # OFFSET 0 keeps PostgreSQL from turning the test into a hash of every session that passes it (all the
    # actions of a status), built before the first row of the page: each listed session is tested alone.
    exists = found.offset(0).exists()
    return exists if clue.present else ~exists


def _summarised(page: sa.Subquery) -> sa.Select[Any]:
    """The sessions of ``page`` with their display status (the first of :data:`rules.DISPLAY_RULES` that matches)
    and action count, worked out for the page's rows alone: over the whole table, PostgreSQL would work them out
    for every session before sorting and keeping a page."""
    whens = [(sa.and_(*(_holds(clue, page) for clue in clues)), shown.value) for shown, clues in rules.DISPLAY_RULES]
    count = sa.select(sa.func.count()).where(_A.c.session_id == page.c.session_id).scalar_subquery()
    newest_first = (page.c.created_at.desc(), page.c.session_id.desc())
    return sa.select(page, sa.case(*whens).label("display_status"), count.label("action_count")).order_by(*newest_first)


def _shown_as(display: DisplayStatus) -> sa.ColumnElement[bool]:
    """Whether the listed session displays ``display``: a rule for it matches, and no earlier rule does."""
    earlier: list[sa.ColumnElement[bool]] = []
    ways: list[sa.ColumnElement[bool]] = []
    for shown, clues in rules.DISPLAY_RULES:
        matched = sa.and_(*(_holds(clue) for clue in clues))
        if shown is display:
            ways.append(sa.and_(matched, *(sa.not_(e) for e in earlier)))
        earlier.append(matched)
    return sa.or_(*ways)
