"""Group commit (DESIGN §6): one writer per process, to which the server's hot routes hand their database work,
so that records arriving together share one transaction and one commit.

Each piece of work is a use case run as it would run alone, in the writer's thread: its transactions are
savepoints of the group's one (:meth:`Store.shared_transaction`), so a record that is refused, blocked or fails
is undone alone and stays that record's answer alone. Every answer waits for the commit that holds it: nothing
is answered before it is durable. If the group's transaction fails as a whole (one piece of work broke it, or
the database refused the commit), none of it was written, and each piece of work runs again alone, in a
transaction of its own. If the database is out (unreachable, locked by another process, or gone during the
commit, whose outcome is then unknown), every piece is answered :class:`AgentReinUnavailableError` instead, as
for any outage: written again here, a commit that did land would hold each record twice.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from agentrein_core.database import lost_to_another_transaction
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError

T = TypeVar("T")
log = logging.getLogger("agentrein")

#: The most pieces of work one commit holds: enough to take in whatever arrived during the last commit,
#: few enough that the first of them is not kept waiting long for the last.
MOST_PER_COMMIT = 64
#: How long :meth:`GroupCommit.close` waits for the work handed over before it to be committed.
CLOSE_WAIT = 10.0

_Work = tuple[Callable[[], Any], "Future[Any]"]


class GroupCommit:
    """The one writer of a :class:`~agentrein_core.store.Store` in this process (started at the first piece of
    work handed to it, stopped by :meth:`close`); ``shared_transaction`` is the store's
    (:meth:`~agentrein_core.store.Store.shared_transaction`)."""

    def __init__(
        self, shared_transaction: Callable[[], AbstractContextManager[Callable[[], bool]]], most: int = MOST_PER_COMMIT
    ) -> None:
        self.shared_transaction = shared_transaction
        self.most = most
        self._waiting: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    async def run(self, work: Callable[[], T]) -> T:
        """Run ``work`` in the writer's group transaction; its result (or what it raised) once that commits. A
        request cancelled meanwhile (its client went away) does not cancel the work: handed over, it is written,
        as it was when each request had a thread of its own."""
        return await asyncio.shield(asyncio.wrap_future(self.submit(work)))

    def submit(self, work: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise AgentReinUnavailableError("the AgentRein server is stopping; try again")
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="agentrein-writer", daemon=True)
                self._thread.start()
            self._waiting.put((work, future))
        return future

    def close(self) -> None:
        """Commit what was handed over already, then stop (a piece of work handed over later is refused)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._waiting.put(None)
        if thread is not None:
            thread.join(CLOSE_WAIT)

    def _write(self) -> None:
        stopping = False
        while not stopping:
            first = self._waiting.get()
            if first is None:
                break
            group = [first]
            while len(group) < self.most:  # whatever arrived meanwhile joins, without waiting for more
                try:
                    more = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                group.append(more)
            try:
                self._commit(group)
            except BaseException as exc:  # never a request left waiting for its answer, nor a writer gone
                log.exception("the group commit of %d records failed", len(group))
                for _, future in group:
                    _settle(future, False, AgentReinError(f"the AgentRein store failed ({type(exc).__name__})"))

    def _commit(self, group: list[_Work]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            with self.shared_transaction() as still_open:
                for work, _ in group:
                    outcomes.append(_outcome(work))
                    if not still_open():  # what the group wrote so far is gone: none of it may be answered
                        raise _Ended("the database ended the group's transaction")
        except Exception as exc:  # the group's transaction or its commit failed: nothing of it was written
            if len(group) == 1:
                outcomes = [(False, exc)]
            elif (
                isinstance(exc, AgentReinUnavailableError)
                and not isinstance(exc, _Ended)
                and not lost_to_another_transaction(exc)  # a commit that lost is known not to have landed
            ):
                # The database could not be had (unreachable, locked, no connection free), so each alone would
                # wait as long again; or the commit's outcome is unknown (the connection went during it), so each
                # again might be written twice. Each is answered as in any outage.
                outcomes = [(False, exc)] * len(group)
            else:
                # Each runs again alone, so that what failed (one piece's error that broke the transaction, a
                # commit the database refused) fails that one alone.
                log.info("a group commit of %d records failed (%s); each is written alone", len(group), exc)
                outcomes = [_outcome(work) for work, _ in group]
        else:
            # A piece that lost a deadlock to another transaction (PostgreSQL ends one of the two) was undone
            # alone; it runs again, by itself, now that the group's rows are free.
            outcomes = [
                _outcome(work) if not ok and lost_to_another_transaction(value) else (ok, value)
                for (work, _), (ok, value) in zip(group, outcomes, strict=True)
            ]
        for (_, future), (ok, value) in zip(group, outcomes, strict=True):
            _settle(future, ok, value)


class _Ended(AgentReinUnavailableError):
    """The database ended the group's transaction under it (SQLite does, on a full disk): a piece of work did."""


def _settle(future: Future[Any], ok: bool, value: Any) -> None:
    """Answer ``future`` with ``value`` (a result when ``ok``, else an exception), unless it was answered."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _outcome(work: Callable[[], Any]) -> tuple[bool, Any]:
    """What ``work`` returned (True) or raised (False): its answer alone; a failure's savepoints are undone."""
    try:
        return True, work()
    except Exception as exc:
        return False, exc
