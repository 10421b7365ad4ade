"""A call the published SDKs report, as the engine's command: their api name ``<connector>.<attribute path>``
(``stripe.customers.create``, ``stripe.Customer.create``) is handed to that connector, which names the call as
its own SDK wrapper would (``customers.create``) and derives its undo from the payload and the reported
response (:meth:`~agentrein_core.connector.Connector.recorded`); a call the connector does not know is
recorded under its path, with no undo. The calls already ran: they are recorded as such
(:class:`~agentrein_core.commands.ExecutedCall`), never as write-ahead records."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from attrs import frozen

from agentrein_core.commands import ExecutedCall
from agentrein_core.connector import JSON, Connector, PreparedCall, not_undone, operation_by_verb
from agentrein_core.errors import ValidationError
from agentrein_core.model import UndoConfig
from agentrein_core.plugins import Connectors
from agentrein_core.redaction import Redactors
from agentrein_core.statuses import OperationType

#: The error recorded for a failed call the SDK reported without one (the Python SDK sends ``{}``).
UNSAID_FAILURE = "the call raised an error (the published SDK does not say which)"
#: Why a call whose before-state could not be read is not undone (the SDK said ``captureFailed``).
CAPTURE_FAILED = "the state before this call could not be read, so no undo can restore it"
#: Why a call whose log names a before-state the server did not keep for the session is not undone.
PRECAPTURE_UNKNOWN = (
    "the state before this call was not one the server read for this session, so no undo can restore it"
)
#: Why a call whose log names a before-state read for another call is not undone.
PRECAPTURE_OTHER_CALL = "the state before this call was read for another call, so no undo can restore it"


@frozen
class ReportedCall:
    """A reported call as this server names it: its connector, api name, operation, payload and undo."""

    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    undo: UndoConfig | None

    def ran(self, session_id: str, succeeded: bool, response: Any) -> ExecutedCall:
        """The command recording it as a call of ``session_id`` that ran, and ended so."""
        return ExecutedCall(
            idempotency_key=self._key(session_id, succeeded, response),
            connector=self.connector,
            api_name=self.api_name,
            operation_type=self.operation_type,
            payload=self.payload,
            succeeded=succeeded,
            response=json_object(response) if succeeded else None,
            undo=self.undo if succeeded else None,
            error=None if succeeded else _error(response),
        )

    def _key(self, session_id: str, succeeded: bool, response: Any) -> str:
        """Their SDKs send no idempotency key and retry a log answered 5xx, so a create is known by the object
        it made: the same create of the same object in the same session is one call, recorded once (a repeat
        is answered with the first record). Any other report is a call of its own."""
        made = _made_id(response) if succeeded and self.operation_type is OperationType.CREATE else None
        if made is None:
            return f"compat-{uuid.uuid4().hex}"
        named = json.dumps([session_id, self.connector, self.api_name, made]).encode()
        return f"compat-{hashlib.sha256(named).hexdigest()[:40]}"


def reported_call(
    connectors: Connectors,
    redactors: Redactors,
    api_name: str,
    payload: Any,
    response: Any,
    before: JSON | None = None,
    *,
    unread: str | None = None,
) -> ReportedCall:
    """The call ``api_name`` (``<connector>.<attribute path>``) with the ``payload`` the SDK sent and the
    ``response`` it got (``before``: the object as precapture read it; ``unread``: why there is none to use, such
    as :data:`CAPTURE_FAILED` when the SDK says it could not be read; a call whose connector reads a
    before-state and has none is taken as :data:`CAPTURE_FAILED`). A call that ran is
    always recorded: when its connector derives no undo because nothing was read before it, or derives one the
    response cannot fill (a create answered without an id) or that could not run once ``redactors`` redacted it
    for the record (a branch named like a token), its undo is ``none`` saying why, for reviewers."""
    connector, method_path, described = _described(connectors, api_name, payload, before)
    if described is None:
        path = method_path.split(".")
        return ReportedCall(connector.name, method_path, operation_by_verb(path[-1]), json_object(payload), None)
    undo = connector.undo_for(described, json_object(response), None)
    # Unread: said so, or never asked (npm's never does, nor a log that names no precapture).
    if undo.is_none and (unread is not None or (before is None and connector.reads_before(described))):
        undo = not_undone(unread or CAPTURE_FAILED)
    try:  # what the engine checks, as it stores it: refused there, the call would not be recorded
        connector.check_undo(redactors.of(connector.name).redact_undo(undo))
    except ValidationError as exc:
        undo = not_undone(f"no undo could be derived from what the call returned ({exc})")
    return ReportedCall(connector.name, described.api_name, described.operation_type, described.payload, undo)


def registry_entries(connectors: Connectors) -> list[JSON]:
    """What ``GET /registry`` lists: every update and delete the connectors describe, by each api name the
    published SDKs give it (``stripe.v1.customers.update``, ``stripe.Customer.modify``), and whether the server
    reads its before-state (``captureBeforeState``). Their SDK asks ``precapture`` only for those listed
    ``true`` and for those not listed (it never asks for what it takes for a create)."""
    listed: list[JSON] = []
    for name in connectors.names():
        connector = connectors.get(name)
        for path in connector.reported_changes():
            described = connector.recorded(path, {}, None)
            if described is not None:
                api_name = f"{name}.{'.'.join(path)}"
                listed.append({"apiName": api_name, "captureBeforeState": connector.reads_before(described)})
    return listed


def call_about_to_run(connectors: Connectors, api_name: str, payload: Any) -> tuple[str, PreparedCall | None]:
    """The connector of a call a precapture asks about, and the call as it describes it (``None``: it does
    not describe it, so nothing can be read for its undo)."""
    connector, _, described = _described(connectors, api_name, payload, None)
    return connector.name, described


def _described(
    connectors: Connectors, api_name: str, payload: Any, before: JSON | None
) -> tuple[Connector, str, PreparedCall | None]:
    name, _, method_path = api_name.partition(".")
    path = tuple(method_path.split("."))
    if not method_path or not all(path):
        raise ValidationError("apiName", "must be '<connector>.<method path>', such as 'stripe.customers.create'")
    connector = connectors.get(name)  # an unknown connector is refused, naming the installed ones
    return connector, method_path, connector.recorded(path, payload, before)


def json_object(value: Any) -> JSON:
    """What the SDK sent as an object, as records keep it: another value (an id, say) under ``value``."""
    if isinstance(value, dict):
        return value
    return {} if value is None else {"value": value}


def _made_id(response: Any) -> str | None:
    """The id of the object a create returned: its own (Stripe), or its ``data``'s (Octokit's answer)."""
    made = response.get("data", response) if isinstance(response, dict) and "id" not in response else response
    found = made.get("id") if isinstance(made, dict) else None
    return str(found) if isinstance(found, str | int) and not isinstance(found, bool) and str(found) else None


def _error(response: Any) -> str:
    """The npm SDK sends the error's message as the response of a failed call; the Python SDK sends ``{}``."""
    return response if isinstance(response, str) and response.strip() else UNSAID_FAILURE
