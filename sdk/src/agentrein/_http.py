"""The SDK's HTTP to an AgentRein server, shared by the agent's transport (:class:`~agentrein._served.ServedMode`)
and the operator's :class:`~agentrein._admin.AdminClient`: one request at a time, answered with its JSON or
with the named error its problem+json stands for (``agentrein_core.errors.from_problem``).

Every wrapped call makes one of these requests, so they go straight to httpx's own connection pool (httpcore):
the ``httpx.Client`` around it (URL merging, cookies, auth and redirect handling, event hooks) cost as much again
per request (about 0.45 ms of 0.9 ms here), and the server needs none of it. What the client did that the
server does need is kept: keep-alive connections shared by threads, TLS with httpx's certificates
(:func:`httpx.create_ssl_context`) and the proxy the environment names (``HTTPS_PROXY``, ``NO_PROXY`` …)."""

from __future__ import annotations

import urllib.request
from json import dumps
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpcore
import httpx
import msgspec

from agentrein_core import errors
from agentrein_core.retry import retrying

URL_ENV = "AGENTREIN_URL"
API_KEY_ENV = "AGENTREIN_API_KEY"


class Connection:
    """One API key's connection to the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10.0) -> None:
        if not api_key:
            raise errors.ValidationError("api_key", f"server mode needs an API key (api_key= or ${API_KEY_ENV})")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = [(b"Authorization", f"Bearer {api_key}".encode()), (b"User-Agent", b"agentrein-sdk")]
        self._pool = _pool_for(self.base_url)

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Any = None,
        wait: float = 0.0,
        idempotent: bool = False,
    ) -> Any:
        """One request; its JSON answer, or the named error its problem+json describes. Reads are retried on
        connection failures (they change nothing); writes are not, as the server may have applied them, unless
        ``idempotent`` (asked again, the server answers what it did the first time).
        ``wait``: how long the server may hold the answer back (a long-poll), on top of the timeout."""
        answer = self._request(method, path, json=json, params=params, wait=wait, idempotent=idempotent)
        # msgspec reads an answer in a tenth of the time json.loads takes (the server writes them with msgspec)
        return None if answer.status == 204 else msgspec.json.decode(answer.content)

    def listed(self, path: str, params: Any = None) -> list[Any]:
        """Every item of a list the server answers in pages (a JSON array each, the next one named by the
        ``Link`` header's ``rel="next"``)."""
        items: list[Any] = []
        following: str | None = path
        while following is not None:
            answer = self._request("GET", following, params=params)
            items += msgspec.json.decode(answer.content)
            links = httpx.Response(answer.status, headers=answer.headers).links  # httpx reads the Link header
            following, params = links.get("next", {}).get("url"), None  # the link carries the query
            if following is not None and following.startswith(self.base_url):
                following = following.removeprefix(self.base_url)
        return items

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Any = None,
        wait: float = 0.0,
        idempotent: bool = False,
    ) -> httpcore.Response:
        timeout = self.timeout + wait
        attempts = 3 if method == "GET" or idempotent else 1
        # A write is not asked again once a connection timed out: the server may be at it still, and an outage
        # that drops packets would make the call wait three timeouts before it is journaled.
        transient = _is_connection_error if method == "GET" else _is_broken_connection
        try:
            for attempt in retrying(transient, attempts):
                with attempt:
                    answer = self._send(method, path, json, params, timeout)
        except _UNREACHABLE as exc:
            raise errors.AgentReinUnavailableError(f"AgentRein server {self.base_url} unreachable: {exc}") from exc
        if 200 <= answer.status < 300:
            return answer
        try:
            body = msgspec.json.decode(answer.content)
        except msgspec.DecodeError:
            body = None
        raise errors.from_problem(answer.status, body)

    def _send(self, method: str, path: str, json: Any, params: Any, timeout: float) -> httpcore.Response:
        url = f"{self.base_url}{path}"
        if params:
            url += ("&" if "?" in path else "?") + urlencode(params, doseq=True)
        headers, content = self._headers, b""
        if json is not None:
            content = dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()  # as httpx
            headers = [*headers, (b"Content-Type", b"application/json")]
        timeouts = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        return self._pool.request(method, url, headers=headers, content=content, extensions={"timeout": timeouts})

    def close(self) -> None:
        self._pool.close()


def _pool_for(base_url: str) -> httpcore.ConnectionPool | httpcore.HTTPProxy:
    """Connections to the server: through the proxy the environment names for it, as an ``httpx.Client``
    would, else direct."""
    parts = urlsplit(base_url)
    ssl_context = httpx.create_ssl_context() if parts.scheme == "https" else None  # loading CAs takes ~30 ms
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy and parts.hostname and not urllib.request.proxy_bypass(parts.hostname):
        return httpcore.HTTPProxy(proxy_url=proxy, ssl_context=ssl_context)
    return httpcore.ConnectionPool(ssl_context=ssl_context)


def segment(record_id: str) -> str:
    """An id as one path segment: an id with a slash in it must not reach another route."""
    return quote(record_id, safe="")


#: What httpcore raises when the server cannot be reached or answered no well-formed HTTP.
_UNREACHABLE = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, httpcore.ConnectError | httpcore.ConnectTimeout | httpcore.RemoteProtocolError)


def _is_broken_connection(exc: BaseException) -> bool:
    return isinstance(exc, httpcore.ConnectError | httpcore.RemoteProtocolError)
