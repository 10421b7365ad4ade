"""The installed verifier plugins behind the :class:`~agentrein_core.intent.Verifiers` interface the
engine asks: the server's workers and the embedded SDK's background thread both run intent checks through
:class:`IntentChecks`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentrein_core import openai_verifier as built_in
from agentrein_core.intent import IntentCheck, Verdict, VerifierSettings
from agentrein_core.model import Action, OrganisationSettings
from agentrein_core.redaction import Redactors

if TYPE_CHECKING:
    from agentrein_core.engine import Engine
    from agentrein_core.model import Verification
    from agentrein_core.plugins import Connectors


class IntentChecks:
    """Runs due intent checks with the installed verifier plugins (:class:`Verifiers`): the server's workers
    and the embedded SDK's background thread both use it. ``decrypt`` opens an organisation's stored verifier
    key (the server's vault; embedded mode stores none)."""

    def __init__(
        self, engine: Engine, connectors: Connectors, decrypt: Callable[[str | None], str | None] | None = None
    ) -> None:
        self.engine = engine
        self.connectors = connectors
        self.decrypt = decrypt or (lambda token: token)
        self.environment = VerifierSettings.from_environment()
        self._redactors = Redactors(connectors.sensitive_fields)

    def run_one(self, org_id: str | None = None, *, queue: bool = True) -> Verification | None:
        """Check one due action or session (of ``org_id`` only, when given); ``None`` when none is due.
        ``queue``: first queue the checks the calls since each session's watermark want."""
        return self.engine.intent_checks.verify_next(self, org_id, queue=queue)

    def answerable(self, settings: VerifierSettings) -> bool:
        """Whether any verifier could answer: the built-in one needs a URL; another plugin may not."""
        others = [
            i for i in self.connectors.pm.hook.agentrein_verify_intent.get_hookimpls() if i.plugin is not built_in
        ]
        return bool(settings.url) or bool(others)

    def ask(self, check: IntentCheck) -> Verdict | None:
        verdict: Verdict | None = self.connectors.pm.hook.agentrein_verify_intent(check=check)
        return verdict

    def settings_of(self, settings: OrganisationSettings) -> VerifierSettings:
        key = self.decrypt(settings.verifier_api_key)
        return self.environment.overridden_by(settings.verifier_url, settings.verifier_model, key)

    def redact(self, action: Action, value: Any) -> Any:
        """Redacted again on the way out, with the action's connector's own sensitive fields where it is
        installed here: what the recording side missed never reaches a model."""
        return self._redactors.of(action.connector).redact(value)
