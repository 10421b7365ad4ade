"""An ``httpx2`` client that reaches public addresses only, for the server's connections to an organisation's MCP
servers (DESIGN §8). The ``mcp`` SDK speaks streamable HTTP through ``httpx2``, not ``httpx``, so the core's
``httpx`` transport cannot be given to it; this is its twin over ``httpx2``, on the same decision
(:func:`~agentrein_core.connector.checked_addresses`): each request's host is resolved once, refused if an answer
is not public (unless ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1), and the connection goes to the answers checked,
while the ``Host`` header, TLS SNI and certificate verification stay on the host's name."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import httpx2

from agentrein_core.connector import DEFAULT_PORTS, checked_addresses


class PinnedAsyncTransport(httpx2.AsyncHTTPTransport):
    """Refuses a private host with :class:`~agentrein_core.connector.ValidationError` naming ``field``, before
    anything is sent. Connections are not kept alive: the pool knows them by address, and a kept one could
    carry another name's request past that name's certificate check."""

    def __init__(self, field: str) -> None:
        super().__init__(limits=httpx2.Limits(max_keepalive_connections=0), trust_env=False)
        self.field = field

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.raw_host.decode("ascii")
        port = request.url.port or DEFAULT_PORTS.get(request.url.scheme, 80)
        try:  # resolving blocks: off the loop, as anyio's own connect does
            addresses = await anyio.to_thread.run_sync(checked_addresses, self.field, host, port)
        except (OSError, UnicodeError) as exc:
            raise httpx2.ConnectError(f"the host {host!r} cannot be resolved ({exc})", request=request) from None
        *others, last = addresses
        for address in others:
            try:
                return await super().handle_async_request(_to_address(request, str(address), host))
            except httpx2.ConnectError:
                continue  # nothing was sent: try the host's next address, as a socket connection would
        return await super().handle_async_request(_to_address(request, str(last), host))


def _to_address(request: httpx2.Request, address: str, host: str) -> httpx2.Request:
    extensions: dict[str, Any] = {**request.extensions, "sni_hostname": host}
    return httpx2.Request(
        request.method,
        request.url.copy_with(host=address),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )


def pinned_async_client(field: str, **options: Any) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` over a :class:`PinnedAsyncTransport`. It ignores ``HTTP(S)_PROXY``: a proxy
    would connect wherever the name leads it, past the address check."""
    return httpx2.AsyncClient(transport=PinnedAsyncTransport(field), trust_env=False, **options)
