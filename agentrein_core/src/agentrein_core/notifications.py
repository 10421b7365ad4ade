"""Telling people what happened: events, their webhook deliveries, and the signature that proves a delivery
came from AgentRein.

An event is recorded in the same transaction as the change it reports, with one delivery per subscribed
webhook, so a crash can lose neither. Workers then post each delivery, signed with HMAC-SHA256 over
``"{timestamp}.{body}"`` in an ``AgentRein-Signature: t=<unix seconds>,v1=<hex>`` header (as Stripe does),
retrying failures with growing pauses; a failing endpoint never holds up an approval or a rollback.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import socket
import time
from datetime import timedelta
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from agentrein_core.converter import to_wire
from agentrein_core.errors import ValidationError
from agentrein_core.model import Event
from agentrein_core.statuses import EventType, WebhookFormat

SIGNATURE_HEADER = "AgentRein-Signature"
#: A receiver should refuse a delivery whose timestamp is further than this from its clock (a replay).
TOLERANCE_SECONDS = 300
#: Pauses before the next attempt after each failed one; then the delivery is given up (``FAILED``).
RETRY_AFTER = (
    timedelta(seconds=10),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=12),
)
#: Set to 1 to let organisations' webhooks and verifiers reach loopback and private addresses (a single-team
#: server on one machine, or tests); otherwise only public addresses are reached.
ALLOW_PRIVATE_ENV = "AGENTREIN_ALLOW_PRIVATE_TARGETS"
#: Every event type; a webhook subscribes to some of them, or to ``*``.
EVENT_TYPES = tuple(t.value for t in EventType)


def check_webhook_url(url: str, allowed_hosts: list[str]) -> str:
    """``url`` if it is http(s) to a host the organisation allows (exact names, or ``*.example.com``) that
    resolves to public addresses only, so that no one can point the server at its own network."""
    if not isinstance(url, str) or not url.strip() or len(url) > 2000:
        raise ValidationError("url", "must be an http or https URL of at most 2000 characters")
    url = url.strip()
    host, port = _host_and_port("url", url)
    if not allowed_hosts:
        raise ValidationError("url", "no webhook hosts are allowed yet: add the host to the settings' webhookHosts")
    if not any(fnmatchcase(host, pattern.lower()) for pattern in allowed_hosts):
        raise ValidationError("url", f"the host {host!r} is not among the organisation's webhookHosts")
    check_public_target("url", host, port)
    return url


def _host_and_port(field: str, url: str) -> tuple[str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValidationError(field, f"{url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(ord(c) < 32 for c in url):
        raise ValidationError(field, f"{url!r} is not an http or https URL")
    if parts.username or parts.password:
        raise ValidationError(field, "must not carry a user name or password")
    return parts.hostname.lower(), port


def check_public_target(field: str, host: str, port: int) -> None:
    """Refuse a host that is, or resolves to, a loopback, private, link-local, shared or otherwise non-public
    address (unless ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` is 1). Checked when a URL is given and again when it
    is used; a name that changes its answer in between is the one gap left (no address pinning)."""
    if os.environ.get(ALLOW_PRIVATE_ENV) == "1":
        return
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        raise ValidationError(field, f"the host {host!r} cannot be resolved") from None
    for raw in found:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise ValidationError(field, f"the host {host!r} is a private or local address ({address}); refused")


def check_target_url(field: str, url: str) -> None:
    """An http(s) URL of a public host (a verifier an organisation chose, say)."""
    check_public_target(field, *_host_and_port(field, url))


def check_host_patterns(patterns: object) -> list[str]:
    """An allow-list of webhook hosts: names like ``hooks.example.com`` or ``*.example.com``."""
    if not isinstance(patterns, list) or len(patterns) > 100:
        raise ValidationError("webhookHosts", "must be a list of at most 100 host names")
    for pattern in patterns:
        name = pattern.removeprefix("*.") if isinstance(pattern, str) else ""
        if not name or len(pattern) > 253 or not all(c.isascii() and (c.isalnum() or c in "-.:") for c in name):
            raise ValidationError("webhookHosts", f"{pattern!r} is not a host name (or *.domain)")
    return [p.lower() for p in patterns]


def envelope(event: Event) -> dict[str, Any]:
    """An event as every webhook (format ``json``) and plugin sees it."""
    return {
        "id": event.event_id,
        "type": event.type.value,
        "createdAt": to_wire(event.created_at),
        "organisationId": event.org_id,
        "data": event.data,
    }


def _slack_escaped(value: object) -> str:
    """Text as Slack shows it literally: an agent's words cannot become a mention or a link."""
    return str(value if value is not None else "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(event: Event, dashboard_url: str) -> dict[str, Any]:
    """A Slack-compatible message (``text``), linking to where a human can act in the dashboard."""
    data = {k: _slack_escaped(v) for k, v in event.data.items()}
    base = dashboard_url.rstrip("/")
    if event.type in (EventType.APPROVAL_REQUESTED, EventType.APPROVAL_DECIDED):
        link = f"{base}/dashboard/approvals#approval-{data.get('approvalId', '')}"
        what = f"{data.get('operationType', '')} {data.get('apiName', '')} by {data.get('agentId', '')}"
        if event.type is EventType.APPROVAL_REQUESTED:
            text = f":raising_hand: Approval needed: {what} (session intent: {data.get('sessionIntent') or '—'})"
        else:
            text = (
                f":white_check_mark: Approval {str(data.get('status', '')).lower()} by {data.get('resolvedBy')}: {what}"
            )
    else:
        link = f"{base}/dashboard/sessions/{data.get('sessionId', '')}"
        if event.type is EventType.DRIFT_DETECTED:
            text = f":warning: Intent drift in session {data.get('sessionId')}: {data.get('rationale', '')}"
        elif event.type is EventType.ROLLBACK_COMPLETED:
            text = f":rewind: Session {data.get('sessionId')} was rolled back"
        else:
            text = f":x: The rollback of session {data.get('sessionId')} failed: {data.get('error')}"
    return {"text": f"{text} <{link}|Open in AgentRein>"}


def body_of(event: Event, fmt: WebhookFormat, dashboard_url: str) -> bytes:
    payload = slack_message(event, dashboard_url) if fmt is WebhookFormat.SLACK else envelope(event)
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``AgentRein-Signature`` header's value for ``body``."""
    stamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={digest}"
