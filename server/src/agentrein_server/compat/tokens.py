"""The tokens of the compatible API: the published SDKs exchange an API key for a token once
(``POST /compat/auth/token``) and send the token with every later request.

A token is signed (HMAC-SHA256 under a secret derived from the server's secret key, as the dashboard's
cookies are, so every replica sharing the key accepts it), names the agent key it was issued for, and expires.
Each request checks that the key is still active, so revoking the key ends its tokens at once. A token is
refused on the native API, and an API key on every ``/compat`` route but ``auth/token``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import timedelta

from litestar import Request

from agentrein_core.errors import ForbiddenError, UnauthorizedError
from agentrein_core.model import ApiKey
from agentrein_core.statuses import Role
from agentrein_core.vault import Vault
from agentrein_server.auth import COMPAT_TOKEN_PREFIX, Caller
from agentrein_server.services import ServicesDep

#: What every token starts with, so that the native API can name what it was sent.
TOKEN_PREFIX = COMPAT_TOKEN_PREFIX
#: How long a token works. Their SDKs reuse one for 24 hours less 5 minutes by their own clock and never renew
#: it on a refusal, so a shorter life would fail long-running agents.
TOKEN_LIFETIME = timedelta(hours=25)
#: The purpose the signing secret is derived for (:meth:`Vault.derive`).
PURPOSE = "compat-token"


class Tokens:
    """Issues and reads tokens under the server's secret key."""

    def __init__(self, vault: Vault) -> None:
        self._secret = vault.derive(PURPOSE)

    def issue(self, key: ApiKey, now: float | None = None) -> str:
        """A token for an agent key; an operator key is refused (the published SDKs are agents)."""
        if key.role is not Role.AGENT:
            raise ForbiddenError("the published SDKs take an agent key; this is an operator key")
        expires = int((now if now is not None else time.time()) + TOKEN_LIFETIME.total_seconds())
        claims = _encode(json.dumps({"k": key.key_id, "o": key.org_id, "x": expires}).encode())
        return f"{TOKEN_PREFIX}{claims}.{self._sign(claims)}"

    def read(self, token: str, now: float | None = None) -> tuple[str, str]:
        """(organisation id, key id) a valid, unexpired token names; :class:`UnauthorizedError` otherwise."""
        if not token.startswith(TOKEN_PREFIX):
            raise UnauthorizedError(
                "send the token that POST /compat/auth/token gives for your API key, not the key itself"
            )
        claims, _, signature = token.removeprefix(TOKEN_PREFIX).partition(".")
        # Compared as bytes: compare_digest refuses a str with other than ASCII in it (a 500, not a 401).
        if not hmac.compare_digest(signature.encode("utf-8", "surrogateescape"), self._sign(claims).encode()):
            raise UnauthorizedError("the token is not one this server issued")
        read = json.loads(_decode(claims))
        if read["x"] <= (now if now is not None else time.time()):
            raise UnauthorizedError("the token has expired; ask POST /compat/auth/token for another")
        return str(read["o"]), str(read["k"])

    def _sign(self, claims: str) -> str:
        return _encode(hmac.new(self._secret, claims.encode(), hashlib.sha256).digest())


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise UnauthorizedError("the token is not one this server issued") from None


def provide_compat_caller(request: Request, services: ServicesDep) -> Caller:  # type: ignore[type-arg]
    """Who is calling a ``/compat`` route: the agent key its bearer token names, while that key is active."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("send the token of POST /compat/auth/token as 'Authorization: Bearer <token>'")
    org_id, key_id = Tokens(services.vault).read(token.strip())
    key = services.engine.accounts.active_key(org_id, key_id)
    return Caller(key.key_id, key.org_id, key.role, f"{key.role} key {key.prefix}… (published SDK)")
