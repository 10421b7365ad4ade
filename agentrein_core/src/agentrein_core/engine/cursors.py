"""Keyset positions handed out by listings as opaque cursors (``nextCursor``, a ``Link`` to the next page):
the sort key of the last record of a page, which the next page starts after. A position is JSON (moments as
ISO 8601) in unpadded URL-safe base64.

Only a cursor a listing could have made is taken: the very encoding of a position whose every part is what
the listing's positions hold (a moment in UTC, a rank, an id of the listing's shape); anything else is a
:class:`ValidationError`, before it reaches a query. Validation, not a signature: a cursor only says where
in the caller's own listing a page starts, so a forged one that passes shows nothing a request without it
would not, and needs no key shared by every replica and the embedded SDK."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from agentrein_core.errors import ValidationError
from agentrein_core.ids import has_shape

Position = tuple[Any, ...]
#: Reads one part of a position, raising ``ValueError`` or ``TypeError`` for what no listing writes.
Part = Callable[[Any], Any]
#: Longer than any cursor a listing makes (about 120 characters): a longer one is refused unread.
MAX_LENGTH = 256


def encode(position: Position) -> str:
    parts = [p.isoformat() if isinstance(p, datetime) else p for p in position]
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def decode(cursor: str, shape: tuple[Part, ...]) -> Position:
    """The position ``cursor`` holds, each part read by the part of ``shape`` (:func:`moment`,
    :func:`one_of`, :func:`identifier`)."""
    try:
        if len(cursor) > MAX_LENGTH:
            raise ValueError(cursor)
        parts = json.loads(base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True))
        if not isinstance(parts, list) or len(parts) != len(shape):
            raise ValueError(cursor)
        position = tuple(read(part) for read, part in zip(shape, parts, strict=True))
        if encode(position) != cursor:  # the same position written otherwise (spaces, "Z"): not one made here
            raise ValueError(cursor)
        return position
    except (ValueError, TypeError):
        raise ValidationError("cursor", "is not a cursor given out by a listing (pass it back as is)") from None


def moment(part: Any) -> datetime:
    """A moment as the store keeps it: in UTC (one in another zone, or none, was never written here)."""
    if not isinstance(part, str):
        raise TypeError(part)
    found = datetime.fromisoformat(part)
    if found.utcoffset() != timedelta(0):
        raise ValueError(part)
    return found


def one_of(*values: int) -> Part:
    """One of a few whole numbers (a rank in a listing's order)."""

    def read(part: Any) -> int:
        if type(part) is not int or part not in values:
            raise ValueError(part)
        return part

    return read


def position_in_session(part: Any) -> int:
    """An action's ``seq``: a whole number from 1."""
    if type(part) is not int or part < 1:
        raise ValueError(part)
    return part


def identifier(prefix: str) -> Part:
    """A record id of the shape ``prefix`` ids have."""

    def read(part: Any) -> str:
        if not isinstance(part, str) or not has_shape(prefix, part):
            raise ValueError(part)
        return part

    return read
