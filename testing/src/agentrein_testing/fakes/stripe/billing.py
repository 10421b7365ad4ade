"""Billing: subscriptions, invoices and invoice items."""

from __future__ import annotations

import string
from typing import Any

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.catalogue import INTERVAL_SECONDS, Catalogue
from agentrein_testing.fakes.stripe.errors import invalid, no_such, validation_error
from agentrein_testing.fakes.stripe.objects import ENDED, new_id, random_string, timestamp
from agentrein_testing.fakes.stripe.params import (
    apply_update,
    as_int,
    currency_param,
    merge_metadata,
    optional_str,
    require,
)
from agentrein_testing.fakes.stripe.payments import decline_for, declined

_NO_DEFAULT_PAYMENT_METHOD = (
    "This customer has no attached payment source or default payment method. Please consider adding a default "
    "payment method. For more information, visit "
    "https://docs.stripe.com/billing/subscriptions/payment-methods-setting#payment-method-priority."
)


_SUBSCRIPTION_SPECIAL = frozenset(
    {
        "items",
        "proration_behavior",
        "proration_date",
        "payment_behavior",
        "off_session",
        "trial_end",
        "trial_from_plan",
        "billing_cycle_anchor",
        "add_invoice_items",
        "automatic_tax",
        "discounts",
    }
)


class Billing(Catalogue):
    """Subscriptions (created, updated, cancelled), invoices (finalized, voided) and invoice items."""

    __slots__ = ()

    def _create_subscription(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", require(params, "customer"), param="customer", status=400)
        entries = require(params, "items")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise validation_error("Invalid array", param="items")
        subscription_id = new_id("sub")
        now = timestamp()
        prices = [self._item_price(entry, f"items[{i}]") for i, entry in enumerate(entries)]
        items = [
            self._subscription_item(subscription_id, price, entry, now)
            for price, entry in zip(prices, entries, strict=True)
        ]
        collection_method = params.get("collection_method") or "charge_automatically"
        if collection_method == "send_invoice" and params.get("days_until_due") is None:
            raise validation_error(
                "Missing required param: days_until_due.", code="parameter_missing", param="days_until_due"
            )
        trial_days = params.get("trial_period_days")
        trial_end = now + trial_days * 86_400 if isinstance(trial_days, int) and trial_days > 0 else None
        if isinstance(params.get("trial_end"), str) and params["trial_end"].isdigit():
            trial_end = int(params["trial_end"])
        due = sum((price["unit_amount"] or 0) * item["quantity"] for price, item in zip(prices, items, strict=True))
        if trial_end is not None:
            status = "trialing"
        elif params.get("payment_behavior") == "default_incomplete":
            status = "incomplete"
        elif collection_method == "send_invoice" or due == 0:
            status = "active"
        else:
            instrument = (
                params.get("default_payment_method")
                or params.get("default_source")
                or customer["invoice_settings"].get("default_payment_method")
                or customer["default_source"]
            )
            if not instrument:
                raise invalid(_NO_DEFAULT_PAYMENT_METHOD, code="resource_missing")
            decline = decline_for(self._instruments.get(instrument, instrument))
            if decline is not None and params.get("payment_behavior") == "error_if_incomplete":
                raise declined(decline)
            status = "incomplete" if decline is not None else "active"
        subscription: JSON = {
            "id": subscription_id,
            "object": "subscription",
            "application": None,
            "application_fee_percent": params.get("application_fee_percent"),
            "billing_cycle_anchor": trial_end or now,
            "cancel_at": params.get("cancel_at"),
            "cancel_at_period_end": params.get("cancel_at_period_end", False),
            "canceled_at": None,
            "cancellation_details": {"comment": None, "feedback": None, "reason": None},
            "collection_method": collection_method,
            "created": now,
            "currency": prices[0]["currency"],
            "customer": customer["id"],
            "days_until_due": params.get("days_until_due"),
            "default_payment_method": optional_str(params, "default_payment_method"),
            "default_source": optional_str(params, "default_source"),
            "description": optional_str(params, "description"),
            "discounts": [],
            "ended_at": None,
            "items": {
                "object": "list",
                "data": items,
                "has_more": False,
                "total_count": len(items),
                "url": f"/v1/subscription_items?subscription={subscription_id}",
            },
            "latest_invoice": None,
            "livemode": False,
            "metadata": {},
            "start_date": now,
            "status": status,
            "trial_end": trial_end,
            "trial_start": now if trial_end is not None else None,
        }
        if "metadata" in params:
            merge_metadata(subscription, params["metadata"])
        return self._put("subscription", subscription)

    def _item_price(self, entry: JSON, param: str) -> JSON:
        if entry.get("price"):
            price = self._get("price", entry["price"], param=f"{param}[price]", status=400)
        elif isinstance(entry.get("price_data"), dict):
            price = self._new_price(entry["price_data"], f"{param}[price_data]")
        else:
            raise validation_error(
                f"Missing required param: {param}[price].", code="parameter_missing", param=f"{param}[price]"
            )
        if not price["active"]:
            raise invalid(
                "The price specified is inactive. This field only accepts active prices.", param=f"{param}[price]"
            )
        if price["type"] != "recurring":
            raise invalid(
                "The price specified is set to `type=one_time` but this field only accepts prices with "
                "`type=recurring`.",
                param=f"{param}[price]",
            )
        return price

    def _subscription_item(self, subscription_id: str, price: JSON, entry: JSON, now: int) -> JSON:
        quantity = entry.get("quantity", 1)
        recurring = price["recurring"]
        period = INTERVAL_SECONDS[recurring["interval"]] * recurring["interval_count"]
        item: JSON = {
            "id": new_id("si", 14),
            "object": "subscription_item",
            "created": now,
            "current_period_end": now + period,
            "current_period_start": now,
            "discounts": [],
            "metadata": {},
            "price": price["id"],
            "quantity": quantity if isinstance(quantity, int) else 1,
            "subscription": subscription_id,
            "tax_rates": [],
        }
        if "metadata" in entry:
            merge_metadata(item, entry["metadata"])
        return item

    def _update_subscription(self, subscription_id: str, params: JSON) -> JSON:
        subscription = self._get("subscription", subscription_id)
        if subscription["status"] in ENDED and set(params) - {"metadata", "cancellation_details", "expand"}:
            raise invalid("A canceled subscription can only update its cancellation_details and metadata.")
        entries = params.get("items")
        if entries is not None:
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise validation_error("Invalid array", param="items")
            items: list[JSON] = subscription["items"]["data"]
            for i, entry in enumerate(entries):
                if entry.get("id"):
                    found = [item for item in items if item["id"] == entry["id"]]
                    if not found:
                        raise no_such("subscription_item", entry["id"], param=f"items[{i}][id]", status=400)
                    if entry.get("deleted") in ("true", True):
                        items.remove(found[0])
                        continue
                    if entry.get("price") or entry.get("price_data"):
                        found[0]["price"] = self._item_price(entry, f"items[{i}]")["id"]
                    if isinstance(entry.get("quantity"), int):
                        found[0]["quantity"] = entry["quantity"]
                    if "metadata" in entry:
                        merge_metadata(found[0], entry["metadata"])
                else:
                    price = self._item_price(entry, f"items[{i}]")
                    items.append(self._subscription_item(subscription_id, price, entry, timestamp()))
            subscription["items"]["total_count"] = len(items)
        if params.get("trial_end") == "now" and subscription["status"] == "trialing":
            subscription["status"] = "active"
            subscription["trial_end"] = timestamp()
        apply_update(subscription, params, _SUBSCRIPTION_SPECIAL)
        return self._render("subscription", subscription)

    def _cancel_subscription(self, subscription_id: str, params: JSON) -> JSON:
        subscription = self._get("subscription", subscription_id)
        if subscription["status"] in ENDED:
            raise no_such("subscription", subscription_id)  # what Stripe answers for a second cancel
        end_subscription(subscription, params.get("cancellation_details") or {})
        return self._render("subscription", subscription)

    def _create_invoice(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", require(params, "customer"), param="customer", status=400)
        collection_method = params.get("collection_method") or "charge_automatically"
        if collection_method == "send_invoice" and params.get("days_until_due") is None and not params.get("due_date"):
            raise validation_error(
                "Missing required param: days_until_due.", code="parameter_missing", param="days_until_due"
            )
        subscription = self._ref("subscription", params, "subscription")
        now = timestamp()
        invoice: JSON = {
            "id": new_id("in"),
            "object": "invoice",
            "account_country": "US",
            "account_name": None,
            "amount_due": 0,
            "amount_paid": 0,
            "amount_remaining": 0,
            "amount_shipping": 0,
            "attempt_count": 0,
            "attempted": False,
            "auto_advance": params.get("auto_advance", False),
            "automatic_tax": {"enabled": False, "liability": None, "status": None},
            "billing_reason": "manual",
            "collection_method": collection_method,
            "created": now,
            "currency": (params.get("currency") or customer["currency"] or "usd").lower(),
            "custom_fields": None,
            "customer": customer["id"],
            "customer_email": customer["email"],
            "customer_name": customer["name"],
            "days_until_due": params.get("days_until_due"),
            "default_payment_method": optional_str(params, "default_payment_method"),
            "default_source": optional_str(params, "default_source"),
            "description": optional_str(params, "description"),
            "discounts": [],
            "due_date": params.get("due_date"),
            "footer": optional_str(params, "footer"),
            "hosted_invoice_url": None,
            "invoice_pdf": None,
            "livemode": False,
            "metadata": {},
            "number": None,
            "parent": None
            if subscription is None
            else {"subscription_details": {"subscription": subscription["id"]}, "type": "subscription_details"},
            "period_end": now,
            "period_start": now,
            "status": "draft",
            "status_transitions": {
                "finalized_at": None,
                "marked_uncollectible_at": None,
                "paid_at": None,
                "voided_at": None,
            },
            "subtotal": 0,
            "total": 0,
        }
        if "metadata" in params:
            merge_metadata(invoice, params["metadata"])
        self._store["invoice"][invoice["id"]] = invoice
        if params.get("pending_invoice_items_behavior") == "include":
            for item in self._store["invoiceitem"].values():
                if item["customer"] == customer["id"] and item["invoice"] is None:
                    item["invoice"] = invoice["id"]
        return self._render("invoice", invoice)

    def _update_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        editable_after_draft = {"metadata", "description", "footer", "custom_fields", "auto_advance", "expand"}
        if invoice["status"] != "draft" and set(params) - editable_after_draft:
            raise invalid(
                f"This invoice can no longer be edited because it is {invoice['status']}; only its metadata, "
                "description, footer and custom_fields can be updated.",
                code="invoice_not_editable",
            )
        apply_update(invoice, params, frozenset({"automatic_tax", "rendering", "shipping_cost", "discounts"}))
        return self._render("invoice", invoice)

    def _delete_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        if invoice["status"] != "draft":
            raise invalid("You can only delete draft invoices.", code="invoice_not_editable")
        del self._store["invoice"][invoice_id]
        for item_id in [i for i, item in self._store["invoiceitem"].items() if item["invoice"] == invoice_id]:
            del self._store["invoiceitem"][item_id]
        return {"id": invoice_id, "object": "invoice", "deleted": True}

    def _finalize_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        if invoice["status"] != "draft":
            raise invalid("This invoice is already finalized, you can't re-finalize a non-draft invoice.")
        now = timestamp()
        customer = self._store["customer"].get(invoice["customer"])
        prefix = customer["invoice_prefix"] if customer else random_string(8, string.ascii_uppercase)
        sequence = customer["next_invoice_sequence"] if customer else 1
        if customer is not None:
            customer["next_invoice_sequence"] = sequence + 1
        invoice["number"] = f"{prefix}-{sequence:04d}"
        invoice["hosted_invoice_url"] = f"https://invoice.stripe.com/i/acct_fake/test_{random_string(24)}"
        invoice["invoice_pdf"] = f"{invoice['hosted_invoice_url']}/pdf"
        invoice["status_transitions"]["finalized_at"] = now
        if "auto_advance" in params:
            invoice["auto_advance"] = params["auto_advance"]
        if sum(line["amount"] for line in self._invoice_line_items(invoice_id)) == 0:
            invoice["status"] = "paid"  # Stripe marks an invoice with nothing due paid when it is finalized
            invoice["status_transitions"]["paid_at"] = now
        else:
            invoice["status"] = "open"
        return self._render("invoice", invoice)

    def _void_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        if invoice["status"] not in ("open", "uncollectible"):
            raise invalid(
                f"You can only void open or uncollectible invoices; this invoice is {invoice['status']}.",
                code="invoice_not_editable" if invoice["status"] == "draft" else None,
            )
        invoice["status"] = "void"
        invoice["auto_advance"] = False
        invoice["status_transitions"]["voided_at"] = timestamp()
        return self._render("invoice", invoice)

    def _invoice_lines(self, invoice_id: str, params: JSON) -> JSON:
        self._get("invoice", invoice_id)
        lines = list(reversed(self._invoice_line_items(invoice_id)))
        return self._list("line_item", params, objects=lines, url=f"/v1/invoices/{invoice_id}/lines")

    def _create_invoiceitem(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", require(params, "customer"), param="customer", status=400)
        invoice = self._ref("invoice", params, "invoice")
        if invoice is not None and invoice["status"] != "draft":
            raise invalid(
                "The specified invoice can no longer be edited. Instead, consider creating additional invoice items "
                "that will be applied to the next invoice.",
                code="invoice_not_editable",
                param="invoice",
            )
        quantity = params.get("quantity", 1)
        pricing = params.get("pricing")
        price_id = pricing.get("price") if isinstance(pricing, dict) else None
        if price_id:
            price = self._get("price", price_id, param="pricing[price]", status=400)
            amount = (price["unit_amount"] or 0) * quantity
            currency = price["currency"]
            pricing_out: JSON | None = {
                "price_details": {"price": price["id"], "product": price["product"]},
                "type": "price_details",
                "unit_amount_decimal": price["unit_amount_decimal"],
            }
        else:
            amount = as_int(params, "amount")
            currency = currency_param(params)
            pricing_out = None
        now = timestamp()
        item: JSON = {
            "id": new_id("ii"),
            "object": "invoiceitem",
            "amount": amount,
            "currency": currency,
            "customer": customer["id"],
            "date": now,
            "description": optional_str(params, "description"),
            "discountable": params.get("discountable", True),
            "discounts": [],
            "invoice": None if invoice is None else invoice["id"],
            "livemode": False,
            "metadata": {},
            "parent": None,
            "period": {"end": now, "start": now},
            "pricing": pricing_out,
            "proration": False,
            "quantity": quantity,
            "tax_rates": [],
            "test_clock": None,
        }
        if "metadata" in params:
            merge_metadata(item, params["metadata"])
        return self._put("invoiceitem", item)

    def _editable_item(self, item_id: str) -> JSON:
        item = self._get("invoiceitem", item_id)
        invoice = self._store["invoice"].get(item["invoice"] or "")
        if invoice is not None and invoice["status"] != "draft":
            raise invalid(
                "The specified invoice can no longer be edited. Instead, consider creating additional invoice items "
                "that will be applied to the next invoice.",
                code="invoice_not_editable",
            )
        return item

    def _update_invoiceitem(self, item_id: str, params: JSON) -> JSON:
        item = self._editable_item(item_id)
        apply_update(item, params, frozenset({"pricing", "price_data", "invoicing_rules", "tax_rates", "discounts"}))
        return self._render("invoiceitem", item)

    def _delete_invoiceitem(self, item_id: str, params: JSON) -> JSON:
        self._editable_item(item_id)
        del self._store["invoiceitem"][item_id]
        return {"id": item_id, "object": "invoiceitem", "deleted": True}


def end_subscription(subscription: JSON, details: Any) -> None:
    now = timestamp()
    subscription["status"] = "canceled"
    subscription["canceled_at"] = now
    subscription["ended_at"] = now
    cancellation = dict(subscription["cancellation_details"])
    if isinstance(details, dict):
        cancellation.update({k: (None if v == "" else v) for k, v in details.items()})
    cancellation["reason"] = "cancellation_requested"
    subscription["cancellation_details"] = cancellation
