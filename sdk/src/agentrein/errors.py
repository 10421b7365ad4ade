"""The errors an agent may catch. They are AgentRein's own (``agentrein_core.errors``), re-exported here so
agents import everything from ``agentrein``."""

from __future__ import annotations

from agentrein_core.errors import (
    AgentReinError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
    ForbiddenError,
    InvalidTransitionError,
    NotFoundError,
    PolicyBlockedError,
    RollbackRefusedError,
    UnauthorizedError,
    UndoError,
    UndoUnavailableError,
    UnknownConnectorError,
    ValidationError,
)

__all__ = [
    "AgentReinError",
    "AgentReinUnavailableError",
    "ApprovalRejectedError",
    "ApprovalTimeoutError",
    "ForbiddenError",
    "InvalidTransitionError",
    "NotFoundError",
    "PolicyBlockedError",
    "RollbackRefusedError",
    "UnauthorizedError",
    "UndoError",
    "UndoUnavailableError",
    "UnknownConnectorError",
    "ValidationError",
]
