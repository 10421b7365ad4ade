"""What the REST API answers, for its OpenAPI document: one msgspec model per wire record, generated from the
attrs record itself (its fields and their types, named in camelCase as the wire converter names them), so a
field added to a record is documented as soon as it is sent.

The converter (:func:`agentrein_core.converter.to_wire`) still writes every answer, byte for byte; a handler
names the model of what it returns in its return type, ``Annotated[dict[str, Any], Shows(model)]`` (the
aliases below, and those beside the views the controllers shape themselves), which :class:`AnswerSchemas`
turns into the model's schema.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Collection, Mapping
from datetime import datetime
from functools import reduce
from typing import Annotated, Any, Literal, TypeAlias, Union, get_args, get_origin, get_type_hints

import attrs
import msgspec
from attrs import frozen
from litestar.openapi.spec import Schema
from litestar.openapi.spec.schema import SchemaDataContainer
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition

from agentrein_core import model, read_models
from agentrein_core.converter import camel


def wire_model(
    record: type[attrs.AttrsInstance],
    *,
    name: str | None = None,
    only: Collection[str] | None = None,
    omit: Collection[str] = (),
    add: Mapping[str, Any] | None = None,
    optional: Collection[str] = (),
) -> type[msgspec.Struct]:
    """The model of ``record`` as the wire shows it: its fields (those in ``only``, when given) but those in
    ``omit``, then those in ``add`` (field names as sent, camelCase). Every field is always sent (``null`` when
    empty), so each is required, except those in ``optional``."""
    hints = get_type_hints(record)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    renames: dict[str, str] = {}
    for attribute in attrs.fields(record):
        sent = camel(attribute.name)
        if sent not in omit and (only is None or sent in only):
            renames[attribute.name] = sent
            fields.append(_field(attribute.name, _wire_type(hints[attribute.name]), sent in optional))
    fields += [_field(sent, annotation, sent in optional) for sent, annotation in (add or {}).items()]
    namespace = {"__doc__": record.__doc__} if record.__doc__ else None
    struct = msgspec.defstruct(
        name or record.__name__, fields, module=__name__, namespace=namespace, rename=renames, kw_only=True
    )
    return struct


def _field(name: str, annotation: Any, optional: bool) -> tuple[str, Any] | tuple[str, Any, Any]:
    return (name, annotation | msgspec.UnsetType, msgspec.UNSET) if optional else (name, annotation)


def _wire_type(annotation: Any) -> Any:
    """A record's field type as sent: records nested in it become their models."""
    if attrs.has(annotation):
        return record_model(annotation)
    args = get_args(annotation)
    if get_origin(annotation) is list:
        return list[_wire_type(args[0])]  # type: ignore[misc]
    if get_origin(annotation) in (Union, types.UnionType):
        return reduce(operator.or_, map(_wire_type, args))
    return annotation


_RECORD_MODELS: dict[type, type[msgspec.Struct]] = {}


def record_model(record: type[attrs.AttrsInstance]) -> type[msgspec.Struct]:
    """The one model of a record sent whole (each record's model is made once, wherever it is nested)."""
    if record not in _RECORD_MODELS:
        _RECORD_MODELS[record] = wire_model(record)
    return _RECORD_MODELS[record]


# The converter sends an undo config as its params with ``type`` and ``requireApproval`` beside them
# (``converter.undo_to_wire``): the two fields are fixed, the connector's params are the object's other keys.
_RECORD_MODELS[model.UndoConfig] = wire_model(model.UndoConfig, omit=("params",))


@frozen
class Shows:
    """Marks a handler's ``dict`` answer with the model that documents it."""

    model: type[msgspec.Struct]


class AnswerSchemas(OpenAPISchemaPlugin):
    """Documents an answer marked with :class:`Shows` by its model's schema."""

    @staticmethod
    def is_plugin_supported_type(value: Any) -> bool:
        return False

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return any(isinstance(marker, Shows) for marker in field_definition.metadata)

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        (shown,) = (marker for marker in field_definition.metadata if isinstance(marker, Shows))
        return SchemaDataContainer(data_container=shown.model)


# Records the API sends whole ------------------------------------------------------------------------------

SessionInfo: TypeAlias = Annotated[dict[str, Any], Shows(record_model(read_models.SessionInfo))]
SessionPage: TypeAlias = Annotated[dict[str, Any], Shows(record_model(read_models.SessionPage))]
ActionPage: TypeAlias = Annotated[dict[str, Any], Shows(record_model(read_models.ActionPage))]
Action: TypeAlias = Annotated[dict[str, Any], Shows(record_model(model.Action))]
LoggedAction: TypeAlias = Annotated[dict[str, Any], Shows(record_model(read_models.LoggedAction))]
ApprovalInfo: TypeAlias = Annotated[dict[str, Any], Shows(record_model(read_models.ApprovalInfo))]
Policy: TypeAlias = Annotated[dict[str, Any], Shows(record_model(model.Policy))]
Delivery: TypeAlias = Annotated[dict[str, Any], Shows(record_model(model.Delivery))]

# Records as the controllers show them -------------------------------------------------------------------

#: A request as listed: the fields above, and those asked for with ``include``.
ListedApproval: TypeAlias = Annotated[
    dict[str, Any],
    Shows(
        wire_model(
            read_models.ApprovalInfo,
            name="ListedApproval",
            only=(*read_models.LISTED_FIELDS, *read_models.INCLUDED_FIELDS),
            optional=read_models.INCLUDED_FIELDS,
        )
    ),
]
#: A rollback job, with the undo it waits on in the agent's process: without its lease token, which is the
#: worker's own business.
Rollback: TypeAlias = Annotated[
    dict[str, Any], Shows(wire_model(read_models.RollbackInfo, name="Rollback", omit=("leaseToken",)))
]
#: A connector's settings (``engine.configuration.shown``): its name, and whether credentials are stored, not them.
Connector: TypeAlias = Annotated[
    dict[str, Any],
    Shows(
        wire_model(
            model.ConnectorConfig,
            name="Connector",
            only=("enabled", "config"),
            add={"name": str, "hasCredentials": bool, "updatedAt": datetime | None},
        )
    ),
]
#: An API key: never its hash, nor (but once, when it is made) its secret.
_KEY_SHOWN = ("keyId", "role", "prefix", "createdAt", "revokedAt")
ApiKey: TypeAlias = Annotated[dict[str, Any], Shows(wire_model(model.ApiKey, only=_KEY_SHOWN))]
CreatedApiKey: TypeAlias = Annotated[
    dict[str, Any], Shows(wire_model(model.ApiKey, name="CreatedApiKey", only=_KEY_SHOWN, add={"key": str}))
]
#: The organisation's settings: whether a verifier API key is stored, not the key.
Settings: TypeAlias = Annotated[
    dict[str, Any],
    Shows(
        wire_model(
            model.OrganisationSettings,
            name="Settings",
            omit=("orgId", "verifierApiKey"),
            add={"hasVerifierApiKey": bool},
        )
    ),
]
#: A webhook: never its secret, but in the answer that made it.
Webhook: TypeAlias = Annotated[dict[str, Any], Shows(wire_model(model.Webhook, omit=("secret",)))]
CreatedWebhook: TypeAlias = Annotated[
    dict[str, Any], Shows(wire_model(model.Webhook, name="CreatedWebhook", omit=("secret",), add={"secret": str}))
]
#: ``/healthz``: the server answers, and so does its database.
Health: TypeAlias = Annotated[
    dict[str, Any],
    Shows(msgspec.defstruct("Health", [("status", Literal["ok"]), ("database", Literal["sqlite", "postgresql"])])),
]

# Lists (named here: a controller's own ``list`` method would shadow the builtin in its annotations) --------

ListedApprovals: TypeAlias = list[ListedApproval]
Policies: TypeAlias = list[Policy]
Connectors: TypeAlias = list[Connector]
ApiKeys: TypeAlias = list[ApiKey]
Webhooks: TypeAlias = list[Webhook]
Deliveries: TypeAlias = list[Delivery]
