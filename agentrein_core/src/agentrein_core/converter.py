"""Conversion between records and plain data, in one place (cattrs).

``storage`` turns records into database rows and back: snake_case names, datetimes kept as ``datetime``;
``wire`` into the REST API's JSON and back: camelCase names, datetimes as ISO 8601 strings.
An :class:`UndoConfig` is stored (and sent) in its wire form ``{"type", "requireApproval", ...params}``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from agentrein_core.connector import REQUIRE_APPROVAL_KEY
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, Action, UndoConfig

T = TypeVar("T")


def _is_json(cls: Any) -> bool:
    return bool(cls == JSON)


def _as_is(value: Any, _: object = None) -> Any:
    return value


storage = cattrs.Converter()
storage.register_unstructure_hook(datetime, lambda dt: dt)
storage.register_structure_hook(datetime, lambda value, _: value)
# A record's JSON (checked to be JSON data when it was given) is stored as it is, and comes back from the
# database as JSON data: neither way is it walked or copied value by value.
storage.register_unstructure_hook_func(_is_json, _as_is)
storage.register_structure_hook_func(_is_json, _as_is)


def undo_to_wire(undo: UndoConfig) -> dict[str, Any]:
    return {**undo.params, "type": undo.type, REQUIRE_APPROVAL_KEY: undo.require_approval}


def undo_from_wire(data: dict[str, Any], _: object = None) -> UndoConfig:
    params = {k: v for k, v in data.items() if k not in ("type", REQUIRE_APPROVAL_KEY)}
    return UndoConfig(str(data["type"]), params, bool(data.get(REQUIRE_APPROVAL_KEY, False)))


storage.register_unstructure_hook(UndoConfig, undo_to_wire)
storage.register_structure_hook(UndoConfig, undo_from_wire)
# An action's verification lives in a table of its own; it joins the action only when read with its session.
storage.register_unstructure_hook(Action, make_dict_unstructure_fn(Action, storage, verification=override(omit=True)))


def to_row(record: Any) -> dict[str, Any]:
    row: dict[str, Any] = storage.unstructure(record)
    return row


def from_row(row: Any, cls: type[T]) -> T:
    return storage.structure(dict(row._mapping), cls)


def from_rows(rows: Any, cls: type[T]) -> list[T]:
    """The records of a query's rows. Their column names are read once: SQLAlchemy builds a view of them each time
    a row is asked (13 µs, as much as structuring the record)."""
    keys = tuple(rows.keys())
    return [storage.structure(dict(zip(keys, row, strict=True)), cls) for row in rows]


def from_columns(columns: dict[str, Any], cls: type[T]) -> T:
    """A record from its columns (a part of a joined row)."""
    return storage.structure(columns, cls)


# The wire: camelCase JSON for the REST API, and back into records in the SDK's HTTP transport ---------------


def camel(name: str) -> str:
    """``approval_id`` -> ``approvalId``."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


wire = cattrs.Converter()
wire.register_unstructure_hook(datetime, lambda dt: dt.isoformat())
wire.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))


# A duration travels as whole milliseconds (at least one), named so: ``approval_timeout`` -> ``approvalTimeoutMs``.
wire.register_unstructure_hook(timedelta, lambda duration: max(1, round(duration.total_seconds() * 1000)))
wire.register_structure_hook(timedelta, lambda ms, _: timedelta(milliseconds=ms))


def _camel_names(cls: Any) -> dict[str, Any]:
    fields = attrs.fields(attrs.resolve_types(cls))
    return {a.name: override(rename=camel(a.name) + ("Ms" if a.type is timedelta else "")) for a in fields}


def _unstructure_camel(cls: Any) -> Any:
    return make_dict_unstructure_fn(cls, wire, **_camel_names(cls))


def _structure_camel(cls: Any) -> Any:
    return make_dict_structure_fn(cls, wire, **_camel_names(cls))


wire.register_unstructure_hook_factory(attrs.has, _unstructure_camel)
wire.register_structure_hook_factory(attrs.has, _structure_camel)
wire.register_unstructure_hook(UndoConfig, undo_to_wire)
wire.register_structure_hook(UndoConfig, undo_from_wire)
# A record's JSON (a payload, a response, undo params) is JSON data already: sent as it is, not walked value by
# value. Read from the wire, it is still checked to be an object (the default hook).
wire.register_unstructure_hook_func(_is_json, _as_is)


def to_wire(record: Any) -> Any:
    """A record (or a list of them) as camelCase JSON-ready data."""
    return wire.unstructure(record)


def from_wire(data: Any, cls: type[T]) -> T:
    return wire.structure(data, cls)


def json_object(field: str, text: str | None) -> JSON | None:
    """A JSON object a person typed (a command-line option, a form's text area); ``None`` when nothing was
    given, :class:`ValidationError` naming ``field`` when it is not a JSON object."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValidationError(field, f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValidationError(field, "is nested too deeply") from None
    if not isinstance(value, dict):
        raise ValidationError(field, 'must be a JSON object, like {"key": "value"}')
    return value
