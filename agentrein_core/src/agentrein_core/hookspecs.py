"""The hooks a plugin may implement. Plugins register under the ``agentrein`` entry-point group, the
built-in connectors exactly like a third party's::

    [project.entry-points.agentrein]
    myservice = "agentrein_myservice"

and mark their implementations with :data:`agentrein_core.connector.hookimpl` (the plugin contract)::

    from agentrein_core.connector import hookimpl

    @hookimpl
    def agentrein_register_connectors():
        return [MyServiceConnector()]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from agentrein_core.connector import Connector

if TYPE_CHECKING:
    from agentrein_core.intent import IntentCheck, Verdict
    from agentrein_core.model import Event

hookspec = pluggy.HookspecMarker("agentrein")


@hookspec
def agentrein_register_connectors() -> list[Connector]:  # type: ignore[empty-body]
    """Return the connectors this plugin provides (see :class:`agentrein_core.connector.Connector`).

    Every plugin's list is gathered; two connectors with one name are an error naming both plugins. A
    connector's settings are judged and used per organisation: ``check_config`` and ``server_client`` are given
    the organisation's id beside its config and credentials.
    """


@hookspec(firstresult=True)
def agentrein_verify_intent(check: IntentCheck) -> Verdict | None:
    """Judge whether ``check.actions`` match the session's declared ``check.intent``; return a
    :class:`~agentrein_core.intent.Verdict` (``VERIFIED`` or ``DRIFT_DETECTED``), or ``None`` to leave
    the check to another verifier (the first answer wins; with none, the check is ``UNVERIFIED``, "no verifier
    configured").

    Called in a background worker, never on the agent's path; payloads are already redacted. Raise
    :class:`~agentrein_core.intent.VerifierError` when no verdict can be given now (the check is
    recorded ``UNVERIFIED`` with the message and asked again later). ``check.settings`` holds the
    organisation's (or the environment's) verifier URL, model, key and timeout.
    """


@hookspec
def agentrein_notify(event: Event) -> None:
    """Something happened that people may want to hear of: ``event.type`` is one of
    :class:`~agentrein_core.statuses.EventType` (``approval.requested``, ``approval.decided``,
    ``rollback.completed``, ``rollback.failed``, ``drift.detected``), ``event.data`` its camelCase details.

    Called by a background worker after the change is committed, at least once per event (a crash between
    the call and its record may repeat it); an exception is logged and the event is not offered again.
    AgentRein's own webhooks are delivered apart from this hook, with retries and a delivery log.
    """
