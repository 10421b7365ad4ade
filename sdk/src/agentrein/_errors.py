"""The errors an agent may catch. They are AgentRein's own (``agentrein_core.errors``), re-exported here so
agents import everything from ``agentrein``, and :class:`RollbackFailedError`, which only the SDK raises."""

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
from agentrein_core.model import Action
from agentrein_core.read_models import SessionInfo
from agentrein_core.statuses import ActionStatus


class RollbackFailedError(AgentReinError):
    """A rollback ended with an undo that failed: ``action`` is ``ROLLBACK_FAILED`` (its ``error`` says why),
    the chain stopped there, and ``session`` is the session as it then stands (stored ``FAILED``, displayed
    ``ROLLBACK_FAILED``). An operator fixes the cause and rolls the session back again."""

    def __init__(self, session: SessionInfo, action: Action) -> None:
        super().__init__(
            f"the rollback of session {session.id} failed: the undo of {action.api_name} (seq {action.seq}) "
            f"failed: {action.error or 'no reason given'}"
        )
        self.session = session
        self.action = action

    @classmethod
    def of(cls, session: SessionInfo) -> RollbackFailedError | None:
        """The error a rollback that left ``session`` so stands for, if its chain stopped at a failed undo."""
        failed = [a for a in session.actions if a.status is ActionStatus.ROLLBACK_FAILED]
        return cls(session, failed[-1]) if failed else None


__all__ = [
    "AgentReinError",
    "AgentReinUnavailableError",
    "ApprovalRejectedError",
    "ApprovalTimeoutError",
    "ForbiddenError",
    "InvalidTransitionError",
    "NotFoundError",
    "PolicyBlockedError",
    "RollbackFailedError",
    "RollbackRefusedError",
    "UnauthorizedError",
    "UndoError",
    "UndoUnavailableError",
    "UnknownConnectorError",
    "ValidationError",
]
