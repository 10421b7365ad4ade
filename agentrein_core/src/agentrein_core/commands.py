"""What callers ask of the engine, as commands built once where they are asked (a public method of the SDK, a
REST route) and passed through every layer below unchanged: the SDK's mode, its outbox, the wire (camelCase
through :mod:`agentrein_core.converter`, a duration as whole milliseconds) and the engine's use case, which
checks and redacts them. None is trusted before the engine has checked it.

They sit beside the engine's package rather than in it: an agent of a server builds them too, and importing
``agentrein_core.engine`` would load the engine's database layer (SQLAlchemy and the rest) into its process."""

from __future__ import annotations

from datetime import timedelta

from attrs import frozen

from agentrein_core.model import JSON, UndoConfig
from agentrein_core.statuses import OperationType, PolicyEffect

#: How long a reviewer has for an approval the caller gave no timeout for (held, after-execution, rollback).
DEFAULT_APPROVAL_TIMEOUT = timedelta(hours=24)


@frozen
class NewPolicy:
    """A rule to add to the organisation's policies. ``before_execution`` (``REQUIRE_APPROVAL`` only) holds a
    matching call until a reviewer approves it, for ``approval_timeout_ms`` if given (else the agent's own
    approval timeout); otherwise a ``REQUIRE_APPROVAL`` rule reviews the call after it ran."""

    name: str
    effect: PolicyEffect | str
    connector: str | None = None
    api_name: str | None = None
    agent_id: str | None = None
    operation_type: str | None = None
    enabled: bool = True
    before_execution: bool = False
    approval_timeout_ms: int | None = None


@frozen
class WriteAhead:
    """The write-ahead record of a call, made before it runs: which call, and whether the agent's code holds it
    for a reviewer (``requires_approval``, waiting ``approval_timeout`` for one).

    ``idempotency_key``: the key the call will run with, made by the client before it asks, so that a call whose
    record was written but whose answer was lost is one record however it goes on: asked again, the record
    written is the answer; run anyway (``failure_mode="open"``) and journaled under the same key, its replay
    settles that record. None: the engine makes one."""

    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    requires_approval: bool = False
    approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT
    idempotency_key: str | None = None


@frozen
class ExecutedCall:
    """A call that ran with no write-ahead record (AgentRein was unreachable), and how it ended: when it
    ``succeeded``, its ``response`` and ``undo``; otherwise its ``error``, and whether that rolls the session
    back (:attr:`Failed.rolls_back`)."""

    idempotency_key: str
    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    succeeded: bool
    response: JSON | None = None
    undo: UndoConfig | None = None
    error: str | None = None
    rolls_back: bool = True


@frozen
class Confirmed:
    """A recorded call succeeded: its (redacted) response, and the undo derived from it."""

    response: JSON | None = None
    undo: UndoConfig | None = None


@frozen
class Failed:
    """A recorded call failed, and why. ``rolls_back``: whether the failure rolls the session back, as a failed
    call does unless the agent chose to only record it (an MCP tool's error with ``on_tool_error="record"``:
    models often recover from one)."""

    error: str
    rolls_back: bool = True
