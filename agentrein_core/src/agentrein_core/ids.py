"""Record ids: a short kind prefix (so a human can tell ``act_…`` from ``ses_…``) and 128 random bits."""

from __future__ import annotations

import re
import secrets

#: The random part of an id, in hex digits (128 bits).
RANDOM_DIGITS = 32


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(RANDOM_DIGITS // 2)}"


def has_shape(prefix: str, value: str) -> bool:
    """Whether ``value`` has the shape of the ids :func:`new_id` makes with ``prefix``: an id a client chose
    at random in that shape is as hard to guess as one made here."""
    return re.fullmatch(f"{re.escape(prefix)}_[0-9a-f]{{{RANDOM_DIGITS}}}", value) is not None
