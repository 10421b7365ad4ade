"""Where AgentRein sends requests an organisation or an agent chose the address of: webhook deliveries, an
organisation's own verifier, and server-side undos (which carry the organisation's stored credentials).

- Allow-lists of hosts (``webhookHosts``, the http connector's ``allowedHosts``) follow one rule
  (:func:`host_entries`): ``host``, ``host:port``, ``[IPv6]`` or ``[IPv6]:port``, each host exact or ``*.``
  followed by a domain of at least two labels (:func:`check_host_pattern`): no entry allows every host.
- Only public addresses are reached (:func:`check_public_target`), unless the server sets
  ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` to 1: checked when an address is stored (a connector's targets by
  :func:`agentrein_core.connector.check_settings`, whatever the connector), and again by the request's own
  connection (:class:`PinnedTransport`), which resolves the host once, checks every answer and connects to
  the address it checked, so a DNS answer that changes in between cannot lead the request elsewhere.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentrein_core.errors import ValidationError

#: Set to 1 to let organisations' webhooks, verifiers and server-side undos reach loopback and private
#: addresses (a single-team server on one machine, or tests); otherwise only public addresses are reached.
ALLOW_PRIVATE_ENV = "AGENTREIN_ALLOW_PRIVATE_TARGETS"
DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
#: One entry of an allow-list of hosts: a host (or ``*.domain``) and the one port it allows, ``None`` for any.
HostEntry = tuple[str, int | None]
#: What every refusal of a private or unresolvable address ends with, so an operator knows the way out.
_ALLOW_HINT = f"set {ALLOW_PRIVATE_ENV}=1 on the server to allow private targets"


def private_targets_allowed() -> bool:
    return os.environ.get(ALLOW_PRIVATE_ENV) == "1"


def host_and_port(field: str, url: str) -> tuple[str, int]:
    """The host (lowercased) and port of an http(s) URL without a user name or password."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
    except ValueError as exc:
        raise ValidationError(field, f"{url!r} is not a URL ({exc})") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or any(ord(c) < 32 for c in url):
        raise ValidationError(field, f"{url!r} is not an http or https URL")
    if parts.username or parts.password:
        raise ValidationError(field, "must not carry a user name or password")
    return parts.hostname.lower(), port


def check_target_url(field: str, url: object) -> None:
    """An http(s) URL of a public host (a verifier an organisation chose, a connector's API address)."""
    if not isinstance(url, str):
        raise ValidationError(field, "must be an http or https URL")
    check_public_target(field, *host_and_port(field, url))


def check_public_target(field: str, host: str, port: int) -> None:
    """Refuse a host that is, or resolves to, a loopback, private, link-local, shared or otherwise non-public
    address (unless ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1), when an address is stored. The request made
    later checks again, on the very answer it connects to (:class:`PinnedTransport`)."""
    if private_targets_allowed():
        return
    try:
        found = addresses_of(host, port)
    except (OSError, UnicodeError):
        raise ValidationError(
            field, f"the host {host!r} cannot be resolved, so its address cannot be checked ({_ALLOW_HINT})"
        ) from None
    _refuse_private(field, host, found)


def addresses_of(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to now (one DNS resolution), in the resolver's order."""
    found = (str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP))
    return list(dict.fromkeys(ipaddress.ip_address(raw.split("%", 1)[0]) for raw in found))


def checked_addresses(field: str, host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to now, for a request to connect to, when each is public (or
    ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1); else :class:`ValidationError` naming ``field``. A host that does not
    resolve raises :class:`OSError` (or :class:`UnicodeError`), as a connection to it would. The one decision
    behind every pinned transport (:class:`PinnedTransport`; the mcp connector's, over ``httpx2``)."""
    addresses = addresses_of(host, port)
    if not private_targets_allowed():
        _refuse_private(field, host, addresses)
    return addresses


def _refuse_private(field: str, host: str, addresses: list[Address]) -> None:
    for address in addresses:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise ValidationError(
                field, f"the host {host!r} is a private or local address ({address}); refused ({_ALLOW_HINT})"
            )


def check_host_pattern(field: str, pattern: object) -> str:
    """One entry of an allow-list of hosts, lowercased: an exact host name or IP address, or ``*.`` followed by
    a domain of at least two labels whose last is not a number (``*.example.com``). Anything else is refused,
    so that no entry allows every host, a whole top-level domain or a range of addresses (``*``, ``*.*``,
    ``*.com``, ``127.0.0.*``, ``*.0.0.1``)."""
    host = pattern.lower() if isinstance(pattern, str) else ""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    domain = host.removeprefix("*.")
    labels = domain.split(".")
    if "*" in domain or (domain != host and (len(labels) < 2 or labels[-1].isdigit())):
        raise ValidationError(
            field, f"{pattern!r} allows too much: a * may only start a domain of two labels or more (*.example.com)"
        )
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValidationError(field, f"{pattern!r} is not a host name, an IP address or *.domain")
    return host


def host_entries(field: str, entries: object) -> list[HostEntry]:
    """An allow-list of hosts (``webhookHosts``, the http connector's ``allowedHosts``), parsed: at most 100
    entries, each ``host``, ``host:port``, ``[IPv6]``, ``[IPv6]:port`` or a bare IPv6 address, its host as
    :func:`check_host_pattern` allows. An entry without a port allows any port."""
    if not isinstance(entries, list) or len(entries) > 100:
        raise ValidationError(field, "must be a list of at most 100 hosts or host:port, e.g. ['api.example.com']")
    return [_host_entry(field, entry) for entry in entries]


def _host_entry(field: str, entry: object) -> HostEntry:
    text = entry if isinstance(entry, str) else ""
    host, port = text, None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or ":" not in host or (rest and not rest.startswith(":")):
            raise ValidationError(field, f"{entry!r} is not [IPv6 address] or [IPv6 address]:port")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    host = check_host_pattern(field, host)
    if port is not None and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValidationError(field, f"{entry!r}: the port must be a number from 1 to 65535")
    return host, None if port is None else int(port)


def host_allowed(entries: list[HostEntry], host: str, port: int) -> bool:
    """Whether ``host`` (lowercased) on ``port`` is among the parsed allow-list ``entries``."""
    return any(fnmatchcase(host, pattern) and allowed in (None, port) for pattern, allowed in entries)


def check_allowed_hosts(field: str, entries: object) -> list[HostEntry]:
    """An allow-list of hosts requests are sent to (:func:`host_entries`), its exact hosts public
    (:func:`check_public_target`; a wildcard's hosts are checked as each request is sent)."""
    parsed = host_entries(field, entries)
    for host, port in parsed:
        if "*" not in host:
            check_public_target(field, host, port or 443)
    return parsed


class PinnedTransport(httpx.HTTPTransport):
    """An httpx transport that resolves each request's host once, refuses it if any answer is not public
    (unless ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1), and connects to the answers it checked,
    in order, while the ``Host`` header, TLS SNI and certificate verification stay on the host's name.

    A refused host raises :class:`ValidationError` naming ``field``, before anything is sent; a host that does
    not resolve raises :class:`httpx.ConnectError`, as httpx's own resolution would. Connections are not kept
    alive: the pool knows them by address, and a kept one could carry another name's request past that
    name's certificate check."""

    def __init__(self, field: str) -> None:
        super().__init__(limits=httpx.Limits(max_keepalive_connections=0))
        self.field = field

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.raw_host.decode("ascii")
        port = request.url.port or DEFAULT_PORTS.get(request.url.scheme, 80)
        try:
            addresses = checked_addresses(self.field, host, port)
        except (OSError, UnicodeError) as exc:
            raise httpx.ConnectError(f"the host {host!r} cannot be resolved ({exc})", request=request) from None
        *others, last = addresses
        for address in others:
            try:
                return super().handle_request(_to_address(request, address, host))
            except httpx.ConnectError:
                continue  # nothing was sent: try the host's next address, as a socket connection would
        return super().handle_request(_to_address(request, last, host))


def _to_address(request: httpx.Request, address: Address, host: str) -> httpx.Request:
    """``request`` sent to ``address``; its headers (``Host`` among them) unchanged, and TLS on ``host``."""
    extensions: dict[str, Any] = {**request.extensions, "sni_hostname": host}
    return httpx.Request(
        request.method,
        request.url.copy_with(host=str(address)),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )


def pinned_client(field: str, **options: Any) -> httpx.Client:
    """An ``httpx.Client`` over a :class:`PinnedTransport`. It ignores ``HTTP(S)_PROXY``: a proxy would connect
    wherever the name leads it, past the address check."""
    return httpx.Client(transport=PinnedTransport(field), trust_env=False, **options)
