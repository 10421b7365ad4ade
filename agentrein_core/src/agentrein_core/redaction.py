"""Redaction of secrets from payloads and responses before anything is stored.

A value is replaced by ``REDACTED`` when its key names a secret (compared without case, ``-`` or ``_``, and
as a substring, so ``X-Api-Key`` and ``client_secret`` are caught), or when it is a string that looks like a
payment card number (13-19 digits passing the Luhn check), wherever it stands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"

#: Key fragments that always mark a secret; a connector adds its own through ``Connector.sensitive_fields``.
DEFAULT_SENSITIVE_FIELDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "token",
        "secret",
        "apikey",
        "accesskey",
        "authorization",
        "cookie",
        "cardnumber",
        "cvc",
        "cvv",
        "privatekey",
    }
)

_CARD_LIKE = re.compile(r"^[0-9][0-9 -]{11,22}[0-9]$")


def normalise_key(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def looks_like_card_number(value: str) -> bool:
    if not _CARD_LIKE.match(value):
        return False
    digits = re.sub(r"[ -]", "", value)
    return 13 <= len(digits) <= 19 and _luhn_ok(digits)


class Redactor:
    """Redacts one connector's payloads: the default fragments plus the connector's own."""

    def __init__(self, extra_fields: Iterable[str] = ()) -> None:
        self.fragments = frozenset(DEFAULT_SENSITIVE_FIELDS | {normalise_key(f) for f in extra_fields})
        self._pattern = re.compile("|".join(re.escape(f) for f in sorted(self.fragments)))
        self._verdicts: dict[str, bool] = {}  # keys repeat from call to call: decide each once

    def is_sensitive_key(self, key: str) -> bool:
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._pattern.search(normalise_key(key)) is not None
            if len(self._verdicts) < 10_000:
                self._verdicts[key] = verdict
        return verdict

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like: dicts, lists, scalars) with every secret replaced."""
        if isinstance(value, dict):
            return {k: REDACTED if self.is_sensitive_key(str(k)) else self.redact(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact(v) for v in value]
        if isinstance(value, str) and looks_like_card_number(value):
            return REDACTED
        if isinstance(value, int) and not isinstance(value, bool) and looks_like_card_number(str(value)):
            return REDACTED
        return value
