"""Redaction of secrets from payloads and responses before anything is stored.

A value is replaced by ``REDACTED`` when its key names a secret (compared without case, ``-`` or ``_``, and
as a substring, so ``X-Api-Key`` and ``client_secret`` are caught; short words such as ``pin`` or ``key`` only
as a whole word of the key, so ``X-Auth-Key`` is caught and ``spinner`` is not), or when it is a string that
looks like a payment card number (13-19 digits passing the Luhn check), wherever it stands. Free text (an
error message, a plain-text body, a URL) is redacted too: the value of every ``key=value`` or ``key: value``
whose key names a secret, and every card number within it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from agentrein_core.model import UndoConfig

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
        "passphrase",
    }
)
#: Words too short to match inside other words (``pass`` in ``compass``): a secret only as a whole word of a
#: key, e.g. ``X-Auth-Key``, ``Ocp-Apim-Subscription-Key``, ``card[pin]`` or a query's ``sig``.
SENSITIVE_WORDS = frozenset({"key", "pass", "pin", "sig", "auth"})
#: Keys ending in a sensitive word that name no secret.
NOT_SECRET_KEYS = frozenset({"idempotencykey"})

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
#: ``key=value``, ``key: value``, ``"key": "value"``: the key and what separates it from its value.
_KEY = re.compile(r"""(?P<key>[A-Za-z][\w.\[\]-]*)["']?\s*[:=]\s*(?P<quote>["']?)""")
#: A value: with its auth scheme (``Bearer x``) if any, up to the next separator (or closing quote).
_VALUE = re.compile(r"(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s&,;\"'<>(){}#]+", re.IGNORECASE)
_QUOTED = {"'": re.compile(r"[^']*"), '"': re.compile(r'[^"]*')}
#: A URL path segment that is a credential: a Telegram ``bot<id>:<token>``, or a long run of mixed-case
#: letters and digits (a Slack or Discord webhook token) that is no prefixed id (``pi_3Mtw…``) or hex.
_PATH_TOKEN = re.compile(r"(?<=/)(?:bot[0-9]+:[\w-]{20,}|[A-Za-z0-9_-]{24,})(?=[/?#\s'\"]|$)")
_PREFIXED_ID = re.compile(r"[a-z]{1,12}_")
_DIGIT_RUN = re.compile(r"(?<![\w-])[0-9](?:[ -]?[0-9]){12,18}(?![\w-])")

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


def _card_in_text(match: re.Match[str]) -> str:
    return REDACTED if looks_like_card_number(match.group(0)) else match.group(0)


def _token_in_path(match: re.Match[str]) -> str:
    segment = match.group(0)
    if segment.startswith("bot"):
        return REDACTED
    if _PREFIXED_ID.match(segment):
        return segment
    # Words joined by dashes (``Very-Long-Name2024``) are a name; a token has a long run of its own.
    runs = [run for run in re.split(r"[-_]", segment) if len(run) >= 20]
    return REDACTED if any(_is_mixed(run) for run in runs) else segment


def _is_mixed(run: str) -> bool:
    return any(c.islower() for c in run) and any(c.isupper() for c in run) and any(c.isdigit() for c in run)


class Redactor:
    """Redacts one connector's payloads: the default fragments plus the connector's own."""

    def __init__(self, extra_fields: Iterable[str] = ()) -> None:
        self.fragments = frozenset(DEFAULT_SENSITIVE_FIELDS | {normalise_key(f) for f in extra_fields})
        self._pattern = re.compile("|".join(re.escape(f) for f in sorted(self.fragments)))
        self._verdicts: dict[str, bool] = {}  # keys repeat from call to call: decide each once

    def is_sensitive_key(self, key: str) -> bool:
        verdict = self._verdicts.get(key)
        if verdict is None:
            normalised = normalise_key(key)
            verdict = self._pattern.search(normalised) is not None or (
                normalised not in NOT_SECRET_KEYS and any(w.lower() in SENSITIVE_WORDS for w in _WORD.findall(key))
            )
            if len(self._verdicts) < 10_000:
                self._verdicts[key] = verdict
        return verdict

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like: dicts, lists, scalars) with every secret replaced, free text too."""
        return self._redact(value, self.redact_text)

    def redact_undo(self, undo: UndoConfig | None) -> UndoConfig | None:
        """An undo config redacted by key and card shape, but its text left as is (a file an undo restores
        must be restored as it was), except the URL it calls, whose query may carry a token."""
        if undo is None:
            return None
        params = self._redact(undo.params, lambda text: text)
        if isinstance(params.get("url"), str):
            params["url"] = self.redact_text(params["url"])
        return UndoConfig(undo.type, params, undo.require_approval)

    def redact_text(self, text: str) -> str:
        """``text`` with the value of every secret ``key=value`` (or ``key: value``), every token-like URL
        path segment and every card number replaced: error messages, plain-text bodies, api names and URLs
        carry secrets in free text."""
        if looks_like_card_number(text):
            return REDACTED
        if "=" in text or ":" in text:  # the common case, a short text of neither, costs no regex
            text = self._redact_pairs(text)
        if "/" in text:
            text = _PATH_TOKEN.sub(_token_in_path, text)
        return _DIGIT_RUN.sub(_card_in_text, text)

    def _redact_pairs(self, text: str) -> str:
        # A key that names no secret is stepped over, not its value: a URL's ``https:`` must not hide the
        # ``?access_token=`` that follows it.
        kept: list[str] = []
        pos = 0
        while (found := _KEY.search(text, pos)) is not None:
            value = (_QUOTED[found["quote"]] if found["quote"] else _VALUE).match(text, found.end())
            if value is None or not value.group(0) or not self.is_sensitive_key(found["key"]):
                kept.append(text[pos : found.end()])
                pos = found.end()
                continue
            kept.append(text[pos : found.end()] + REDACTED)
            pos = value.end()
        kept.append(text[pos:])
        return "".join(kept)

    def _redact(self, value: Any, text: Callable[[str], str]) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if self.is_sensitive_key(str(k)) else self._redact(v, text) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._redact(v, text) for v in value]
        if isinstance(value, str):
            return REDACTED if looks_like_card_number(value) else text(value)
        if isinstance(value, int) and not isinstance(value, bool) and looks_like_card_number(str(value)):
            return REDACTED
        return value


class Redactors:
    """One :class:`Redactor` per connector, built once: the default fields plus those ``fields_of`` the
    connector (its ``sensitive_fields``; none for a connector that is not installed)."""

    def __init__(self, fields_of: Callable[[str], Iterable[str]]) -> None:
        self._fields_of = fields_of
        self._by_connector: dict[str, Redactor] = {}

    def of(self, connector: str) -> Redactor:
        redactor = self._by_connector.get(connector)
        if redactor is None:  # a race builds the same redactor twice, harmlessly
            redactor = self._by_connector[connector] = Redactor(self._fields_of(connector))
        return redactor
