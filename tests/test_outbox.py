"""The SDK's one local outbox: one file, one log of typed entries, and what older versions left read once and
emptied (the journal and outcomes files of the version before the outbox, and the working directory's
``./agentrein-journal.db`` of the versions before the state directory). These tests drive the outbox alone,
with a recorder that writes down what it is sent; test_journal.py and test_confirmations.py drive it through a
server."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from agentrein import _outbox
from agentrein._outbox import Outbox
from agentrein._outbox_file import (
    CallConfirmed,
    CallRecorded,
    LoggingFailed,
    OutcomeReported,
    RollbackRequested,
    SessionCompleted,
    journal_file,
)
from agentrein._port import Recorder
from agentrein_core.clock import utcnow
from agentrein_core.commands import ExecutedCall
from agentrein_core.converter import undo_from_wire
from agentrein_core.errors import AgentReinUnavailableError, NotFoundError
from agentrein_core.statuses import OperationType

ME, OTHER = "server a key 1", "server b key 2"
#: The former journal's ``entries`` table and its outcomes file's ``outcomes`` table, as they were created.
FORMER_ENTRIES = (
    "CREATE TABLE entries (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, body TEXT NOT NULL, "
    "problem TEXT)"
)
FORMER_OUTCOMES = (
    "CREATE TABLE outcomes (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL, owner TEXT NOT NULL, "
    "session_id TEXT NOT NULL, action_id TEXT NOT NULL, body TEXT NOT NULL)"
)
UNDO = {"type": "http-delete", "requireApproval": False, "url": "http://127.0.0.1:9/v1/orders/1"}
CALL = {
    "idempotencyKey": "agentrein-journal-1",
    "connector": "http",
    "apiName": "POST /v1/orders",
    "operationType": "CREATE",
    "payload": {"n": 1},
    "succeeded": True,
    "response": {"statusCode": 201},
    "undo": UNDO,
    "error": None,
}


def former_entry(session_id: str, **one: Any) -> str:
    """A former journal entry's body: every one of its six fields written, one of them set."""
    fields = dict.fromkeys(("call", "outcome", "opened", "completedAt", "rollback", "loggingFailure"))
    return json.dumps({"sessionId": session_id, **fields, **one})


#: One entry of each kind the former journal held, in the order they were written.
FORMER_JOURNAL = [
    former_entry(
        "ses_new",
        opened={"agentId": "billing", "intent": "orders", "sandbox": False, "openedAt": "2026-01-01T00:00:00+00:00"},
    ),
    former_entry("ses_new", call=CALL),
    former_entry(
        "ses_old", outcome={"actionId": "act_2", "succeeded": False, "response": None, "undo": None, "error": "boom"}
    ),
    former_entry("ses_new", completedAt="2026-01-01T00:01:00+00:00"),
    former_entry("ses_old", rollback={"trigger": "rollback_session()", "approvalTimeoutMs": 5000}),
    former_entry("ses_old", loggingFailure={"reason": "action logging failed", "connector": "http"}),
]
FORMER_CONFIRMATION = json.dumps(
    {
        "sessionId": "ses_old",
        "actionId": "act_1",
        "response": {"statusCode": 201},
        "undo": UNDO,
        "row": None,
        "since": 0.0,
    }
)


class Recording:
    """A recorder that writes down what it is sent, in order."""

    identity = ME

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.sent.append((name, *args, *sorted(kwargs.items())))

        return record


def leave_former_files(journal: Path) -> None:
    """What the version before the outbox left at ``journal``: its entries of each kind and a confirmation
    (beside another server's and key's, which stay there)."""
    with closing(sqlite3.connect(journal)) as db, db:
        db.execute(FORMER_ENTRIES)
        db.executemany("INSERT INTO entries (backend, body) VALUES (?, ?)", [(ME, b) for b in FORMER_JOURNAL])
        db.execute("INSERT INTO entries (backend, body) VALUES (?, ?)", (OTHER, FORMER_JOURNAL[0]))
    outcomes = journal.with_name(f"{journal.stem}-outcomes{journal.suffix}")
    with closing(sqlite3.connect(outcomes)) as db, db:
        db.execute(FORMER_OUTCOMES)
        insert = (
            "INSERT INTO outcomes (backend, owner, session_id, action_id, body) VALUES (?, 'x', 'ses_old', 'act_1', ?)"
        )
        db.executemany(insert, [(ME, FORMER_CONFIRMATION), (OTHER, FORMER_CONFIRMATION)])


def left_there(journal: Path) -> list[tuple[str, ...]]:
    """The backends whose records are still in the former files at ``journal``."""
    outcomes = journal.with_name(f"{journal.stem}-outcomes{journal.suffix}")
    with closing(sqlite3.connect(journal)) as entries, closing(sqlite3.connect(outcomes)) as confirmations:
        return [
            *entries.execute("SELECT backend FROM entries").fetchall(),
            *confirmations.execute("SELECT backend FROM outcomes").fetchall(),
        ]


def sent_by(path: Path | None) -> tuple[list[CallConfirmed], list[tuple[Any, ...]]]:
    """What a new outbox at ``path`` sends when flushed: the confirmations (as a served mode's ``PATCH``
    would), and what it sends a recorder."""
    confirmed: list[CallConfirmed] = []
    recorder = Recording()
    outbox = Outbox(ME, path, recorder=cast(Recorder, recorder), send=confirmed.append)
    outbox.flush()
    outbox.close()
    return confirmed, recorder.sent


def assert_sent_in_order(confirmed: list[CallConfirmed], replayed: list[tuple[Any, ...]]) -> None:
    assert confirmed == [CallConfirmed("ses_old", "act_1", {"statusCode": 201}, undo_from_wire(UNDO))]
    assert [(name, session_id) for name, session_id, *_ in replayed] == [
        ("new_session", "billing"),
        ("record_executed_action", "ses_new"),
        ("fail_action", "ses_old"),
        ("complete_session", "ses_new"),
        ("request_rollback", "ses_old"),
        ("follow_rollback", "ses_old"),
        ("fail_session", "ses_old"),
        ("follow_rollback", "ses_old"),
    ]
    assert replayed[0][-1] == ("session_id", "ses_new")
    assert replayed[1][2] == ExecutedCall(
        "agentrein-journal-1",
        "http",
        "POST /v1/orders",
        OperationType.CREATE,
        {"n": 1},
        True,
        {"statusCode": 201},
        undo_from_wire(UNDO),
    )
    assert replayed[4][2:] == (("approval_timeout", timedelta(seconds=5)), ("trigger", "rollback_session()"))


def test_the_journal_and_outcomes_files_of_the_version_before_the_outbox_are_read_once_and_emptied(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.db"
    leave_former_files(journal)
    assert_sent_in_order(*sent_by(journal))
    assert left_there(journal) == [(OTHER,), (OTHER,)]
    assert sent_by(journal) == ([], [])  # read once


def test_the_files_an_older_version_left_in_the_working_directory_are_read_once_and_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTREIN_JOURNAL", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    former = tmp_path / "agentrein-journal.db"
    leave_former_files(former)
    assert_sent_in_order(*sent_by(None))
    assert left_there(former) == [(OTHER,), (OTHER,)]
    assert sent_by(None) == ([], [])  # read once
    assert journal_file(ME).exists()


def test_every_kind_of_entry_is_kept_in_one_file_and_sent_by_one_replay_in_the_order_it_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "FLUSH_DELAY", 600.0)  # the background thread sends none of them first
    path = tmp_path / "outbox.db"
    recorder = Recording()
    outbox = Outbox(ME, path, recorder=cast(Recorder, recorder), send=lambda c: recorder.sent.append(("PATCH", c)))
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    outbox.append(OutcomeReported("ses_1", "act_2", False, error="boom"))
    outbox.keep("ses_1", "act_3", {"statusCode": 201}, None)
    outbox.append(SessionCompleted("ses_2", utcnow()))
    outbox.append(RollbackRequested("ses_1", "rollback_session()", 1000))
    outbox.keep("ses_1", "act_4", {"statusCode": 201}, None)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["outbox.db"]
    assert outbox.replay() == 5
    sent = [name if name != "PATCH" else f"PATCH {confirmed.action_id}" for name, confirmed, *_ in recorder.sent]
    assert sent == [
        "PATCH act_1",
        "fail_action",
        "PATCH act_3",
        "complete_session",
        "request_rollback",
        "follow_rollback",
    ]
    # The confirmation kept after the last journaled entry is left to ride with the session's next record.
    carried = outbox.take("ses_1")
    assert [c.action_id for c in carried] == ["act_4"]
    outbox.delivered(carried)
    outbox.close()


def test_an_entry_the_server_refuses_is_kept_aside_and_the_next_ones_are_sent(tmp_path: Path) -> None:
    class Refusing(Recording):
        def record_executed_action(self, session_id: str, call: ExecutedCall) -> None:
            raise NotFoundError("session", session_id)

    recorder = Refusing()
    outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, recorder))
    call = ExecutedCall("agentrein-journal-2", "http", "POST /v1/orders", OperationType.CREATE, {}, succeeded=True)
    outbox.append(CallRecorded("ses_gone", call))
    outbox.append(SessionCompleted("ses_1", utcnow()))
    assert outbox.replay() == 1
    assert [name for name, *_ in recorder.sent] == ["complete_session"]
    assert not outbox.has_entries()
    outbox.close()


def test_a_confirmation_is_written_while_another_clients_replay_of_the_same_file_waits_on_the_server(
    tmp_path: Path,
) -> None:
    path = tmp_path / "outbox.db"
    arrived, release = threading.Event(), threading.Event()

    class Slow(Recording):
        def complete_session(self, session_id: str) -> None:
            arrived.set()
            release.wait()

    replaying = Outbox(ME, path, recorder=cast(Recorder, Slow()))
    replaying.append(SessionCompleted("ses_1", utcnow()))
    replay = threading.Thread(target=replaying.replay)
    replay.start()
    assert arrived.wait(timeout=30)  # the replay is under way, waiting on the server
    other = Outbox(ME, path, recorder=cast(Recorder, Recording()), send=lambda confirmed: None)
    other.keep("ses_2", "act_1", {"statusCode": 201}, None)  # does not wait for the replay
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT kind, session_id FROM outbox ORDER BY id").fetchall() == [
            ("SessionCompleted", "ses_1"),
            ("CallConfirmed", "ses_2"),
        ]
    release.set()
    replay.join(timeout=30)
    assert not replaying.has_entries()
    other.close()
    replaying.close()


def test_a_replay_before_a_record_sends_nothing_when_nothing_was_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "FLUSH_DELAY", 600.0)
    confirmed: list[CallConfirmed] = []
    outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, Recording()), send=confirmed.append)
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    assert outbox.replay() == 0
    assert confirmed == []  # it rides with the session's next record
    assert outbox.flush() == 1  # any other request sends it first
    assert [c.action_id for c in confirmed] == ["act_1"]
    outbox.close()


def test_a_request_waits_for_a_confirmation_the_outbox_thread_took_to_send_after_the_request_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rollback requested from another thread must find the call it follows confirmed. Its flush had looked for
    # confirmations in flight (none yet), then the outbox's own thread took the one waiting and began to send it,
    # then the flush found nothing waiting and returned: the rollback overtook the confirmation (seen in CI as
    # "the session has no SUCCESS action to roll back").
    looked, sending, release = threading.Event(), threading.Event(), threading.Event()
    events: list[str] = []

    def send(confirmed: CallConfirmed) -> None:
        sending.set()
        release.wait(timeout=30)
        events.append(f"sent {confirmed.action_id}")

    outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, Recording()), send=send)
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    looking = outbox._wait_for_carried

    def look_then_let_the_thread_take_it(before: float) -> None:
        looking(before)
        if threading.current_thread().name == "request":
            looked.set()
            sending.wait(timeout=1)  # the thread's chance to take it right after the look (none, once fixed)

    monkeypatch.setattr(outbox, "_wait_for_carried", look_then_let_the_thread_take_it)
    request = threading.Thread(target=lambda: events.append(f"flushed {outbox.flush()}"), name="request")
    request.start()
    assert looked.wait(timeout=30)
    background = threading.Thread(target=outbox.flush)  # as the outbox's thread does
    background.start()
    request.join(timeout=0.3)  # time enough to return, had it not waited for the sending
    release.set()
    for thread in (background, request):
        thread.join(timeout=30)
    # Sent once, by either flush, and before the request's flush returned.
    assert events in (["sent act_1", "flushed 0"], ["sent act_1", "flushed 1"])
    outbox.close()


def test_a_request_waits_for_a_confirmation_another_threads_record_took_to_carry_after_the_request_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same race with a record instead of the outbox's thread: the session's next call, in another thread,
    # takes the success to carry it in its write-ahead record right after the flush looked for those in flight.
    sent: list[str] = []
    outbox = Outbox(
        ME, tmp_path / "outbox.db", recorder=cast(Recorder, Recording()), send=lambda c: sent.append(c.action_id)
    )
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    looking = outbox._wait_for_carried
    looked, taken = threading.Event(), threading.Event()

    def look_then_let_a_record_take_it(before: float) -> None:
        looking(before)
        if threading.current_thread().name == "request":
            looked.set()
            taken.wait(timeout=1)  # the record's chance to take it right after the look (none, once fixed)

    monkeypatch.setattr(outbox, "_wait_for_carried", look_then_let_a_record_take_it)
    returned = threading.Event()
    request = threading.Thread(target=lambda: (outbox.flush(), returned.set()), name="request")  # a rollback's
    request.start()
    assert looked.wait(timeout=30)
    carried = outbox.take("ses_1")  # the record's
    taken.set()
    returned_while_carried = bool(carried) and returned.wait(timeout=1)
    outbox.delivered(carried)
    request.join(timeout=30)
    outbox.close()
    assert not returned_while_carried  # the rollback would have gone out before the success it follows
    assert sorted([*sent, *(c.action_id for c in carried)]) == ["act_1"]  # sent once, by one or the other


def test_a_carried_confirmation_refused_and_not_settled_is_kept_aside_and_a_settled_one_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "FLUSH_DELAY", 600.0)
    path = tmp_path / "outbox.db"
    sent: list[CallConfirmed] = []
    outbox = Outbox(ME, path, recorder=cast(Recorder, Recording()), send=sent.append)
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    outbox.keep("ses_1", "act_2", {"statusCode": 201}, None)
    carried = outbox.take("ses_1")  # carried with a write-ahead record, whose answer refused act_1 only
    outbox.delivered(carried, refused={"act_1": "action act_1 is FAILED; it cannot become SUCCESS"})
    outbox.close()
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT kind, problem FROM outbox").fetchall()
    assert rows == [("CallConfirmed", "action act_1 is FAILED; it cannot become SUCCESS")]
    assert sent == []


def test_a_confirmation_agentrein_refuses_is_kept_aside_in_the_file_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "outbox.db"

    def refuse(confirmed: CallConfirmed) -> None:
        raise NotFoundError("action", confirmed.action_id)

    outbox = Outbox(ME, path, recorder=cast(Recorder, Recording()), send=refuse)
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    assert outbox.flush() == 0
    outbox.close()
    with closing(sqlite3.connect(path)) as db:
        ((kind, problem),) = db.execute("SELECT kind, problem FROM outbox").fetchall()
    assert kind == "CallConfirmed" and "act_1" in problem
    sent: list[CallConfirmed] = []
    Outbox(ME, path, recorder=cast(Recorder, Recording()), send=sent.append).close()  # the next process
    assert sent == []  # not sent again


def test_a_request_made_while_an_entry_is_sent_does_not_send_the_outbox_again(tmp_path: Path) -> None:
    class Flushing(Recording):
        """As a served mode does: each of its requests first flushes the outbox."""

        outbox: Outbox

        def complete_session(self, session_id: str) -> None:
            self.sent.append(("complete_session", session_id, self.outbox.flush()))

    recorder = Flushing()
    recorder.outbox = outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, recorder))
    outbox.append(SessionCompleted("ses_1", utcnow()))
    outbox.append(SessionCompleted("ses_2", utcnow()))
    assert outbox.replay() == 2
    assert recorder.sent == [("complete_session", "ses_1", 0), ("complete_session", "ses_2", 0)]
    outbox.close()


def test_what_was_journaled_reaches_agentrein_once_it_is_back_with_no_further_call_of_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "RETRY_DELAY", 0.05)
    back, arrived = threading.Event(), threading.Event()

    class ComingBack(Recording):
        def complete_session(self, session_id: str) -> None:
            if not back.is_set():
                raise AgentReinUnavailableError("connection refused")
            self.sent.append(("complete_session", session_id))
            arrived.set()

    recorder = ComingBack()
    outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, recorder))
    outbox.append(SessionCompleted("ses_1", utcnow()))
    with pytest.raises(AgentReinUnavailableError):
        outbox.replay()  # the agent's own try, while AgentRein is away
    back.set()
    assert arrived.wait(timeout=30)  # sent by the outbox's thread: the agent made no call
    assert outbox.flush() == 0  # once the thread's send is through (one sender at a time), nothing is left
    assert recorder.sent == [("complete_session", "ses_1")]
    assert not outbox.has_entries()
    outbox.close()


def test_the_outbox_thread_tries_again_less_and_less_often_when_what_it_sends_keeps_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_outbox, "RETRY_DELAY", 0.2)
    tries: list[float] = []
    enough = threading.Event()

    class Broken(Recording):
        def complete_session(self, session_id: str) -> None:
            tries.append(time.monotonic())
            if len(tries) == 4:
                enough.set()
            raise ValueError("an answer that is not JSON")  # not AgentRein's named error: a bug, tried again

    outbox = Outbox(ME, tmp_path / "outbox.db", recorder=cast(Recorder, Broken()))
    outbox.append(SessionCompleted("ses_1", utcnow()))
    assert enough.wait(timeout=60)
    outbox.close()
    pauses = [later - earlier for earlier, later in itertools.pairwise(tries)]
    assert [pause >= 0.2 * 2**i - 0.01 for i, pause in enumerate(pauses[:3])] == [True] * 3  # 0.2, 0.4, 0.8 s


def test_a_journaled_rollback_is_not_sent_before_a_confirmation_written_before_it_that_a_record_carries(
    tmp_path: Path,
) -> None:
    recorder = Recording()
    outbox = Outbox(
        ME,
        tmp_path / "outbox.db",
        recorder=cast(Recorder, recorder),
        send=lambda c: recorder.sent.append(("PATCH", c.action_id)),
    )
    outbox.keep("ses_1", "act_1", {"statusCode": 201}, None)
    carried = outbox.take("ses_1")  # on its way with a write-ahead record, in another thread
    outbox.append(LoggingFailed("ses_1", "action logging failed", "http"))
    replay = threading.Thread(target=outbox.replay)
    replay.start()
    time.sleep(0.2)  # the replay, if it did not wait for the record, would have sent the rollback by now
    outbox.put_back(carried)  # the record failed: the confirmation is sent in its turn
    replay.join(timeout=30)
    assert [name for name, *_ in recorder.sent] == ["PATCH", "fail_session", "follow_rollback"]
    outbox.close()
