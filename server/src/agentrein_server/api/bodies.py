"""Request bodies. Litestar decodes and checks them (types, required fields, no unknown fields) before a
handler runs, and documents them in the OpenAPI schema (:class:`ClosedBodies` adds that unknown fields are
refused); :class:`JsonRequest` and :func:`require_json` add what it does not check: that a body is declared as
JSON, and that no object repeats a key."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal

import msgspec
from litestar import Request
from litestar._openapi.schema_generation.plugins.struct import StructSchemaPlugin
from litestar.exceptions import HTTPException
from litestar.openapi.spec import Operation, RequestBody, Schema
from litestar.params import QueryParameter
from litestar.status_codes import HTTP_415_UNSUPPORTED_MEDIA_TYPE
from litestar.typing import FieldDefinition

from agentrein_core.engine import cursors
from agentrein_core.errors import ValidationError
from agentrein_core.read_models import MAX_CONFIRMATIONS
from agentrein_core.statuses import DriftResponse, OperationType, Role, WebhookFormat

#: The longest a long-poll (``?wait=``) may wait, in seconds.
MAX_WAIT = 60.0
#: An approval timeout in milliseconds: at least 1, at most 365 days.
TimeoutMs = Annotated[int, msgspec.Meta(ge=1, le=365 * 24 * 3600 * 1000)]
#: A listing's ``cursor`` query parameter, as the OpenAPI document describes it.
Cursor = Annotated[
    str | None,
    QueryParameter(
        description="Where the page starts: the `nextCursor` (or the `cursor` of the `Link` header's `next` URL) "
        "of the page before, passed back as is. Opaque; any value a listing did not give out is refused (400).",
        pattern="^[A-Za-z0-9_-]+$",
        max_length=cursors.MAX_LENGTH,
    ),
]
#: Text the server refuses empty (blank too, which a schema cannot say).
Text = Annotated[str, msgspec.Meta(min_length=1)]


def is_json(media_type: str) -> bool:
    """``application/json`` or a JSON-based type such as ``application/merge-patch+json`` (parameters such
    as ``charset`` already stripped)."""
    return media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json"))


async def require_json(request: Request[Any, Any, Any]) -> None:
    """Before an API handler runs: a body not declared as JSON is refused (415) rather than parsed as JSON
    anyway, and so is one declared in a charset other than UTF-8, the one JSON is read in (RFC 8259), rather
    than misread; a request without a body needs no ``Content-Type``."""
    if not await request.body():
        return
    media_type, parameters = request.content_type
    declared = request.headers.get("content-type") or "no Content-Type"
    if not is_json(media_type) or not _is_utf8(parameters.get("charset", "utf-8")):
        raise HTTPException(
            status_code=HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            detail=f"the body must be sent as 'Content-Type: application/json' (in UTF-8), not {declared}",
        )


def _is_utf8(charset: str) -> bool:
    try:
        return codecs.lookup(charset).name == "utf-8"
    except LookupError:
        return False


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValidationError(key, "appears more than once in one JSON object; send each key once")
        seen.add(key)


class JsonRequest(Request[Any, Any, Any]):
    """Where the request bytes become JSON (every ``data`` parameter reads this): msgspec, like any JSON
    decoder, keeps the last of repeated keys, so a body that repeats one, at any depth, is refused instead
    of read as one of its possible meanings."""

    async def json(self) -> Any:
        value = await super().json()  # first, so malformed JSON keeps Litestar's message
        body = await self.body()
        if body:
            # stdlib json: the one decoder here that shows every pair; the hook builds nothing
            json.loads(body, object_pairs_hook=_refuse_repeated_keys)
        return value


class Body(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    pass


@dataclass
class OptionalBody(Operation):
    """The OpenAPI entry of an operation whose body may be left out (``operation_class=bodies.OptionalBody``):
    Litestar documents every body as required."""

    def __post_init__(self) -> None:
        if isinstance(self.request_body, RequestBody):
            self.request_body.required = False


class ClosedBodies(StructSchemaPlugin):
    """Litestar's schema of a body, with ``additionalProperties: false`` where the body refuses unknown fields
    (Litestar leaves it out, so the document would say that any field is taken)."""

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return super().is_plugin_supported_field(field_definition) and bool(
            field_definition.type_.__struct_config__.forbid_unknown_fields
        )

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        schema.additional_properties = False
        return schema


def timeout(ms: int | None) -> timedelta | None:
    return timedelta(milliseconds=ms) if ms is not None else None


class NewSession(Body):
    agent_id: Text
    intent: str = ""
    sandbox: bool = False
    #: An id the client chose (the SDK does for a session it opened while the server was unreachable): of
    #: the shape of the server's own, ``ses_`` and 32 lowercase hex digits chosen at random. Accepted once;
    #: the same creation sent again returns the session made first; any other use of a taken id is a 409.
    id: (
        Annotated[
            str,
            msgspec.Meta(
                pattern="^ses_[0-9a-f]{32}$",
                description="An id the client chose for the session (`ses_` and 32 random lowercase hex digits), "
                "accepted once: the same creation again returns the session made first; any other use of a "
                "taken id is refused (409).",
            ),
        ]
        | None
    ) = None


class SessionFailure(Body):
    """The agent's run failed outside a recorded call (AgentRein could not record one)."""

    reason: Text
    #: The connector of the call that could not be recorded: the reason is redacted by its rules.
    connector: Text | None = None


class Confirmation(Body):
    """An earlier call of the session that succeeded: its (redacted) response and undo config, as a
    ``SUCCESS`` outcome (``PATCH``) has them."""

    action_id: Text
    response: dict[str, Any] | None = None
    undo: dict[str, Any] | None = None


class NewAction(Body):
    connector: Text
    api_name: Text
    operation_type: OperationType
    payload: dict[str, Any] = {}
    requires_approval: bool = False
    approval_timeout_ms: TimeoutMs | None = None
    #: The key the call will run with, made by the client: asked again under it (the first answer was lost),
    #: the record written is the answer; a call run anyway and replayed from the journal under it settles that
    #: record. Omitted: the server makes one.
    idempotency_key: Text | None = None
    #: Confirmations carried with this record (at most ``MAX_CONFIRMATIONS``), applied first.
    confirm: Annotated[list[Confirmation], msgspec.Meta(max_length=MAX_CONFIRMATIONS)] = []


class ActionOutcome(Body):
    """``SUCCESS`` with the call's (redacted) response and undo config, or ``FAILED`` with its error; a failure
    rolls the session back unless ``rollsBack`` is false (the agent only records it)."""

    status: Literal["SUCCESS", "FAILED"]
    response: dict[str, Any] | None = None
    undo: dict[str, Any] | None = None
    error: str | None = None
    rolls_back: bool = True


class ExecutedAction(Body):
    """A call that ran while AgentRein was unreachable, replayed from the SDK's journal."""

    idempotency_key: Text
    connector: Text
    api_name: Text
    operation_type: OperationType
    status: Literal["SUCCESS", "FAILED"]
    payload: dict[str, Any] = {}
    response: dict[str, Any] | None = None
    undo: dict[str, Any] | None = None
    error: str | None = None
    rolls_back: bool = True


class RollbackRequest(Body):
    reason: str | None = None
    #: How long a rollback approval this rollback opens waits for a reviewer (default 24 hours).
    approval_timeout_ms: TimeoutMs | None = None


class Decision(Body):
    reviewer: Text | None = None
    reason: str | None = None


class Withdrawal(Body):
    reason: Text = "the agent stopped waiting"


class NewPolicy(Body):
    name: Text
    effect: Text  # checked by the engine, whose error lists the effects
    connector: str | None = None
    api_name: str | None = None
    agent_id: str | None = None
    operation_type: str | None = None
    enabled: bool = True
    #: REQUIRE_APPROVAL only: hold a matching call until a reviewer approves it (else it is reviewed after it ran).
    before_execution: bool = False
    #: How long a held call waits for a reviewer (default: the agent's own approval timeout); the engine checks
    #: it, with the other rules of a policy that holds calls.
    approval_timeout_ms: TimeoutMs | None = None


class PolicyChange(Body):
    enabled: bool


class ConnectorSettings(Body):
    enabled: bool
    config: dict[str, Any] = {}
    credentials: dict[str, Any] | None = None


class NewApiKey(Body):
    role: Role


class SettingsChange(Body):
    """Only the fields given change; ``null`` clears a verifier field (the environment's then applies)."""

    on_drift: DriftResponse | msgspec.UnsetType = msgspec.UNSET
    verifier_url: Text | msgspec.UnsetType | None = msgspec.UNSET
    verifier_model: Text | msgspec.UnsetType | None = msgspec.UNSET
    verifier_api_key: Text | msgspec.UnsetType | None = msgspec.UNSET
    webhook_hosts: list[str] | msgspec.UnsetType = msgspec.UNSET


class NewWebhook(Body):
    url: Text
    events: list[str]
    #: The signing secret; left out, one is made and returned in this answer only.
    secret: Annotated[str, msgspec.Meta(min_length=16, max_length=200)] | None = None
    format: WebhookFormat = WebhookFormat.JSON
