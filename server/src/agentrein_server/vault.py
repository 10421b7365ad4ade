"""Secrets at rest (connector credentials, webhook signing secrets, verifier keys): encrypted with Fernet
(cryptography) under the server's secret key.

The key comes from ``$AGENTREIN_SECRET_KEY``, or from a key file beside the database, generated on first use
with owner-only permissions. Without the key the stored credentials are unreadable, so keep it (and back it
up) apart from the database.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from agentrein_core.errors import AgentReinError, ValidationError
from agentrein_core.model import JSON

SECRET_KEY_ENV = "AGENTREIN_SECRET_KEY"


class Vault:
    """Encrypts and decrypts connector credentials."""

    def __init__(self, key: str | bytes) -> None:
        try:
            self._fernet = Fernet(key)
            self._key = base64.urlsafe_b64decode(key)
        except (ValueError, TypeError):
            raise ValidationError(SECRET_KEY_ENV, "must be a Fernet key (32 url-safe base64-encoded bytes)") from None

    @classmethod
    def from_environment(cls, key_file: Path) -> Vault:
        """The key of ``$AGENTREIN_SECRET_KEY``, else of ``key_file`` (created now if it does not exist)."""
        key = os.environ.get(SECRET_KEY_ENV)
        if key:
            return cls(key)
        if not key_file.exists():
            key_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key())
        return cls(key_file.read_bytes().strip())

    def derive(self, purpose: str) -> bytes:
        """A 32-byte secret for ``purpose`` (signing dashboard cookies, say), derived from the secret key so
        that every replica sharing the key agrees on it and no second secret needs managing."""
        return hmac.new(self._key, purpose.encode(), hashlib.sha256).digest()

    def encrypt(self, credentials: JSON) -> str:
        return self._fernet.encrypt(json.dumps(credentials).encode()).decode()

    def encrypt_text(self, secret: str) -> str:
        """One secret string (a webhook's signing secret, a verifier's API key), encrypted."""
        return self.encrypt({"secret": secret})

    def decrypt_text(self, token: str | None) -> str | None:
        return str(self.decrypt(token)["secret"]) if token else None

    def decrypt(self, token: str | None) -> JSON:
        if not token:
            return {}
        try:
            credentials: JSON = json.loads(self._fernet.decrypt(token.encode()))
        except InvalidToken:
            raise AgentReinError(
                "the stored connector credentials cannot be decrypted with this server's secret key "
                f"(was {SECRET_KEY_ENV} or the key file changed?); store them again"
            ) from None
        return credentials
