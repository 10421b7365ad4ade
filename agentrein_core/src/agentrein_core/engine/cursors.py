"""Keyset positions handed out by listings as opaque cursors (``nextCursor``, a ``Link`` to the next page):
the sort key of the last record of a page, which the next page starts after. A position is JSON (moments as
ISO 8601) in unpadded URL-safe base64; a cursor that does not decode to a position of its listing's shape
is a :class:`ValidationError`."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from agentrein_core.errors import ValidationError

Position = tuple[Any, ...]


def encode(position: Position) -> str:
    parts = [p.isoformat() if isinstance(p, datetime) else p for p in position]
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def decode(cursor: str, shape: tuple[type, ...]) -> Position:
    """The position ``cursor`` holds, each part of the type ``shape`` gives (``datetime``, ``str``, ``int``)."""
    try:
        parts = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(parts, list) or len(parts) != len(shape):
            raise ValueError(cursor)
        return tuple(_part(kind, part) for kind, part in zip(shape, parts, strict=True))
    except (ValueError, TypeError):
        raise ValidationError("cursor", "is not a cursor given out by a listing (pass it back as is)") from None


def _part(kind: type, part: Any) -> Any:
    if kind is datetime:
        return datetime.fromisoformat(part)
    if not isinstance(part, kind) or isinstance(part, bool):
        raise TypeError(part)
    return part
