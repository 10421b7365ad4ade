"""The named errors of AgentRein. The SDK re-exports the ones agents catch; the server maps each to a
problem+json ``type`` slug (``problem_type``)."""

from __future__ import annotations


class AgentReinError(Exception):
    """Base class of every error AgentRein raises on purpose."""

    problem_type = "agentrein-error"


class NotFoundError(AgentReinError, LookupError):
    """No such record in this organisation (another organisation's ids are reported the same way)."""

    problem_type = "not-found"

    def __init__(self, kind: str, record_id: str, *, key: str = "id") -> None:
        super().__init__(f"no {kind} with {key} {record_id!r}")
        self.kind = kind
        self.record_id = record_id


class ValidationError(AgentReinError, ValueError):
    """Bad input, naming the field at fault."""

    problem_type = "validation-error"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownConnectorError(ValidationError):
    """A connector name that no installed plugin provides; the message lists the installed ones."""

    def __init__(self, name: str, installed: list[str]) -> None:
        listed = ", ".join(sorted(installed)) or "none"
        super().__init__("connector", f"no connector named {name!r} is installed (installed: {listed})")
        self.name = name
        self.installed = sorted(installed)


class UnauthorizedError(AgentReinError):
    """No API key, or one that is unknown or revoked."""

    problem_type = "unauthorized"


class ForbiddenError(AgentReinError):
    """The API key is valid but its role may not do this."""

    problem_type = "forbidden"


class InvalidTransitionError(AgentReinError):
    """A status change the rules forbid, or one that lost a race to a concurrent change."""

    problem_type = "invalid-transition"


class LeaseLostError(InvalidTransitionError):
    """A rollback worker's lease on its job ran out and another worker took the job over."""


class RollbackRefusedError(InvalidTransitionError):
    """A rollback the rules of the status reference (§3) do not allow for this session or caller."""

    problem_type = "rollback-refused"


class PolicyBlockedError(AgentReinError):
    """A ``BLOCK`` policy matched: the action is stored ``FAILED`` and the call never ran."""

    problem_type = "policy-blocked"

    def __init__(self, action_id: str, policy_name: str) -> None:
        super().__init__(f"blocked by policy {policy_name!r}; the call was not made")
        self.action_id = action_id
        self.policy_name = policy_name


class ApprovalRejectedError(AgentReinError):
    """A before-execution approval was rejected (or no approval gate exists on the plan); the action is
    ``FAILED`` and the session has been rolled back. ``reason`` is the reviewer's reason."""

    problem_type = "approval-rejected"

    def __init__(self, reason: str | None, approval_id: str | None = None, action_id: str | None = None) -> None:
        super().__init__(f"approval rejected: {reason}" if reason else "approval rejected")
        self.reason = reason
        self.approval_id = approval_id
        self.action_id = action_id


class ApprovalTimeoutError(AgentReinError, TimeoutError):
    """A before-execution approval expired undecided; the action is ``FAILED`` and the session rolled back."""

    problem_type = "approval-expired"

    def __init__(self, approval_id: str, action_id: str | None = None) -> None:
        super().__init__(f"approval {approval_id} expired before anyone decided it")
        self.approval_id = approval_id
        self.action_id = action_id


class AgentReinUnavailableError(AgentReinError):
    """The AgentRein store or server cannot be reached (raised before any side effect in ``closed`` mode)."""

    problem_type = "unavailable"


class UndoError(AgentReinError):
    """An inverse call failed; the action becomes ``ROLLBACK_FAILED`` and the rollback chain stops."""

    problem_type = "undo-failed"


class UndoUnavailableError(AgentReinError):
    """This process cannot run the next undo of a rollback (it holds no client for that connector in that
    session); the rollback stays where it is, for a process that can."""

    problem_type = "undo-unavailable"
