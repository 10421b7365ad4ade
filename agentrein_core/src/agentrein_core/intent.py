"""Intent verification: did what a session did match what it declared it would do? (product reference §6)

Each ``SUCCESS`` action, and each session when it completes, is queued for a check. A worker (the server's,
or a background thread of the embedded SDK) takes due checks, asks the verifier plugins (the firstresult hook
``agentrein_verify_intent``) with :class:`IntentCheck` built from redacted records, and records the
:class:`Verdict` through the engine, which applies the organisation's ``onDrift`` choice. A verifier that is
down, slow or answers nonsense gives ``UNVERIFIED`` with the reason and is asked again later; the agent never
waits for any of this. The built-in verifier (:mod:`agentrein_core.openai_verifier`) asks an OpenAI-compatible
chat-completions endpoint; :mod:`agentrein_core.verifier_plugins` puts the installed ones behind
:class:`Verifiers`.

This module holds what a verifier plugin sees and answers (its value types) and imports no runner.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, Protocol

from attrs import field, frozen

from agentrein_core.errors import AgentReinError
from agentrein_core.model import JSON, Action, OrganisationSettings
from agentrein_core.statuses import OperationType, VerificationOutcome

log = logging.getLogger("agentrein.verification")

URL_ENV = "AGENTREIN_VERIFIER_URL"
MODEL_ENV = "AGENTREIN_VERIFIER_MODEL"
API_KEY_ENV = "AGENTREIN_VERIFIER_API_KEY"
TIMEOUT_ENV = "AGENTREIN_VERIFIER_TIMEOUT"
DEFAULT_TIMEOUT = 30.0

NO_VERIFIER = "no verifier configured"
NO_INTENT = "the session declared no intent to check against"
#: When a check that could not be made is tried again, after each failed attempt; then it stays UNVERIFIED.
RETRY_AFTER = (timedelta(seconds=30), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2))
#: How long a worker holds a check it took (a crashed worker's check comes due again after this); a
#: verifier's timeout is kept well under it, so a slow answer is never asked for twice.
CHECK_LEASE = timedelta(minutes=2)
MAX_TIMEOUT = 60.0
#: A session's check shows the model at most its latest this many actions, each at most this long in JSON.
MAX_ACTIONS_SHOWN = 50
MAX_SHOWN_CHARS = 4000


class VerifierError(AgentReinError):
    """A verifier could not give a verdict (unreachable, timed out, or answered something unusable). The
    check is recorded ``UNVERIFIED`` with this message and tried again later."""

    problem_type = "verifier-error"


@frozen
class VerifierSettings:
    """Where a verifier finds its model: the organisation's settings, else the environment's."""

    url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    #: The server's own (from its environment): it may be on a private address, where an organisation's may not.
    trusted: bool = True

    @classmethod
    def from_environment(cls) -> VerifierSettings:
        raw = os.environ.get(TIMEOUT_ENV, "")
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT
        except ValueError:
            log.warning("%s=%r is not a number of seconds; using %s", TIMEOUT_ENV, raw, DEFAULT_TIMEOUT)
            timeout = DEFAULT_TIMEOUT
        return cls(
            url=os.environ.get(URL_ENV) or None,
            model=os.environ.get(MODEL_ENV) or None,
            api_key=os.environ.get(API_KEY_ENV) or None,
            timeout=min(timeout, MAX_TIMEOUT) if timeout > 0 else DEFAULT_TIMEOUT,
        )

    def overridden_by(self, url: str | None, model: str | None, api_key: str | None) -> VerifierSettings:
        """An organisation's own verifier, when it set a URL: then its model and key alone (the server's key
        must never travel to an address an organisation chose); else these settings."""
        if url:
            return VerifierSettings(url, model, api_key, self.timeout, trusted=False)
        return self


@frozen
class CheckedAction:
    """What a verifier is shown of one action: what was called, with what (redacted), and what came back."""

    seq: int
    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    response: JSON | None

    @classmethod
    def of(cls, action: Action, redact: Callable[[Action, Any], Any]) -> CheckedAction:
        return cls(
            action.seq,
            action.connector,
            redact(action, action.api_name),
            action.operation_type,
            _bounded(redact(action, action.payload)),
            _bounded(redact(action, action.response)),
        )


def _bounded(value: Any) -> Any:
    """A value as shown to a model: whole when small, else its JSON cut short (a model's context is finite)."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return value if len(text) <= MAX_SHOWN_CHARS else {"truncatedJson": text[:MAX_SHOWN_CHARS] + "…"}


def printable(text: str, limit: int) -> str:
    """A verifier's words as stored: control characters (NUL above all, which no database keeps) removed."""
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text).strip()[:limit]


@frozen
class IntentCheck:
    """One question for a verifier: does ``subject`` (one action, or the session's actions as a whole) match
    the declared ``intent``?"""

    org_id: str
    session_id: str
    agent_id: str
    intent: str
    subject: Literal["action", "session"]
    actions: list[CheckedAction]
    settings: VerifierSettings


@frozen
class Verdict:
    """A verifier's answer; ``verifier`` names it in the record (say ``openai-compatible:gpt-4o-mini``)."""

    outcome: VerificationOutcome
    rationale: str
    verifier: str


class Verifiers(Protocol):
    """What :meth:`Engine.verify_next <agentrein_core.engine.Engine.verify_next>` asks: the one small interface
    behind which the verifier plugins and their settings live (as :class:`~agentrein_core.rollback.UndoExecutor`
    is for inverses)."""

    def settings_of(self, settings: OrganisationSettings) -> VerifierSettings:
        """The verifier settings that apply to an organisation."""
        ...

    def answerable(self, settings: VerifierSettings) -> bool:
        """Whether any verifier could answer with these settings (without asking one)."""
        ...

    def redact(self, action: Action, value: Any) -> Any:
        """``value`` (a payload or response of ``action``) with what must not leave hidden."""
        ...

    def ask(self, check: IntentCheck) -> Verdict | None:
        """The first verifier's verdict; None when none answers; :class:`VerifierError` when none can now."""
        ...
