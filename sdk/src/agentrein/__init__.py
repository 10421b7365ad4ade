"""AgentRein: wrap the API clients your agent already uses; every side effect is recorded before it runs,
checked against your policies, held for approval where you say so, retried safely, and undone last-first
when the run goes wrong.

>>> ar = AgentRein()
>>> s = ar.new_session(agent_id="billing-agent", intent="Process monthly invoice batch")
>>> api = ar.wrap(httpx.Client(base_url="https://api.example.com"), s, connector="http")
"""

from __future__ import annotations

from agentrein._admin import AdminClient
from agentrein._async_client import AsyncAgentRein
from agentrein._client import AgentRein
from agentrein._errors import (
    AgentReinError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
    ForbiddenError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    RollbackFailedError,
    RollbackRefusedError,
    UnauthorizedError,
    UndoError,
    UndoUnavailableError,
    UnknownConnectorError,
    ValidationError,
)
from agentrein_core.read_models import ApprovalInfo, RollbackInfo, SessionInfo, SessionSummary, UndoWithAgent
from agentrein_core.statuses import (
    ActionStatus,
    ApprovalPurpose,
    ApprovalStatus,
    DisplayStatus,
    OperationType,
    PolicyEffect,
    SessionStatus,
    UndoStatus,
    VerificationOutcome,
)

__all__ = [
    "ActionStatus",
    "AdminClient",
    "AgentRein",
    "AgentReinError",
    "AgentReinUnavailableError",
    "ApprovalInfo",
    "ApprovalPurpose",
    "ApprovalRejectedError",
    "ApprovalStatus",
    "ApprovalTimeoutError",
    "AsyncAgentRein",
    "DisplayStatus",
    "ForbiddenError",
    "InvalidTransitionError",
    "NotFoundError",
    "OperationType",
    "PolicyBlockedError",
    "PolicyEffect",
    "RollbackFailedError",
    "RollbackInfo",
    "RollbackRefusedError",
    "SessionInfo",
    "SessionStatus",
    "SessionSummary",
    "UnauthorizedError",
    "UndoError",
    "UndoStatus",
    "UndoUnavailableError",
    "UndoWithAgent",
    "UnknownConnectorError",
    "ValidationError",
    "VerificationOutcome",
]
