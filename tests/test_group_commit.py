"""Group commit (DESIGN §6): records handed to the store's one writer together share one transaction and one
commit; each is answered after that commit, alone in what it was refused; on both databases."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from test_engine import Clock, clock, log

from agentrein_core.commands import Confirmed, NewPolicy, WriteAhead
from agentrein_core.engine import Engine
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, NotFoundError, PolicyBlockedError
from agentrein_core.model import UndoConfig
from agentrein_core.read_models import Confirmation
from agentrein_core.statuses import ActionStatus, OperationType, Plan
from agentrein_core.store import Store

__all__ = ["clock"]  # the engine tests' clock fixture, used here too


@pytest.fixture
def engine(database_url: str, clock: Clock) -> Iterator[Engine]:
    engine = Engine(Store(database_url), clock=clock)
    yield engine
    engine.store.close()


def an_organisation(engine: Engine) -> tuple[str, str]:
    """An organisation of this test's own (PostgreSQL's test database is shared) and a session of it."""
    org = engine.accounts.create_organisation(f"group-{uuid.uuid4().hex[:8]}", Plan.TEAM)
    return org.org_id, engine.recording.new_session(org.org_id, "agent", "intent").session_id


def commits_of(store: Store) -> list[int]:
    """A list that grows by one at each commit of ``store``'s database, from now on."""
    commits: list[int] = []
    sa.event.listen(store.engine, "commit", lambda conn: commits.append(1))
    return commits


def handed_together(
    engine: Engine, works: list[Callable[[], Any]], meanwhile: Callable[[], None] = lambda: None
) -> list[Future[Any]]:
    """``works`` handed to the writer while it is busy with a first piece of work, so that they all wait and
    then go in one group (``meanwhile`` runs just before the writer is let go); their futures."""
    writer = engine.store.group_commit
    busy, release = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(10)

    first = writer.submit(hold)
    assert busy.wait(10)
    futures = [writer.submit(work) for work in works]
    assert not any(f.done() for f in futures)  # nothing answered before its commit
    meanwhile()
    release.set()
    first.result(10)
    return futures


def create(org_id: str, session_id: str, engine: Engine, name: str) -> Callable[[], Any]:
    call = WriteAhead(connector="fake", api_name=name, operation_type=OperationType.CREATE, payload={})
    return lambda: engine.recording.log_action(org_id, session_id, call)


def test_records_handed_over_together_share_one_commit(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    commits = commits_of(engine.store)
    futures = handed_together(engine, [create(org_id, session_id, engine, f"things.create#{i}") for i in range(5)])
    seqs = [f.result(10).action.seq for f in futures]
    assert seqs == [1, 2, 3, 4, 5]
    assert len(commits) == 2  # the first piece of work's, then one for the five
    shown = engine.recording.get_session(org_id, session_id)
    assert [a.status for a in shown.actions] == [ActionStatus.CLEARED] * 5


def test_a_blocked_record_in_a_group_is_that_records_answer_alone(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    engine.policies.add_policy(org_id, NewPolicy("no payouts", "BLOCK", api_name="payouts.*"))
    works = [create(org_id, session_id, engine, name) for name in ("things.create", "payouts.create", "things.create")]
    first, blocked, last = handed_together(engine, works)
    assert first.result(10).action.status is ActionStatus.CLEARED
    assert last.result(10).action.status is ActionStatus.CLEARED
    with pytest.raises(PolicyBlockedError):
        blocked.result(10)
    statuses = [a.status for a in engine.recording.get_session(org_id, session_id).actions]
    assert statuses == [ActionStatus.CLEARED, ActionStatus.FAILED, ActionStatus.CLEARED]  # the block is recorded


def test_a_record_refused_in_a_group_writes_nothing_and_the_others_are_kept(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    earlier = log(engine, org_id, session_id).action
    call = WriteAhead(connector="fake", api_name="things.create", operation_type=OperationType.CREATE, payload={})
    confirmation = Confirmation(earlier.action_id, {}, UndoConfig("fake-delete"))

    def refused() -> Any:  # an unknown before-state refuses the whole request, the confirmation it carries too
        return engine.recording.log_action(org_id, session_id, call, confirm=[confirmation], before_state="bst_nope")

    kept, refused_one = handed_together(engine, [create(org_id, session_id, engine, "things.create#2"), refused])
    assert kept.result(10).action.status is ActionStatus.CLEARED
    with pytest.raises(NotFoundError):
        refused_one.result(10)
    shown = engine.recording.get_session(org_id, session_id).actions
    assert [(a.action_id == earlier.action_id, a.status) for a in shown] == [
        (True, ActionStatus.CLEARED),  # not confirmed: the refused request wrote nothing
        (False, ActionStatus.CLEARED),
    ]


def failing_commits(store: Store, which: Callable[[int], bool], outage: bool = True) -> list[int]:
    """Make the commits of ``store`` for which ``which(n)`` is true fail (n: 1 for the next commit from now), as a
    lost disk or connection would (``outage``), or as a commit the database refuses; the commits counted, the
    failed ones too."""
    commits = commits_of(store)

    def fail(conn: Any) -> None:
        if which(len(commits)):
            if outage:
                raise sa.exc.OperationalError("COMMIT", {}, Exception("disk I/O error"))
            raise sa.exc.DatabaseError("COMMIT", {}, Exception("refused at commit"))

    sa.event.listen(store.engine, "commit", fail)
    return commits


def test_a_group_whose_commit_the_database_refuses_writes_each_of_its_records_alone(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    commits = failing_commits(engine.store, lambda n: n == 2, outage=False)  # the first is the busy writer's own
    futures = handed_together(engine, [create(org_id, session_id, engine, f"things.create#{i}") for i in range(3)])
    assert [f.result(10).action.seq for f in futures] == [1, 2, 3]
    assert len(commits) == 5  # the writer's own, the group's that failed, then one for each record
    assert len(engine.recording.get_session(org_id, session_id).actions) == 3


def test_a_group_whose_commit_is_lost_with_the_database_is_answered_unavailable_and_not_written_again(
    engine: Engine,
) -> None:
    org_id, session_id = an_organisation(engine)
    # Its outcome is unknown (the connection may go after the database committed): written again, the records
    # could be there twice. Each is answered as in any outage.
    commits = failing_commits(engine.store, lambda n: n == 2)
    futures = handed_together(engine, [create(org_id, session_id, engine, f"things.create#{i}") for i in range(3)])
    for future in futures:
        with pytest.raises(AgentReinUnavailableError):
            future.result(10)
    assert len(commits) == 2  # the writer's own and the group's: none written alone after it
    assert engine.recording.get_session(org_id, session_id).actions == []


def test_a_group_that_cannot_have_the_database_answers_each_record_unavailable_at_once(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    tries: list[int] = []

    def locked(conn: Any) -> None:  # as when another process holds the lock past the busy timeout
        tries.append(1)
        raise sa.exc.OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked"))

    def lock_out() -> None:
        sa.event.listen(engine.store.engine, "begin", locked)

    works = [create(org_id, session_id, engine, f"things.create#{i}") for i in range(3)]
    futures = handed_together(engine, works, meanwhile=lock_out)
    for future in futures:
        with pytest.raises(AgentReinUnavailableError, match="locked"):
            future.result(10)
    assert len(tries) == 1  # the group's: not each record alone after it, waiting as long again
    sa.event.remove(engine.store.engine, "begin", locked)
    assert engine.recording.get_session(org_id, session_id).actions == []


def test_records_whose_every_commit_fails_are_each_answered_with_the_failure_and_none_is_written(
    engine: Engine,
) -> None:
    org_id, session_id = an_organisation(engine)
    disk_lost = True
    failing_commits(engine.store, lambda n: n >= 2 and disk_lost)
    futures = handed_together(engine, [create(org_id, session_id, engine, f"things.create#{i}") for i in range(3)])
    for future in futures:
        with pytest.raises(AgentReinError):
            future.result(10)
    disk_lost = False
    assert engine.recording.get_session(org_id, session_id).actions == []


def test_a_confirmation_in_a_group_sees_the_record_written_before_it_in_the_same_group(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    recording = engine.recording
    call = WriteAhead(connector="fake", api_name="things.create", operation_type=OperationType.CREATE, payload={})
    logged: dict[str, str] = {}

    def record() -> None:
        logged["id"] = recording.log_action(org_id, session_id, call).action.action_id

    def confirm() -> Any:
        return recording.confirm_action(org_id, logged["id"], Confirmed({}, UndoConfig("fake-delete")))

    _, confirmed = handed_together(engine, [record, confirm])
    assert confirmed.result(10).status is ActionStatus.SUCCESS


def test_a_request_cancelled_while_its_record_waits_is_still_written_and_the_writer_goes_on(engine: Engine) -> None:
    org_id, session_id = an_organisation(engine)
    writer = engine.store.group_commit
    busy, release = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(10)

    async def client_goes_away() -> None:
        first = writer.submit(hold)
        assert busy.wait(10)
        request = asyncio.ensure_future(writer.run(create(org_id, session_id, engine, "things.create#1")))
        await asyncio.sleep(0)  # handed over
        request.cancel()  # as Litestar cancels the handler of a client that disconnected
        with pytest.raises(asyncio.CancelledError):
            await request
        release.set()
        first.result(10)

    asyncio.run(client_goes_away())
    later = writer.submit(create(org_id, session_id, engine, "things.create#2")).result(10)
    assert later.action.seq == 2  # the cancelled request's record was written first, and the writer goes on


def test_a_record_is_never_answered_when_sqlite_ends_the_groups_transaction_under_it(
    tmp_path: Path, clock: Clock
) -> None:
    engine = Engine(Store(f"sqlite:///{tmp_path / 'agentrein.db'}"), clock=clock)
    org_id, session_id = an_organisation(engine)

    def fill_the_disk() -> None:  # SQLITE_FULL: SQLite rolls the whole transaction back, the group's
        with engine.store.transaction() as tx:
            tx.conn.exec_driver_sql(f"PRAGMA max_page_count={tx.conn.exec_driver_sql('PRAGMA page_count').scalar()}")
            tx.conn.exec_driver_sql("CREATE TABLE filler (x TEXT)")
            for i in range(200):
                tx.conn.exec_driver_sql("INSERT INTO filler VALUES (?)", (f"{i}" * 4000,))

    try:
        kept, full = handed_together(engine, [create(org_id, session_id, engine, "things.create#1"), fill_the_disk])
        with pytest.raises(AgentReinError, match="full"):
            full.result(10)
        answered = kept.result(10)  # written alone again, after the group was lost
        stored = engine.recording.get_session(org_id, session_id).actions
        assert [a.action_id for a in stored] == [answered.action.action_id]
    finally:
        engine.store.close()


def test_a_record_that_loses_a_deadlock_inside_a_group_is_written_alone_once_the_group_commits(
    postgres_url: str, clock: Clock
) -> None:
    engine = Engine(Store(postgres_url), clock=clock)
    org_id, first = an_organisation(engine)
    second = engine.recording.new_session(org_id, "agent", "intent").session_id
    other = engine.store.engine.connect()  # another transaction: it holds the second session, then wants the first
    other_tx = other.begin()
    other.exec_driver_sql("SET deadlock_timeout = '30s'")  # so that the group's statement is the one PostgreSQL ends
    other.exec_driver_sql("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", (second,))
    other_done = threading.Event()

    def other_wants_the_first() -> None:
        other.exec_driver_sql("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", (first,))
        other_tx.commit()
        other_done.set()

    waiting = threading.Thread(target=other_wants_the_first)

    def other_waits_for_the_group() -> None:  # the group holds the first session's row now
        waiting.start()
        with engine.store.engine.connect() as look:
            while not look.exec_driver_sql(
                "SELECT 1 FROM pg_locks WHERE NOT granted AND pid = %s",
                (other.connection.dbapi_connection.info.backend_pid,),
            ).first():
                time.sleep(0.05)

    try:
        _, _, stuck = handed_together(
            engine,
            [
                create(org_id, first, engine, "things.create#1"),
                other_waits_for_the_group,
                create(org_id, second, engine, "things.create#2"),  # waits for the other: a deadlock
            ],
        )
        assert stuck.result(30).action.seq == 1  # undone in the group, then written alone
        assert other_done.wait(30)
        assert [a.api_name for a in engine.recording.get_session(org_id, second).actions] == ["things.create#2"]
    finally:
        waiting.join(30)
        other.close()
        engine.store.close()


def test_a_groups_commit_waits_for_locks_as_usual_though_its_records_give_way_after_a_moment(
    postgres_url: str, clock: Clock
) -> None:
    # A commit that announces a change takes PostgreSQL's one notification lock, which every other announcing
    # commit holds through its own flush: a group's commit given up after 200 ms answered every record 503.
    engine = Engine(Store(postgres_url), clock=clock)
    org_id, session_id = an_organisation(engine)
    in_force: dict[str, list[str]] = {"statement": [], "commit": []}

    def at_commit(conn: sa.Connection) -> None:
        if threading.current_thread().name == "agentrein-writer":
            in_force["commit"].append(conn.connection.dbapi_connection.execute("SHOW lock_timeout").fetchone()[0])

    def look() -> Any:
        with engine.store.transaction() as tx:
            in_force["statement"].append(tx.conn.exec_driver_sql("SHOW lock_timeout").scalar())
        return create(org_id, session_id, engine, "things.create#1")()

    sa.event.listen(engine.store.engine, "commit", at_commit)
    try:
        engine.store.group_commit.submit(look).result(30)
    finally:
        sa.event.remove(engine.store.engine, "commit", at_commit)
        engine.store.close()
    assert in_force == {"statement": ["200ms"], "commit": ["0"]}
