"""Who is calling: ``Authorization: Bearer <api key>`` resolved to the key's organisation and role."""

from __future__ import annotations

import time

from attrs import frozen
from litestar import Request

from agentrein_core.engine import Engine
from agentrein_core.errors import ForbiddenError, UnauthorizedError
from agentrein_core.model import ApiKey
from agentrein_core.statuses import Role

#: How long a resolved key is remembered, sparing a database read per request (and so how long a key
#: revoked through another replica may still work here).
KEY_CACHE_SECONDS = 10.0
#: What the tokens of the compatible API start with (:mod:`agentrein_server.compat.tokens`): they work there only.
COMPAT_TOKEN_PREFIX = "art_"


@frozen
class Caller:
    key_id: str
    org_id: str
    role: Role
    label: str  # how the caller is named in records it decides (resolvedBy, requestedBy)

    @property
    def agent_key(self) -> str | None:
        """An agent key's id: it acts only on the sessions it opened. None for an operator key, which acts on
        all the organisation's."""
        return self.key_id if self.role is Role.AGENT else None

    def require_operator(self, doing: str) -> None:
        if self.role is not Role.OPERATOR:
            raise ForbiddenError(f"an {self.role} key may not {doing}; use an operator key")


class Authenticator:
    """Resolves API keys, remembering them for ``KEY_CACHE_SECONDS``. Called on the event loop: a remembered
    key costs no thread hop; only a key not seen lately reads the database (briefly, by primary key)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._cache: dict[str, tuple[float, ApiKey]] = {}

    def forget(self, key_id: str) -> None:
        """Drop a revoked key from the cache."""
        for secret, (_, key) in list(self._cache.items()):
            if key.key_id == key_id:
                self._cache.pop(secret, None)

    def __call__(self, request: Request) -> Caller:  # type: ignore[type-arg]
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise UnauthorizedError("send the API key as 'Authorization: Bearer <key>'")
        secret = secret.strip()
        if secret.startswith(COMPAT_TOKEN_PREFIX):
            raise UnauthorizedError("a /compat token works on the /compat routes only; send an API key here")
        cached = self._cache.get(secret)
        if cached is not None and cached[0] > time.monotonic():
            key = cached[1]
        else:
            key = self.engine.accounts.authenticate(secret)
            self._cache[secret] = (time.monotonic() + KEY_CACHE_SECONDS, key)
        return Caller(key.key_id, key.org_id, key.role, f"{key.role} key {key.prefix}…")
