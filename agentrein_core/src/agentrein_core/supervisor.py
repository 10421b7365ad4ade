"""The supervisor: every background duty of the engine, and the one loop that advances rollbacks.

It owns every schedule: when each duty is due again, which of the store's change notifications wake it at
once, and how long it pauses when it found nothing to do. Its hosts only say what differs between them:

- the server's workers (:mod:`agentrein_server.workers`): the organisations' stored connector settings run
  the undos, rollback jobs of every organisation are claimed by several threads, intent checks, webhook
  deliveries and the ``agentrein_notify`` plugins have a thread each, and on PostgreSQL a listener turns
  other replicas' NOTIFYs into this process's wake-ups;
- embedded mode (:mod:`agentrein._embedded`): a daemon thread per duty, one organisation, the undos run through the
  clients the agent wrapped, so only the rollbacks of sessions this process can run are taken (several
  processes on one SQLite file never run each other's sessions' undos). It sleeps until a duty is due, so an
  idle process keeps no busy thread.

Duties:

- maintenance expires approvals at their ``timeoutAt`` (woken when one opens, and then sleeping until the
  next one ends), abandons sessions idle for 24 h and prunes what is past the retention
  (:meth:`~agentrein_core.engine.Engine.maintain`);
- rollbacks: running jobs are claimed (leases) and advanced through the host's
  :class:`~agentrein_core.rollback.UndoExecutor`; a job left by a killed process is resumed once its lease
  runs out;
- intent checks (:class:`~agentrein_core.verifier_plugins.IntentChecks`), webhook deliveries, events to the notify
  plugins.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from attrs import define, field, frozen

from agentrein_core.engine import Engine
from agentrein_core.errors import AgentReinError, UndoUnavailableError
from agentrein_core.model import Event, Rollback
from agentrein_core.rollback import UndoExecutor
from agentrein_core.rules import ROLLBACK_ENDED
from agentrein_core.store import Change
from agentrein_core.verifier_plugins import IntentChecks

log = logging.getLogger("agentrein")

#: The one loop that advances rollbacks (run by ``rollback_threads`` threads on the server).
ROLLBACKS = "rollbacks"
#: An approval is expired this long after its end, so that the clock the rules read has passed it too.
PAST_THE_END = 0.01
#: How long the listener waits before it reconnects to PostgreSQL after losing its connection.
RECONNECT_AFTER = 1.0
#: How long a rollback approval opened by the server's supervisor waits for a reviewer...
ROLLBACK_APPROVAL_TIMEOUT = timedelta(hours=24)
#: ...and one opened by embedded mode's (as long as an agent's call waits by default), unless the request
#: for the rollback said how long.
DEFAULT_APPROVAL_WAIT = timedelta(seconds=300)


def catch_up(engine: Engine) -> None:
    """What a supervisor would have done by now, once and in this thread, for a host that lives one command
    and runs none (the command line on a database): approvals past their time expired, idle sessions
    abandoned, what is past the retention pruned, so that nothing the command reads is stale."""
    engine.maintenance.maintain()


class Sender(Protocol):
    """Sends one due webhook delivery; ``False`` when none was due."""

    def send_one(self) -> bool: ...


@frozen
class Schedule:
    """How often duties look again by themselves, when nothing woke them."""

    #: Maintenance runs this often (and sooner when an approval's time ends first).
    maintenance_every: float
    #: A duty that found nothing to do looks again after this long.
    idle_poll: float
    #: How long rollback approvals opened by the supervisor wait for a reviewer.
    rollback_approval_timeout: timedelta
    #: Queued intent checks are looked for this often and then run together: every recorded call queues one,
    #: so a wake-up per check would put a verifier round beside every call (the agent never waits for them).
    checks_every: float


#: The server's: other replicas' work is seen within a second.
SERVER = Schedule(
    maintenance_every=1.0, idle_poll=0.5, rollback_approval_timeout=ROLLBACK_APPROVAL_TIMEOUT, checks_every=0.5
)
#: Embedded mode's: an idle agent's process wakes twice a minute; what this process changes wakes it at once.
EMBEDDED = Schedule(
    maintenance_every=30.0, idle_poll=30.0, rollback_approval_timeout=DEFAULT_APPROVAL_WAIT, checks_every=5.0
)


@frozen
class Duty:
    """One background duty: ``step`` does one round of it and returns how many seconds until it is due again
    (0: at once); a committed change among ``wakes_on`` makes it due at once."""

    name: str
    step: Callable[[], float]
    wakes_on: frozenset[Change] = frozenset()


@define
class _Thread:
    """The duties one thread runs, each when it is due or woken."""

    name: str
    duties: list[Duty]
    stopping: threading.Event
    pause_after_failure: float
    _woken: set[str] = field(factory=set)
    _wake: threading.Event = field(factory=threading.Event)
    _lock: threading.Lock = field(factory=threading.Lock)
    _thread: threading.Thread | None = None

    def observe(self, changes: frozenset[Change]) -> None:
        woken = {duty.name for duty in self.duties if duty.wakes_on & changes}
        if woken:
            self.wake(woken)

    def wake(self, names: set[str]) -> None:
        with self._lock:
            self._woken |= names
        self._wake.set()

    def start(self) -> None:
        named = "agentrein-supervisor" + (f"-{self.name}" if self.name != "supervisor" else "")
        self._thread = threading.Thread(target=self._run, name=named, daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        due = dict.fromkeys((duty.name for duty in self.duties), 0.0)
        while not self.stopping.is_set():
            self._wake.clear()  # before reading who was woken: a wake from now on ends the next wait
            with self._lock:
                woken, self._woken = self._woken, set()
            for duty in self.duties:
                if self.stopping.is_set():
                    return
                if duty.name in woken or due[duty.name] <= time.monotonic():
                    due[duty.name] = time.monotonic() + self._step(duty)
            self._wake.wait(max(0.0, min(due.values()) - time.monotonic()))

    def _step(self, duty: Duty) -> float:
        try:
            return duty.step()
        except Exception:
            log.exception("AgentRein's %s failed; it is tried again", duty.name)
            return self.pause_after_failure


class Supervisor:
    """Runs the engine's background duties for a host (the server's workers, or embedded mode).

    ``executor`` runs the undos. ``org_id``: only that organisation's rollbacks and checks. ``runs``: only the
    rollbacks of the sessions it accepts are taken (embedded mode's clients can undo only the sessions they
    wrapped); ``None`` claims any. ``rollback_threads``: threads advancing rollbacks (0: none), each other
    duty having its own; ``one_thread``: every duty in one thread instead. ``rollback_ended``: told of every
    rollback it finished (the server's metrics). ``listen``: on PostgreSQL, other processes' changes wake this
    one's observers."""

    def __init__(
        self,
        engine: Engine,
        executor: UndoExecutor,
        *,
        schedule: Schedule = SERVER,
        org_id: str | None = None,
        runs: Callable[[str], bool] | None = None,
        rollback_threads: int = 2,
        one_thread: bool = False,
        checks: IntentChecks | None = None,
        sender: Sender | None = None,
        notify: Callable[[Event], None] | None = None,
        rollback_ended: Callable[[Rollback], None] | None = None,
        listen: bool = False,
    ) -> None:
        self.engine = engine
        self.executor = executor
        self.schedule = schedule
        self.org_id = org_id
        self.runs = runs
        self.rollback_threads = rollback_threads
        self.one_thread = one_thread
        self.checks = checks
        self.sender = sender
        self.notify = notify
        self.rollback_ended = rollback_ended
        self.listen = listen
        self._stopping = threading.Event()
        self._threads: list[_Thread] = []
        self._lock = threading.Lock()
        #: Why the last round could not run each session's rollback here (embedded mode's waiting caller
        #: raises it), until a round runs it.
        self._unavailable: dict[str, AgentReinError] = {}
        self._maintain_at = 0.0  # at once
        self._checks_round = True  # the verifier's next look starts a round: it queues the checks wanted

    # the host's controls ------------------------------------------------------------------------------
    def start(self, *, background: bool = True) -> None:
        """Start the threads. ``background=False``: only the listener (a server process beside the one that
        runs the background work, whose long-polls still wake at once)."""
        duties = self._duties() if background else []
        rollbacks = [duty for duty in duties if duty.name == ROLLBACKS]
        others = [duty for duty in duties if duty.name != ROLLBACKS]
        pause = self.schedule.idle_poll
        if self.one_thread:
            groups = [("supervisor", duties)] if duties else []
        else:
            groups = [(f"rollback-{n}", rollbacks) for n in range(self.rollback_threads) if rollbacks]
            groups += [(duty.name, [duty]) for duty in others]
        if self.listen and self.engine.store.dialect == "postgresql":
            groups.append(("listener", [Duty("listener", self._listen)]))
        with self._lock:
            self._stopping.clear()
            self._threads = [_Thread(name, group, self._stopping, pause) for name, group in groups]
            for thread in self._threads:
                thread.start()
        self.engine.store.observe(self._observe)  # until stop(): a change wakes the duties it concerns

    def stop(self, wait: float = 10.0) -> None:
        """Stop every thread, waiting up to ``wait`` seconds for each (an inverse or a verifier call under way
        may take longer: it is then left to finish, and its job is taken again when its lease runs out)."""
        self.engine.store.unobserve(self._observe)
        with self._lock:
            self._stopping.set()
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(wait)

    def look_again(self, session_id: str | None = None) -> None:
        """The host can run more now (a client wrapped, a caller waiting for a session's rollback): the
        rollback loop looks at once, trying again ``session_id``'s rollback it could not run before."""
        with self._lock:
            if session_id is not None:
                self._unavailable.pop(session_id, None)
            threads = list(self._threads)
        for thread in threads:
            thread.wake({ROLLBACKS})

    def unavailable(self, session_id: str) -> AgentReinError | None:
        """Why the session's rollback could not go on here in the last round (no client here can run an undo,
        the database failed…), if it could not: the waiter raises it."""
        with self._lock:
            return self._unavailable.get(session_id)

    def _observe(self, changes: frozenset[Change]) -> None:
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.observe(changes)

    # the duties ---------------------------------------------------------------------------------------
    def _duties(self) -> list[Duty]:
        duties = [
            Duty("maintenance", self._maintain, frozenset({Change.APPROVAL})),
            Duty(ROLLBACKS, self._advance_rollbacks, frozenset({Change.ROLLBACK, Change.DECISION})),
        ]
        if self.checks is not None:
            duties.append(Duty("verifier", self._check_intents))
        if self.sender is not None:
            duties.append(Duty("webhooks", self._send_webhooks))
        if self.notify is not None:
            duties.append(Duty("notify", self._dispatch_events))
        return duties

    def _maintain(self) -> float:
        """Expire, abandon and prune every ``maintenance_every``, and at once when an approval's time is up;
        due again then, or at the next approval's end if that comes first (an approval opened wakes it)."""
        ends_in = self._next_approval_end()
        if ends_in <= 0 or time.monotonic() >= self._maintain_at:
            self.engine.maintenance.maintain()  # the gauges that count records are read by /metrics, when scraped
            self._maintain_at = time.monotonic() + self.schedule.maintenance_every
            ends_in = self._next_approval_end()
            if ends_in <= 0:  # still pending past its end (decided elsewhere meanwhile, or beyond this batch)
                ends_in = float("inf")  # left to the next maintenance, rather than run again at once
        return max(0.0, min(self._maintain_at - time.monotonic(), ends_in + PAST_THE_END))

    def _next_approval_end(self) -> float:
        """Seconds until the next pending approval ends (0 or less: it has), if before the next maintenance."""
        now = self.engine.clock()
        with self.engine.store.transaction(write=False) as tx:
            soonest = tx.approvals.due(now + timedelta(seconds=self.schedule.maintenance_every), limit=1)
        return (soonest[0].timeout_at - now).total_seconds() if soonest else float("inf")

    def _advance_rollbacks(self) -> float:
        """Advance the rollbacks due; due again at once while one was advanced, else after ``idle_poll``."""
        if self.runs is None:
            job = self.engine.rollbacks.run_next_rollback(self.executor, self.schedule.rollback_approval_timeout)
            if job is None:
                return self.schedule.idle_poll
            self._advanced(job)
            return 0.0
        for job in self.engine.rollbacks.rollbacks_to_run(self.org_id):
            if self.runs(job.session_id):
                self._advance_here(job)
        return self._until_a_lease_ends(self.runs)

    def _until_a_lease_ends(self, runs: Callable[[str], bool]) -> float:
        """Seconds until the lease of a running job of a session this host runs ends (a job handed back for
        a moment while a call's outcome is awaited, or held by a process that may have died), at most
        ``idle_poll``: nothing announces that a lease ran out."""
        now = self.engine.clock()
        with self.engine.store.transaction(write=False) as tx:
            running = tx.rollbacks.running(self.org_id)
        ends = [
            job.lease_until for job in running if job.lease_until and job.lease_until > now and runs(job.session_id)
        ]
        if not ends:
            return self.schedule.idle_poll
        return min(self.schedule.idle_poll, (min(ends) - now).total_seconds() + PAST_THE_END)

    def _advance_here(self, job: Rollback) -> None:
        """Advance one job of a session this host runs; one it cannot run is remembered, for its waiter."""
        try:
            advanced = self.engine.rollbacks.run_rollback(
                job.org_id, job.rollback_id, self.executor, self.schedule.rollback_approval_timeout
            )
        except AgentReinError as exc:
            with self._lock:
                self._unavailable[job.session_id] = exc
            if not isinstance(exc, UndoUnavailableError):
                log.warning("AgentRein could not go on rolling back session %s: %s", job.session_id, exc)
            return
        with self._lock:
            self._unavailable.pop(job.session_id, None)
        self._advanced(advanced)

    def _advanced(self, job: Rollback) -> None:
        if job.status in ROLLBACK_ENDED and self.rollback_ended is not None:
            self.rollback_ended(job)

    def _check_intents(self) -> float:
        """A round: queue the checks the calls made since the last round want, run the checks due one after
        the other; then look again after ``checks_every``, or when the next check to be asked again comes due
        if that is sooner."""
        checks = self.checks
        assert checks is not None
        every = self.schedule.checks_every
        queue, self._checks_round = self._checks_round, False
        if checks.run_one(self.org_id, queue=queue) is not None:
            return 0.0
        self._checks_round = True
        if self.org_id is None:
            return every
        with self.engine.store.transaction(write=False) as tx:
            due = tx.verifications.next_due(self.org_id)
        if due is None:
            return every
        return min(every, max(0.0, (due - self.engine.clock()).total_seconds()))

    def _send_webhooks(self) -> float:
        assert self.sender is not None
        return 0.0 if self.sender.send_one() else self.schedule.idle_poll

    def _dispatch_events(self) -> float:
        """Events to the notify plugins, in a thread of their own: a slow plugin holds up no webhook."""
        assert self.notify is not None
        return 0.0 if self.engine.outbox.dispatch_events(self.notify) > 0 else self.schedule.idle_poll

    def _listen(self) -> float:
        """Other replicas' changes reach this one's observers (its long-polls, its rollback threads); blocks
        until the supervisor stops, and reconnects after a lost connection."""
        try:
            self.engine.store.listen(self._stopping)
        except Exception:
            log.exception("listening for PostgreSQL notifications failed; reconnecting")
        return RECONNECT_AFTER
