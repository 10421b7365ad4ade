"""The named errors of AgentRein, and their wire form.

Each error class declares its HTTP ``status``, its problem+json ``type`` slug (``problem_type``) and whether
it rolls the session back when recording a call meets it (``rolls_back``); subclasses inherit them unless
they declare their own, and every class that declares a slug is registered
under it. :func:`to_problem` turns an error into an RFC 9457 problem+json body (with the attributes named in
``problem_fields``), :func:`from_problem` turns a status and body back into the same error: the server
answers with the one, the SDK and the command line raise the other, so a caller cannot tell whether an error
came from a server or from the engine in its own process.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

TYPE_BASE = "https://agentrein.dev/problems/"
#: Answers that mean the server (or the database behind it) cannot serve now, rather than that it failed.
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})

#: Every error class that declares a problem type, by its slug (the classes :func:`from_problem` rebuilds).
PROBLEM_TYPES: dict[str, type[AgentReinError]] = {}


class AgentReinError(Exception):
    """Base class of every error AgentRein raises on purpose."""

    status: ClassVar[int] = 500
    problem_type: ClassVar[str] = "agentrein-error"
    #: Whether recording a call that meets this error means action logging failed, so the call does not run
    #: and the session is rolled back: bad input and AgentRein failing do; a decision about the call, the
    #: session's own state or the key's rights do not (a rollback would be refused or wrong then). Sent as
    #: the problem's ``rollsBack``, which a client's rebuilt error takes.
    rolls_back: bool = True
    #: The attributes a problem+json body carries beside ``detail``: wire (camelCase) name -> attribute. An
    #: attribute's class-level value is what a body that lacks the field gives.
    problem_fields: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "problem_type" in cls.__dict__:
            taken = PROBLEM_TYPES.setdefault(cls.problem_type, cls)
            if taken is not cls:
                raise TypeError(f"{cls.__name__}: problem type {cls.problem_type!r} is {taken.__name__}'s")


PROBLEM_TYPES[AgentReinError.problem_type] = AgentReinError


class NotFoundError(AgentReinError, LookupError):
    """No such record in this organisation (another organisation's ids are reported the same way)."""

    status = 404
    problem_type = "not-found"
    rolls_back = False
    problem_fields: ClassVar[Mapping[str, str]] = {"kind": "kind", "id": "record_id"}
    kind: str = "record"
    record_id: str = "?"

    def __init__(self, kind: str, record_id: str, *, key: str = "id") -> None:
        super().__init__(f"no {kind} with {key} {record_id!r}")
        self.kind = kind
        self.record_id = record_id


class ValidationError(AgentReinError, ValueError):
    """Bad input, naming the field at fault."""

    status = 400
    problem_type = "validation-error"
    problem_fields: ClassVar[Mapping[str, str]] = {"field": "field"}
    field: str = "request"

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

    status = 401
    problem_type = "unauthorized"
    rolls_back = False


class ForbiddenError(AgentReinError):
    """The API key is valid but its role may not do this."""

    status = 403
    problem_type = "forbidden"
    rolls_back = False


class InvalidTransitionError(AgentReinError):
    """A status change the rules forbid, or one that lost a race to a concurrent change."""

    status = 409
    problem_type = "invalid-transition"
    rolls_back = False


class LeaseLostError(InvalidTransitionError):
    """A lease ran out: a rollback worker's on its job (another worker took the job over), or an agent process's
    on an undo it was handed (its outcome comes too late)."""

    problem_type = "lease-lost"


class RollbackRefusedError(InvalidTransitionError):
    """A rollback the rules of the status reference (§3) do not allow for this session or caller."""

    problem_type = "rollback-refused"


class PolicyBlockedError(AgentReinError):
    """A ``BLOCK`` policy matched: the action is stored ``FAILED`` and the call never ran (or, for a call
    reported after it ran, ``ran``: it is recorded and undone where it can be)."""

    status = 403
    problem_type = "policy-blocked"
    rolls_back = False
    problem_fields: ClassVar[Mapping[str, str]] = {"actionId": "action_id", "policyName": "policy_name"}
    action_id: str = ""
    policy_name: str = ""

    def __init__(self, action_id: str, policy_name: str, *, ran: bool = False, undoable: bool = True) -> None:
        if not ran:
            made = "the call was not made"
        elif undoable:
            made = "the call had already run: it is being undone"
        else:
            made = "the call had already run and AgentRein cannot undo it: it waits for a reviewer"
        super().__init__(f"blocked by policy {policy_name!r}; {made}")
        self.action_id = action_id
        self.policy_name = policy_name


class ApprovalRejectedError(AgentReinError):
    """A before-execution approval was rejected (or no approval gate exists on the plan); the action is
    ``FAILED`` and the session has been rolled back. ``reason`` is the reviewer's reason."""

    status = 403
    problem_type = "approval-rejected"
    rolls_back = False
    problem_fields: ClassVar[Mapping[str, str]] = {
        "actionId": "action_id",
        "approvalId": "approval_id",
        "reason": "reason",
    }
    reason: str | None = None
    approval_id: str | None = None
    action_id: str | None = None

    def __init__(self, reason: str | None, approval_id: str | None = None, action_id: str | None = None) -> None:
        super().__init__(f"approval rejected: {reason}" if reason else "approval rejected")
        self.reason = reason
        self.approval_id = approval_id
        self.action_id = action_id


class ApprovalTimeoutError(AgentReinError):
    """A before-execution approval expired undecided; the action is ``FAILED`` and the session rolled back.
    Deliberately not a ``TimeoutError``: that is an ``OSError``, which agent code catches for network errors."""

    status = 403  # as a rejection: the call may not run
    problem_type = "approval-expired"
    rolls_back = False
    problem_fields: ClassVar[Mapping[str, str]] = {"approvalId": "approval_id", "actionId": "action_id"}
    approval_id: str = "?"
    action_id: str | None = None

    def __init__(self, approval_id: str, action_id: str | None = None) -> None:
        super().__init__(f"approval {approval_id} expired before anyone decided it")
        self.approval_id = approval_id
        self.action_id = action_id


class AgentReinUnavailableError(AgentReinError):
    """The AgentRein store or server cannot be reached (raised before any side effect in ``closed`` mode)."""

    status = 503
    problem_type = "unavailable"


class UndoError(AgentReinError):
    """An inverse call failed; the action becomes ``ROLLBACK_FAILED`` and the rollback chain stops."""

    problem_type = "undo-failed"


class UndoUnavailableError(AgentReinError):
    """This process cannot run the next undo of a rollback (it holds no client for that connector in that
    session); the rollback stays where it is, for a process that can."""

    problem_type = "undo-unavailable"


def problem(status: int, problem_type: str, detail: str, rolls_back: bool | None = None) -> dict[str, Any]:
    """An RFC 9457 problem+json body; ``rollsBack`` is the ``rolls_back`` of the error (by default, of the class
    a client rebuilds from this status and slug: a problem that names no error of AgentRein's)."""
    if rolls_back is None:
        rolls_back = type(from_problem(status, {"type": problem_type})).rolls_back
    return {
        "type": TYPE_BASE + problem_type,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "rollsBack": rolls_back,
    }


def to_problem(error: AgentReinError) -> dict[str, Any]:
    """The problem+json body that stands for ``error``: its status, slug, message, fields and ``rollsBack``."""
    fields = {wire: getattr(error, attribute) for wire, attribute in error.problem_fields.items()}
    return problem(error.status, error.problem_type, str(error), error.rolls_back) | fields


def from_problem(status: int, body: object) -> AgentReinError:
    """The error a problem+json answer stands for: the class registered under its slug, with the body's
    ``detail`` as message and its fields as attributes. A server that cannot serve now (502, 503, 504 or
    ``unavailable``) gives :class:`AgentReinUnavailableError`; any other 5xx a plain :class:`AgentReinError`
    (the server is up but failed, so ``failure_mode="open"`` must not run the call as if it were
    unreachable); a 4xx of a slug nobody registered, a :class:`ValidationError`. The body's ``rollsBack``, where
    it has one, says whether the error rolls the session back."""
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    detail = str(fields.get("detail") or f"HTTP {status} from the AgentRein server")
    slug = str(fields.get("type", "")).rsplit("/", 1)[-1]
    if status in UNAVAILABLE_STATUSES or slug == AgentReinUnavailableError.problem_type:
        error: AgentReinError = AgentReinUnavailableError(f"the AgentRein server is unavailable: {detail}")
    elif status >= 500:
        error = AgentReinError(f"the AgentRein server failed: {detail}")
    else:
        cls = PROBLEM_TYPES.get(slug, ValidationError)
        # Rebuilt without its constructor, which would word the message anew: it is the server's, as sent.
        error = cls.__new__(cls)
        Exception.__init__(error, detail)
        for wire, attribute in cls.problem_fields.items():
            if wire in fields:
                setattr(error, attribute, fields[wire])
    if isinstance(fields.get("rollsBack"), bool):
        error.rolls_back = fields["rollsBack"]
    return error
