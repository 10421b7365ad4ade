"""Payments: payment intents, charges and refunds, and Stripe's test cards."""

from __future__ import annotations

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.errors import StripeError, invalid, validation_error
from agentrein_testing.fakes.stripe.objects import StripeObjects, new_id, random_string, timestamp
from agentrein_testing.fakes.stripe.params import (
    apply_update,
    as_int,
    check_amount,
    currency_param,
    merge_metadata,
    optional_str,
)

_PI_CANCELABLE = (
    "requires_payment_method",
    "requires_capture",
    "requires_confirmation",
    "requires_action",
    "processing",
)


_PI_CONFIRMABLE = ("requires_payment_method", "requires_confirmation", "requires_action")


_CHARGE_SPECIAL = frozenset(
    {
        "amount",
        "currency",
        "customer",
        "source",
        "capture",
        "description",
        "destination",
        "application_fee",
        "radar_options",
    }
)


class Payments(StripeObjects):
    """Payment intents (confirmed, captured, cancelled), charges and refunds."""

    __slots__ = ()

    def _create_payment_intent(self, _: str, params: JSON) -> JSON:
        amount = as_int(params, "amount")
        currency = currency_param(params)
        check_amount(amount, currency)
        customer = self._ref("customer", params, "customer")
        payment_method = optional_str(params, "payment_method")
        intent_id = new_id("pi")
        intent: JSON = {
            "id": intent_id,
            "object": "payment_intent",
            "amount": amount,
            "amount_capturable": 0,
            "amount_received": 0,
            "application": None,
            "application_fee_amount": params.get("application_fee_amount"),
            "automatic_payment_methods": None,
            "canceled_at": None,
            "cancellation_reason": None,
            "capture_method": params.get("capture_method") or "automatic_async",
            "client_secret": f"{intent_id}_secret_{random_string(25)}",
            "confirmation_method": params.get("confirmation_method") or "automatic",
            "created": timestamp(),
            "currency": currency,
            "customer": None if customer is None else customer["id"],
            "description": optional_str(params, "description"),
            "last_payment_error": None,
            "latest_charge": None,
            "livemode": False,
            "metadata": {},
            "next_action": None,
            "payment_method": payment_method,
            "payment_method_types": params.get("payment_method_types") or ["card"],
            "receipt_email": optional_str(params, "receipt_email"),
            "setup_future_usage": params.get("setup_future_usage"),
            "shipping": params.get("shipping"),
            "statement_descriptor": params.get("statement_descriptor"),
            "status": "requires_confirmation" if payment_method else "requires_payment_method",
            "transfer_group": params.get("transfer_group"),
        }
        if "metadata" in params:
            merge_metadata(intent, params["metadata"])
        self._store["payment_intent"][intent_id] = intent
        if params.get("confirm") is True:
            self._confirm(intent, params)
        return self._render("payment_intent", intent)

    def _update_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        always = {"metadata", "description", "receipt_email", "shipping", "expand"}
        if intent["status"] in ("succeeded", "canceled") and set(params) - always:
            raise invalid(
                f"This PaymentIntent's {sorted(set(params) - always)[0]} could not be updated because it has a "
                f"status of {intent['status']}. You may only update the {', '.join(sorted(always - {'expand'}))} "
                "of a PaymentIntent with this status.",
                code="payment_intent_unexpected_state",
            )
        if "currency" in params:
            params = {**params, "currency": currency_param(params)}
        if "customer" in params:
            self._ref("customer", params, "customer")
        apply_update(
            intent, params, frozenset({"payment_method_data", "payment_method_options", "amount_details", "hooks"})
        )
        if params.get("payment_method") and intent["status"] == "requires_payment_method":
            intent["status"] = "requires_confirmation"
        return self._render("payment_intent", intent)

    def _confirm_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        self._confirm(intent, params)
        return self._render("payment_intent", intent)

    def _confirm(self, intent: JSON, params: JSON) -> None:
        if intent["status"] not in _PI_CONFIRMABLE:
            raise invalid(
                f"You cannot confirm this PaymentIntent because it has a status of {intent['status']}.",
                code="payment_intent_unexpected_state",
            )
        payment_method = optional_str(params, "payment_method") or intent["payment_method"]
        if not payment_method:
            raise invalid(
                "You cannot confirm this PaymentIntent because it's missing a payment method. You can either update "
                "the PaymentIntent with a payment method and then confirm it again, or confirm it again directly "
                "with a payment method.",
                code="payment_intent_unexpected_state",
            )
        if params.get("capture_method"):
            intent["capture_method"] = params["capture_method"]
        intent["payment_method"] = payment_method
        manual = intent["capture_method"] == "manual"
        charge = self._new_charge(
            intent["amount"],
            intent["currency"],
            customer=intent["customer"],
            instrument=payment_method,
            captured=not manual,
            payment_intent=intent["id"],
            description=intent["description"],
        )
        intent["latest_charge"] = charge["id"]
        if charge["status"] == "failed":
            intent["status"] = "requires_payment_method"
            intent["payment_method"] = None
            decline = charge["outcome"]["reason"]
            intent["last_payment_error"] = {
                "charge": charge["id"],
                "code": "card_declined",
                "decline_code": decline,
                "message": decline_message(decline),
                "type": "card_error",
            }
            raise declined(decline, {"charge": charge["id"], "payment_intent": self._render("payment_intent", intent)})
        intent["last_payment_error"] = None
        if manual:
            intent["status"] = "requires_capture"
            intent["amount_capturable"] = intent["amount"]
        else:
            intent["status"] = "succeeded"
            intent["amount_received"] = intent["amount"]

    def _capture_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        if intent["status"] != "requires_capture":
            raise invalid(
                f"This PaymentIntent could not be captured because it has a status of {intent['status']}. Only a "
                "PaymentIntent with one of the following statuses may be captured: requires_capture.",
                code="payment_intent_unexpected_state",
            )
        amount = params.get("amount_to_capture", intent["amount_capturable"])
        if not isinstance(amount, int) or not 0 < amount <= intent["amount_capturable"]:
            raise invalid(
                f"The amount_to_capture ({amount}) must be greater than 0 and less than or equal to the amount "
                f"capturable ({intent['amount_capturable']}).",
                param="amount_to_capture",
            )
        charge = self._store["charge"][intent["latest_charge"]]
        _capture(charge, amount)
        intent["amount_received"] = amount
        intent["amount_capturable"] = 0
        intent["status"] = "succeeded"
        if "metadata" in params:
            merge_metadata(intent, params["metadata"])
        return self._render("payment_intent", intent)

    def _cancel_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        if intent["status"] not in _PI_CANCELABLE:
            raise invalid(
                f"You cannot cancel this PaymentIntent because it has a status of {intent['status']}. Only a "
                f"PaymentIntent with one of the following statuses may be canceled: {', '.join(_PI_CANCELABLE)}.",
                code="payment_intent_unexpected_state",
            )
        if intent["status"] == "requires_capture":  # the authorization is released
            charge = self._store["charge"][intent["latest_charge"]]
            charge["amount_refunded"] = charge["amount"]
            charge["refunded"] = True
        intent["status"] = "canceled"
        intent["canceled_at"] = timestamp()
        intent["cancellation_reason"] = params.get("cancellation_reason")
        intent["amount_capturable"] = 0
        return self._render("payment_intent", intent)

    def _create_charge(self, _: str, params: JSON) -> JSON:
        amount = as_int(params, "amount")
        currency = currency_param(params)
        check_amount(amount, currency)
        customer = self._ref("customer", params, "customer")
        source = optional_str(params, "source")
        if source is None and customer is None:
            raise validation_error("Must provide source or customer.")
        if source is None and customer is not None:
            source = customer["default_source"]
            if source is None:
                raise invalid("Cannot charge a customer that has no active card", code="missing", param="card")
        charge = self._new_charge(
            amount,
            currency,
            customer=None if customer is None else customer["id"],
            instrument=source,
            captured=params.get("capture", True) is not False,
            payment_intent=None,
            description=optional_str(params, "description"),
        )
        apply_update(charge, params, _CHARGE_SPECIAL)
        if charge["status"] == "failed":
            decline = charge["outcome"]["reason"]
            raise declined(decline, {"charge": charge["id"]})
        return self._render("charge", charge)

    def _new_charge(
        self,
        amount: int,
        currency: str,
        *,
        customer: str | None,
        instrument: str | None,
        captured: bool,
        payment_intent: str | None,
        description: str | None,
    ) -> JSON:
        decline = decline_for(self._instruments.get(instrument or "", instrument))
        paid = decline is None
        charge: JSON = {
            "id": new_id("ch"),
            "object": "charge",
            "amount": amount,
            "amount_captured": amount if paid and captured else 0,
            "amount_refunded": 0,
            "balance_transaction": new_id("txn") if paid and captured else None,
            "billing_details": {"address": None, "email": None, "name": None, "phone": None},
            "captured": paid and captured,
            "created": timestamp(),
            "currency": currency,
            "customer": customer,
            "description": description,
            "disputed": False,
            "failure_code": None if paid else "card_declined",
            "failure_message": None if paid else decline_message(decline or "generic_decline"),
            "fraud_details": {},
            "livemode": False,
            "metadata": {},
            "outcome": {
                "network_status": "approved_by_network" if paid else "declined_by_network",
                "reason": decline,
                "risk_level": "normal",
                "seller_message": "Payment complete." if paid else "The bank did not return any further details.",
                "type": "authorized" if paid else "issuer_declined",
            },
            "paid": paid,
            "payment_intent": payment_intent,
            "payment_method": instrument,
            "receipt_email": None,
            "refunded": False,
            "shipping": None,
            "source": None,
            "statement_descriptor": None,
            "status": "succeeded" if paid else "failed",
            "transfer_group": None,
        }
        self._store["charge"][charge["id"]] = charge
        return charge

    def _update_charge(self, charge_id: str, params: JSON) -> JSON:
        charge = self._get("charge", charge_id)
        if params.get("customer"):
            if charge["customer"] is not None:
                raise invalid("You cannot change the customer of a charge.", param="customer")
            self._ref("customer", params, "customer")
        apply_update(charge, params)
        return self._render("charge", charge)

    def _capture_charge(self, charge_id: str, params: JSON) -> JSON:
        charge = self._get("charge", charge_id)
        if charge["captured"]:
            raise invalid(f"Charge {charge_id} has already been captured.", code="charge_already_captured")
        if charge["refunded"] or charge["status"] != "succeeded":
            raise invalid(f"Charge {charge_id} cannot be captured.", code="charge_expired_for_capture")
        amount = params.get("amount", charge["amount"])
        if not isinstance(amount, int) or not 0 < amount <= charge["amount"]:
            raise invalid(f"Invalid amount: {amount}", param="amount")
        _capture(charge, amount)
        return self._render("charge", charge)

    def _create_refund(self, _: str, params: JSON) -> JSON:
        intent = self._ref("payment_intent", params, "payment_intent")
        charge: JSON | None
        if intent is not None:
            if intent["status"] != "succeeded" or intent["latest_charge"] is None:
                raise invalid(
                    f"This PaymentIntent ({intent['id']}) does not have a successful charge to refund.",
                    param="payment_intent",
                )
            charge = self._store["charge"][intent["latest_charge"]]
        else:
            charge = self._ref("charge", params, "charge")
            if charge is None:
                raise validation_error(
                    "One of the following params should be provided for this request: payment_intent or charge.",
                    code="parameter_missing",
                )
        if charge["status"] != "succeeded":
            raise invalid(f"Charge {charge['id']} has failed and cannot be refunded.", param="charge")
        refundable = charge["amount"] - charge["amount_refunded"]  # what partial captures released is refunded
        if charge["refunded"] or refundable <= 0:
            raise invalid(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded")
        amount = params.get("amount", refundable)
        if not isinstance(amount, int) or amount < 1:
            raise validation_error("This value must be greater than or equal to 1.", param="amount")
        if amount > refundable:
            raise invalid(
                f"Refund amount ({_money(amount, charge['currency'])}) is greater than unrefunded amount on charge "
                f"({_money(refundable, charge['currency'])})",
                param="amount",
            )
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] >= charge["amount"]
        refund: JSON = {
            "id": new_id("re"),
            "object": "refund",
            "amount": amount,
            "balance_transaction": new_id("txn") if charge["captured"] else None,
            "charge": charge["id"],
            "created": timestamp(),
            "currency": charge["currency"],
            "destination_details": {"card": {"type": "refund"}, "type": "card"},
            "metadata": {},
            "payment_intent": charge["payment_intent"],
            "reason": optional_str(params, "reason"),
            "receipt_number": None,
            "source_transfer_reversal": None,
            "status": "succeeded",
            "transfer_reversal": None,
        }
        if "metadata" in params:
            merge_metadata(refund, params["metadata"])
        return self._put("refund", refund)


def _capture(charge: JSON, amount: int) -> None:
    charge["captured"] = True
    charge["amount_captured"] = amount
    charge["balance_transaction"] = new_id("txn")
    if amount < charge["amount"]:  # Stripe refunds what is not captured
        charge["amount_refunded"] = charge["amount"] - amount


def _money(amount: int, currency: str) -> str:
    if currency == "usd":
        return f"${amount / 100:.2f}"
    return f"{amount / 100:.2f} {currency.upper()}"


def decline_for(instrument: str | None) -> str | None:
    """Stripe's test cards: a declined one names ``chargeDeclined`` (tok_chargeDeclined, pm_card_chargeDeclined...)."""
    if instrument is None or "chargeDeclined" not in instrument:
        return None
    return "insufficient_funds" if "InsufficientFunds" in instrument else "generic_decline"


def decline_message(decline_code: str) -> str:
    return "Your card has insufficient funds." if decline_code == "insufficient_funds" else "Your card was declined."


def declined(decline_code: str, extra: JSON | None = None) -> StripeError:
    """The 402 of a declined card; ``extra`` goes in the error (the failed charge, say)."""
    return StripeError(
        402,
        decline_message(decline_code),
        error_type="card_error",
        code="card_declined",
        decline_code=decline_code,
        extra=extra,
    )
