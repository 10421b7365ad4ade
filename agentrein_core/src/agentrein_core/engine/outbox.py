"""Use cases of telling the world: the events recorded with the changes they report (by
:func:`~agentrein_core.engine.consequences.emit`), handed to the ``agentrein_notify`` plugins, and delivered
to webhooks, each delivery retried on a schedule kept in the database so that any replica takes it over."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core import notifications
from agentrein_core.engine.base import UseCases
from agentrein_core.errors import NotFoundError, ValidationError
from agentrein_core.ids import new_id
from agentrein_core.model import Delivery, Event, OrganisationSettings, Webhook
from agentrein_core.statuses import DeliveryStatus, WebhookFormat

log = logging.getLogger("agentrein")

#: How long a worker holds a webhook delivery it is sending (then another may try it).
DELIVERY_LEASE = timedelta(minutes=1)


class Outbox(UseCases):
    def list_events(self, org_id: str, limit: int = 100) -> list[Event]:
        """The organisation's latest events, newest first."""
        with self.store.transaction(write=False) as tx:
            return tx.events.of_org(org_id, limit)

    def dispatch_events(self, notify: Callable[[Event], None], limit: int = 100) -> int:
        """Hand events not yet dispatched to ``notify`` (the ``agentrein_notify`` plugins), oldest first, and
        mark them dispatched; an exception from ``notify`` is logged and the event is not offered again."""
        with self.store.transaction(write=False) as tx:
            events = tx.events.undispatched(limit)
        for event in events:
            try:
                notify(self._outgoing(event))
            except Exception:
                log.exception("a notify plugin failed on event %s (%s)", event.event_id, event.type)
        if events:
            with self.store.transaction() as tx:
                tx.events.mark_dispatched([e.event_id for e in events], self.clock())
        return len(events)

    def add_webhook(
        self, org_id: str, url: str, events: list[str], secret: str, fmt: WebhookFormat | str = WebhookFormat.JSON
    ) -> Webhook:
        """Register an endpoint for ``events`` (names of :class:`EventType`, or ``*``); ``secret`` is the
        encrypted token of its signing secret. The URL's host must be among the organisation's webhook hosts."""
        if not isinstance(events, list) or not events:
            raise ValidationError("events", f"must list some of {', '.join(notifications.EVENT_TYPES)} (or '*')")
        unknown = [e for e in events if e != "*" and e not in notifications.EVENT_TYPES]
        if unknown:
            raise ValidationError(
                "events", f"{unknown[0]!r} is not an event (use {', '.join(notifications.EVENT_TYPES)})"
            )
        with self.store.transaction(write=False) as tx:
            settings = tx.settings.get(org_id) or OrganisationSettings(org_id)
        hook = Webhook(
            webhook_id=new_id("whk"),
            org_id=org_id,
            # checked outside the transaction: it may resolve the host name (DNS)
            url=notifications.check_webhook_url(url, settings.webhook_hosts),
            events=sorted(set(events)),
            secret=secret,
            format=validation.enum("format", WebhookFormat, fmt),
            created_at=self.clock(),
        )
        with self.store.transaction() as tx:
            tx.insert(hook)
        return hook

    def list_webhooks(self, org_id: str) -> list[Webhook]:
        with self.store.transaction(write=False) as tx:
            return tx.webhooks.of_org(org_id)

    def delete_webhook(self, org_id: str, webhook_id: str) -> None:
        with self.store.transaction() as tx:
            if not tx.webhooks.delete(org_id, webhook_id):
                raise NotFoundError("webhook", webhook_id)

    def list_deliveries(self, org_id: str, webhook_id: str, limit: int = 100) -> list[Delivery]:
        """The webhook's delivery log, newest first."""
        with self.store.transaction(write=False) as tx:
            if tx.webhooks.get(org_id, webhook_id) is None:
                raise NotFoundError("webhook", webhook_id)
            return tx.deliveries.of_webhook(org_id, webhook_id, limit)

    def next_delivery(self) -> tuple[Delivery, Webhook, Event, OrganisationSettings] | None:
        """Take one delivery that is due (held for ``DELIVERY_LEASE``), with what sending it needs."""
        now = self.clock()
        with self.store.transaction() as tx:
            delivery = tx.deliveries.claim_due(now, now + DELIVERY_LEASE)
            if delivery is None:
                return None
            hook = tx.webhooks.get(delivery.org_id, delivery.webhook_id)
            event = tx.events.get(delivery.event_id)
            settings = tx.settings.get(delivery.org_id) or OrganisationSettings(delivery.org_id)
        if hook is None or event is None:
            return None
        return delivery, hook, self._outgoing(event), settings

    def _outgoing(self, event: Event) -> Event:
        """``event`` as it leaves AgentRein: redacted when its records were stored, and again here, by the
        default rules (a connector's own fields, such as Stripe's ``payload``, would hide what the records
        show), so that what a rule added since would catch does not leave either."""
        return evolve(event, data=self.redactors.of("").redact(event.data))

    def record_delivery(self, delivery: Delivery, *, status: int | None, error: str | None) -> Delivery:
        """The outcome of one attempt: a 2xx answer delivers; anything else is tried again after the next
        pause of ``delivery_retry_after``, until they run out (``FAILED``)."""
        now = self.clock()
        attempts = delivery.attempts + 1
        delivered = status is not None and 200 <= status < 300
        if delivered:
            outcome = evolve(
                delivery,
                status=DeliveryStatus.DELIVERED,
                attempts=attempts,
                due_at=None,
                last_status=status,
                last_error=None,
                delivered_at=now,
            )
        else:
            again = attempts <= len(self.delivery_retry_after)
            outcome = evolve(
                delivery,
                status=DeliveryStatus.PENDING if again else DeliveryStatus.FAILED,
                attempts=attempts,
                due_at=now + self.delivery_retry_after[attempts - 1] if again else None,
                last_status=status,
                last_error=(error or f"answered {status}")[: validation.MAX_TEXT],
            )
        with self.store.transaction() as tx:
            tx.replace(outcome, due_at=delivery.due_at)
        return outcome
