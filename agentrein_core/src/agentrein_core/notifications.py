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
import json
import time
from datetime import timedelta
from typing import Any, cast

from agentrein_core import targets
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
#: Every event type; a webhook subscribes to some of them, or to ``*``.
EVENT_TYPES = tuple(t.value for t in EventType)


def check_webhook_url(url: str, allowed_hosts: list[str]) -> str:
    """``url``, when a webhook is added, if it is http(s) to a host the organisation allows (exact names, or
    ``*.example.com``) that resolves to public addresses only, so that no one can point the server at its own
    network."""
    targets.check_public_target("url", *check_webhook_host(url, allowed_hosts))
    return url.strip()


def check_webhook_host(url: str, allowed_hosts: list[str]) -> tuple[str, int]:
    """The host and port of ``url`` if it is http(s) to a host among the organisation's ``webhookHosts``:
    checked when a webhook is added and before each delivery (the list may have changed since). Where the
    host resolves is checked again by the delivery's own connection
    (:class:`~agentrein_core.targets.PinnedTransport`)."""
    if not isinstance(url, str) or not url.strip() or len(url) > 2000:
        raise ValidationError("url", "must be an http or https URL of at most 2000 characters")
    host, port = targets.host_and_port("url", url.strip())
    if not allowed_hosts:
        raise ValidationError("url", "no webhook hosts are allowed yet: add the host to the settings' webhookHosts")
    if not targets.host_allowed(targets.host_entries("webhookHosts", allowed_hosts), host, port):
        raise ValidationError("url", f"the host {host!r} on port {port} is not among the organisation's webhookHosts")
    return host, port


def check_host_patterns(patterns: object) -> list[str]:
    """An allow-list of webhook hosts, lowercased: ``hooks.example.com``, ``*.example.com``,
    ``hooks.example.com:8443``, ``[::1]:8080``, as the http connector's ``allowedHosts``
    (:func:`~agentrein_core.targets.host_entries`)."""
    targets.host_entries("webhookHosts", patterns)  # refuses anything but a list of such entries
    return [pattern.lower() for pattern in cast(list[str], patterns)]


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
