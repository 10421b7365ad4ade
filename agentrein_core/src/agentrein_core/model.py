"""The records AgentRein keeps, as immutable attrs classes.

Records are values: a state change makes a new record (``attrs.evolve``) through the rules in
:mod:`agentrein_core.rules`, and the store writes it guarded by the status it was read with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from attrs import field, frozen

from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DeliveryStatus,
    DriftResponse,
    EventType,
    HandoffOutcome,
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

JSON = dict[str, Any]

#: The undo type of an action that cannot or should not be undone: logged for audit, ``SKIPPED`` on rollback.
UNDO_NONE = "none"

#: The organisation an embedded agent, and a fresh server, works in unless told another.
DEFAULT_ORGANISATION = "default"


@frozen
class UndoConfig:
    """How to undo one action: a connector-specific ``type`` (``http-delete``, ``none`` …) and its ``params``.

    ``require_approval`` holds the undo for a human's ``ROLLBACK`` approval before it runs (money moves,
    repositories vanish). The connector that derived the config is the only one that interprets ``params``.
    """

    type: str
    params: JSON = field(factory=dict)
    require_approval: bool = False

    @property
    def is_none(self) -> bool:
        return self.type == UNDO_NONE


@frozen
class Organisation:
    org_id: str
    name: str
    plan: Plan
    created_at: datetime
    policy_version: int = 0


@frozen
class Session:
    session_id: str
    org_id: str
    agent_id: str
    intent: str
    sandbox: bool
    status: SessionStatus
    created_at: datetime
    last_activity_at: datetime
    completed_at: datetime | None = None
    #: The id of the API key that opened it (None: opened by an embedded engine, or before keys were remembered).
    opened_by_key: str | None = None
    #: The client that recorded it, when not one of AgentRein's own: ``"published SDK (Python)"`` for the hosted
    #: product's SDKs speaking the compatible API (``/compat``). None: AgentRein's SDKs, API or command line.
    recorded_with: str | None = None


@frozen
class Verification:
    """Whether an action (``action_id``), or a whole session (``action_id`` None), did what the session's
    intent declared. ``outcome`` is None until first checked; ``due_at`` is when it is (re)checked next, None
    once final (an UNVERIFIED outcome from a failing verifier is tried again later)."""

    verification_id: str
    org_id: str
    session_id: str
    action_id: str | None
    created_at: datetime
    outcome: VerificationOutcome | None = None
    rationale: str = ""
    verifier: str = ""
    attempts: int = 0
    #: While a worker checks it, pushed ahead by the worker's lease (so no other takes it meanwhile).
    due_at: datetime | None = None
    checked_at: datetime | None = None


#: What the key of an approved action's failure record adds to the action's own key.
FAILURE_KEY_SUFFIX = "-failed"
#: What the key of a call that ran while its write-ahead record was held (its answer lost) adds to that key.
RAN_KEY_SUFFIX = "-ran"
#: The longest key a client may choose for a write-ahead record: the engine adds a suffix above to it.
MAX_WRITE_AHEAD_KEY = 100 - max(len(FAILURE_KEY_SUFFIX), len(RAN_KEY_SUFFIX))


@frozen
class Action:
    """One recorded side-effecting call, written before it runs (write-ahead)."""

    action_id: str
    session_id: str
    org_id: str
    seq: int
    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    status: ActionStatus
    idempotency_key: str
    created_at: datetime
    updated_at: datetime
    response: JSON | None = None
    undo: UndoConfig | None = None
    undo_status: UndoStatus = UndoStatus.NONE
    error: str | None = None
    #: The policy that decided the write-ahead record (None: no policy matched), and whether it asked for an
    #: after-execution review, which is opened when the call is confirmed.
    policy_name: str | None = None
    review_after: bool = False
    #: A reviewer rejected this executed action after the fact: undo it alone (status reference §4).
    undo_requested: bool = False
    #: Its intent verification, when read with its session (not a column of the action's own row).
    verification: Verification | None = None

    @property
    def undo_idempotency_key(self) -> str:
        """The key every attempt of this action's inverse carries: stable, and distinct from the action's."""
        return f"{self.idempotency_key}-undo"

    @property
    def failure_idempotency_key(self) -> str:
        """The key of the ``FAILED`` record of an approved action's failed call (the approved action itself
        stays ``CLEARED``, status reference §1)."""
        return f"{self.idempotency_key}{FAILURE_KEY_SUFFIX}"

    @property
    def ran_idempotency_key(self) -> str:
        """The key of the record of this held call, run without waiting for its decision: its write-ahead answer
        was lost, so the client ran it as AgentRein unreachable (``failure_mode="open"``) and journaled it."""
        return f"{self.idempotency_key}{RAN_KEY_SUFFIX}"


@frozen
class Approval:
    approval_id: str
    org_id: str
    session_id: str
    action_id: str
    purpose: ApprovalPurpose
    status: ApprovalStatus
    requested_at: datetime
    timeout_at: datetime
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    reason: str | None = None
    rollback_id: str | None = None
    #: Before execution: until when the agent was last known to wait for the decision. A long-poll on the
    #: request sets it to when it will end at the latest as it starts, and to its end as it ends (two writes a
    #: long-poll, whatever its length), so many replicas on one database share it.
    waited_until: datetime | None = None


@frozen
class Policy:
    """An organisation rule: when every given glob matches an action, ``effect`` applies to it.

    A ``REQUIRE_APPROVAL`` rule reviews a matching call after it ran, unless ``before_execution``: then the
    call is held until a reviewer approves it, for ``approval_timeout_ms`` (else the agent's own timeout)."""

    policy_id: str
    org_id: str
    name: str
    effect: PolicyEffect
    enabled: bool
    created_at: datetime
    connector: str | None = None
    api_name: str | None = None
    agent_id: str | None = None
    operation_type: str | None = None
    before_execution: bool = False
    approval_timeout_ms: int | None = None


@frozen
class Rollback:
    """A rollback job: the undo chain of a whole session, or (``whole_session`` false) of the actions whose
    undo a reviewer requested by rejecting them after execution.

    The chain is derived from the actions themselves (what is executed and not yet undone or skipped), so a
    job interrupted by a crash resumes where it stopped; ``lease_token`` names the one worker allowed to
    advance it until ``lease_until``.
    """

    rollback_id: str
    org_id: str
    session_id: str
    status: RollbackStatus
    trigger: str
    requested_by: str
    created_at: datetime
    whole_session: bool = True
    #: How long a rollback approval this job opens waits for a reviewer (None: the runner's default).
    approval_timeout_ms: int | None = None
    lease_token: str | None = None
    lease_until: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None


@frozen
class BeforeState:
    """An object as the server read it just before a call changed it (the published SDKs' precapture, through
    ``/compat``), kept redacted until the call is reported, so that its undo can restore it."""

    precapture_id: str
    org_id: str
    session_id: str
    connector: str
    api_name: str
    state: JSON
    captured_at: datetime
    #: The call it was read for, when that call was held for a reviewer before it ran: its undo is derived
    #: once it is confirmed, from this before-state.
    action_id: str | None = None


@frozen
class UndoHandoff:
    """An undo the server cannot run (its connector reaches the service only through the client the agent
    wrapped: an MCP server over stdio), handed to the agent process that holds that client.

    The rollback job waits while it is offered (until ``claim_by``) and while a process holds it (``lease_id``,
    until ``leased_until``); the process reports ``outcome`` (``DONE`` or ``FAILED`` with ``error``), and the
    job goes on. Offered and never taken, or taken and never reported, the undo fails with that reason."""

    handoff_id: str
    org_id: str
    session_id: str
    rollback_id: str
    action_id: str
    connector: str
    offered_at: datetime
    claim_by: datetime
    lease_id: str | None = None
    leased_until: datetime | None = None
    outcome: HandoffOutcome | None = None
    error: str | None = None


@frozen
class ApiKey:
    """An API key: only ``key_hash`` (sha256 of the secret) is stored; the secret is shown once, at creation.
    ``prefix`` is the secret's first characters, so a human can tell keys apart in a list."""

    key_id: str
    org_id: str
    role: Role
    key_hash: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None


@frozen
class User:
    """A person who signs in to the dashboard with ``email`` (unique across organisations, stored lower-case)
    and a password, of which only an argon2 hash is kept."""

    user_id: str
    org_id: str
    email: str
    role: UserRole
    password_hash: str = field(repr=False)
    created_at: datetime
    #: Bumped to end every sign-in made so far (signing out ends them all); a sign-in remembers its epoch.
    sign_in_epoch: int = 0


@frozen
class ConnectorConfig:
    """An organisation's settings for one connector, used by the server's rollback worker to run inverses.

    ``credentials`` is an encrypted token (the server's secret key encrypts it); the core never reads it."""

    org_id: str
    connector: str
    enabled: bool
    config: JSON
    updated_at: datetime
    credentials: str | None = None


@frozen
class OrganisationSettings:
    """An organisation's choices for intent verification and webhooks. ``verifier_api_key`` is an encrypted
    token (the server encrypts; nothing returns it)."""

    org_id: str
    on_drift: DriftResponse = DriftResponse.REVIEW
    verifier_url: str | None = None
    verifier_model: str | None = None
    verifier_api_key: str | None = field(default=None, repr=False)
    #: Hosts webhooks may be sent to (exact names, or ``*.example.com``); none: no webhook may be added.
    webhook_hosts: list[str] = field(factory=list)


@frozen
class Event:
    """Something that happened, kept for ``agentrein_notify`` plugins (``dispatched_at`` once they had it)
    and delivered to the organisation's webhooks."""

    event_id: str
    org_id: str
    type: EventType
    data: JSON
    created_at: datetime
    dispatched_at: datetime | None = None


@frozen
class Webhook:
    """An endpoint the organisation registered; ``secret`` is an encrypted token (HMAC key of signatures)."""

    webhook_id: str
    org_id: str
    url: str
    events: list[str]
    secret: str = field(repr=False)
    format: WebhookFormat
    created_at: datetime


@frozen
class Delivery:
    """One event to one webhook: attempted until delivered (a 2xx answer) or given up."""

    delivery_id: str
    org_id: str
    webhook_id: str
    event_id: str
    event_type: EventType
    status: DeliveryStatus
    created_at: datetime
    attempts: int = 0
    due_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
