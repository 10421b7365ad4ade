"""Sending webhook deliveries: each due delivery is posted, signed, to its endpoint, and the outcome recorded
(retried with growing pauses until delivered or given up). Runs in the server's notifier worker, so a slow or
failing endpoint holds up nothing but its own deliveries."""

from __future__ import annotations

import logging
import os

import httpx

from agentrein_core import notifications, targets
from agentrein_core.engine import Engine
from agentrein_core.errors import ValidationError
from agentrein_core.model import Event, Webhook
from agentrein_core.vault import Vault

log = logging.getLogger("agentrein.server")

#: Where people open the dashboard, for the links in Slack-format messages.
PUBLIC_URL_ENV = "AGENTREIN_PUBLIC_URL"
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"
#: An endpoint has this long to answer.
SEND_TIMEOUT = 10.0


class WebhookSender:
    def __init__(self, engine: Engine, vault: Vault, public_url: str | None = None) -> None:
        self.engine = engine
        self.vault = vault
        self.public_url = public_url or os.environ.get(PUBLIC_URL_ENV) or DEFAULT_PUBLIC_URL
        # Redirects are not followed: an allowed host must not bounce a delivery to one that is not.
        self.http = targets.pinned_client("url", timeout=SEND_TIMEOUT, follow_redirects=False)

    def send_one(self) -> bool:
        """Send one due delivery; False when none is due. Whatever fails is recorded on the delivery (and
        tried again later), so no delivery stays taken and unanswered."""
        taken = self.engine.outbox.next_delivery()
        if taken is None:
            return False
        delivery, hook, event, settings = taken
        try:
            status, error = self._post(hook, event, delivery.delivery_id, settings.webhook_hosts)
        except Exception as exc:
            log.exception("webhook delivery %s could not be sent", delivery.delivery_id)
            status, error = None, f"not sent ({type(exc).__name__})"
        self.engine.outbox.record_delivery(delivery, status=status, error=error)
        return True

    def _post(self, hook: Webhook, event: Event, delivery_id: str, allowed: list[str]) -> tuple[int | None, str | None]:
        body = notifications.body_of(event, hook.format, self.public_url)
        headers = {
            "content-type": "application/json",
            "user-agent": "AgentRein-Webhooks/1",
            notifications.SIGNATURE_HEADER: notifications.signature(self.vault.decrypt_text(hook.secret) or "", body),
            "AgentRein-Event": event.type.value,
            "AgentRein-Delivery": delivery_id,
        }
        try:
            notifications.check_webhook_host(hook.url, allowed)  # the allow-list may have changed
            answer = self.http.post(hook.url, content=body, headers=headers)  # refused if its address is not public
        except ValidationError as exc:
            return None, f"not sent: {exc}"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        # The answer's body is not kept: it could be anything the endpoint says, and the log is readable.
        return answer.status_code, None if answer.is_success else f"answered {answer.status_code}"

    def close(self) -> None:
        self.http.close()
