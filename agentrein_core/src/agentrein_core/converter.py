"""Conversion between records and plain data, in one place (cattrs).

``storage`` turns records into database rows and back: snake_case names, datetimes kept as ``datetime``.
An :class:`UndoConfig` is stored (and sent) in its wire form ``{"type", "requireApproval", ...params}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

import cattrs

from agentrein_core.connector import REQUIRE_APPROVAL_KEY
from agentrein_core.model import UndoConfig

T = TypeVar("T")

storage = cattrs.Converter()
storage.register_unstructure_hook(datetime, lambda dt: dt)
storage.register_structure_hook(datetime, lambda value, _: value)


def undo_to_wire(undo: UndoConfig) -> dict[str, Any]:
    return {**undo.params, "type": undo.type, REQUIRE_APPROVAL_KEY: undo.require_approval}


def undo_from_wire(data: dict[str, Any], _: object = None) -> UndoConfig:
    params = {k: v for k, v in data.items() if k not in ("type", REQUIRE_APPROVAL_KEY)}
    return UndoConfig(str(data["type"]), params, bool(data.get(REQUIRE_APPROVAL_KEY, False)))


storage.register_unstructure_hook(UndoConfig, undo_to_wire)
storage.register_structure_hook(UndoConfig, undo_from_wire)


def to_row(record: Any) -> dict[str, Any]:
    row: dict[str, Any] = storage.unstructure(record)
    return row


def from_row(row: Any, cls: type[T]) -> T:
    return storage.structure(dict(row._mapping), cls)
