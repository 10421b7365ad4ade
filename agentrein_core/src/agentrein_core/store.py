"""Persistence: one :class:`Store` per database, and :class:`Tx`, the unit of work every use case runs in.

Every state change is written with :meth:`Tx.replace`, an ``UPDATE … WHERE <key> AND <expected statuses>``:
if a concurrent writer changed the record first, no row matches and the caller learns it lost the race
(compare-and-set), so two decisions on one approval or two rollbacks of one session cannot both win.

SQLite (the default, a file beside the caller) runs in WAL mode, and write transactions take the write lock
up front (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing halfway. PostgreSQL is reached
through psycopg 3 and is the path for several processes or machines.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from attrs import frozen
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError

from agentrein_core import rules, schema, statements
from agentrein_core.converter import from_columns, from_row, to_row
from agentrein_core.database import alembic_config, create_db_engine, is_outage, resolve_database_url
from agentrein_core.errors import AgentReinError, AgentReinUnavailableError, InvalidTransitionError, ValidationError
from agentrein_core.listings import Listings
from agentrein_core.migrations import HEAD
from agentrein_core.model import (
    Action,
    ApiKey,
    Approval,
    ConnectorConfig,
    Delivery,
    Event,
    Organisation,
    OrganisationSettings,
    Policy,
    Rollback,
    Session,
    User,
    Verification,
    Webhook,
)
from agentrein_core.prepared import Prepared
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DeliveryStatus,
    Plan,
    RollbackStatus,
    SessionStatus,
    VerificationOutcome,
)

T = TypeVar("T")


#: Records written whole over their row, keyed by these columns (:meth:`Tx.upsert`).
_UPSERTED: dict[type[Any], tuple[sa.Table, tuple[str, ...]]] = {
    ConnectorConfig: (schema.connector_configs, ("org_id", "connector")),
    OrganisationSettings: (schema.organisation_settings, ("org_id",)),
}
#: The PostgreSQL channel on which committed changes are announced (a :class:`Change` each), so that every
#: replica's long-polls and workers wake at once.
EVENTS_CHANNEL = "agentrein_events"
_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")
_SCHEMA_VERSION = sa.text("SELECT version_num FROM alembic_version")

log = logging.getLogger("agentrein")


class Change(StrEnum):
    """What a committed transaction tells the observers of its store (:meth:`Store.observe`)."""

    #: An approval was decided (or expired): long-polls waiting on it look again.
    DECISION = "decision"
    #: A rollback started, resumed, paused or ended: rollback workers and waiters look again.
    ROLLBACK = "rollback"
    #: An intent check was queued.
    CHECK = "check"
    #: An approval was opened: whoever expires approvals looks at when it ends.
    APPROVAL = "approval"


Observer = Callable[[frozenset[Change]], None]
_CHANGES = frozenset(c.value for c in Change)


_S, _A = schema.sessions, schema.actions


def _due(now: datetime) -> tuple[sa.ColumnElement[bool], ...]:
    """A rollback job a worker may take now: running, and nobody holds it (or the holder's lease ran out)."""
    t = schema.rollbacks
    return t.c.status == RollbackStatus.RUNNING, sa.or_(t.c.lease_until.is_(None), t.c.lease_until < now)


@frozen
class SeqTaken:
    """What taking a seq learns: the seq, the session's agent, and its organisation's policy version and plan."""

    seq: int
    agent_id: str
    policy_version: int
    plan: Plan


class Store:
    """A database holding AgentRein's records. ``Store(url)`` connects and brings the schema up to date."""

    def __init__(self, url: str | None = None, *, migrate: bool = True) -> None:
        self.url = resolve_database_url(url)
        self.engine = create_db_engine(self.url)
        # Made once: an engine whose connections take SQLite's write lock when their transaction begins.
        self._writer = self.engine.execution_options(write=True)
        self.dialect = self.engine.dialect.name
        self._sqlite_writers = threading.RLock()
        self._held: tuple[int, Connection] | None = None  # (pid, connection): see _sqlite_writer
        self._observers: list[Observer] = []
        #: Whether :meth:`listen` runs, so that other processes' changes reach this one's observers at once.
        self.listening = False
        if migrate:
            self.upgrade()

    def upgrade(self) -> None:
        """Apply every Alembic migration not yet applied (``agentrein db upgrade`` does the same)."""
        if self.schema_version() == HEAD:
            return
        from alembic import command  # only a database behind the code pays for importing the migrator

        config = alembic_config(self.url)
        with self._connect(write=True) as conn, conn.begin():
            if self.dialect == "postgresql":
                # One migrator at a time when several processes start together.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(7346121)"))
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def schema_version(self) -> str | None:
        """The Alembic revision the database is at (``None``: not migrated yet)."""
        with self._connect(write=False) as conn:
            try:
                return conn.execute(_SCHEMA_VERSION).scalar()
            except (sa.exc.OperationalError, sa.exc.ProgrammingError):
                return None  # no alembic_version table: an empty database

    def close(self) -> None:
        with self._sqlite_writers:
            if self._held is not None and self._held[0] == os.getpid():
                self._release(self._held[1])
            self._held = None
        self.engine.dispose()

    def observe(self, observer: Observer) -> None:
        """Call ``observer`` with the changes of every transaction committed through this store, and (once
        :meth:`listen` runs) of those other processes commit on the same PostgreSQL database."""
        self._observers.append(observer)

    def changed(self, changes: frozenset[Change]) -> None:
        """Tell the observers; one that fails is logged, and the others are told all the same."""
        if not changes:
            return
        for observer in self._observers:
            try:
                observer(changes)
            except Exception:
                log.exception("an observer of the store failed on %s", sorted(changes))

    def listen(self, stop: threading.Event) -> None:
        """PostgreSQL only: pass the changes other processes announce on to this store's observers, until
        ``stop`` is set. Blocks; run it in a thread of its own. Connection errors propagate (the caller
        reconnects)."""
        import psycopg
        from psycopg import sql

        dsn = sa.engine.make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(EVENTS_CHANNEL)))
            self.listening = True
            try:
                while not stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        if note.payload in _CHANGES:
                            self.changed(frozenset({Change(note.payload)}))
            finally:
                self.listening = False

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        try:
            if write and self.dialect == "sqlite":
                with self._sqlite_writer() as conn:
                    yield conn
            else:
                with (self._writer if write else self.engine).connect() as conn:
                    yield conn
        except OperationalError as exc:
            if not is_outage(exc):
                raise  # the database answered, and failed: an error of AgentRein's, not an outage
            # Unreachable, locked past the busy timeout, out of disk...: the store cannot serve us now.
            raise AgentReinUnavailableError(f"the AgentRein database is unavailable: {exc.orig}") from exc
        except sa.exc.TimeoutError as exc:
            raise AgentReinUnavailableError(f"no database connection free in time ({exc})") from exc

    @contextmanager
    def _sqlite_writer(self) -> Iterator[Connection]:
        """SQLite has one writer at a time. Writers of this process queue on a lock, which hands over at once,
        rather than in SQLite's busy handler, which sleeps (up to 100 ms) between looks at the file lock; and
        they share one connection, kept open, so a write pays for no pool checkout and return. A connection
        a failed write leaves behind, or one a parent process opened before a fork, is not reused."""
        with self._sqlite_writers:
            held = self._held
            if held is not None and (held[0] != os.getpid() or held[1].closed):
                held = None
            if held is None or held[1].in_transaction():  # none yet, or a write inside a write: its own
                conn = self._writer.connect()
                if held is None:
                    self._held = (os.getpid(), conn)
            else:
                conn = held[1]
            try:
                yield conn
            except BaseException:
                self._release(conn)
                raise
            if self._held is None or self._held[1] is not conn:
                conn.close()

    def _release(self, conn: Connection) -> None:
        if self._held is not None and self._held[1] is conn:
            self._held = None
        conn.close()

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Tx]:
        """One unit of work: everything inside commits together or not at all. A write that a concurrent one
        made impossible is :class:`InvalidTransitionError`; a value the database cannot hold (PostgreSQL
        refuses NUL characters, say) is :class:`ValidationError`; either way nothing is written. A database
        that cannot serve now (unreachable, locked, full) is :class:`AgentReinUnavailableError`; any other
        database error is :class:`AgentReinError` (500): the store failed."""
        try:
            with self._connect(write) as conn, conn.begin():
                tx = Tx(conn, self.dialect)
                yield tx
        except IntegrityError as exc:
            raise InvalidTransitionError(
                f"a concurrent change conflicts with this one; try again ({exc.orig})"
            ) from exc
        except DataError as exc:
            raise ValidationError("request", f"a value the database cannot store ({exc.orig})") from exc
        except DBAPIError as exc:
            # Named, so a caller can tell AgentRein's failure from its own; the database's words stay in the
            # cause (a traceback, the server's log), for they may quote what was stored.
            raise AgentReinError(f"the AgentRein database failed ({type(exc.orig).__name__})") from exc
        self.changed(frozenset(tx.changes))  # committed: only now may anyone act on it


class Tx(Listings):
    """Reads and writes inside one transaction. Every read is scoped to an organisation by its caller."""

    def __init__(self, conn: Connection, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect
        #: What this transaction announces when it commits (:meth:`announce`).
        self.changes: set[Change] = set()

    # generic ------------------------------------------------------------------------------------------
    def insert(self, record: Any, **extra: Any) -> None:
        statements.INSERT[type(record)].run(self.conn, {**to_row(record), **extra})

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the transaction that can fail alone: its writes are undone, the rest's are kept (and
        so is what it announced: undone too)."""
        announced = set(self.changes)
        try:
            with self.conn.begin_nested():
                yield
        except BaseException:
            self.changes = announced
            raise

    def insert_once(self, record: Any, **extra: Any) -> bool:
        """Insert ``record`` unless a unique key says it is there already (False then; nothing written)."""
        try:
            with self.conn.begin_nested():
                self.insert(record, **extra)
        except IntegrityError:
            return False
        return True

    def replace(self, record: T, **expected: Any) -> bool:
        """Write ``record`` over its row if the row still has the ``expected`` column values."""
        table, key = statements.TABLES[type(record)]
        row = to_row(record)
        shape, params = statements.guard_params(row[key], row, expected)
        return bool(statements.guarded_update(table, tuple(row), shape, returning=False).run(self.conn, params))

    def _one(self, cls: type[T], key: str, org_id: str | None = None, lock: bool = False) -> T | None:
        """The ``cls`` record with id ``key`` in organisation ``org_id``; ``lock`` holds its row (PostgreSQL)."""
        if "\x00" in key:
            return None  # no id holds one (and PostgreSQL cannot even compare it)
        stmt = (statements.BY_ID_LOCKED if lock and self.dialect == "postgresql" else statements.BY_ID)[cls]
        row = stmt.run_first(self.conn, {"key": key, "org": org_id})
        return from_columns(row, cls) if row is not None else None

    def _all(self, cls: type[T], stmt: Any, params: dict[str, Any] | None = None) -> list[T]:
        return [from_row(row, cls) for row in self.conn.execute(stmt, params)]

    def _prepared(self, cls: type[T], stmt: Prepared, params: dict[str, Any]) -> list[T]:
        return [from_columns(row, cls) for row in stmt.run(self.conn, params)]

    def announce(self, change: Change) -> None:
        """Tell the store's observers of ``change`` once this transaction commits (and, on PostgreSQL, other
        processes listening: NOTIFY is delivered on commit too). Nothing is told if it rolls back."""
        if change in self.changes:
            return
        self.changes.add(change)
        if self.dialect == "postgresql":
            self.conn.execute(_NOTIFY, {"channel": EVENTS_CHANNEL, "payload": change.value})

    # organisations ------------------------------------------------------------------------------------
    def organisations(self) -> list[Organisation]:
        t = schema.organisations
        return self._all(Organisation, sa.select(t).order_by(t.c.created_at, t.c.name))

    # api keys -----------------------------------------------------------------------------------------
    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        t = schema.api_keys
        row = self.conn.execute(sa.select(t).where(t.c.key_hash == key_hash)).first()
        return from_row(row, ApiKey) if row is not None else None

    def api_key(self, org_id: str, key_id: str) -> ApiKey | None:
        t = schema.api_keys
        row = self.conn.execute(sa.select(t).where(t.c.key_id == key_id, t.c.org_id == org_id)).first()
        return from_row(row, ApiKey) if row is not None else None

    def api_keys_of(self, org_id: str) -> list[ApiKey]:
        t = schema.api_keys
        return self._all(ApiKey, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.created_at))

    # dashboard users ----------------------------------------------------------------------------------
    def user(self, org_id: str, user_id: str) -> User | None:
        return self._one(User, user_id, org_id)

    def user_by_email(self, email: str) -> User | None:
        t = schema.users
        row = self.conn.execute(sa.select(t).where(t.c.email == email)).first()
        return from_row(row, User) if row is not None else None

    def users_of(self, org_id: str) -> list[User]:
        t = schema.users
        return self._all(User, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.email))

    def delete_user(self, org_id: str, user_id: str) -> bool:
        t = schema.users
        return self.conn.execute(t.delete().where(t.c.user_id == user_id, t.c.org_id == org_id)).rowcount == 1

    # connector configurations -------------------------------------------------------------------------
    def connector_config(self, org_id: str, connector: str) -> ConnectorConfig | None:
        t = schema.connector_configs
        row = self.conn.execute(sa.select(t).where(t.c.org_id == org_id, t.c.connector == connector)).first()
        return from_row(row, ConnectorConfig) if row is not None else None

    def connector_configs(self, org_id: str) -> list[ConnectorConfig]:
        t = schema.connector_configs
        return self._all(ConnectorConfig, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.connector))

    def upsert(self, record: Any) -> None:
        """Write ``record`` over its row, or insert it (if another request inserted it meanwhile, ours is the
        newer and overwrites it)."""
        table, keys = _UPSERTED[type(record)]
        row = to_row(record)
        update = table.update().where(*(table.c[k] == row[k] for k in keys)).values(**row)
        if self.conn.execute(update).rowcount == 0:
            try:
                with self.conn.begin_nested():
                    self.conn.execute(table.insert(), row)
            except IntegrityError:
                self.conn.execute(update)

    # organisation settings ----------------------------------------------------------------------------
    def settings(self, org_id: str) -> OrganisationSettings | None:
        t = schema.organisation_settings
        row = self.conn.execute(sa.select(t).where(t.c.org_id == org_id)).first()
        return from_row(row, OrganisationSettings) if row is not None else None

    # due work: verifications and webhook deliveries ---------------------------------------------------
    def has_due_verification(self, now: datetime, org_id: str | None) -> bool:
        t = schema.verifications
        due = sa.select(t.c.verification_id).where(t.c.due_at.is_not(None), t.c.due_at <= now)
        if org_id is not None:
            due = due.where(t.c.org_id == org_id)
        return self.conn.execute(due.limit(1)).first() is not None

    def next_verification_due(self, org_id: str) -> datetime | None:
        """When the organisation's next check comes due (None: none is waiting)."""
        t = schema.verifications
        stmt = sa.select(t.c.due_at).where(t.c.org_id == org_id, t.c.due_at.is_not(None)).order_by(t.c.due_at)
        found: datetime | None = self.conn.execute(stmt.limit(1)).scalar()
        return found

    def claim_due_verification(self, now: datetime, lease_until: datetime, org_id: str | None) -> Verification | None:
        where = [schema.verifications.c.org_id == org_id] if org_id is not None else []
        return self._claim_due(Verification, now, lease_until, *where)

    def claim_due_delivery(self, now: datetime, lease_until: datetime) -> Delivery | None:
        return self._claim_due(Delivery, now, lease_until, schema.deliveries.c.status == DeliveryStatus.PENDING)

    def _claim_due(self, cls: type[T], now: datetime, lease_until: datetime, *where: Any) -> T | None:
        """Take one ``cls`` record whose ``due_at`` has come, pushing its ``due_at`` to ``lease_until`` so that
        no other worker takes it meanwhile (a crashed worker's record comes due again then). On PostgreSQL
        the row is taken ``FOR UPDATE SKIP LOCKED``, so workers claiming at once get different records."""
        table, key = statements.TABLES[cls]
        due = (
            sa.select(table.c[key], table.c.due_at)
            .where(table.c.due_at.is_not(None), table.c.due_at <= now, *where)
            .order_by(table.c.due_at)
            .limit(1)
        )
        if self.dialect == "postgresql":
            due = due.with_for_update(skip_locked=True)
        found = self.conn.execute(due).first()
        if found is None:
            return None
        take = table.update().where(table.c[key] == found[0], table.c.due_at == found[1]).values(due_at=lease_until)
        if self.conn.execute(take).rowcount != 1:
            return None  # taken by another worker between the two statements (SQLite)
        row = self.conn.execute(sa.select(table).where(table.c[key] == found[0])).first()
        return from_row(row, cls)

    def verification(self, org_id: str, verification_id: str) -> Verification | None:
        return self._one(Verification, verification_id, org_id)

    def settle_due_verifications(self, org_id: str, now: datetime, until: datetime, rationale: str) -> None:
        """Record every check of the organisation due by ``until`` ``UNVERIFIED`` with ``rationale``."""
        t = schema.verifications
        self.conn.execute(
            t.update()
            .where(t.c.org_id == org_id, t.c.due_at.is_not(None), t.c.due_at <= until)
            .values(
                outcome=VerificationOutcome.UNVERIFIED,
                rationale=rationale,
                verifier="",
                attempts=t.c.attempts + 1,
                due_at=None,
                checked_at=now,
            )
        )

    def verifications_of(self, session_id: str) -> list[Verification]:
        t = schema.verifications
        return self._all(Verification, sa.select(t).where(t.c.session_id == session_id).order_by(t.c.created_at))

    def webhook(self, org_id: str, webhook_id: str) -> Webhook | None:
        return self._one(Webhook, webhook_id, org_id)

    def webhooks_of(self, org_id: str) -> list[Webhook]:
        t = schema.webhooks
        return self._all(Webhook, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.created_at))

    def delete_webhook(self, org_id: str, webhook_id: str) -> bool:
        t, d = schema.webhooks, schema.deliveries
        self.conn.execute(d.delete().where(d.c.webhook_id == webhook_id, d.c.org_id == org_id))
        return self.conn.execute(t.delete().where(t.c.webhook_id == webhook_id, t.c.org_id == org_id)).rowcount == 1

    def deliveries_of(self, org_id: str, webhook_id: str, limit: int) -> list[Delivery]:
        t = schema.deliveries
        stmt = sa.select(t).where(t.c.org_id == org_id, t.c.webhook_id == webhook_id)
        return self._all(Delivery, stmt.order_by(t.c.created_at.desc(), t.c.delivery_id.desc()).limit(limit))

    def event(self, event_id: str) -> Event | None:
        return self._one(Event, event_id)

    def events_of(self, org_id: str, limit: int) -> list[Event]:
        t = schema.events
        stmt = sa.select(t).where(t.c.org_id == org_id).order_by(t.c.created_at.desc(), t.c.event_id.desc())
        return self._all(Event, stmt.limit(limit))

    def undispatched_events(self, limit: int) -> list[Event]:
        t = schema.events
        stmt = sa.select(t).where(t.c.dispatched_at.is_(None)).order_by(t.c.created_at, t.c.event_id).limit(limit)
        return self._all(Event, stmt)

    def mark_dispatched(self, event_ids: list[str], now: datetime) -> None:
        t = schema.events
        self.conn.execute(
            t.update().where(t.c.event_id.in_(event_ids), t.c.dispatched_at.is_(None)).values(dispatched_at=now)
        )

    # organisations ------------------------------------------------------------------------------------
    def org_by_name(self, name: str) -> Organisation | None:
        t = schema.organisations
        row = self.conn.execute(sa.select(t).where(t.c.name == name)).first()
        return from_row(row, Organisation) if row is not None else None

    def org(self, org_id: str) -> Organisation | None:
        return self._one(Organisation, org_id)

    # sessions -----------------------------------------------------------------------------------------
    def session(self, org_id: str, session_id: str, lock: bool = False) -> Session | None:
        return self._one(Session, session_id, org_id, lock=lock)

    def take_seq(self, org_id: str, session_id: str, now: datetime, only_active: bool = True) -> SeqTaken | None:
        """Take the session's next action seq and mark it active now; None if there is no such session, or
        if ``only_active`` and it is not ``ACTIVE`` or is being rolled back. One statement, so concurrent
        callers never share a seq; it also reads what the write-ahead record needs of the organisation."""
        stmt = statements.TAKE_SEQ_ACTIVE if only_active else statements.TAKE_SEQ
        row = stmt.run_first(self.conn, {"sid": session_id, "org": org_id, "now": now})
        if row is None:
            return None
        return SeqTaken(row["last_seq"], row["agent_id"], row["policy_version"], Plan(row["plan"]))

    def touch_session(self, session_id: str, now: datetime) -> None:
        statements.TOUCH.run(self.conn, {"sid": session_id, "now": now})

    def sessions_idle_since(self, cutoff: datetime, limit: int = 500) -> list[Session]:
        """Active sessions idle since ``cutoff``, longest idle first. In that order PostgreSQL reads them from
        the (status, last activity) index; without it, it scans every session, once a second, to find none."""
        t = schema.sessions
        stmt = sa.select(t).where(t.c.status == SessionStatus.ACTIVE, t.c.last_activity_at <= cutoff)
        return self._all(Session, stmt.order_by(t.c.last_activity_at).limit(limit))

    # actions ------------------------------------------------------------------------------------------
    def action(self, org_id: str, action_id: str) -> Action | None:
        return self._one(Action, action_id, org_id)

    def action_by_key(self, org_id: str, session_id: str, idempotency_key: str) -> Action | None:
        t = schema.actions
        stmt = sa.select(t).where(
            t.c.org_id == org_id, t.c.session_id == session_id, t.c.idempotency_key == idempotency_key
        )
        row = self.conn.execute(stmt).first()
        return from_row(row, Action) if row is not None else None

    def recent_actions(self, org_id: str, limit: int) -> list[tuple[Action, str]]:
        """The organisation's latest ``limit`` actions, newest first, each with its session's agent."""
        stmt = (
            sa.select(_A, _S.c.agent_id)
            .join(_S, _S.c.session_id == _A.c.session_id)
            .where(_A.c.org_id == org_id)
            .order_by(_A.c.created_at.desc(), _A.c.action_id.desc())
            .limit(limit)
        )
        return [(from_row(row, Action), row.agent_id) for row in self.conn.execute(stmt)]

    def actions_of(self, session_id: str) -> list[Action]:
        return self._prepared(Action, statements.ACTIONS_OF, {"sid": session_id})

    def set_action_outcome(
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
        row = statements.CONFIRM.run_first(self.conn, params)
        return from_columns(row, Action) if row is not None else None

    # approvals ----------------------------------------------------------------------------------------
    def approval(self, org_id: str, approval_id: str) -> Approval | None:
        return self._one(Approval, approval_id, org_id)

    def approvals_of_session(self, session_id: str) -> list[Approval]:
        return self._prepared(Approval, statements.APPROVALS_OF_SESSION, {"sid": session_id})

    def approvals_of_action(self, action_id: str) -> list[Approval]:
        return self._prepared(Approval, statements.APPROVALS_OF_ACTION, {"aid": action_id})

    def sessions_held_for_decision(self, org_id: str, session_ids: list[str]) -> set[str]:
        """Of the organisation's ``session_ids``, those with a pending approval that holds something up (a call
        or a rollback): the others' pending approvals, if any, are all reviews of calls that already ran."""
        t = schema.approvals
        stmt = sa.select(t.c.session_id).where(
            t.c.org_id == org_id,
            t.c.session_id.in_(session_ids),
            t.c.status == ApprovalStatus.PENDING,
            t.c.purpose != ApprovalPurpose.AFTER_EXECUTION,
        )
        return set(self.conn.execute(stmt.distinct()).scalars())

    def note_waiter(self, approval_id: str, until: datetime, *, noted: datetime | None = None) -> None:
        """The agent waits for the approval until ``until`` (:attr:`Approval.waited_until`); that column alone
        is written, so nothing a decision wrote meanwhile is written over. ``noted``: only if the column still
        holds it (a wait's end leaves alone what a newer wait of the same agent noted meanwhile)."""
        t = schema.approvals
        stmt = t.update().where(t.c.approval_id == approval_id)
        if noted is not None:
            stmt = stmt.where(t.c.waited_until == noted)
        self.conn.execute(stmt.values(waited_until=until))

    def lock_org(self, org_id: str) -> None:
        """Hold the organisation's row until the transaction ends (PostgreSQL; SQLite has one writer)."""
        self._one(Organisation, org_id, lock=True)

    def count_pending_approvals(self) -> int:
        t = schema.approvals
        return int(
            self.conn.execute(sa.select(sa.func.count()).where(t.c.status == ApprovalStatus.PENDING)).scalar_one()
        )

    def count_unconfirmed(self, approved_before: datetime) -> int:
        """Actions still ``CLEARED`` whose approval was given before ``approved_before`` (all organisations)."""
        p, a = schema.approvals, schema.actions
        stmt = (
            sa.select(sa.func.count())
            .select_from(p.join(a, a.c.action_id == p.c.action_id))
            .where(
                p.c.status == ApprovalStatus.APPROVED,
                p.c.resolved_at <= approved_before,
                a.c.status == ActionStatus.CLEARED,
            )
        )
        return int(self.conn.execute(stmt).scalar_one())

    def approvals_due(self, now: datetime, limit: int = 500) -> list[Approval]:
        t = schema.approvals
        stmt = (
            sa.select(t)
            .where(t.c.status == ApprovalStatus.PENDING, t.c.timeout_at <= now)
            .order_by(t.c.timeout_at)
            .limit(limit)
        )
        return self._all(Approval, stmt)

    # policies -----------------------------------------------------------------------------------------
    def policy(self, org_id: str, policy_id: str) -> Policy | None:
        return self._one(Policy, policy_id, org_id)

    def enabled_policies(self, org_id: str) -> list[Policy]:
        return self._prepared(Policy, statements.ENABLED_POLICIES, {"org": org_id})

    def bump_policy_version(self, org_id: str) -> None:
        statements.BUMP_POLICY_VERSION.run(self.conn, {"org": org_id})

    def policies_of(self, org_id: str) -> list[Policy]:
        t = schema.policies
        return self._all(Policy, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.created_at))

    def delete_policy(self, org_id: str, policy_id: str) -> bool:
        t = schema.policies
        stmt = t.delete().where(t.c.policy_id == policy_id, t.c.org_id == org_id)
        return self.conn.execute(stmt).rowcount == 1

    # rollbacks ----------------------------------------------------------------------------------------
    def rollback(self, org_id: str, rollback_id: str) -> Rollback | None:
        return self._one(Rollback, rollback_id, org_id)

    def active_rollback(self, session_id: str) -> Rollback | None:
        t = schema.rollbacks
        row = self.conn.execute(
            sa.select(t).where(t.c.session_id == session_id, t.c.status.in_(rules.ROLLBACK_UNDER_WAY))
        ).first()
        return from_row(row, Rollback) if row is not None else None

    def latest_rollback(self, session_id: str) -> Rollback | None:
        row = statements.LATEST_ROLLBACK.run_first(self.conn, {"sid": session_id})
        return from_columns(row, Rollback) if row is not None else None

    def rollbacks_of(self, session_id: str) -> list[Rollback]:
        t = schema.rollbacks
        stmt = sa.select(t).where(t.c.session_id == session_id).order_by(t.c.created_at, t.c.rollback_id)
        return self._all(Rollback, stmt)

    def update_rollback(self, rollback_id: str, values: dict[str, Any], **expected: Any) -> Rollback | None:
        """Set only ``values`` on the job if it still has the ``expected`` column values; the job as stored
        afterwards, or None if it did not match."""
        shape, params = statements.guard_params(rollback_id, values, expected)
        stmt = statements.guarded_update(schema.rollbacks, tuple(values), shape, returning=True)
        row = stmt.run_first(self.conn, params)
        return from_columns(row, Rollback) if row is not None else None

    def insert_rollback(self, job: Rollback) -> Rollback:
        """Insert ``job`` unless the session already has an unfinished rollback; return the one that runs."""
        try:
            with self.conn.begin_nested():
                self.insert(job)
        except IntegrityError:
            existing = self.active_rollback(job.session_id)
            if existing is None:  # the other one finished between our insert and this read
                raise
            return existing
        return job

    def claim_due_rollback(self, now: datetime, token: str, lease_until: datetime) -> Rollback | None:
        """Lease one running job whose lease is free or expired to ``token``. On PostgreSQL the row is taken
        ``FOR UPDATE SKIP LOCKED``, so replicas claiming at once each get a different job, never the same."""
        t = schema.rollbacks
        due = sa.select(t.c.rollback_id, t.c.lease_token).where(*_due(now)).order_by(t.c.created_at).limit(1)
        if self.dialect == "postgresql":
            due = due.with_for_update(skip_locked=True)
        row = self.conn.execute(due).first()
        if row is None:
            return None
        values = {"lease_token": token, "lease_until": lease_until}
        # Guarded by the lease it had, for SQLite (one writer at a time) and as a second lock on PostgreSQL.
        return self.update_rollback(row.rollback_id, values, lease_token=row.lease_token, status=RollbackStatus.RUNNING)

    def rollbacks_to_run(self, org_id: str | None, now: datetime, limit: int = 100) -> list[Rollback]:
        """Running jobs whose lease is free or expired (a crashed worker's jobs included)."""
        t = schema.rollbacks
        stmt = sa.select(t).where(*_due(now))
        if org_id is not None:
            stmt = stmt.where(t.c.org_id == org_id)
        return self._all(Rollback, stmt.order_by(t.c.created_at).limit(limit))
