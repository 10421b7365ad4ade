"""A closed httpx client, reopened to run an inverse: the agent's ``with httpx.Client(...) as raw:`` block has
ended by the time it rolls back.

Everything the client was made with that httpx shows after construction is carried over: base URL, headers,
auth, cookies, params, timeout, redirects, event hooks, ``trust_env`` and the default encoding. TLS (verify,
certificates), HTTP/2, limits, proxies and a custom transport (``httpx.MockTransport``, say) are not shown:
they live in the client's transports, ``client._transport`` and ``client._mounts``, which the reopened client
reuses. httpx's own transports serve again after ``close()`` (closing an httpcore connection pool only drops
its connections; the next request opens new ones), and a custom transport is the agent's own, kept as it is.

Those two attributes are httpx's private ones. Should a version of httpx not have them, the client is reopened
without them: with httpx's default transport (certificates verified, proxies from the environment when
``trust_env``), a warning says so, and a setting that lived only in the transport is lost.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

log = logging.getLogger("agentrein")


def reopened(client: httpx.Client | httpx.AsyncClient) -> httpx.Client | httpx.AsyncClient:
    """A new client of the same kind that sends as the closed ``client`` did."""
    settings: dict[str, Any] = {
        "base_url": client.base_url,
        "headers": client.headers,
        "auth": client.auth,
        "cookies": client.cookies,
        "params": client.params,
        "timeout": client.timeout,
        "follow_redirects": client.follow_redirects,
        "max_redirects": client.max_redirects,
        "event_hooks": client.event_hooks,
        "trust_env": client.trust_env,
        "default_encoding": getattr(client, "_default_encoding", "utf-8"),
    }
    is_async = isinstance(client, httpx.AsyncClient)
    settings.update(_transports(client, httpx.AsyncBaseTransport if is_async else httpx.BaseTransport))
    return httpx.AsyncClient(**settings) if is_async else httpx.Client(**settings)


def _transports(client: httpx.Client | httpx.AsyncClient, kind: type) -> dict[str, Any]:
    """The closed client's transport and mounts (private attributes of httpx), to pass as the new client's."""
    transport = getattr(client, "_transport", None)
    mounts = getattr(client, "_mounts", None)
    if isinstance(transport, kind) and isinstance(mounts, dict):
        # With a transport given, httpx reads no proxies from the environment: the mounts carry the ones it read.
        return {"transport": transport, "mounts": {pattern.pattern: mounted for pattern, mounted in mounts.items()}}
    log.warning(
        "AgentRein reopens a closed %s without its transport settings (this httpx keeps them elsewhere): "
        "the inverse uses httpx's default TLS, proxy and transport settings",
        type(client).__name__,
    )
    return {}
