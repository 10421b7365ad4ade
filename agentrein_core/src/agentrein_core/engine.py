"""The use cases of AgentRein. The embedded SDK, the server and the workers all call these.

Each use case is one transaction: it reads the records it needs, asks :mod:`agentrein_core.rules`,
:mod:`agentrein_core.policies` and :mod:`agentrein_core.rollback` what may happen, and writes the outcome
guarded by the statuses it read. Losing a race raises :class:`InvalidTransitionError`; nothing is half-written.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from enum import Enum
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from attrs import evolve, frozen

from agentrein_core import notifications, policies, rollback, rules, verification
from agentrein_core.clock import Clock, utcnow
from agentrein_core.converter import to_wire, undo_to_wire
from agentrein_core.errors import (
    ApprovalRejectedError,
    InvalidTransitionError,
    LeaseLostError,
    NotFoundError,
    PolicyBlockedError,
    UnauthorizedError,
    UndoUnavailableError,
    ValidationError,
)
from agentrein_core.ids import new_id
from agentrein_core.model import (
    JSON,
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
    UndoConfig,
    User,
    Verification,
    Webhook,
)
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DeliveryStatus,
    DisplayStatus,
    DriftResponse,
    EventType,
    OperationType,
    Plan,
    PolicyEffect,
    Role,
    RollbackStatus,
    SessionStatus,
    UndoStatus,
    UserRole,
    VerificationOutcome,
    WebhookFormat,
)
from agentrein_core.store import EVENTS_CHANNEL, Store, Tx
from agentrein_core.views import ApprovalInfo, SessionInfo, SessionPage

log = logging.getLogger("agentrein")
E = TypeVar("E", bound=Enum)

DEFAULT_ORGANISATION = "default"
#: How long a reviewer has for an approval the caller gave no timeout for (after-execution, rollback).
DEFAULT_APPROVAL_TIMEOUT = timedelta(hours=24)
#: How long a rollback worker owns a job before another may take it over (renewed at every step).
ROLLBACK_LEASE = timedelta(seconds=60)
#: Who decides approvals that expire or are closed by a sandbox rollback.
SYSTEM = "agentrein"
#: API keys: a recognisable prefix, then 256 random bits; only their sha256 is stored.
API_KEY_PREFIX = "ar_"
NO_GATES_REASON = "the organisation's plan has no approval gates (upgrade to 'team' to require approvals)"
MAX_TEXT = 10_000
#: How long a worker holds a webhook delivery it is sending (then another may try it).
DELIVERY_LEASE = timedelta(minutes=1)
#: The longest a reviewer may be given for any approval.
MAX_APPROVAL_TIMEOUT = timedelta(days=365)
#: A rollback job whose advance failed through AgentRein's own fault waits this long before it is retried.
RETRY_AFTER_OWN_FAILURE = timedelta(seconds=5)
#: A listing filtered by display status (derived, so filtered after reading) reads at most this many
#: sessions per page, then answers with what it found and a cursor to go on from.
MAX_SCANNED = 2_000


@frozen
class LoggedAction:
    """The write-ahead record of a call, and its before-execution approval when it must wait for one."""

    action: Action
    approval: Approval | None


@frozen
class MaintenanceReport:
    expired_approvals: int
    abandoned_sessions: int


class Engine:
    """AgentRein's use cases over one :class:`Store`. Thread-safe; share one per process."""

    def __init__(self, store: Store, clock: Clock = utcnow, *, rollback_lease: timedelta = ROLLBACK_LEASE) -> None:
        self.store = store
        self.clock = clock
        #: How long a worker holds a rollback job between steps; a crashed worker's job waits this long.
        self.rollback_lease = rollback_lease
        #: Checks an undo config an agent sent (connector name, config) before it is stored; the server sets
        #: it to ask the installed connectors. ValidationError refuses the config.
        self.check_undo: Callable[[str, UndoConfig], None] | None = None
        #: How often a waiting long-poll looks again by itself, for changes made where no notification reaches
        #: this process (another process on the same SQLite file). A server listening to PostgreSQL's NOTIFY
        #: is woken at once and looks less often.
        self.recheck_every = 1.0
        self._changed = threading.Condition()  # an approval decided or a rollback ended or paused
        self._policies: dict[str, tuple[int, list[Policy]]] = {}  # org -> (policy version, enabled policies)
        #: Pauses between attempts of a webhook delivery (tests shorten them).
        self.delivery_retry_after: tuple[timedelta, ...] = notifications.RETRY_AFTER

    # organisations ------------------------------------------------------------------------------------
    def ensure_organisation(self, name: str = DEFAULT_ORGANISATION, plan: Plan = Plan.TEAM) -> Organisation:
        """The organisation called ``name``, created with ``plan`` if it does not exist yet."""
        with self.store.transaction() as tx:
            existing = tx.org_by_name(name)
            if existing is not None:
                return existing
            org = Organisation(new_id("org"), _text("name", name, 200), Plan(plan), self.clock())
            tx.insert(org)
            return org

    def create_organisation(self, name: str, plan: Plan | str = Plan.TEAM) -> Organisation:
        """A new organisation; its name must be new."""
        plan = _enum("plan", Plan, plan)
        with self.store.transaction() as tx:
            if tx.org_by_name(name) is not None:
                raise ValidationError("name", f"an organisation named {name!r} already exists")
            org = Organisation(new_id("org"), _text("name", name, 200), plan, self.clock())
            tx.insert(org)
            return org

    def list_organisations(self) -> list[Organisation]:
        with self.store.transaction(write=False) as tx:
            return tx.organisations()

    def organisation_named(self, name: str) -> Organisation:
        with self.store.transaction(write=False) as tx:
            org = tx.org_by_name(name)
            if org is None:
                raise NotFoundError("organisation", name, key="name")
            return org

    # api keys -----------------------------------------------------------------------------------------
    def create_api_key(self, org_id: str, role: Role | str) -> tuple[ApiKey, str]:
        """A new key of ``role`` for the organisation: the record, and the secret, which is never stored and
        so can be shown only now."""
        role = _enum("role", Role, role)
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(new_id("key"), org_id, role, _hash_key(secret), secret[:10], self.clock())
        with self.store.transaction() as tx:
            if tx.org(org_id) is None:
                raise NotFoundError("organisation", org_id)
            tx.insert(key)
        return key, secret

    def authenticate(self, secret: str) -> ApiKey:
        """The key whose secret this is; :class:`UnauthorizedError` for an unknown or revoked one."""
        if not secret.startswith(API_KEY_PREFIX):
            raise UnauthorizedError("the API key is not an AgentRein key (they start with 'ar_')")
        with self.store.transaction(write=False) as tx:
            key = tx.api_key_by_hash(_hash_key(secret))
        if key is None or key.revoked_at is not None:
            raise UnauthorizedError("the API key is unknown or revoked")
        return key

    def revoke_api_key(self, org_id: str, key_id: str) -> ApiKey:
        """The key stops working (at once on this server; within ``KEY_CACHE_SECONDS`` on other replicas)."""
        with self.store.transaction() as tx:
            key = tx.api_key(org_id, key_id)
            if key is None:
                raise NotFoundError("API key", key_id)
            if key.revoked_at is not None:
                return key
            revoked = evolve(key, revoked_at=self.clock())
            _replace(tx, revoked, revoked_at=None)
            return revoked

    def list_api_keys(self, org_id: str) -> list[ApiKey]:
        with self.store.transaction(write=False) as tx:
            return tx.api_keys_of(org_id)

    # dashboard users ----------------------------------------------------------------------------------
    def create_user(self, org_id: str, email: str, role: UserRole | str, password: str) -> User:
        """A dashboard user of the organisation; only an argon2 hash of ``password`` is kept."""
        user = User(
            user_id=new_id("usr"),
            org_id=org_id,
            email=_email(email),
            role=_enum("role", UserRole, role),
            password_hash=_PASSWORDS.hash(_password(password)),
            created_at=self.clock(),
        )
        with self.store.transaction() as tx:
            if tx.org(org_id) is None:
                raise NotFoundError("organisation", org_id)
            if not tx.insert_once(user):
                # Emails are unique across organisations; say no more than that it cannot be used.
                raise ValidationError("email", f"{user.email!r} cannot be used: it is taken")
        return user

    def sign_in(self, email: str, password: str) -> User:
        """The user with this email and password; :class:`UnauthorizedError` otherwise, saying not which of
        the two was wrong (and taking as long for an unknown email, so emails cannot be probed)."""
        with self.store.transaction(write=False) as tx:
            user = tx.user_by_email(email.strip().lower()) if isinstance(email, str) else None
        try:
            _PASSWORDS.verify(user.password_hash if user else _unknown_user_hash(), str(password)[:1024])
        except (VerificationError, InvalidHashError):
            user = None
        if user is None:
            raise UnauthorizedError("the email or the password is wrong")
        return user

    def get_user(self, org_id: str, user_id: str) -> User:
        with self.store.transaction(write=False) as tx:
            user = tx.user(org_id, user_id)
        if user is None:
            raise NotFoundError("user", user_id)
        return user

    def end_sign_ins(self, org_id: str, user_id: str) -> User:
        """Sign the user out everywhere: every dashboard sign-in made before now stops working."""
        with self.store.transaction() as tx:
            user = tx.user(org_id, user_id)
            if user is None:
                raise NotFoundError("user", user_id)
            ended = evolve(user, sign_in_epoch=user.sign_in_epoch + 1)
            tx.replace(ended)
            return ended

    def list_users(self, org_id: str) -> list[User]:
        with self.store.transaction(write=False) as tx:
            return tx.users_of(org_id)

    def delete_user(self, org_id: str, user_id: str) -> None:
        """Remove a user (their past decisions keep their name). The organisation's last admin stays, so
        someone can always manage it."""
        with self.store.transaction() as tx:
            tx.lock_org(org_id)  # two admins removing each other at once must not both succeed
            user = tx.user(org_id, user_id)
            if user is None:
                raise NotFoundError("user", user_id)
            admins = [u for u in tx.users_of(org_id) if u.role is UserRole.ADMIN]
            if admins == [user]:
                raise ValidationError("user", f"{user.email} is the organisation's last admin; make another first")
            tx.delete_user(org_id, user_id)

    # connector configurations -------------------------------------------------------------------------
    def configure_connector(
        self, org_id: str, connector: str, *, enabled: bool, config: JSON, credentials: str | None
    ) -> ConnectorConfig:
        """Store the organisation's settings for ``connector``; ``credentials`` is an encrypted token (the
        caller encrypts), kept as it is when ``None`` is given and settings existed."""
        _json("config", config)
        with self.store.transaction() as tx:
            existing = tx.connector_config(org_id, connector)
            if credentials is None and existing is not None:
                credentials = existing.credentials
            stored = ConnectorConfig(
                org_id=org_id,
                connector=_text("connector", connector, 100),
                enabled=_bool("enabled", enabled),
                config=config,
                updated_at=self.clock(),
                credentials=credentials,
            )
            tx.upsert(stored)
            return stored

    def connector_config(self, org_id: str, connector: str) -> ConnectorConfig | None:
        with self.store.transaction(write=False) as tx:
            return tx.connector_config(org_id, connector)

    def list_connector_configs(self, org_id: str) -> list[ConnectorConfig]:
        with self.store.transaction(write=False) as tx:
            return tx.connector_configs(org_id)

    # sessions -----------------------------------------------------------------------------------------
    def new_session(self, org_id: str, agent_id: str, intent: str = "", sandbox: bool = False) -> Session:
        now = self.clock()
        session = Session(
            session_id=new_id("ses"),
            org_id=org_id,
            agent_id=_text("agent_id", agent_id, 200),
            intent=_text("intent", intent, MAX_TEXT, allow_empty=True),
            sandbox=_bool("sandbox", sandbox),
            status=SessionStatus.ACTIVE,
            created_at=now,
            last_activity_at=now,
        )
        with self.store.transaction() as tx:
            if tx.org(org_id) is None:
                raise NotFoundError("organisation", org_id)
            tx.insert(session, last_seq=0)
        return session

    def get_session(self, org_id: str, session_id: str) -> SessionInfo:
        """The session with its actions, approvals and intent verifications."""
        with self.store.transaction(write=False) as tx:
            return _view(tx, _session(tx, org_id, session_id), verified=True)

    def list_sessions(
        self,
        org_id: str,
        limit: int = 100,
        *,
        status: SessionStatus | str | None = None,
        display_status: DisplayStatus | str | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        cursor: str | None = None,
    ) -> SessionPage:
        """One page of the organisation's sessions, newest first (at most ``limit``, 1 to 1000), filtered.
        Pass the page's ``next_cursor`` back as ``cursor`` for the next page (keyset pagination: pages do
        not shift when sessions are added meanwhile)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError("limit", f"must be a whole number from 1 to 1000, not {limit!r}")
        stored = _enum("status", SessionStatus, status) if status is not None else None
        shown = _enum("displayStatus", DisplayStatus, display_status) if display_status is not None else None
        position = _decode_cursor(cursor) if cursor else None
        found: list[SessionInfo] = []
        scanned = 0
        with self.store.transaction(write=False) as tx:
            while True:
                batch = tx.list_sessions(
                    org_id,
                    limit,
                    status=stored,
                    agent_id=agent_id,
                    created_after=created_after,
                    created_before=created_before,
                    after=position,
                )
                for session in batch:
                    position = (session.created_at, session.session_id)
                    scanned += 1
                    view = _view(tx, session)
                    # The display status is derived, so it is filtered here rather than in SQL.
                    if shown is None or view.display_status is shown:
                        found.append(view)
                        if len(found) == limit:
                            return SessionPage(found, _encode_cursor(position))
                    if scanned >= MAX_SCANNED:  # a rare display status: answer now, go on from here next time
                        return SessionPage(found, _encode_cursor(position))
                if len(batch) < limit:
                    return SessionPage(found, None)

    def complete_session(self, org_id: str, session_id: str) -> SessionInfo:
        now = self.clock()
        with self.store.transaction() as tx:
            session = _session(tx, org_id, session_id)
            _set_session_status(tx, session, SessionStatus.COMPLETED, completed_at=now)
            if session.status is not SessionStatus.COMPLETED:  # a repeated completion asks for no second check
                tx.insert(_verification_of(org_id, session_id, None, now))
            return _view(tx, _session(tx, org_id, session_id))

    # actions ------------------------------------------------------------------------------------------
    def log_action(
        self,
        org_id: str,
        session_id: str,
        *,
        connector: str,
        api_name: str,
        operation_type: OperationType,
        payload: JSON,
        requires_approval: bool = False,
        approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> LoggedAction:
        """Record a call before it runs and decide whether it may run now (``CLEARED``), must wait for a
        human (``PENDING_APPROVAL``), or must not run (``FAILED``, raising :class:`PolicyBlockedError`)."""
        operation_type = OperationType(operation_type)
        _text("api_name", api_name, 500)
        _json("payload", payload)
        now = self.clock()
        blocked: PolicyBlockedError | None = None
        no_gates: ApprovalRejectedError | None = None
        with self.store.transaction() as tx:
            taken = tx.take_seq(org_id, session_id, now)
            if taken is None:
                session = _session(tx, org_id, session_id)  # NotFoundError if it does not exist
                if session.status is SessionStatus.ACTIVE:
                    raise InvalidTransitionError(
                        f"session {session_id} is being rolled back; it accepts no new actions"
                    )
                raise InvalidTransitionError(
                    f"session {session_id} is {session.status}; only ACTIVE sessions accept new actions"
                )
            seq, agent_id = taken.seq, taken.agent_id
            action_id = new_id("act")
            action = Action(
                action_id=action_id,
                session_id=session_id,
                org_id=org_id,
                seq=seq,
                connector=_text("connector", connector, 100),
                api_name=api_name,
                operation_type=operation_type,
                payload=payload,
                status=ActionStatus.CLEARED,
                idempotency_key=f"agentrein-{action_id}",
                created_at=now,
                updated_at=now,
            )
            subject = policies.Subject(connector, api_name, agent_id, operation_type)
            decision = policies.decide(self._enabled_policies(tx, org_id, taken.policy_version), subject)
            if decision.policy is not None:
                # A held call has had its human review already; otherwise REQUIRE_APPROVAL reviews it afterwards.
                review_after = decision.effect is PolicyEffect.REQUIRE_APPROVAL and not requires_approval
                action = evolve(action, policy_name=decision.policy.name, review_after=review_after)
            approval = None
            if decision.effect is PolicyEffect.BLOCK:
                assert decision.policy is not None
                action = evolve(action, status=ActionStatus.FAILED, error=f"blocked by policy {decision.policy.name!r}")
                blocked = PolicyBlockedError(action_id, decision.policy.name)
            elif requires_approval and taken.plan is Plan.FREE:
                action = evolve(action, status=ActionStatus.FAILED, error=NO_GATES_REASON)
                no_gates = ApprovalRejectedError(NO_GATES_REASON, None, action_id)
            elif requires_approval:
                action = evolve(action, status=ActionStatus.PENDING_APPROVAL)
                approval = _new_approval(action, ApprovalPurpose.BEFORE_EXECUTION, now, approval_timeout)
            tx.insert(action)
            if approval is not None:
                self._open_approval(tx, approval)
            if no_gates is not None:
                self._after_failure(tx, _session(tx, org_id, session_id), "approval gate unavailable on plan", SYSTEM)
        if blocked is not None:
            raise blocked
        if no_gates is not None:
            raise no_gates
        return LoggedAction(action, approval)

    def confirm_action(
        self,
        org_id: str,
        action_id: str,
        *,
        response: JSON | None = None,
        undo: UndoConfig | None = None,
        session_id: str | None = None,
    ) -> Action:
        """The call ran and succeeded: ``CLEARED -> SUCCESS`` with its (redacted) response and undo config.
        If a ``REQUIRE_APPROVAL`` policy matched its write-ahead record, an after-execution approval opens.
        ``session_id``, when given, must be the action's session."""
        _json("response", response)
        now = self.clock()
        with self.store.transaction() as tx:
            done = tx.set_action_outcome(
                org_id, action_id, ActionStatus.CLEARED, ActionStatus.SUCCESS, response, _undo_row(undo), now
            )
            if done is None:
                action = _action(tx, org_id, action_id)  # NotFoundError if it does not exist
                rules.check("action", rules.ACTION_TRANSITIONS, action.status, ActionStatus.SUCCESS)
                raise InvalidTransitionError(f"action {action_id} changed concurrently; try again")
            if session_id is not None and done.session_id != session_id:
                raise NotFoundError("action", action_id)  # raised inside the transaction: nothing is written
            if undo is not None and self.check_undo is not None:
                self.check_undo(done.connector, undo)
            if done.review_after:
                self._open_approval(
                    tx, _new_approval(done, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT)
                )
            tx.insert(_verification_of(done.org_id, done.session_id, done.action_id, now))
            return done

    def fail_action(self, org_id: str, action_id: str, *, error: str, session_id: str | None = None) -> Action:
        """The call failed: record why and roll the session back (a job the caller then runs).

        An action a reviewer approved stays ``CLEARED`` (status reference §1): its failure is recorded as a
        separate ``FAILED`` action, so the approval's history is never rewritten."""
        now = self.clock()
        error = _text("error", error or "failed", MAX_TEXT)
        with self.store.transaction() as tx:
            action = _action(tx, org_id, action_id)
            if session_id is not None and action.session_id != session_id:
                raise NotFoundError("action", action_id)
            rules.check("action", rules.ACTION_TRANSITIONS, action.status, ActionStatus.FAILED)
            was_approved = any(
                p.purpose is ApprovalPurpose.BEFORE_EXECUTION and p.status is ApprovalStatus.APPROVED
                for p in tx.approvals_of_action(action_id)
            )
            sibling_key = f"{action.idempotency_key}-failed"
            if was_approved and (reported := tx.action_by_key(org_id, action.session_id, sibling_key)) is not None:
                return reported  # this failure was reported already (a retried or replayed report)
            if was_approved:
                taken = tx.take_seq(org_id, action.session_id, now, only_active=False)
                assert taken is not None  # the session exists and only_active=False always takes a seq
                seq = taken.seq
                failed_id = new_id("act")
                failed = evolve(
                    action,
                    action_id=failed_id,
                    seq=seq,
                    status=ActionStatus.FAILED,
                    idempotency_key=sibling_key,
                    error=error,
                    created_at=now,
                    updated_at=now,
                )
                tx.insert(failed)
            else:
                failed = evolve(action, status=ActionStatus.FAILED, error=error, updated_at=now)
                _replace(tx, failed, status=action.status)
                tx.touch_session(action.session_id, now)
            # Read after the writes above, so the session's new activity time is not written back stale.
            session = _session(tx, org_id, action.session_id)
            self._after_agent_failure(tx, session, f"action {action.api_name} failed")
            return failed

    def record_executed_action(
        self,
        org_id: str,
        session_id: str,
        *,
        idempotency_key: str,
        connector: str,
        api_name: str,
        operation_type: OperationType,
        payload: JSON,
        succeeded: bool,
        response: JSON | None = None,
        undo: UndoConfig | None = None,
        error: str | None = None,
    ) -> Action:
        """Record a call that already ran without a write-ahead record, because AgentRein was unreachable
        (``failure_mode="open"``): the SDK replays it from its local journal once AgentRein answers again.

        It is recorded as it happened, once: a second replay with the same ``idempotency_key`` (the key the
        call itself carried) returns the first record. Policies cannot stop what already ran, so a match is
        noted (``policy_name``) and a ``BLOCK`` or ``REQUIRE_APPROVAL`` match opens an after-execution review.
        A failed call rolls the session back, as it would have online."""
        operation_type = OperationType(operation_type)
        _text("idempotency_key", idempotency_key, 100)
        if undo is not None and self.check_undo is not None:
            self.check_undo(connector, undo)
        _text("api_name", api_name, 500)
        _json("payload", payload)
        _json("response", response)
        now = self.clock()
        with self.store.transaction() as tx:
            existing = tx.action_by_key(org_id, session_id, idempotency_key)
            if existing is not None:
                return existing
            taken = tx.take_seq(org_id, session_id, now, only_active=False)
            if taken is None:
                raise NotFoundError("session", session_id)
            subject = policies.Subject(connector, api_name, taken.agent_id, operation_type)
            decision = policies.decide(self._enabled_policies(tx, org_id, taken.policy_version), subject)
            action = Action(
                action_id=new_id("act"),
                session_id=session_id,
                org_id=org_id,
                seq=taken.seq,
                connector=_text("connector", connector, 100),
                api_name=api_name,
                operation_type=operation_type,
                payload=payload,
                status=ActionStatus.SUCCESS if succeeded else ActionStatus.FAILED,
                idempotency_key=idempotency_key,
                created_at=now,
                updated_at=now,
                response=response if succeeded else None,
                undo=undo if succeeded else None,
                error=None if succeeded else _text("error", error or "failed", MAX_TEXT),
                policy_name=decision.policy.name if decision.policy is not None else None,
            )
            if not tx.insert_once(action):  # a concurrent replay of the same call won
                existing = tx.action_by_key(org_id, session_id, idempotency_key)
                assert existing is not None
                return existing
            if not succeeded:
                self._after_agent_failure(tx, _session(tx, org_id, session_id), f"action {api_name} failed")
            elif decision.effect is not PolicyEffect.ALLOW:
                self._open_approval(
                    tx, _new_approval(action, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT)
                )
            if succeeded:
                tx.insert(_verification_of(org_id, session_id, action.action_id, now))
            return action

    # approvals ----------------------------------------------------------------------------------------
    def get_approval(self, org_id: str, approval_id: str) -> ApprovalInfo:
        with self.store.transaction(write=False) as tx:
            return _approval_view(tx, _approval(tx, org_id, approval_id), self.clock())

    def list_approvals(self, org_id: str, status: ApprovalStatus | None = None) -> list[ApprovalInfo]:
        """Approvals of the organisation, pending first and oldest first."""
        status = ApprovalStatus(status) if status is not None else None
        now = self.clock()
        with self.store.transaction(write=False) as tx:
            return [_approval_view(tx, p, now) for p in tx.list_approvals(org_id, status)]

    def approval_queue(self, org_id: str, decided: int = 20) -> tuple[list[ApprovalInfo], list[ApprovalInfo]]:
        """What a reviewer's queue shows: every pending approval (oldest first) and the ``decided`` latest
        decisions (newest first), read in two queries however long the history."""
        now = self.clock()
        with self.store.transaction(write=False) as tx:
            pending, latest = tx.approval_queue(org_id, decided)
        return (
            [_approval_info(*found, now) for found in pending],
            [_approval_info(*found, now) for found in latest],
        )

    def count_pending_approvals(self) -> int:
        """Approvals waiting for a decision, in all organisations (for metrics)."""
        with self.store.transaction(write=False) as tx:
            return tx.count_pending_approvals()

    def count_unconfirmed(self) -> int:
        """Approved actions whose execution was never confirmed (``unconfirmed``), in all organisations."""
        with self.store.transaction(write=False) as tx:
            return tx.count_unconfirmed(self.clock() - rules.UNCONFIRMED_AFTER)

    def approve(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.APPROVED, reviewer, reason)

    def reject(self, org_id: str, approval_id: str, reviewer: str, reason: str | None = None) -> Approval:
        return self._decide(org_id, approval_id, ApprovalStatus.REJECTED, reviewer, reason)

    def wait_for_decision(self, org_id: str, approval_id: str, timeout: float) -> ApprovalInfo:
        """The approval once it is decided, or as it stands after ``timeout`` seconds. Decisions made through
        this engine, or announced to it (:meth:`wake_waiters`), wake the wait at once; others are seen at the
        next look (every ``recheck_every`` seconds)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            view = self.get_approval(org_id, approval_id)
            remaining = deadline - time.monotonic()
            if view.status is not ApprovalStatus.PENDING or remaining <= 0:
                return view
            with self._changed:
                self._changed.wait(min(remaining, self.recheck_every))

    def _decide(
        self, org_id: str, approval_id: str, status: ApprovalStatus, reviewer: str, reason: str | None
    ) -> Approval:
        reviewer = _text("reviewer", reviewer, 200)
        reason = _text("reason", reason, MAX_TEXT, allow_empty=True) if reason is not None else None
        with self.store.transaction() as tx:
            decided = self._apply_decision(tx, _approval(tx, org_id, approval_id), status, reviewer, reason)
        self.wake_waiters()
        return decided

    def _apply_decision(
        self, tx: Tx, approval: Approval, status: ApprovalStatus, reviewer: str, reason: str | None
    ) -> Approval:
        """Decide ``approval`` and carry out what the decision means for its action (status reference §4)."""
        if approval.status is not ApprovalStatus.PENDING:
            by = f" by {approval.resolved_by}" if approval.resolved_by else ""
            raise InvalidTransitionError(f"approval {approval.approval_id} was already {approval.status}{by}")
        now = self.clock()
        decided = evolve(approval, status=status, resolved_at=now, resolved_by=reviewer, reason=reason)
        _replace(tx, decided, status=ApprovalStatus.PENDING)
        tx.notify(EVENTS_CHANNEL, approval.approval_id)
        action = _action(tx, approval.org_id, approval.action_id)
        session = _session(tx, approval.org_id, approval.session_id)
        self._emit(
            tx, approval.org_id, EventType.APPROVAL_DECIDED, to_wire(_approval_info(decided, action, session, now))
        )
        approved = status is ApprovalStatus.APPROVED
        purpose = approval.purpose
        if purpose is ApprovalPurpose.BEFORE_EXECUTION:
            if approved:
                _set_action(tx, action, now, status=ActionStatus.CLEARED)
            else:
                why = f"approval {status.lower()}" + (f": {reason}" if reason else "")
                _set_action(tx, action, now, status=ActionStatus.FAILED, error=why)
                self._after_failure(tx, session, f"before-execution approval {status.lower()}", reviewer)
        elif purpose is ApprovalPurpose.AFTER_EXECUTION:
            if status is ApprovalStatus.REJECTED and action.status in rules.UNDOABLE:
                _set_action(tx, action, now, undo_requested=True)
                self._start_rollback(tx, session, reviewer, "after-execution approval rejected", whole_session=False)
        elif purpose is ApprovalPurpose.ROLLBACK:
            job = tx.rollback(approval.org_id, approval.rollback_id or "")
            if approved:
                if job is not None and job.status is RollbackStatus.WAITING_APPROVAL:
                    _replace(tx, evolve(job, status=RollbackStatus.RUNNING), status=job.status)
            else:
                _set_action(tx, action, now, undo_status=UndoStatus.DECLINED)
                _set_session_status(tx, session, SessionStatus.FAILED)
                if job is not None and job.status in (
                    RollbackStatus.RUNNING,
                    RollbackStatus.WAITING_APPROVAL,
                ):
                    finished = evolve(
                        job,
                        status=RollbackStatus.FAILED,
                        finished_at=now,
                        error=f"rollback approval for {action.api_name} {status.lower()}",
                        lease_token=None,
                        lease_until=None,
                    )
                    _replace(tx, finished, status=job.status)
                    self._rollback_ended(tx, finished)
        return decided

    def wake_waiters(self) -> None:
        """Wake every :meth:`wait_for_decision` and :meth:`wait_for_rollback` of this process to look again.
        The engine calls it for its own changes; a server calls it on another replica's NOTIFY."""
        with self._changed:
            self._changed.notify_all()

    # policies -----------------------------------------------------------------------------------------
    def _enabled_policies(self, tx: Tx, org_id: str, version: int) -> list[Policy]:
        """The organisation's enabled policies, read again only when their version has moved (any process
        that changes a policy bumps it in the same transaction)."""
        cached = self._policies.get(org_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        enabled = tx.enabled_policies(org_id)
        self._policies[org_id] = (version, enabled)
        return enabled

    def add_policy(
        self,
        org_id: str,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None = None,
        api_name: str | None = None,
        agent_id: str | None = None,
        operation_type: str | None = None,
        enabled: bool = True,
    ) -> Policy:
        policy = Policy(
            policy_id=new_id("pol"),
            org_id=org_id,
            name=_text("name", name, 200),
            effect=policies.parse_effect(effect),
            enabled=_bool("enabled", enabled),
            created_at=self.clock(),
            connector=policies.validate_glob("connector", connector),
            api_name=policies.validate_glob("api_name", api_name),
            agent_id=policies.validate_glob("agent_id", agent_id),
            operation_type=policies.validate_glob("operation_type", operation_type),
        )
        with self.store.transaction() as tx:
            if any(p.name == policy.name for p in tx.policies_of(org_id)):
                raise ValidationError("name", f"a policy named {policy.name!r} already exists")
            tx.insert(policy)
            tx.bump_policy_version(org_id)
        return policy

    def list_policies(self, org_id: str) -> list[Policy]:
        with self.store.transaction(write=False) as tx:
            return tx.policies_of(org_id)

    def set_policy_enabled(self, org_id: str, policy_id: str, enabled: bool) -> Policy:
        with self.store.transaction() as tx:
            policy = tx.policy(org_id, policy_id)
            if policy is None:
                raise NotFoundError("policy", policy_id)
            changed = evolve(policy, enabled=_bool("enabled", enabled))
            tx.replace(changed)
            tx.bump_policy_version(org_id)
            return changed

    def delete_policy(self, org_id: str, policy_id: str) -> None:
        with self.store.transaction() as tx:
            if not tx.delete_policy(org_id, policy_id):
                raise NotFoundError("policy", policy_id)
            tx.bump_policy_version(org_id)

    def preview_policy(
        self,
        org_id: str,
        *,
        connector: str | None = None,
        api_name: str | None = None,
        agent_id: str | None = None,
        operation_type: str | None = None,
        recent: int = 200,
    ) -> list[Action]:
        """Which of the organisation's latest ``recent`` actions a policy with these globs would have
        matched, newest first: a rule can be tried before it is saved."""
        rule = Policy(
            policy_id="preview",
            org_id=org_id,
            name="preview",
            effect=PolicyEffect.BLOCK,
            enabled=True,
            created_at=self.clock(),
            connector=policies.validate_glob("connector", connector),
            api_name=policies.validate_glob("api_name", api_name),
            agent_id=policies.validate_glob("agent_id", agent_id),
            operation_type=policies.validate_glob("operation_type", operation_type),
        )
        with self.store.transaction(write=False) as tx:
            found = tx.recent_actions(org_id, recent)
        return [
            action
            for action, agent in found
            if policies.matches(rule, policies.Subject(action.connector, action.api_name, agent, action.operation_type))
        ]

    # rollback -----------------------------------------------------------------------------------------
    def request_rollback(
        self,
        org_id: str,
        session_id: str,
        *,
        caller_role: str,
        requested_by: str,
        trigger: str = "requested",
        approval_timeout: timedelta | None = None,
    ) -> Rollback:
        """Start rolling a session back, within the rules of the status reference §3; a rollback approval it
        opens waits ``approval_timeout`` (default: the runner's).

        A session with a rollback under way gets that rollback back: two requests start one rollback. A
        sandbox session is rolled back at once, in this transaction, with no inverse call."""
        if approval_timeout is not None:
            _check_approval_timeout(approval_timeout, "approval_timeout")
        with self.store.transaction() as tx:
            session = _session(tx, org_id, session_id, lock=True)
            running = _session_rollback_under_way(tx, session_id)
            if running is not None:
                return running
            view = _view(tx, session)
            rules.check_rollback_allowed(session, view.actions, view.display_status, caller_role)
            return self._start_rollback(
                tx, session, _text("requested_by", requested_by, 200), trigger, approval_timeout=approval_timeout
            )

    def get_rollback(self, org_id: str, rollback_id: str) -> Rollback:
        with self.store.transaction(write=False) as tx:
            job = tx.rollback(org_id, rollback_id)
            if job is None:
                raise NotFoundError("rollback", rollback_id)
            return job

    def rollbacks_to_run(self, org_id: str | None = None) -> list[Rollback]:
        with self.store.transaction(write=False) as tx:
            return tx.rollbacks_to_run(org_id, self.clock())

    def active_rollback(self, org_id: str, session_id: str) -> Rollback | None:
        """The session's unfinished rollback (running or waiting for a rollback approval), if any."""
        with self.store.transaction(write=False) as tx:
            _session(tx, org_id, session_id)
            return tx.active_rollback(session_id)

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
            job = tx.claim_due_rollback(now, token, now + self.rollback_lease)
        if job is None:
            return None
        return self._advance(job, token, executor, approval_timeout)

    def wait_for_rollback(self, org_id: str, session_id: str, timeout: float) -> Rollback | None:
        """The session's latest rollback once it has ended or waits for a reviewer, or as it stands after
        ``timeout`` seconds; ``None`` if the session was never rolled back."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            job = self.latest_rollback(org_id, session_id)
            remaining = deadline - time.monotonic()
            if job is None or job.status is not RollbackStatus.RUNNING or remaining <= 0:
                return job
            with self._changed:
                self._changed.wait(min(remaining, self.recheck_every))

    def latest_rollback(self, org_id: str, session_id: str) -> Rollback | None:
        with self.store.transaction(write=False) as tx:
            _session(tx, org_id, session_id)
            return tx.active_rollback(session_id) or tx.latest_rollback(session_id)

    def _advance(
        self, job: Rollback, token: str, executor: rollback.UndoExecutor, approval_timeout: timedelta
    ) -> Rollback:
        """Run the claimed ``job`` (held by ``token``) until it ends, pauses, or cannot go on here."""
        try:
            while True:
                with self.store.transaction() as tx:
                    job, step = self._plan_step(tx, job, token, approval_timeout)
                    if step is None:
                        tx.notify(EVENTS_CHANNEL, job.rollback_id)
                if step is None:
                    self.wake_waiters()
                    return job
                if not executor.can_run(step.action):
                    job = self._release(job, token)
                    raise UndoUnavailableError(
                        f"this process cannot reach connector {step.action.connector!r} to undo "
                        f"{step.action.api_name} (seq {step.action.seq}); wrap a client for it in session "
                        f"{job.session_id} and roll back again"
                    )
                action, job = self._mark_in_progress(job, token, step.action)
                try:
                    with self._lease_kept(job, token):
                        executor.run_undo(action)
                except Exception as exc:  # any failure of the inverse stops the chain (DESIGN.md §4)
                    failed = self._undo_failed(job, token, action, exc)
                    self.wake_waiters()
                    return failed
                job = self._undo_done(job, token, action)
        except (UndoUnavailableError, LeaseLostError):
            raise
        except Exception:
            # Our own failure (not the inverse's): hand the job back after a pause, so that a job that keeps
            # failing does not hold up the jobs queued behind it.
            self._release_quietly(job, token, retry_after=RETRY_AFTER_OWN_FAILURE)
            raise

    def _claim(self, org_id: str, rollback_id: str, token: str) -> Rollback | None:
        """Take the job's lease if it is running and nobody holds it (or the holder's lease ran out)."""
        now = self.clock()
        with self.store.transaction() as tx:
            job = tx.rollback(org_id, rollback_id)
            if job is None:
                raise NotFoundError("rollback", rollback_id)
            if job.status is not RollbackStatus.RUNNING:
                return None
            if job.lease_until is not None and job.lease_until > now:
                return None
            values = {"lease_token": token, "lease_until": now + self.rollback_lease}
            return tx.update_rollback(rollback_id, values, lease_token=job.lease_token, status=job.status)

    def _renew(self, tx: Tx, job: Rollback, token: str, **changes: object) -> Rollback:
        """Write ``changes`` (only those columns) and renew the lease, while ``token`` still holds the job.
        Returns the job as stored, so a scope widened meanwhile by another request is seen at once."""
        values = {"lease_until": self.clock() + self.rollback_lease, **changes}
        renewed = tx.update_rollback(job.rollback_id, values, lease_token=token)
        if renewed is None:
            raise LeaseLostError(f"rollback {job.rollback_id} is no longer held by this worker")
        if renewed.status in (RollbackStatus.SUCCEEDED, RollbackStatus.FAILED) and job.status is not renewed.status:
            self._rollback_ended(tx, renewed)
        return renewed

    def _plan_step(
        self, tx: Tx, job: Rollback, token: str, approval_timeout: timedelta
    ) -> tuple[Rollback, rollback.RunUndo | None]:
        """Apply every step that needs no inverse call; stop at one that does (returned) or at a pause."""
        now = self.clock()
        if job.approval_timeout_ms:
            approval_timeout = timedelta(milliseconds=job.approval_timeout_ms)
        session = _session(tx, job.org_id, job.session_id)
        paused = {"status": RollbackStatus.WAITING_APPROVAL, "lease_token": None, "lease_until": None}
        while True:
            actions = tx.actions_of(job.session_id)
            step = rollback.next_step(job, actions, tx.approvals_of_session(job.session_id))
            if isinstance(step, rollback.RunUndo):
                return self._renew(tx, job, token), step
            if isinstance(step, rollback.Skip):
                _set_action(tx, step.action, now, undo_status=UndoStatus.SKIPPED)
                job = self._renew(tx, job, token)
            elif isinstance(step, rollback.AskApproval):
                _set_action(tx, step.action, now, undo_status=UndoStatus.AWAITING_APPROVAL)
                approval = _new_approval(
                    step.action, ApprovalPurpose.ROLLBACK, now, approval_timeout, rollback_id=job.rollback_id
                )
                self._open_approval(tx, approval)
                return self._renew(tx, job, token, **paused), None
            elif isinstance(step, rollback.WaitForApproval):
                return self._renew(tx, job, token, **paused), None
            elif isinstance(step, rollback.Declined):
                error = f"the undo of {step.action.api_name} was declined"
                return self._renew(tx, job, token, **_finished(RollbackStatus.FAILED, now), error=error), None
            else:
                if job.whole_session:
                    _set_session_status(tx, session, rules.session_status_after_rollback(session, actions))
                return self._renew(tx, job, token, **_finished(RollbackStatus.SUCCEEDED, now)), None

    def _mark_in_progress(self, job: Rollback, token: str, action: Action) -> tuple[Action, Rollback]:
        """Record that the inverse is about to run: a crash from here on leaves ``IN_PROGRESS``, and the
        resumed job repeats the inverse with the same idempotency key."""
        with self.store.transaction() as tx:
            if action.undo_status is not UndoStatus.IN_PROGRESS:
                action = _set_action(tx, action, self.clock(), undo_status=UndoStatus.IN_PROGRESS)
            return action, self._renew(tx, job, token)

    def _undo_done(self, job: Rollback, token: str, action: Action) -> Rollback:
        now = self.clock()
        with self.store.transaction() as tx:
            done = _set_action(
                tx, action, now, status=ActionStatus.ROLLED_BACK, undo_status=UndoStatus.DONE, error=None
            )
            self._close_reviews(tx, done, now, "the action was rolled back")
            return self._renew(tx, job, token)

    def _undo_failed(self, job: Rollback, token: str, action: Action, exc: Exception) -> Rollback:
        now = self.clock()
        error = _text("error", f"undo failed: {exc}", MAX_TEXT)
        with self.store.transaction() as tx:
            _set_action(
                tx, action, now, status=ActionStatus.ROLLBACK_FAILED, undo_status=UndoStatus.FAILED, error=error
            )
            _set_session_status(tx, _session(tx, job.org_id, job.session_id), SessionStatus.FAILED)
            tx.notify(EVENTS_CHANNEL, job.rollback_id)
            return self._renew(tx, job, token, **_finished(RollbackStatus.FAILED, now), error=error)

    def _release(self, job: Rollback, token: str) -> Rollback:
        with self.store.transaction() as tx:
            return self._renew(tx, job, token, lease_token=None, lease_until=None)

    @contextmanager
    def _lease_kept(self, job: Rollback, token: str) -> Iterator[None]:
        """Renew the job's lease while a slow inverse runs, so no other worker takes it over meanwhile."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.rollback_lease.total_seconds() / 3):
                try:
                    with self.store.transaction() as tx:
                        self._renew(tx, job, token)
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

    def _start_rollback(
        self,
        tx: Tx,
        session: Session,
        requested_by: str,
        trigger: str,
        *,
        whole_session: bool = True,
        approval_timeout: timedelta | None = None,
    ) -> Rollback:
        """Start a rollback job, or return the one under way (it takes in any action marked for undo)."""
        now = self.clock()
        job = Rollback(
            rollback_id=new_id("rbk"),
            org_id=session.org_id,
            session_id=session.session_id,
            status=RollbackStatus.RUNNING,
            trigger=_text("trigger", trigger, 200),
            requested_by=requested_by,
            created_at=now,
            whole_session=whole_session,
            approval_timeout_ms=round(approval_timeout.total_seconds() * 1000) if approval_timeout else None,
        )
        if session.sandbox:
            return self._sandbox_rollback(tx, session, job)
        return tx.insert_rollback(job)

    def _sandbox_rollback(self, tx: Tx, session: Session, job: Rollback) -> Rollback:
        """Sandbox sessions ran nothing real: flip every SUCCESS and PENDING_APPROVAL action (or those a
        reviewer asked to undo) to ROLLED_BACK in this one transaction; no inverse runs."""
        now = self.clock()
        flipped = (ActionStatus.SUCCESS, ActionStatus.PENDING_APPROVAL)
        for action in tx.actions_of(session.session_id):
            if action.status in flipped and (job.whole_session or action.undo_requested):
                rolled_back = _set_action(tx, action, now, status=ActionStatus.ROLLED_BACK)
                self._close_reviews(tx, rolled_back, now, "sandbox session rolled back")
        if job.whole_session:
            actions = tx.actions_of(session.session_id)
            _set_session_status(tx, session, rules.session_status_after_rollback(session, actions))
        done = evolve(job, status=RollbackStatus.SUCCEEDED, finished_at=now)
        tx.insert(done)
        self._rollback_ended(tx, done)
        return done

    def _after_agent_failure(self, tx: Tx, session: Session, trigger: str) -> None:
        """A call the agent reports failed rolls its session back while the session is ``ACTIVE``. A report
        that arrives after the session ended is recorded only: the agent's right to roll back ends with the
        session (status reference §3); an operator decides."""
        if session.status is SessionStatus.ACTIVE:
            self._after_failure(tx, session, trigger, SYSTEM)

    def _after_failure(self, tx: Tx, session: Session, trigger: str, requested_by: str) -> None:
        """A failure rolls the session back; with nothing to undo the session simply becomes FAILED."""
        if _session_rollback_under_way(tx, session.session_id) is not None:
            return
        if any(a.status in rules.UNDOABLE for a in tx.actions_of(session.session_id)):
            self._start_rollback(tx, session, requested_by, trigger)
        elif SessionStatus.FAILED in rules.SESSION_TRANSITIONS[session.status]:
            _set_session_status(tx, session, SessionStatus.FAILED)

    # events -------------------------------------------------------------------------------------------
    def _emit(self, tx: Tx, org_id: str, type_: EventType, data: JSON) -> None:
        """Record an event with the change it reports, and a delivery for each webhook that wants it."""
        now = self.clock()
        event = Event(new_id("evt"), org_id, type_, data, now)
        tx.insert(event)
        for hook in tx.webhooks_of(org_id):
            if type_.value in hook.events or "*" in hook.events:
                delivery = Delivery(
                    new_id("dlv"),
                    org_id,
                    hook.webhook_id,
                    event.event_id,
                    type_,
                    DeliveryStatus.PENDING,
                    now,
                    due_at=now,
                )
                tx.insert(delivery)

    def _open_approval(self, tx: Tx, approval: Approval) -> None:
        tx.insert(approval)
        self._emit(
            tx, approval.org_id, EventType.APPROVAL_REQUESTED, to_wire(_approval_view(tx, approval, self.clock()))
        )

    def _close_reviews(self, tx: Tx, action: Action, now: datetime, reason: str) -> None:
        for closed in _close_pending_approvals(tx, action, now, reason):
            self._emit(tx, closed.org_id, EventType.APPROVAL_DECIDED, to_wire(_approval_view(tx, closed, now)))

    def _rollback_ended(self, tx: Tx, job: Rollback) -> None:
        ended = EventType.ROLLBACK_COMPLETED if job.status is RollbackStatus.SUCCEEDED else EventType.ROLLBACK_FAILED
        shown = {k: v for k, v in to_wire(job).items() if k not in ("leaseToken", "leaseUntil")}
        self._emit(tx, job.org_id, ended, shown)

    def list_events(self, org_id: str, limit: int = 100) -> list[Event]:
        """The organisation's latest events, newest first."""
        with self.store.transaction(write=False) as tx:
            return tx.events_of(org_id, limit)

    def dispatch_events(self, notify: Callable[[Event], None], limit: int = 100) -> int:
        """Hand events not yet dispatched to ``notify`` (the ``agentrein_notify`` plugins), oldest first, and
        mark them dispatched; an exception from ``notify`` is logged and the event is not offered again."""
        with self.store.transaction(write=False) as tx:
            events = tx.undispatched_events(limit)
        for event in events:
            try:
                notify(event)
            except Exception:
                log.exception("a notify plugin failed on event %s (%s)", event.event_id, event.type)
        if events:
            with self.store.transaction() as tx:
                tx.mark_dispatched([e.event_id for e in events], self.clock())
        return len(events)

    # organisation settings ----------------------------------------------------------------------------
    def settings(self, org_id: str) -> OrganisationSettings:
        with self.store.transaction(write=False) as tx:
            if tx.org(org_id) is None:
                raise NotFoundError("organisation", org_id)
            return tx.settings(org_id) or OrganisationSettings(org_id)

    def update_settings(self, org_id: str, **changes: object) -> OrganisationSettings:
        """Change some of the organisation's settings (``on_drift``, ``verifier_url``, ``verifier_model``,
        ``verifier_api_key`` (an encrypted token), ``webhook_hosts``); the others stay as they are."""
        checked: dict[str, object] = {}
        for name, value in changes.items():
            if name == "on_drift":
                checked[name] = _enum("onDrift", DriftResponse, value)
            elif name == "verifier_url":
                checked[name] = _url("verifierUrl", value) if value is not None else None
            elif name == "verifier_model":
                checked[name] = _text("verifierModel", value, 200) if value is not None else None
            elif name == "verifier_api_key":
                checked[name] = _text("verifierApiKey", value, 10_000) if value is not None else None
            elif name == "webhook_hosts":
                checked[name] = notifications.check_host_patterns(value)
            else:
                raise ValidationError(name, "is not a setting")
        with self.store.transaction() as tx:
            if tx.org(org_id) is None:
                raise NotFoundError("organisation", org_id)
            updated = evolve(tx.settings(org_id) or OrganisationSettings(org_id), **checked)  # type: ignore[arg-type]
            tx.upsert(updated)
            return updated

    # intent verification ------------------------------------------------------------------------------
    def verify_next(self, verifiers: verification.Verifiers, org_id: str | None = None) -> Verification | None:
        """Take one due intent check (of ``org_id`` only, when given), ask ``verifiers`` outside any
        transaction, and record the outcome; ``None`` when nothing is due. When no verifier could answer with
        an organisation's settings, all its due checks are recorded "no verifier configured" at once (one
        write, not one per action).

        Whatever goes wrong after the check was taken is recorded as ``UNVERIFIED`` and the check is asked
        again later, so no check is left taken and never answered. Drift has the consequence the organisation
        chose (``onDrift``): none, an after-execution review of the action, or a rollback of the session; and
        a ``drift.detected`` event."""
        now = self.clock()
        with self.store.transaction(write=False) as tx:  # most looks find nothing: no write lock for them
            if not tx.has_due_verification(now, org_id):
                return None
        with self.store.transaction() as tx:
            claimed = tx.claim_due_verification(now, now + verification.CHECK_LEASE, org_id)
            if claimed is None:
                return None
            session = _session(tx, claimed.org_id, claimed.session_id)
            if claimed.action_id is None:
                shown = [
                    a
                    for a in tx.actions_of(claimed.session_id)
                    if a.status in rules.UNDOABLE or a.status is ActionStatus.ROLLED_BACK
                ][-verification.MAX_ACTIONS_SHOWN :]
            else:
                shown = [_action(tx, claimed.org_id, claimed.action_id)]
            settings = tx.settings(claimed.org_id) or OrganisationSettings(claimed.org_id)
        verifier_settings = verifiers.settings_of(settings)
        if not verifiers.answerable(verifier_settings):
            with self.store.transaction() as tx:
                # due by the end of the lease: the check taken just now among them
                tx.settle_due_verifications(
                    claimed.org_id, now, now + verification.CHECK_LEASE, verification.NO_VERIFIER
                )
                return tx.verification(claimed.org_id, claimed.verification_id)
        if not session.intent.strip():
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, verification.NO_INTENT, "", retry=False)
        if not shown:
            return self._record_check(
                claimed,
                VerificationOutcome.VERIFIED,
                "the session did nothing that could go against it",
                "",
                retry=False,
            )
        try:
            check = verification.IntentCheck(
                org_id=claimed.org_id,
                session_id=session.session_id,
                agent_id=session.agent_id,
                intent=session.intent,
                subject="action" if claimed.action_id else "session",
                actions=[verification.CheckedAction.of(a, verifiers.redact) for a in shown],
                settings=verifier_settings,
            )
            verdict = verifiers.ask(check)
        except verification.VerifierError as exc:
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, str(exc), "", retry=True)
        except Exception as exc:  # a verifier's failure is never the agent's: note it (its kind only), retry
            log.exception("intent check %s failed", claimed.verification_id)
            reason = f"the verifier failed ({type(exc).__name__}); see the server's log"
            return self._record_check(claimed, VerificationOutcome.UNVERIFIED, reason, "", retry=True)
        if verdict is None:
            return self._record_check(
                claimed, VerificationOutcome.UNVERIFIED, verification.NO_VERIFIER, "", retry=False
            )
        return self._record_check(claimed, verdict.outcome, verdict.rationale, verdict.verifier, retry=False)

    def _record_check(
        self, claimed: Verification, outcome: VerificationOutcome, rationale: str, verifier: str, *, retry: bool
    ) -> Verification:
        now = self.clock()
        rationale, verifier = verification.printable(rationale, MAX_TEXT), verification.printable(verifier, 200)
        attempts = claimed.attempts + 1
        again = retry and attempts <= len(verification.RETRY_AFTER)
        due = now + verification.RETRY_AFTER[attempts - 1] if again else None
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
                        self._after_drift(tx, checked)
                except Exception:  # any failure at all: the recorded outcome must stand
                    log.exception("the consequence of drift in session %s failed", checked.session_id)
        return checked

    @staticmethod
    def _may_start_rollback(tx: Tx, session: Session) -> bool:
        """No rollback under way, and something to undo."""
        under_way = _session_rollback_under_way(tx, session.session_id)
        return under_way is None and any(a.status in rules.UNDOABLE for a in tx.actions_of(session.session_id))

    def _after_drift(self, tx: Tx, check: Verification) -> None:
        org = tx.org(check.org_id)
        settings = tx.settings(check.org_id) or OrganisationSettings(check.org_id)
        session = _session(tx, check.org_id, check.session_id)
        action = _action(tx, check.org_id, check.action_id) if check.action_id else None
        now = self.clock()
        consequence = "recorded only"
        if settings.on_drift is DriftResponse.REVIEW:
            if action is None:
                consequence = "recorded only: a review is opened for an action, and this check was of the session"
            elif org is not None and org.plan is Plan.FREE:
                consequence = "recorded only: the free plan has no approvals"
            elif action.status is not ActionStatus.SUCCESS:
                consequence = f"recorded only: the action is {action.status} already"
            elif any(p.status is ApprovalStatus.PENDING for p in tx.approvals_of_action(action.action_id)):
                consequence = "recorded only: the action already waits for a review"
            else:
                self._open_approval(
                    tx, _new_approval(action, ApprovalPurpose.AFTER_EXECUTION, now, DEFAULT_APPROVAL_TIMEOUT)
                )
                consequence = "review opened"
        elif settings.on_drift is DriftResponse.ROLLBACK:
            if self._may_start_rollback(tx, session):
                self._start_rollback(tx, session, "intent verifier", f"intent drift: {check.rationale}"[:200])
                consequence = "rollback started"
            else:
                consequence = "recorded only: nothing to roll back, or a rollback is under way"
        self._emit(
            tx,
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

    # webhooks -----------------------------------------------------------------------------------------
    def add_webhook(
        self, org_id: str, url: str, events: list[str], secret: str, fmt: WebhookFormat | str = WebhookFormat.JSON
    ) -> Webhook:
        """Register an endpoint for ``events`` (names of :class:`EventType`, or ``*``); ``secret`` is the
        encrypted token of its signing secret. The URL's host must be among the organisation's webhook hosts."""
        if not isinstance(events, list) or not events:
            raise ValidationError("events", f"must list some of {', '.join(notifications.EVENT_TYPES)} (or '*')")
        unknown = [e for e in events if e != "*" and e not in notifications.EVENT_TYPES]
        if unknown:
            raise ValidationError(
                "events", f"{unknown[0]!r} is not an event (use {', '.join(notifications.EVENT_TYPES)})"
            )
        with self.store.transaction(write=False) as tx:
            settings = tx.settings(org_id) or OrganisationSettings(org_id)
        hook = Webhook(
            webhook_id=new_id("whk"),
            org_id=org_id,
            # checked outside the transaction: it may resolve the host name (DNS)
            url=notifications.check_webhook_url(url, settings.webhook_hosts),
            events=sorted(set(events)),
            secret=secret,
            format=_enum("format", WebhookFormat, fmt),
            created_at=self.clock(),
        )
        with self.store.transaction() as tx:
            tx.insert(hook)
        return hook

    def list_webhooks(self, org_id: str) -> list[Webhook]:
        with self.store.transaction(write=False) as tx:
            return tx.webhooks_of(org_id)

    def delete_webhook(self, org_id: str, webhook_id: str) -> None:
        with self.store.transaction() as tx:
            if not tx.delete_webhook(org_id, webhook_id):
                raise NotFoundError("webhook", webhook_id)

    def list_deliveries(self, org_id: str, webhook_id: str, limit: int = 100) -> list[Delivery]:
        """The webhook's delivery log, newest first."""
        with self.store.transaction(write=False) as tx:
            if tx.webhook(org_id, webhook_id) is None:
                raise NotFoundError("webhook", webhook_id)
            return tx.deliveries_of(org_id, webhook_id, limit)

    def next_delivery(self) -> tuple[Delivery, Webhook, Event, OrganisationSettings] | None:
        """Take one delivery that is due (held for ``DELIVERY_LEASE``), with what sending it needs."""
        now = self.clock()
        with self.store.transaction() as tx:
            delivery = tx.claim_due_delivery(now, now + DELIVERY_LEASE)
            if delivery is None:
                return None
            hook = tx.webhook(delivery.org_id, delivery.webhook_id)
            event = tx.event(delivery.event_id)
            settings = tx.settings(delivery.org_id) or OrganisationSettings(delivery.org_id)
        if hook is None or event is None:
            return None
        return delivery, hook, event, settings

    def record_delivery(self, delivery: Delivery, *, status: int | None, error: str | None) -> Delivery:
        """The outcome of one attempt: a 2xx answer delivers; anything else is tried again after the next
        pause of ``delivery_retry_after``, until they run out (``FAILED``)."""
        now = self.clock()
        attempts = delivery.attempts + 1
        delivered = status is not None and 200 <= status < 300
        if delivered:
            outcome = evolve(
                delivery,
                status=DeliveryStatus.DELIVERED,
                attempts=attempts,
                due_at=None,
                last_status=status,
                last_error=None,
                delivered_at=now,
            )
        else:
            again = attempts <= len(self.delivery_retry_after)
            outcome = evolve(
                delivery,
                status=DeliveryStatus.PENDING if again else DeliveryStatus.FAILED,
                attempts=attempts,
                due_at=now + self.delivery_retry_after[attempts - 1] if again else None,
                last_status=status,
                last_error=(error or f"answered {status}")[:MAX_TEXT],
            )
        with self.store.transaction() as tx:
            tx.replace(outcome, due_at=delivery.due_at)
        return outcome

    # maintenance --------------------------------------------------------------------------------------
    def maintain(self) -> MaintenanceReport:
        """Expire approvals past ``timeout_at`` (with the consequences of an expiry) and mark sessions idle
        for 24 hours ``ABANDONED``. Run it periodically; every part is safe to run concurrently."""
        now = self.clock()
        expired = abandoned = 0
        with self.store.transaction(write=False) as tx:
            due = tx.approvals_due(now)
            idle = tx.sessions_idle_since(now - rules.ABANDONED_AFTER)
        for approval in due:
            try:
                with self.store.transaction() as tx:
                    current = tx.approval(approval.org_id, approval.approval_id)
                    if current is not None and current.status is ApprovalStatus.PENDING:
                        self._apply_decision(tx, current, ApprovalStatus.EXPIRED, SYSTEM, "timed out")
                        expired += 1
            except InvalidTransitionError:
                continue  # decided by someone else meanwhile
        if expired:
            self.wake_waiters()
        for session in idle:
            with self.store.transaction() as tx:
                if tx.replace(
                    evolve(session, status=SessionStatus.ABANDONED),
                    status=SessionStatus.ACTIVE,
                    last_activity_at=session.last_activity_at,
                ):
                    abandoned += 1
        return MaintenanceReport(expired, abandoned)


# helpers: reads that must find their record, and guarded writes --------------------------------------


def _session(tx: Tx, org_id: str, session_id: str, lock: bool = False) -> Session:
    session = tx.session(org_id, session_id, lock=lock)
    if session is None:
        raise NotFoundError("session", session_id)
    return session


def _action(tx: Tx, org_id: str, action_id: str) -> Action:
    action = tx.action(org_id, action_id)
    if action is None:
        raise NotFoundError("action", action_id)
    return action


def _approval(tx: Tx, org_id: str, approval_id: str) -> Approval:
    approval = tx.approval(org_id, approval_id)
    if approval is None:
        raise NotFoundError("approval", approval_id)
    return approval


def _session_rollback_under_way(tx: Tx, session_id: str) -> Rollback | None:
    """The session's unfinished rollback, as a whole-session one: a one-action rollback under way (an
    after-execution rejection) is widened to the whole session, so a session rollback asked for now is not
    lost when that one action is undone."""
    running = tx.active_rollback(session_id)
    if running is not None and not running.whole_session:
        running = tx.update_rollback(running.rollback_id, {"whole_session": True}, status=running.status)
    return running


def _finished(status: RollbackStatus, now: datetime) -> dict[str, object]:
    return {"status": status, "finished_at": now, "lease_token": None, "lease_until": None}


def _close_pending_approvals(tx: Tx, action: Action, now: datetime, reason: str) -> list[Approval]:
    """An action that is rolled back needs no review any more: close what still asks about it (returned,
    so that the caller announces the decisions)."""
    closed: list[Approval] = []
    for approval in tx.approvals_of_action(action.action_id):
        if approval.status is ApprovalStatus.PENDING:
            decided = evolve(
                approval, status=ApprovalStatus.REJECTED, resolved_at=now, resolved_by=SYSTEM, reason=reason
            )
            _replace(tx, decided, status=ApprovalStatus.PENDING)
            closed.append(decided)
    return closed


def _undo_row(undo: UndoConfig | None) -> JSON | None:
    return undo_to_wire(undo) if undo is not None else None


def _replace(tx: Tx, record: object, **expected: object) -> None:
    if not tx.replace(record, **expected):
        raise InvalidTransitionError(f"{type(record).__name__} changed concurrently; try again")


def _set_action(
    tx: Tx,
    action: Action,
    now: datetime,
    status: ActionStatus | None = None,
    undo_status: UndoStatus | None = None,
    **other: object,
) -> Action:
    """Change an action's status and/or undo status, checked against the transition tables."""
    changes = dict(other)
    if status is not None and status is not action.status:
        rules.check("action", rules.ACTION_TRANSITIONS, action.status, status)
        changes["status"] = status
    if undo_status is not None and undo_status is not action.undo_status:
        rules.check("undo", rules.UNDO_TRANSITIONS, action.undo_status, undo_status)
        changes["undo_status"] = undo_status
    changed = evolve(action, updated_at=now, **changes)  # type: ignore[arg-type]
    _replace(tx, changed, status=action.status, undo_status=action.undo_status)
    return changed


def _set_session_status(tx: Tx, session: Session, status: SessionStatus, **changes: object) -> None:
    if status is session.status:
        return
    rules.check("session", rules.SESSION_TRANSITIONS, session.status, status)
    _replace(tx, evolve(session, status=status, **changes), status=session.status)  # type: ignore[arg-type]


def _verification_of(org_id: str, session_id: str, action_id: str | None, now: datetime) -> Verification:
    """A check of an action (or, ``action_id`` None, of a whole session) against the intent, due now."""
    return Verification(new_id("ver"), org_id, session_id, action_id, created_at=now, due_at=now)


def _new_approval(
    action: Action,
    purpose: ApprovalPurpose,
    now: datetime,
    timeout: timedelta,
    rollback_id: str | None = None,
) -> Approval:
    _check_approval_timeout(timeout)
    return Approval(
        approval_id=new_id("apr"),
        org_id=action.org_id,
        session_id=action.session_id,
        action_id=action.action_id,
        purpose=purpose,
        status=ApprovalStatus.PENDING,
        requested_at=now,
        timeout_at=now + timeout,
        rollback_id=rollback_id,
    )


def _view(tx: Tx, session: Session, *, verified: bool = False) -> SessionInfo:
    """The session as read; ``verified`` adds its intent verifications (one more query, so lists skip it)."""
    actions = tx.actions_of(session.session_id)
    approvals = tx.approvals_of_session(session.session_id)
    of_session = None
    if verified:
        checks = {v.action_id: v for v in tx.verifications_of(session.session_id)}
        actions = [evolve(a, verification=checks[a.action_id]) if a.action_id in checks else a for a in actions]
        of_session = checks.get(None)
    return SessionInfo(
        id=session.session_id,
        agent_id=session.agent_id,
        intent=session.intent,
        sandbox=session.sandbox,
        status=session.status,
        display_status=rules.display_status(session, actions, approvals),
        created_at=session.created_at,
        last_activity_at=session.last_activity_at,
        completed_at=session.completed_at,
        actions=actions,
        approvals=approvals,
        verification=of_session,
    )


def _approval_view(tx: Tx, approval: Approval, now: datetime) -> ApprovalInfo:
    action = _action(tx, approval.org_id, approval.action_id)
    session = _session(tx, approval.org_id, approval.session_id)
    return _approval_info(approval, action, session, now)


def _approval_info(approval: Approval, action: Action, session: Session, now: datetime) -> ApprovalInfo:
    remaining = (approval.timeout_at - now).total_seconds() if approval.status is ApprovalStatus.PENDING else 0.0
    return ApprovalInfo(
        approval_id=approval.approval_id,
        action_id=action.action_id,
        api_name=action.api_name,
        operation_type=action.operation_type,
        session_id=session.session_id,
        agent_id=session.agent_id,
        purpose=approval.purpose,
        payload_summary=summarise(action),
        requested_at=approval.requested_at,
        timeout_at=approval.timeout_at,
        time_remaining=max(0.0, remaining),
        status=approval.status,
        resolved_at=approval.resolved_at,
        resolved_by=approval.resolved_by,
        reason=approval.reason,
        action_status=action.status,
        unconfirmed=rules.is_unconfirmed(action, approval, now),
        session_intent=session.intent,
    )


def summarise(action: Action, limit: int = 240) -> str:
    """A one-line, human-readable summary of what an action does, for reviewers."""
    body = json.dumps(action.payload, separators=(", ", ": "), sort_keys=True, default=str)
    text = f"{action.operation_type} {action.api_name} {body}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_approval_timeout(timeout: timedelta, field: str = "timeout_ms") -> None:
    if not timedelta(0) < timeout <= MAX_APPROVAL_TIMEOUT:
        raise ValidationError(
            field, f"an approval timeout must be positive and at most {MAX_APPROVAL_TIMEOUT.days} days"
        )


def _text(field: str, value: object, max_len: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(field, "must not contain NUL characters")
    if not allow_empty and not value.strip():
        raise ValidationError(field, "must not be empty")
    if len(value) > max_len:
        raise ValidationError(field, f"must be at most {max_len} characters")
    return value


def _bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be true or false, not {value!r}")
    return value


def _json(field: str, value: object) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, f"must be JSON-serialisable ({exc})") from None


def _enum(field: str, cls: type[E], value: object) -> E:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in cls)
        raise ValidationError(field, f"{value!r} is not one of {allowed}") from None


_PASSWORDS = PasswordHasher()
MIN_PASSWORD_LENGTH = 10
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


@functools.cache
def _unknown_user_hash() -> str:
    """Checked against when the email is unknown, so that a wrong email costs as long as a wrong password."""
    return _PASSWORDS.hash(secrets.token_urlsafe(16))


def _url(field: str, value: object) -> str:
    url = _text(field, value, 2000).strip()
    if not re.match(r"https?://[^/\s]+", url):
        raise ValidationError(field, f"{url!r} is not an http or https URL")
    return url


def _email(value: object) -> str:
    # 200, like every name a record keeps (``resolvedBy``, ``requestedBy``), which is where emails end up.
    email = _text("email", value, 200).strip().lower()
    if not _EMAIL.fullmatch(email):
        raise ValidationError("email", f"{email!r} is not an email address")
    return email


def _password(value: object) -> str:
    password = _text("password", value, 1024)
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValidationError("password", f"must be at least {MIN_PASSWORD_LENGTH} characters")
    return password


def _hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _encode_cursor(position: tuple[datetime, str]) -> str:
    raw = json.dumps([position[0].isoformat(), position[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, session_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(created), str(session_id)
    except (ValueError, TypeError):
        raise ValidationError("cursor", "is not a cursor given out by a listing (pass nextCursor back as is)") from None
