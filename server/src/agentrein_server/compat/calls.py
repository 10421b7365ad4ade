"""A call the published SDKs report, as the engine's command: their api name ``<connector>.<attribute path>``
(``stripe.customers.create``, ``stripe.Customer.create``) is handed to that connector, which names the call as
its own SDK wrapper would (``customers.create``) and derives its undo from the payload and the reported
response (:meth:`~agentrein_core.connector.Connector.recorded`); a call the connector does not know is
recorded under its path, with no undo. The calls already ran: they are recorded as such
(:class:`~agentrein_core.commands.ExecutedCall`), never as write-ahead records."""

from __future__ import annotations

import uuid
from typing import Any

from attrs import frozen

from agentrein_core.commands import ExecutedCall
from agentrein_core.connector import JSON, Connector, PreparedCall, operation_by_verb
from agentrein_core.errors import ValidationError
from agentrein_core.model import UndoConfig
from agentrein_core.plugins import Connectors
from agentrein_core.statuses import OperationType

#: The error recorded for a failed call the SDK reported without one (the Python SDK sends ``{}``).
UNSAID_FAILURE = "the call raised an error (the published SDK does not say which)"


@frozen
class ReportedCall:
    """A reported call as this server names it: its connector, api name, operation, payload and undo."""

    connector: str
    api_name: str
    operation_type: OperationType
    payload: JSON
    undo: UndoConfig | None

    def ran(self, succeeded: bool, response: Any) -> ExecutedCall:
        """The command recording it as a call that ran, and ended so."""
        return ExecutedCall(
            idempotency_key=f"compat-{uuid.uuid4().hex}",  # their SDKs send none; each report is one call
            connector=self.connector,
            api_name=self.api_name,
            operation_type=self.operation_type,
            payload=self.payload,
            succeeded=succeeded,
            response=json_object(response) if succeeded else None,
            undo=self.undo if succeeded else None,
            error=None if succeeded else _error(response),
        )


def reported_call(
    connectors: Connectors, api_name: str, payload: Any, response: Any, before: JSON | None = None
) -> ReportedCall:
    """The call ``api_name`` (``<connector>.<attribute path>``) with the ``payload`` the SDK sent and the
    ``response`` it got (``before``: the object as precapture read it)."""
    connector, method_path, described = _described(connectors, api_name, payload, before)
    if described is None:
        path = method_path.split(".")
        return ReportedCall(connector.name, method_path, operation_by_verb(path[-1]), json_object(payload), None)
    undo = connector.undo_for(described, json_object(response), None)
    return ReportedCall(connector.name, described.api_name, described.operation_type, described.payload, undo)


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


def _error(response: Any) -> str:
    """The npm SDK sends the error's message as the response of a failed call; the Python SDK sends ``{}``."""
    return response if isinstance(response, str) and response.strip() else UNSAID_FAILURE
