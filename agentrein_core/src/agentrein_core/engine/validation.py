"""Checks of what callers send, each raising :class:`ValidationError` naming the field at fault. Use cases
check their input here before they open a transaction, so bad input never leaves a half-written record."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import secrets
import sys
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from agentrein_core import ids, nesting
from agentrein_core.errors import ValidationError
from agentrein_core.model import UndoConfig

if TYPE_CHECKING:
    from agentrein_core.redaction import Redactor

E = TypeVar("E", bound=Enum)

#: The longest free text a record keeps (an intent, an error, a reason).
MAX_TEXT = 10_000
#: The longest a reviewer may be given for any approval.
MAX_APPROVAL_TIMEOUT = timedelta(days=365)
MIN_PASSWORD_LENGTH = 10

_PASSWORDS = PasswordHasher()
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def text(field: str, value: object, max_len: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(field, "must not contain NUL characters")
    if not allow_empty and not value.strip():
        raise ValidationError(field, "must not be empty")
    if len(value) > max_len:
        raise ValidationError(field, f"must be at most {max_len} characters")
    return value


def redacted_text(field: str, value: object, max_len: int, redactor: Redactor, allow_empty: bool = False) -> str:
    """:func:`text` with its secrets redacted, refused if the marker made it longer than ``max_len`` (a short
    secret is replaced by a longer marker, and the record keeps no more)."""
    redacted = redactor.redact_text(text(field, value, max_len, allow_empty))
    if len(redacted) > max_len:
        raise ValidationError(field, f"must be at most {max_len} characters once its secrets are redacted")
    return redacted


def cut_text(field: str, value: object, max_len: int, redactor: Redactor) -> str:
    """:func:`text` of any length, redacted, then cut to ``max_len``: for a record that keeps only the start of
    what it is given (a rollback's trigger). Redacted before it is cut: a secret cut in two would no longer
    be recognised."""
    return redactor.redact_text(text(field, value, sys.maxsize))[:max_len]


def secret_free(field: str, value: object, max_len: int, redactor: Redactor) -> str:
    """:func:`text` that must hold nothing ``redactor`` would redact: for a value that cannot be redacted
    and still do its work (an idempotency key, which is stored and sent again to the service)."""
    checked = text(field, value, max_len)
    if redactor.redact_text(checked) != checked:
        raise ValidationError(field, "looks like it holds a secret, which AgentRein does not store; use a random id")
    return checked


def idempotency_key(value: object, max_len: int, redactor: Redactor | None) -> str:
    """A key a client made for a call's write-ahead record: printable ASCII without spaces (the key is sent again,
    in a header, with the call's undo), and refused rather than redacted if it looks like a secret (``redactor``;
    None: made by this process's own guard)."""
    field = "idempotency_key"
    checked = text(field, value, max_len) if redactor is None else secret_free(field, value, max_len, redactor)
    if not all("!" <= c <= "~" for c in checked):
        raise ValidationError(field, "must be printable ASCII without spaces: it is sent again in a header")
    return checked


def boolean(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be true or false, not {value!r}")
    return value


def chosen_id(field: str, value: object, prefix: str) -> str:
    """An id a client chose for a record it creates: it must have the shape of AgentRein's own ids, so that it
    is as hard to guess (and to collide with) as they are."""
    if not isinstance(value, str) or not ids.has_shape(prefix, value):
        raise ValidationError(
            field,
            f"must be an id of AgentRein's shape, {prefix!r}, '_' and {ids.RANDOM_DIGITS} lowercase hex digits "
            "chosen at random",
        )
    return value


def json_value(field: str, value: object) -> None:
    nesting.check(field, value)  # first: json.dumps itself fails on a deep enough value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, f"must be JSON-serialisable ({exc})") from None


def undo_params(undo: UndoConfig | None) -> None:
    """An undo config's parameters are the agent's JSON like any other (named ``undo``, as on the wire)."""
    if undo is not None:
        json_value("undo", undo.params)


def page_size(field: str, value: object) -> int:
    """How many records a page holds: a whole number from 1 to 1000."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValidationError(field, f"must be a whole number from 1 to 1000, not {value!r}")
    return value


def enum(field: str, cls: type[E], value: object) -> E:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in cls)
        raise ValidationError(field, f"{value!r} is not one of {allowed}") from None


def approval_timeout(timeout: timedelta, field: str = "timeout_ms") -> None:
    if not timedelta(0) < timeout <= MAX_APPROVAL_TIMEOUT:
        raise ValidationError(
            field, f"an approval timeout must be positive and at most {MAX_APPROVAL_TIMEOUT.days} days"
        )


def url(field: str, value: object) -> str:
    checked = text(field, value, 2000).strip()
    if not re.match(r"https?://[^/\s]+", checked):
        raise ValidationError(field, f"{checked!r} is not an http or https URL")
    return checked


def email(value: object) -> str:
    # 200, like every name a record keeps (``resolvedBy``, ``requestedBy``), which is where emails end up.
    checked = text("email", value, 200).strip().lower()
    if not _EMAIL.fullmatch(checked):
        raise ValidationError("email", f"{checked!r} is not an email address")
    return checked


def password(value: object) -> str:
    checked = text("password", value, 1024)
    if len(checked) < MIN_PASSWORD_LENGTH:
        raise ValidationError("password", f"must be at least {MIN_PASSWORD_LENGTH} characters")
    return checked


def hash_password(plain: str) -> str:
    return _PASSWORDS.hash(plain)


def password_matches(password_hash: str | None, given: object) -> bool:
    """Whether ``given`` is the password of ``password_hash``; with no hash (an unknown email) a dummy one is
    checked, so that a wrong email costs as long as a wrong password and emails cannot be probed."""
    try:
        _PASSWORDS.verify(password_hash or _unknown_user_hash(), str(given)[:1024])
    except (VerificationError, InvalidHashError):
        return False
    return password_hash is not None


@functools.cache
def _unknown_user_hash() -> str:
    return _PASSWORDS.hash(secrets.token_urlsafe(16))


def hash_key(secret: str) -> str:
    """What is stored of an API key: 256 random bits need no slow hash."""
    return hashlib.sha256(secret.encode()).hexdigest()
