"""Customers, and the cards their test tokens make."""

from __future__ import annotations

import re
import string
from typing import Any

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.billing import end_subscription
from agentrein_testing.fakes.stripe.errors import invalid, validation_error
from agentrein_testing.fakes.stripe.objects import ENDED, StripeObjects, new_id, random_string, timestamp
from agentrein_testing.fakes.stripe.params import apply_update

_CUSTOMER_SPECIAL = frozenset(
    {"source", "default_source", "payment_method", "tax", "tax_id_data", "cash_balance", "validate", "test_clock"}
)


class Customers(StripeObjects):
    """Customers: created, updated and deleted (a deleted one retrieves as a stub)."""

    __slots__ = ()

    def _create_customer(self, _: str, params: JSON) -> JSON:
        _check_email(params)
        customer: JSON = {
            "id": new_id("cus", 14),
            "object": "customer",
            "address": None,
            "balance": 0,
            "created": timestamp(),
            "currency": None,
            "default_source": None,
            "delinquent": False,
            "description": None,
            "discount": None,
            "email": None,
            "invoice_prefix": random_string(8, string.ascii_uppercase + string.digits),
            "invoice_settings": {
                "custom_fields": None,
                "default_payment_method": None,
                "footer": None,
                "rendering_options": None,
            },
            "livemode": False,
            "metadata": {},
            "name": None,
            "next_invoice_sequence": 1,
            "phone": None,
            "preferred_locales": [],
            "shipping": None,
            "tax_exempt": "none",
            "test_clock": None,
        }
        apply_update(customer, params, _CUSTOMER_SPECIAL)
        if params.get("source"):
            customer["default_source"] = self._card_from(params["source"], "source")
        return self._put("customer", customer)

    def _update_customer(self, customer_id: str, params: JSON) -> JSON:
        customer = self._get("customer", customer_id)
        _check_email(params)
        apply_update(customer, params, _CUSTOMER_SPECIAL)
        if params.get("source"):
            customer["default_source"] = self._card_from(params["source"], "source")
        if "default_source" in params:
            customer["default_source"] = params["default_source"] or None
        return self._render("customer", customer)

    def _delete_customer(self, customer_id: str, params: JSON) -> JSON:
        self._get("customer", customer_id)
        del self._store["customer"][customer_id]
        self._deleted_customers.add(customer_id)
        for subscription in self._store["subscription"].values():
            if subscription["customer"] == customer_id and subscription["status"] not in ENDED:
                end_subscription(subscription, {})
        return {"id": customer_id, "object": "customer", "deleted": True}

    def _card_from(self, token: Any, param: str) -> str:
        if not isinstance(token, str) or not token.startswith(("tok_", "card_", "src_")):
            raise invalid(f"No such token: '{token}'", code="resource_missing", param=param)
        if token.startswith("tok_"):
            card_id = new_id("card")
            self._instruments[card_id] = token
            return card_id
        return token


def _check_email(params: JSON) -> None:
    email = params.get("email")
    if isinstance(email, str) and email and not re.fullmatch(r"[^@\s]+@[^@\s]+", email):
        raise validation_error(f"Invalid email address: {email}", code="email_invalid", param="email")
