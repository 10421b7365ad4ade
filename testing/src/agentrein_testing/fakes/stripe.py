"""A stateful fake of the Stripe API on 127.0.0.1, driven by the real ``stripe`` SDK in tests and the demo.

It speaks Stripe's wire format: form-encoded bodies (``metadata[k]=v``, ``items[0][price]=...``, ``expand[0]=...``
or ``expand[]=...``) parsed with the stdlib, JSON answers shaped like Stripe's (``{"id": "cus_...", "object":
"customer", ...}``, lists ``{"object": "list", "data": [...], "has_more": ..., "url": ...}``), Stripe's error bodies
(``{"error": {"type": ..., "code": ..., "message": ..., "param": ...}}``) with Stripe's statuses, and a ``Request-Id``
header on every answer. State is real: a deleted customer is gone, a refunded charge cannot be refunded again.

Pointing the SDK at it (stripe-python 16; its default HTTP client is ``stripe.RequestsClient`` (``requests``), which
works on loopback without any network; nothing here needs ``stripe.HTTPXClient``)::

    with FakeStripe().running() as fake:
        client = stripe.StripeClient(
            "sk_test_anything",  # any sk_test_/rk_test_ key is accepted
            base_addresses={"api": fake.base_url},
            max_network_retries=0,  # the default for StripeClient is already 0 (None)
        )
        client.v1.customers.create(params={"email": "a@example.com"}, options={"idempotency_key": "k1"})

        # module ("legacy") style: global settings; tests should set them with monkeypatch.setattr
        stripe.api_key = "sk_test_anything"
        stripe.api_base = fake.base_url
        stripe.max_network_retries = 0  # the module default is 2: injected 5xx/409 would be retried
        stripe.Customer.create(email="a@example.com", idempotency_key="k1")

What the SDK does on the wire (and what this fake therefore checks): every POST carries an ``Idempotency-Key``
(the one given in ``options``/``idempotency_key=``, else a random UUID the SDK makes per call and reuses for its own
retries); GET and DELETE carry one only when given. GET/DELETE parameters go in the query string. Arrays are always
indexed (``expand[0]=...``), booleans are ``true``/``false``, ``None`` values are left out (send ``""`` to unset).
The SDK retries connection errors, 409 and 5xx (honouring ``Stripe-Should-Retry``) up to ``max_network_retries``
times, sleeping at least 0.5 s between tries.

Behaviour chosen to match real Stripe, where it differs from what one might guess:

* Idempotency (POST only, as Stripe: "Don't send idempotency keys in GET and DELETE requests because it has no
  effect"): keys are scoped by API key; the same key with the same method, path and parameters replays the saved
  status and body with ``Idempotent-Replayed: true`` and ``Original-Request: <first Request-Id>``; the same key with
  other parameters or another endpoint answers 400 ``idempotency_error``; a key whose first request is still running
  answers 409 ``idempotency_key_in_use``. Like Stripe, results are saved once the endpoint runs (errors included, e.g.
  a 402 decline or a 400 ``charge_already_refunded``) but not for parameter validation errors (unknown, missing or
  malformed parameters), 401s or 409s, which can be retried with the same key.
* A deleted customer retrieves as ``{"id": ..., "object": "customer", "deleted": true}``; deleting, updating or
  referring to it again answers "No such customer" (404 on the path, 400 with ``param`` for a parameter). Deleting a
  customer cancels its subscriptions. Deleted products, coupons, invoices and invoice items answer 404.
* ``DELETE /v1/subscriptions/{id}`` cancels (the subscription stays retrievable with ``status: canceled``);
  cancelling it again answers 404 "No such subscription" as Stripe does; updating a canceled subscription answers 400
  unless only ``metadata``/``cancellation_details`` change.
* Creating a subscription charged automatically for a non-zero price needs a default payment method (the
  subscription's ``default_payment_method``/``default_source`` or the customer's
  ``invoice_settings[default_payment_method]``/``default_source``, e.g. a customer created with ``source=tok_visa``),
  otherwise 400 as on Stripe. A trial (``trial_period_days``), ``payment_behavior=default_incomplete`` (status
  ``incomplete``) or ``collection_method=send_invoice`` (with ``days_until_due``) need none. No invoice is made.
* Test cards: any payment method or source succeeds except those containing ``chargeDeclined`` (402 ``card_error``
  ``card_declined``, ``decline_code`` ``generic_decline``, or ``insufficient_funds`` for
  ``...chargeDeclinedInsufficientFunds``); the failed charge is stored, as on Stripe.
* Finalizing an invoice with nothing due marks it ``paid`` (Stripe does); add invoice items
  (``POST /v1/invoiceitems`` with ``invoice=in_...``) to get an ``open`` invoice that can be voided.
* Unknown top-level parameters answer 400 ``parameter_unknown`` (the allowed names are those of stripe-python 16's
  parameter types), missing required ones 400 ``parameter_missing``, unknown URLs 404 "Unrecognized request URL".

Error messages for the common cases are Stripe's; the rarer ones are close paraphrases (match on ``code``/status).

Faults: :meth:`FakeStripe.fail_next` makes the next matching request answer a Stripe-style error or drop the
connection, before its effect or after it (the response is lost but the effect happened and is saved for the
idempotency key, so a retry with the same key replays it). Inspection: :meth:`calls`, :meth:`objects`, :meth:`get`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
import secrets
import string
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from attrs import define, field

from agentrein_testing.fakes.base import Fault, LoopbackFake, Reply, Request, Saved

JSON = dict[str, Any]

#: what the fake answers in ``Stripe-Version`` when a request names none (the SDK always names one)
DEFAULT_API_VERSION = "2026-10-28.endive"

KINDS = (
    "customer",
    "subscription",
    "payment_intent",
    "charge",
    "refund",
    "invoice",
    "invoiceitem",
    "coupon",
    "product",
    "price",
)
_COLLECTIONS = {
    "customers": "customer",
    "subscriptions": "subscription",
    "payment_intents": "payment_intent",
    "charges": "charge",
    "refunds": "refund",
    "invoices": "invoice",
    "invoiceitems": "invoiceitem",
    "coupons": "coupon",
    "products": "product",
    "prices": "price",
}
_URLS = {kind: f"/v1/{collection}" for collection, kind in _COLLECTIONS.items()}
_ALPHANUMERIC = string.ascii_letters + string.digits


def _keys(names: str) -> frozenset[str]:
    return frozenset(names.split())


# Top-level parameters each endpoint accepts (besides ``expand``), from stripe-python 16's parameter types.
_PARAMS: dict[tuple[str, str], frozenset[str]] = {
    ("customer", "create"): _keys(
        "address balance business_name cash_balance description email individual_name invoice_prefix "
        "invoice_settings metadata name next_invoice_sequence payment_method phone preferred_locales shipping source "
        "tax tax_exempt tax_id_data test_clock validate"
    ),
    ("customer", "update"): _keys(
        "address balance business_name cash_balance default_source description email individual_name invoice_prefix "
        "invoice_settings metadata name next_invoice_sequence phone preferred_locales shipping source tax tax_exempt "
        "validate"
    ),
    ("customer", "list"): _keys("created email ending_before limit starting_after test_clock"),
    ("subscription", "create"): _keys(
        "add_invoice_items application_fee_percent automatic_tax backdate_start_date billing_cycle_anchor "
        "billing_cycle_anchor_config billing_mode billing_schedules billing_thresholds cancel_at cancel_at_period_end "
        "collection_method currency customer customer_account days_until_due default_payment_method default_source "
        "default_tax_rates description discounts invoice_settings items metadata off_session on_behalf_of "
        "payment_behavior payment_settings pending_invoice_item_interval proration_behavior transfer_data trial_end "
        "trial_from_plan trial_period_days trial_settings"
    ),
    ("subscription", "update"): _keys(
        "add_invoice_items application_fee_percent automatic_tax billing_cycle_anchor billing_schedules "
        "billing_thresholds cancel_at cancel_at_period_end cancellation_details collection_method days_until_due "
        "default_payment_method default_source default_tax_rates description discounts invoice_settings items "
        "metadata off_session on_behalf_of pause_collection payment_behavior payment_settings "
        "pending_invoice_item_interval proration_behavior proration_date transfer_data trial_end trial_from_plan "
        "trial_settings"
    ),
    ("subscription", "cancel"): _keys("cancellation_details invoice_now prorate"),
    ("subscription", "list"): _keys(
        "automatic_tax collection_method created current_period_end current_period_start customer customer_account "
        "ending_before limit plan price starting_after status test_clock"
    ),
    ("payment_intent", "create"): _keys(
        "allowed_payment_method_types amount amount_details application_fee_amount automatic_payment_methods "
        "capture_method confirm confirmation_method confirmation_token currency customer customer_account description "
        "error_on_requires_action excluded_payment_method_types hooks mandate mandate_data metadata off_session "
        "on_behalf_of payment_details payment_method payment_method_configuration payment_method_data "
        "payment_method_options radar_options receipt_email return_url setup_future_usage shipping "
        "statement_descriptor statement_descriptor_suffix transfer_data transfer_group use_stripe_sdk"
    ),
    ("payment_intent", "update"): _keys(
        "allowed_payment_method_types amount amount_details application_fee_amount capture_method currency customer "
        "customer_account description excluded_payment_method_types hooks metadata payment_details payment_method "
        "payment_method_configuration payment_method_data payment_method_options receipt_email setup_future_usage "
        "shipping statement_descriptor statement_descriptor_suffix transfer_data transfer_group"
    ),
    ("payment_intent", "confirm"): _keys(
        "allowed_payment_method_types amount_details amount_to_confirm capture_method confirmation_token "
        "error_on_requires_action excluded_payment_method_types hooks mandate mandate_data off_session "
        "payment_details payment_method payment_method_data payment_method_options radar_options receipt_email "
        "return_url setup_future_usage shipping use_stripe_sdk"
    ),
    ("payment_intent", "capture"): _keys(
        "amount_details amount_to_capture application_fee_amount final_capture hooks metadata payment_details "
        "statement_descriptor statement_descriptor_suffix transfer_data"
    ),
    ("payment_intent", "cancel"): _keys("cancellation_reason"),
    ("payment_intent", "list"): _keys("created customer customer_account ending_before limit starting_after"),
    ("charge", "create"): _keys(
        "amount application_fee application_fee_amount capture currency customer description destination metadata "
        "on_behalf_of radar_options receipt_email shipping source statement_descriptor statement_descriptor_suffix "
        "transfer_data transfer_group"
    ),
    ("charge", "update"): _keys("customer description fraud_details metadata receipt_email shipping transfer_group"),
    ("charge", "capture"): _keys(
        "amount application_fee application_fee_amount receipt_email statement_descriptor "
        "statement_descriptor_suffix transfer_data transfer_group"
    ),
    ("charge", "list"): _keys("created customer ending_before limit payment_intent starting_after transfer_group"),
    ("refund", "create"): _keys(
        "amount charge currency customer instructions_email metadata origin payment_intent reason "
        "refund_application_fee reverse_transfer"
    ),
    ("refund", "update"): _keys("metadata"),
    ("refund", "list"): _keys("charge created ending_before limit payment_intent starting_after"),
    ("invoice", "create"): _keys(
        "account_tax_ids application_fee_amount auto_advance automatic_tax automatically_finalizes_at "
        "collection_method currency custom_fields customer customer_account days_until_due default_payment_method "
        "default_source default_tax_rates description discounts due_date effective_at footer from_invoice issuer "
        "metadata number on_behalf_of payment_settings pending_invoice_items_behavior rendering shipping_cost "
        "shipping_details statement_descriptor subscription transfer_data"
    ),
    ("invoice", "update"): _keys(
        "account_tax_ids application_fee_amount auto_advance automatic_tax automatically_finalizes_at "
        "collection_method custom_fields days_until_due default_payment_method default_source default_tax_rates "
        "description discounts due_date effective_at footer issuer metadata number on_behalf_of payment_settings "
        "rendering shipping_cost shipping_details statement_descriptor transfer_data"
    ),
    ("invoice", "finalize"): _keys("auto_advance"),
    ("invoice", "list"): _keys(
        "collection_method created customer customer_account due_date ending_before limit starting_after status "
        "subscription"
    ),
    ("invoice", "lines"): _keys("ending_before limit starting_after"),
    ("invoiceitem", "create"): _keys(
        "amount currency customer customer_account description discountable discounts invoice metadata period "
        "price_data pricing quantity quantity_decimal subscription tax_behavior tax_code tax_rates unit_amount_decimal"
    ),
    ("invoiceitem", "update"): _keys(
        "amount description discountable discounts invoicing_rules metadata period price_data pricing quantity "
        "quantity_decimal tax_behavior tax_code tax_rates unit_amount_decimal"
    ),
    ("invoiceitem", "list"): _keys(
        "created customer customer_account ending_before invoice limit pending starting_after"
    ),
    ("coupon", "create"): _keys(
        "amount_off applies_to currency currency_options duration duration_in_months id max_redemptions metadata name "
        "percent_off redeem_by"
    ),
    ("coupon", "update"): _keys("currency_options metadata name"),
    ("coupon", "list"): _keys("created ending_before limit starting_after"),
    ("product", "create"): _keys(
        "active default_price_data description id images marketing_features metadata name package_dimensions "
        "shippable statement_descriptor tax_code tax_details type unit_label url"
    ),
    ("product", "update"): _keys(
        "active default_price description images marketing_features metadata name package_dimensions shippable "
        "statement_descriptor tax_code tax_details unit_label url"
    ),
    ("product", "list"): _keys("active created ending_before ids limit shippable starting_after type url"),
    ("price", "create"): _keys(
        "active billing_scheme currency currency_options custom_unit_amount lookup_key metadata nickname product "
        "product_data recurring tax_behavior tiers tiers_mode transfer_lookup_key transform_quantity unit_amount "
        "unit_amount_decimal"
    ),
    ("price", "update"): _keys("active currency_options lookup_key metadata nickname tax_behavior transfer_lookup_key"),
    ("price", "list"): _keys(
        "active created currency ending_before limit lookup_keys product recurring starting_after type"
    ),
}

# Parameters (at any depth, except inside metadata) whose form-encoded strings are numbers or booleans.
_INTEGERS = _keys(
    "amount amount_off amount_to_capture amount_to_confirm application_fee_amount balance cancel_at days_until_due "
    "due_date duration_in_months interval_count limit max_redemptions next_invoice_sequence proration_date "
    "quantity redeem_by trial_period_days unit_amount"
)
_BOOLEANS = _keys(
    "active auto_advance cancel_at_period_end capture confirm discountable error_on_requires_action final_capture "
    "invoice_now off_session pending prorate refund_application_fee reverse_transfer shippable trial_from_plan "
    "use_stripe_sdk validate"
)
_DECIMALS = frozenset(["percent_off", "application_fee_percent"])

_INTERVAL_SECONDS = {"day": 86_400, "week": 7 * 86_400, "month": 30 * 86_400, "year": 365 * 86_400}
_PI_CANCELABLE = (
    "requires_payment_method",
    "requires_capture",
    "requires_confirmation",
    "requires_action",
    "processing",
)
_PI_CONFIRMABLE = ("requires_payment_method", "requires_confirmation", "requires_action")
_NO_DEFAULT_PAYMENT_METHOD = (
    "This customer has no attached payment source or default payment method. Please consider adding a default "
    "payment method. For more information, visit "
    "https://docs.stripe.com/billing/subscriptions/payment-methods-setting#payment-method-priority."
)


class StripeError(Exception):
    """An error answer, shaped like Stripe's. ``saved``: kept for its idempotency key (the endpoint ran)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        decline_code: str | None = None,
        extra: JSON | None = None,
        headers: Mapping[str, str] | None = None,
        saved: bool = True,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.code = code
        self.param = param
        self.decline_code = decline_code
        self.extra = extra or {}
        self.headers = dict(headers or {})
        self.saved = saved

    def body(self, request_id: str) -> JSON:
        error: JSON = {}
        if self.code is not None:
            error["code"] = self.code
            error["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        if self.decline_code is not None:
            error["decline_code"] = self.decline_code
        error["message"] = self.message
        if self.param is not None:
            error["param"] = self.param
        error["request_log_url"] = f"https://dashboard.stripe.com/test/logs/{request_id}"
        error["type"] = self.error_type
        error.update(self.extra)
        return {"error": error}


def _invalid(message: str, *, code: str | None = None, param: str | None = None) -> StripeError:
    return StripeError(400, message, code=code, param=param)


def _validation(message: str, *, code: str | None = None, param: str | None = None) -> StripeError:
    return StripeError(400, message, code=code, param=param, saved=False)


def _no_such(kind: str, object_id: str, *, param: str = "id", status: int = 404) -> StripeError:
    return StripeError(status, f"No such {kind}: '{object_id}'", code="resource_missing", param=param)


def _fault_error(status: int, message: str | None, code: str | None, error_type: str | None) -> StripeError:
    """The body of an injected fault: what Stripe answers with that status."""
    defaults: dict[int, tuple[str, str | None, str]] = {
        400: ("invalid_request_error", "parameter_invalid", "Injected fault: invalid request."),
        401: ("invalid_request_error", None, "Invalid API Key provided: sk_test_****"),
        402: ("card_error", "card_declined", "Your card was declined."),
        403: ("invalid_request_error", None, "The provided key does not have the required permissions."),
        404: ("invalid_request_error", "resource_missing", "Injected fault: no such resource."),
        409: (
            "invalid_request_error",
            "lock_timeout",
            "This object cannot be accessed right now because another API request or Stripe process is currently "
            "accessing it.",
        ),
        429: (
            "invalid_request_error",
            "rate_limit",
            "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
        ),
    }
    default_type, default_code, default_message = defaults.get(
        status, ("api_error", None, "An unknown error occurred while processing your request.")
    )
    error = StripeError(
        status,
        message or default_message,
        error_type=error_type or default_type,
        code=code or default_code,
    )
    if status == 402 and code is None:
        error.decline_code = "generic_decline"
    return error


def _random(length: int, alphabet: str = _ALPHANUMERIC) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _new_id(prefix: str, length: int = 24) -> str:
    return f"{prefix}_{_random(length)}"


def _now() -> int:
    return int(time.time())


def _money(amount: int, currency: str) -> str:
    if currency == "usd":
        return f"${amount / 100:.2f}"
    return f"{amount / 100:.2f} {currency.upper()}"


# form decoding ----------------------------------------------------------------------------------------------------
_KEY = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")


def parse_form(text: str) -> JSON:
    """Decode a Stripe form body or query string: ``a[b]=1&c[0][d]=2&e[]=3`` → ``{"a": {"b": "1"}, "c": [{"d":
    "2"}], "e": ["3"]}``. Values stay strings; hashes whose keys are all indices become lists (not metadata)."""
    root: JSON = {}
    for raw_key, value in parse_qsl(text, keep_blank_values=True):
        match = _KEY.match(raw_key)
        if match is None:
            raise _validation(f"Invalid parameter name: {raw_key}", code="parameter_invalid_empty", param=raw_key)
        path = [match.group(1), *_SEGMENT.findall(match.group(2))]
        if path[-1] == "" and len(path) >= 2:
            parent = _walk(root, path[:-2])
            existing = parent.get(path[-2])
            if isinstance(existing, list):
                existing.append(value)
            elif isinstance(existing, dict):
                existing[str(len(existing))] = value
            else:
                parent[path[-2]] = [value]
        else:
            _walk(root, path[:-1])[path[-1]] = value
    result = _listify(root, inside_metadata=False)
    assert isinstance(result, dict)
    return result


def _walk(node: JSON, path: list[str]) -> JSON:
    for segment in path:
        child = node.get(segment)
        if isinstance(child, list):
            child = {str(i): v for i, v in enumerate(child)}
            node[segment] = child
        elif not isinstance(child, dict):
            child = {}
            node[segment] = child
        node = child
    return node


def _listify(value: Any, *, inside_metadata: bool) -> Any:
    if isinstance(value, list):
        return [_listify(v, inside_metadata=False) for v in value]
    if not isinstance(value, dict):
        return value
    converted = {k: _listify(v, inside_metadata=k == "metadata") for k, v in value.items()}
    if converted and not inside_metadata and all(k.isdigit() for k in converted):
        return [converted[k] for k in sorted(converted, key=int)]
    return converted


def _coerce(value: Any, key: str, param: str) -> Any:
    """Numbers and booleans from their form strings, checked like Stripe checks them."""
    if key == "metadata":
        return value
    if isinstance(value, dict):
        return {k: _coerce(v, k, f"{param}[{k}]") for k, v in value.items()}
    if isinstance(value, list):
        return [_coerce(v, key, f"{param}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or value == "":
        return value
    if key in _INTEGERS:
        if not re.fullmatch(r"-?\d+", value):
            raise _validation(f"Invalid integer: {value}", code="parameter_invalid_integer", param=param)
        return int(value)
    if key in _BOOLEANS:
        if value not in ("true", "false"):
            raise _validation(f"Invalid boolean: {value}", param=param)
        return value == "true"
    if key in _DECIMALS:
        try:
            return float(value)
        except ValueError:
            raise _validation(f"Invalid decimal: {value}", param=param) from None
    return value


def _require(params: JSON, name: str) -> Any:
    value = params.get(name)
    if value is None or value == "":
        raise _validation(f"Missing required param: {name}.", code="parameter_missing", param=name)
    return value


def _as_int(params: JSON, name: str, *, minimum: int | None = None) -> int:
    value = _require(params, name)
    if not isinstance(value, int):
        raise _validation(f"Invalid integer: {value}", code="parameter_invalid_integer", param=name)
    if minimum is not None and value < minimum:
        raise _validation(f"This value must be greater than or equal to {minimum}.", param=name)
    return value


def _optional_str(params: JSON, name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _validation(f"Invalid string: {value!r}", param=name)
    return value


def _currency(params: JSON) -> str:
    currency = _require(params, "currency")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
        raise _validation(f"Invalid currency: {currency}", param="currency")
    return currency.lower()


def _check_amount(amount: int, currency: str) -> None:
    if amount < 1:
        raise _validation("This value must be greater than or equal to 1.", param="amount")
    if currency == "usd" and amount < 50:
        raise _validation("Amount must be at least $0.50 usd", code="amount_too_small", param="amount")


def _apply(obj: JSON, params: JSON, exclude: frozenset[str] | set[str] = frozenset()) -> None:
    """Stripe's update semantics: ``""`` unsets, hashes merge, ``metadata[k]=""`` removes one key."""
    for key, value in params.items():
        if key in exclude or key == "expand":
            continue
        if key == "metadata":
            _merge_metadata(obj, value)
        elif value == "":
            obj[key] = None
        elif isinstance(value, dict) and isinstance(obj.get(key), dict):
            merged = dict(obj[key])
            for sub_key, sub_value in value.items():
                merged[sub_key] = None if sub_value == "" else sub_value
            obj[key] = merged
        else:
            obj[key] = value


def _merge_metadata(obj: JSON, value: Any) -> None:
    if value == "":
        obj["metadata"] = {}
        return
    if not isinstance(value, dict):
        raise _validation("Invalid object", param="metadata")
    metadata = dict(obj.get("metadata") or {})
    for key, item in value.items():
        if not isinstance(item, str):
            raise _validation("Metadata values must be strings.", param=f"metadata[{key}]")
        if len(key) > 40:
            raise _validation("Metadata keys can have a maximum length of 40 characters.", param=f"metadata[{key}]")
        if len(item) > 500:
            raise _validation("Metadata values can have a maximum length of 500 characters.", param=f"metadata[{key}]")
        if item == "":
            metadata.pop(key, None)
        else:
            metadata[key] = item
    if len(metadata) > 50:
        raise _validation("Metadata can have a maximum of 50 keys.", param="metadata")
    obj["metadata"] = metadata


def _decline_for(instrument: str | None) -> str | None:
    """Stripe's test cards: a declined one names ``chargeDeclined`` (tok_chargeDeclined, pm_card_chargeDeclined...)."""
    if instrument is None or "chargeDeclined" not in instrument:
        return None
    return "insufficient_funds" if "InsufficientFunds" in instrument else "generic_decline"


def _decline_message(decline_code: str) -> str:
    return "Your card has insufficient funds." if decline_code == "insufficient_funds" else "Your card was declined."


# the fake -----------------------------------------------------------------------------------------------------------
@define
class StripeCall:
    """One request as the fake received it: ``params`` are the decoded form (or query) parameters, as strings."""

    method: str
    path: str
    idempotency_key: str | None
    params: JSON
    api_key: str | None = None
    stripe_version: str | None = None
    status: int | None = None  # None: the connection was dropped
    replayed: bool = False
    request_id: str = ""  # the Request-Id the fake answered with


@define
class StripeFault(Fault):
    message: str | None = None
    code: str | None = None
    error_type: str | None = None
    should_retry: bool | None = None


_Operation = Callable[[str, JSON], JSON]  # (object id or "", params) -> the answer


@define
class FakeStripe(LoopbackFake[StripeCall, StripeFault]):
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>`` (give it to the SDK as is)."""

    thread_name: ClassVar[str] = "fake-stripe"

    _store: dict[str, dict[str, JSON]] = field(factory=lambda: {kind: {} for kind in KINDS}, init=False)
    _deleted_customers: set[str] = field(factory=set, init=False)
    _instruments: dict[str, str] = field(factory=dict, init=False)  # card_... -> the test token it was made from

    # test controls ------------------------------------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        path_glob: str,
        status: int | None = 500,
        *,
        times: int = 1,
        after_effect: bool = False,
        message: str | None = None,
        code: str | None = None,
        error_type: str | None = None,
        should_retry: bool | None = None,
    ) -> None:
        """Make the next ``times`` requests matching ``method`` and ``path_glob`` (fnmatch on the path without
        query, e.g. ``/v1/customers/*``) fail: with ``status`` and Stripe's error body for it (``message``,
        ``code`` and ``error_type`` override it; ``should_retry`` sends ``Stripe-Should-Retry``), or, with
        ``status=None``, by dropping the connection. ``after_effect``: the request takes effect first (and its
        answer is saved for its idempotency key), only the response is lost."""
        self._inject(
            StripeFault(method.upper(), path_glob, status, times, after_effect, message, code, error_type, should_retry)
        )

    def objects(self, kind: str) -> list[JSON]:
        """The live objects of a kind (``"customer"``, ``"subscription"``, ``"payment_intent"``, ``"charge"``,
        ``"refund"``, ``"invoice"``, ``"invoiceitem"``, ``"coupon"``, ``"product"``, ``"price"``), oldest first, as
        the API would render them. Deleted objects are left out; canceled subscriptions and payment intents, voided
        invoices and archived (``active: false``) products and prices are still there, as on Stripe."""
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
        with self._lock:
            return [self._render(kind, obj) for obj in self._store[kind].values()]

    def get(self, object_id: str) -> JSON | None:
        """The live object with this id, of any kind, as the API would render it; None when there is none."""
        with self._lock:
            for kind in KINDS:
                obj = self._store[kind].get(object_id)
                if obj is not None:
                    return self._render(kind, obj)
        return None

    # HTTP ---------------------------------------------------------------------------------------------------------
    def _record(self, request: Request) -> StripeCall:
        return StripeCall(
            request.method,
            urlsplit(request.target).path,
            request.headers.get("idempotency-key"),
            {},
            _api_key(request.headers.get("authorization")),
            request.headers.get("stripe-version"),
            request_id=_new_id("req", 14),
        )

    def _refusal(self, request: Request, call: StripeCall) -> Reply | None:
        """Malformed parameters and a missing or wrong API key are answered before anything else."""
        try:
            params = parse_form(urlsplit(request.target).query)
            if request.body:
                params.update(parse_form(request.body.decode("utf-8", "replace")))
        except StripeError as error:
            return self._error_reply(call, error)
        call.params = params
        if not call.api_key or not re.fullmatch(r"(sk|rk)_test_\w+", call.api_key):
            return self._error_reply(call, _auth_error(call.api_key))
        return None

    def _idempotency_scope(self, call: StripeCall) -> Hashable | None:
        """Stripe's idempotency covers POSTs only, each API key's keys apart."""
        if call.idempotency_key is None or call.method != "POST":
            return None
        return (call.api_key, call.idempotency_key)

    def _key_in_use(self, call: StripeCall) -> Reply:
        return self._error_reply(call, _key_in_use(call.idempotency_key))

    def _replay(self, saved: Saved[StripeCall], call: StripeCall) -> Reply:
        mismatch = _idempotency_mismatch(saved.record, call)
        if mismatch is not None:
            return self._error_reply(call, mismatch)
        call.replayed = True
        headers = {
            **saved.reply.headers,
            **self._headers(call),
            "Idempotent-Replayed": "true",
            "Original-Request": saved.record.request_id,
        }
        return Reply(saved.reply.status, headers, saved.reply.body)

    def _effect(self, request: Request, call: StripeCall) -> tuple[Reply, bool]:
        try:
            return Reply.json(200, self._dispatch(call.method, call.path, call.params), self._headers(call)), True
        except StripeError as error:
            return self._error_reply(call, error), error.saved
        except Exception as error:  # a bug in the fake: answer like Stripe's 500 rather than hang up
            return self._error_reply(
                call, StripeError(500, f"The fake failed: {error!r}", error_type="api_error")
            ), False

    def _fault_reply(self, fault: StripeFault, status: int, call: StripeCall) -> Reply:
        error = _fault_error(status, fault.message, fault.code, fault.error_type)
        if fault.should_retry is not None:
            error.headers["Stripe-Should-Retry"] = "true" if fault.should_retry else "false"
        return self._error_reply(call, error)

    def _headers(self, call: StripeCall) -> dict[str, str]:
        """What every answer to ``call`` carries."""
        headers = {"Request-Id": call.request_id, "Stripe-Version": call.stripe_version or DEFAULT_API_VERSION}
        if call.idempotency_key is not None and call.method == "POST":
            headers["Idempotency-Key"] = call.idempotency_key
        return headers

    def _error_reply(self, call: StripeCall, error: StripeError) -> Reply:
        return Reply.json(error.status, error.body(call.request_id), {**self._headers(call), **error.headers})

    # routing ------------------------------------------------------------------------------------------------------
    def _dispatch(self, method: str, path: str, raw: JSON) -> JSON:
        parts = [p for p in path.split("/") if p]
        if len(parts) < 2 or parts[0] != "v1" or parts[1] not in _COLLECTIONS or len(parts) > 4:
            raise _unrecognized(method, path)
        kind = _COLLECTIONS[parts[1]]
        shape = "/".join(["{id}", *parts[3:]]) if len(parts) > 2 else ""
        route = self._routes(kind).get((method, shape))
        if route is None:
            raise _unrecognized(method, path)
        operation, handler = route
        allowed = _PARAMS.get((kind, operation), frozenset())
        for name in raw:
            if name != "expand" and name not in allowed:
                raise _validation(f"Received unknown parameter: {name}", code="parameter_unknown", param=name)
        params = {k: _coerce(v, k, k) for k, v in raw.items()}
        expand = params.pop("expand", [])
        if isinstance(expand, str):
            expand = [expand]
        if not isinstance(expand, list) or not all(isinstance(e, str) for e in expand):
            raise _validation("Invalid array", param="expand")
        result = handler(parts[2] if len(parts) > 2 else "", params)
        for expansion in expand:
            result = self._expand(result, expansion.split("."))
        return result

    def _routes(self, kind: str) -> dict[tuple[str, str], tuple[str, _Operation]]:
        def listing(_: str, params: JSON) -> JSON:
            return self._list(kind, params)

        def retrieve(object_id: str, params: JSON) -> JSON:
            return self._retrieve(kind, object_id)

        routes: dict[tuple[str, str], tuple[str, _Operation]] = {
            ("GET", ""): ("list", listing),
            ("GET", "{id}"): ("retrieve", retrieve),
        }
        creates: dict[str, _Operation] = {
            "customer": self._create_customer,
            "subscription": self._create_subscription,
            "payment_intent": self._create_payment_intent,
            "charge": self._create_charge,
            "refund": self._create_refund,
            "invoice": self._create_invoice,
            "invoiceitem": self._create_invoiceitem,
            "coupon": self._create_coupon,
            "product": self._create_product,
            "price": self._create_price,
        }
        updates: dict[str, _Operation] = {
            "customer": self._update_customer,
            "subscription": self._update_subscription,
            "payment_intent": self._update_payment_intent,
            "charge": self._update_charge,
            "refund": self._update_simple("refund"),
            "invoice": self._update_invoice,
            "invoiceitem": self._update_invoiceitem,
            "coupon": self._update_simple("coupon"),
            "product": self._update_product,
            "price": self._update_simple("price"),
        }
        deletes: dict[str, tuple[str, _Operation]] = {
            "customer": ("delete", self._delete_customer),
            "subscription": ("cancel", self._cancel_subscription),
            "invoice": ("delete", self._delete_invoice),
            "invoiceitem": ("delete", self._delete_invoiceitem),
            "coupon": ("delete", self._delete_coupon),
            "product": ("delete", self._delete_product),
        }
        actions: dict[tuple[str, str, str], tuple[str, _Operation]] = {
            ("payment_intent", "POST", "{id}/confirm"): ("confirm", self._confirm_payment_intent),
            ("payment_intent", "POST", "{id}/capture"): ("capture", self._capture_payment_intent),
            ("payment_intent", "POST", "{id}/cancel"): ("cancel", self._cancel_payment_intent),
            ("charge", "POST", "{id}/capture"): ("capture", self._capture_charge),
            ("invoice", "POST", "{id}/finalize"): ("finalize", self._finalize_invoice),
            ("invoice", "POST", "{id}/void"): ("void", self._void_invoice),
            ("invoice", "GET", "{id}/lines"): ("lines", self._invoice_lines),
        }
        routes[("POST", "")] = ("create", creates[kind])
        routes[("POST", "{id}")] = ("update", updates[kind])
        if kind in deletes:
            routes[("DELETE", "{id}")] = deletes[kind]
        for (action_kind, method, shape), route in actions.items():
            if action_kind == kind:
                routes[(method, shape)] = route
        return routes

    # storage and rendering ----------------------------------------------------------------------------------------
    def _get(self, kind: str, object_id: Any, *, param: str = "id", status: int = 404) -> JSON:
        obj = self._store[kind].get(object_id) if isinstance(object_id, str) else None
        if obj is None:
            raise _no_such(kind, str(object_id), param=param, status=status)
        return obj

    def _ref(self, kind: str, params: JSON, name: str) -> JSON | None:
        """The object a parameter names (400 when there is no such object), or None when it is not given."""
        object_id = params.get(name)
        if object_id is None or object_id == "":
            return None
        return self._get(kind, object_id, param=name, status=400)

    def _put(self, kind: str, obj: JSON) -> JSON:
        self._store[kind][obj["id"]] = obj
        return self._render(kind, obj)

    def _retrieve(self, kind: str, object_id: str) -> JSON:
        if kind == "customer" and object_id in self._deleted_customers:
            return {"id": object_id, "object": "customer", "deleted": True}
        return self._render(kind, self._get(kind, object_id))

    def _render(self, kind: str, obj: JSON) -> JSON:
        rendered = copy.deepcopy(obj)
        if kind == "subscription":
            for item in rendered["items"]["data"]:
                item["price"] = self._render("price", self._store["price"][item["price"]])
        elif kind == "invoice":
            lines = self._invoice_line_items(obj["id"])
            total = sum(line["amount"] for line in lines)
            rendered["lines"] = {
                "object": "list",
                "data": lines,
                "has_more": False,
                "total_count": len(lines),
                "url": f"/v1/invoices/{obj['id']}/lines",
            }
            rendered["subtotal"] = rendered["subtotal_excluding_tax"] = total
            rendered["total"] = rendered["total_excluding_tax"] = total
            rendered["amount_due"] = total
            rendered["amount_paid"] = total if obj["status"] == "paid" else 0
            rendered["amount_remaining"] = 0 if obj["status"] in ("paid", "void") else total
        return rendered

    def _lookup(self, object_id: str) -> JSON | None:
        if object_id in self._deleted_customers:
            return {"id": object_id, "object": "customer", "deleted": True}
        for kind in KINDS:
            obj = self._store[kind].get(object_id)
            if obj is not None:
                return self._render(kind, obj)
        return None

    def _expand(self, value: Any, path: list[str]) -> Any:
        if not path or not isinstance(value, dict) or path[0] not in value:
            return value
        head, rest = path[0], path[1:]
        child = value[head]
        if isinstance(child, list):
            value[head] = [self._expand(self._resolve(c), rest) for c in child]
        else:
            value[head] = self._expand(self._resolve(child), rest)
        return value

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, str):
            found = self._lookup(value)
            return value if found is None else found
        return value

    def _list(self, kind: str, params: JSON, *, objects: list[JSON] | None = None, url: str | None = None) -> JSON:
        """A page of a list, newest first, with Stripe's ``limit``/``starting_after``/``ending_before``."""
        if objects is None:
            objects = [
                self._render(kind, obj) for obj in reversed(self._store[kind].values()) if _matches(kind, obj, params)
            ]
        limit = params.get("limit", 10)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise _validation(
                f"This value must be less than or equal to 100 (it currently is '{limit}')."
                if isinstance(limit, int)
                else f"Invalid integer: {limit}",
                param="limit",
            )
        ids = [obj["id"] for obj in objects]
        starting_after, ending_before = params.get("starting_after"), params.get("ending_before")
        if starting_after:
            if starting_after not in ids:
                raise _no_such(kind, str(starting_after), param="starting_after", status=400)
            after = objects[ids.index(starting_after) + 1 :]
            page, has_more = after[:limit], len(after) > limit
        elif ending_before:
            if ending_before not in ids:
                raise _no_such(kind, str(ending_before), param="ending_before", status=400)
            before = objects[: ids.index(ending_before)]
            page, has_more = before[-limit:], len(before) > limit
        else:
            page, has_more = objects[:limit], len(objects) > limit
        return {"object": "list", "data": page, "has_more": has_more, "url": url or _URLS[kind]}

    # customers ----------------------------------------------------------------------------------------------------
    def _create_customer(self, _: str, params: JSON) -> JSON:
        _check_email(params)
        customer: JSON = {
            "id": _new_id("cus", 14),
            "object": "customer",
            "address": None,
            "balance": 0,
            "created": _now(),
            "currency": None,
            "default_source": None,
            "delinquent": False,
            "description": None,
            "discount": None,
            "email": None,
            "invoice_prefix": _random(8, string.ascii_uppercase + string.digits),
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
        _apply(customer, params, _CUSTOMER_SPECIAL)
        if params.get("source"):
            customer["default_source"] = self._card_from(params["source"], "source")
        return self._put("customer", customer)

    def _update_customer(self, customer_id: str, params: JSON) -> JSON:
        customer = self._get("customer", customer_id)
        _check_email(params)
        _apply(customer, params, _CUSTOMER_SPECIAL)
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
            if subscription["customer"] == customer_id and subscription["status"] not in _ENDED:
                _end_subscription(subscription, {})
        return {"id": customer_id, "object": "customer", "deleted": True}

    def _card_from(self, token: Any, param: str) -> str:
        if not isinstance(token, str) or not token.startswith(("tok_", "card_", "src_")):
            raise _invalid(f"No such token: '{token}'", code="resource_missing", param=param)
        if token.startswith("tok_"):
            card_id = _new_id("card")
            self._instruments[card_id] = token
            return card_id
        return token

    # products and prices ------------------------------------------------------------------------------------------
    def _create_product(self, _: str, params: JSON) -> JSON:
        name = _require(params, "name")
        product_id = _optional_str(params, "id") or _new_id("prod", 14)
        if product_id in self._store["product"]:
            raise _invalid("Product already exists.", code="resource_already_exists", param="id")
        now = _now()
        product: JSON = {
            "id": product_id,
            "object": "product",
            "active": True,
            "created": now,
            "default_price": None,
            "description": None,
            "images": [],
            "livemode": False,
            "marketing_features": [],
            "metadata": {},
            "name": name,
            "package_dimensions": None,
            "shippable": None,
            "statement_descriptor": None,
            "tax_code": None,
            "type": "service",
            "unit_label": None,
            "updated": now,
            "url": None,
        }
        _apply(product, params, frozenset({"id", "default_price_data", "tax_details"}))
        self._store["product"][product_id] = product
        price_data = params.get("default_price_data")
        if isinstance(price_data, dict):
            price = self._new_price({**price_data, "product": product_id}, "default_price_data")
            product["default_price"] = price["id"]
        return self._render("product", product)

    def _update_product(self, product_id: str, params: JSON) -> JSON:
        product = self._get("product", product_id)
        default_price = params.get("default_price")
        if default_price:
            price = self._get("price", default_price, param="default_price", status=400)
            if price["product"] != product_id:
                raise _invalid(
                    f"The price '{default_price}' does not belong to product '{product_id}'.", param="default_price"
                )
        _apply(product, params, frozenset({"tax_details"}))
        product["updated"] = _now()
        return self._render("product", product)

    def _delete_product(self, product_id: str, params: JSON) -> JSON:
        self._get("product", product_id)
        if any(price["product"] == product_id for price in self._store["price"].values()):
            raise _invalid("This product cannot be deleted because it has one or more user-created prices.")
        del self._store["product"][product_id]
        return {"id": product_id, "object": "product", "deleted": True}

    def _create_price(self, _: str, params: JSON) -> JSON:
        return self._render("price", self._new_price(params, None))

    def _new_price(self, params: JSON, prefix: str | None) -> JSON:
        def param(name: str) -> str:
            return f"{prefix}[{name}]" if prefix else name

        currency = _require(params, "currency") if prefix is None else params.get("currency")
        if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise _validation(
                f"Missing required param: {param('currency')}.", code="parameter_missing", param=param("currency")
            )
        product_id = params.get("product")
        product_data = params.get("product_data")
        if product_id:
            self._get("product", product_id, param=param("product"), status=400)
        elif isinstance(product_data, dict):
            product_id = self._create_product("", product_data)["id"]
        else:
            raise _validation(
                f"Missing required param: {param('product')}.", code="parameter_missing", param=param("product")
            )
        unit_amount = params.get("unit_amount")
        if unit_amount is None and params.get("unit_amount_decimal") not in (None, ""):
            unit_amount = int(float(params["unit_amount_decimal"]))
        if unit_amount is None and not params.get("custom_unit_amount") and not params.get("tiers"):
            raise _validation(
                f"Missing required param: {param('unit_amount')}.", code="parameter_missing", param=param("unit_amount")
            )
        if isinstance(unit_amount, int) and unit_amount < 0:
            raise _validation("This value must be greater than or equal to 0.", param=param("unit_amount"))
        recurring = params.get("recurring")
        if isinstance(recurring, dict):
            interval = recurring.get("interval")
            if interval not in _INTERVAL_SECONDS:
                raise _validation(
                    "Invalid recurring[interval]: must be one of day, week, month, or year",
                    param=param("recurring[interval]"),
                )
            recurring = {
                "interval": interval,
                "interval_count": recurring.get("interval_count", 1),
                "meter": None,
                "trial_period_days": recurring.get("trial_period_days"),
                "usage_type": recurring.get("usage_type", "licensed"),
            }
        price: JSON = {
            "id": _new_id("price"),
            "object": "price",
            "active": params.get("active", True),
            "billing_scheme": params.get("billing_scheme", "per_unit"),
            "created": _now(),
            "currency": currency.lower(),
            "custom_unit_amount": None,
            "livemode": False,
            "lookup_key": _optional_str(params, "lookup_key"),
            "metadata": {},
            "nickname": _optional_str(params, "nickname"),
            "product": product_id,
            "recurring": recurring if isinstance(recurring, dict) else None,
            "tax_behavior": params.get("tax_behavior", "unspecified"),
            "tiers_mode": params.get("tiers_mode"),
            "transform_quantity": None,
            "type": "recurring" if isinstance(recurring, dict) else "one_time",
            "unit_amount": unit_amount,
            "unit_amount_decimal": None if unit_amount is None else str(unit_amount),
        }
        if "metadata" in params:
            _merge_metadata(price, params["metadata"])
        self._store["price"][price["id"]] = price
        return price

    def _update_simple(self, kind: str) -> _Operation:
        def update(object_id: str, params: JSON) -> JSON:
            obj = self._get(kind, object_id)
            _apply(obj, params, frozenset({"currency_options", "transfer_lookup_key"}))
            return self._render(kind, obj)

        return update

    # coupons ------------------------------------------------------------------------------------------------------
    def _create_coupon(self, _: str, params: JSON) -> JSON:
        coupon_id = _optional_str(params, "id") or _random(8, string.ascii_uppercase + string.digits)
        if coupon_id in self._store["coupon"]:
            raise _invalid("Coupon already exists.", code="resource_already_exists", param="id")
        percent_off, amount_off = params.get("percent_off"), params.get("amount_off")
        if percent_off is None and amount_off is None:
            raise _validation("You must pass either `percent_off` or `amount_off`.", param="percent_off")
        if amount_off is not None and not params.get("currency"):
            raise _validation(
                "You must pass currency when passing amount_off.", code="parameter_missing", param="currency"
            )
        if isinstance(percent_off, float) and not 0 < percent_off <= 100:
            raise _validation("Invalid percent_off: must be greater than 0 and at most 100.", param="percent_off")
        duration = params.get("duration") or "once"
        if duration not in ("once", "repeating", "forever"):
            raise _validation(f"Invalid duration: {duration}", param="duration")
        if duration == "repeating" and params.get("duration_in_months") is None:
            raise _validation(
                "Missing required param: duration_in_months.", code="parameter_missing", param="duration_in_months"
            )
        coupon: JSON = {
            "id": coupon_id,
            "object": "coupon",
            "amount_off": amount_off,
            "created": _now(),
            "currency": params["currency"].lower() if params.get("currency") else None,
            "duration": duration,
            "duration_in_months": params.get("duration_in_months"),
            "livemode": False,
            "max_redemptions": params.get("max_redemptions"),
            "metadata": {},
            "name": _optional_str(params, "name"),
            "percent_off": percent_off,
            "redeem_by": params.get("redeem_by"),
            "times_redeemed": 0,
            "valid": True,
        }
        if "metadata" in params:
            _merge_metadata(coupon, params["metadata"])
        return self._put("coupon", coupon)

    def _delete_coupon(self, coupon_id: str, params: JSON) -> JSON:
        self._get("coupon", coupon_id)
        del self._store["coupon"][coupon_id]
        return {"id": coupon_id, "object": "coupon", "deleted": True}

    # subscriptions ------------------------------------------------------------------------------------------------
    def _create_subscription(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", _require(params, "customer"), param="customer", status=400)
        entries = _require(params, "items")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise _validation("Invalid array", param="items")
        subscription_id = _new_id("sub")
        now = _now()
        prices = [self._item_price(entry, f"items[{i}]") for i, entry in enumerate(entries)]
        items = [
            self._subscription_item(subscription_id, price, entry, now)
            for price, entry in zip(prices, entries, strict=True)
        ]
        collection_method = params.get("collection_method") or "charge_automatically"
        if collection_method == "send_invoice" and params.get("days_until_due") is None:
            raise _validation(
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
                raise _invalid(_NO_DEFAULT_PAYMENT_METHOD, code="resource_missing")
            decline = _decline_for(self._instruments.get(instrument, instrument))
            if decline is not None and params.get("payment_behavior") == "error_if_incomplete":
                raise StripeError(
                    402, _decline_message(decline), error_type="card_error", code="card_declined", decline_code=decline
                )
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
            "default_payment_method": _optional_str(params, "default_payment_method"),
            "default_source": _optional_str(params, "default_source"),
            "description": _optional_str(params, "description"),
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
            _merge_metadata(subscription, params["metadata"])
        return self._put("subscription", subscription)

    def _item_price(self, entry: JSON, param: str) -> JSON:
        if entry.get("price"):
            price = self._get("price", entry["price"], param=f"{param}[price]", status=400)
        elif isinstance(entry.get("price_data"), dict):
            price = self._new_price(entry["price_data"], f"{param}[price_data]")
        else:
            raise _validation(
                f"Missing required param: {param}[price].", code="parameter_missing", param=f"{param}[price]"
            )
        if not price["active"]:
            raise _invalid(
                "The price specified is inactive. This field only accepts active prices.", param=f"{param}[price]"
            )
        if price["type"] != "recurring":
            raise _invalid(
                "The price specified is set to `type=one_time` but this field only accepts prices with "
                "`type=recurring`.",
                param=f"{param}[price]",
            )
        return price

    def _subscription_item(self, subscription_id: str, price: JSON, entry: JSON, now: int) -> JSON:
        quantity = entry.get("quantity", 1)
        recurring = price["recurring"]
        period = _INTERVAL_SECONDS[recurring["interval"]] * recurring["interval_count"]
        item: JSON = {
            "id": _new_id("si", 14),
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
            _merge_metadata(item, entry["metadata"])
        return item

    def _update_subscription(self, subscription_id: str, params: JSON) -> JSON:
        subscription = self._get("subscription", subscription_id)
        if subscription["status"] in _ENDED and set(params) - {"metadata", "cancellation_details", "expand"}:
            raise _invalid("A canceled subscription can only update its cancellation_details and metadata.")
        entries = params.get("items")
        if entries is not None:
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise _validation("Invalid array", param="items")
            items: list[JSON] = subscription["items"]["data"]
            for i, entry in enumerate(entries):
                if entry.get("id"):
                    found = [item for item in items if item["id"] == entry["id"]]
                    if not found:
                        raise _no_such("subscription_item", entry["id"], param=f"items[{i}][id]", status=400)
                    if entry.get("deleted") in ("true", True):
                        items.remove(found[0])
                        continue
                    if entry.get("price") or entry.get("price_data"):
                        found[0]["price"] = self._item_price(entry, f"items[{i}]")["id"]
                    if isinstance(entry.get("quantity"), int):
                        found[0]["quantity"] = entry["quantity"]
                    if "metadata" in entry:
                        _merge_metadata(found[0], entry["metadata"])
                else:
                    price = self._item_price(entry, f"items[{i}]")
                    items.append(self._subscription_item(subscription_id, price, entry, _now()))
            subscription["items"]["total_count"] = len(items)
        if params.get("trial_end") == "now" and subscription["status"] == "trialing":
            subscription["status"] = "active"
            subscription["trial_end"] = _now()
        _apply(subscription, params, _SUBSCRIPTION_SPECIAL)
        return self._render("subscription", subscription)

    def _cancel_subscription(self, subscription_id: str, params: JSON) -> JSON:
        subscription = self._get("subscription", subscription_id)
        if subscription["status"] in _ENDED:
            raise _no_such("subscription", subscription_id)  # what Stripe answers for a second cancel
        _end_subscription(subscription, params.get("cancellation_details") or {})
        return self._render("subscription", subscription)

    # payment intents and charges ----------------------------------------------------------------------------------
    def _create_payment_intent(self, _: str, params: JSON) -> JSON:
        amount = _as_int(params, "amount")
        currency = _currency(params)
        _check_amount(amount, currency)
        customer = self._ref("customer", params, "customer")
        payment_method = _optional_str(params, "payment_method")
        intent_id = _new_id("pi")
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
            "client_secret": f"{intent_id}_secret_{_random(25)}",
            "confirmation_method": params.get("confirmation_method") or "automatic",
            "created": _now(),
            "currency": currency,
            "customer": None if customer is None else customer["id"],
            "description": _optional_str(params, "description"),
            "last_payment_error": None,
            "latest_charge": None,
            "livemode": False,
            "metadata": {},
            "next_action": None,
            "payment_method": payment_method,
            "payment_method_types": params.get("payment_method_types") or ["card"],
            "receipt_email": _optional_str(params, "receipt_email"),
            "setup_future_usage": params.get("setup_future_usage"),
            "shipping": params.get("shipping"),
            "statement_descriptor": params.get("statement_descriptor"),
            "status": "requires_confirmation" if payment_method else "requires_payment_method",
            "transfer_group": params.get("transfer_group"),
        }
        if "metadata" in params:
            _merge_metadata(intent, params["metadata"])
        self._store["payment_intent"][intent_id] = intent
        if params.get("confirm") is True:
            self._confirm(intent, params)
        return self._render("payment_intent", intent)

    def _update_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        always = {"metadata", "description", "receipt_email", "shipping", "expand"}
        if intent["status"] in ("succeeded", "canceled") and set(params) - always:
            raise _invalid(
                f"This PaymentIntent's {sorted(set(params) - always)[0]} could not be updated because it has a "
                f"status of {intent['status']}. You may only update the {', '.join(sorted(always - {'expand'}))} "
                "of a PaymentIntent with this status.",
                code="payment_intent_unexpected_state",
            )
        if "currency" in params:
            params = {**params, "currency": _currency(params)}
        if "customer" in params:
            self._ref("customer", params, "customer")
        _apply(intent, params, frozenset({"payment_method_data", "payment_method_options", "amount_details", "hooks"}))
        if params.get("payment_method") and intent["status"] == "requires_payment_method":
            intent["status"] = "requires_confirmation"
        return self._render("payment_intent", intent)

    def _confirm_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        self._confirm(intent, params)
        return self._render("payment_intent", intent)

    def _confirm(self, intent: JSON, params: JSON) -> None:
        if intent["status"] not in _PI_CONFIRMABLE:
            raise _invalid(
                f"You cannot confirm this PaymentIntent because it has a status of {intent['status']}.",
                code="payment_intent_unexpected_state",
            )
        payment_method = _optional_str(params, "payment_method") or intent["payment_method"]
        if not payment_method:
            raise _invalid(
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
                "message": _decline_message(decline),
                "type": "card_error",
            }
            raise StripeError(
                402,
                _decline_message(decline),
                error_type="card_error",
                code="card_declined",
                decline_code=decline,
                extra={"charge": charge["id"], "payment_intent": self._render("payment_intent", intent)},
            )
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
            raise _invalid(
                f"This PaymentIntent could not be captured because it has a status of {intent['status']}. Only a "
                "PaymentIntent with one of the following statuses may be captured: requires_capture.",
                code="payment_intent_unexpected_state",
            )
        amount = params.get("amount_to_capture", intent["amount_capturable"])
        if not isinstance(amount, int) or not 0 < amount <= intent["amount_capturable"]:
            raise _invalid(
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
            _merge_metadata(intent, params["metadata"])
        return self._render("payment_intent", intent)

    def _cancel_payment_intent(self, intent_id: str, params: JSON) -> JSON:
        intent = self._get("payment_intent", intent_id)
        if intent["status"] not in _PI_CANCELABLE:
            raise _invalid(
                f"You cannot cancel this PaymentIntent because it has a status of {intent['status']}. Only a "
                f"PaymentIntent with one of the following statuses may be canceled: {', '.join(_PI_CANCELABLE)}.",
                code="payment_intent_unexpected_state",
            )
        if intent["status"] == "requires_capture":  # the authorization is released
            charge = self._store["charge"][intent["latest_charge"]]
            charge["amount_refunded"] = charge["amount"]
            charge["refunded"] = True
        intent["status"] = "canceled"
        intent["canceled_at"] = _now()
        intent["cancellation_reason"] = params.get("cancellation_reason")
        intent["amount_capturable"] = 0
        return self._render("payment_intent", intent)

    def _create_charge(self, _: str, params: JSON) -> JSON:
        amount = _as_int(params, "amount")
        currency = _currency(params)
        _check_amount(amount, currency)
        customer = self._ref("customer", params, "customer")
        source = _optional_str(params, "source")
        if source is None and customer is None:
            raise _validation("Must provide source or customer.")
        if source is None and customer is not None:
            source = customer["default_source"]
            if source is None:
                raise _invalid("Cannot charge a customer that has no active card", code="missing", param="card")
        charge = self._new_charge(
            amount,
            currency,
            customer=None if customer is None else customer["id"],
            instrument=source,
            captured=params.get("capture", True) is not False,
            payment_intent=None,
            description=_optional_str(params, "description"),
        )
        _apply(charge, params, _CHARGE_SPECIAL)
        if charge["status"] == "failed":
            decline = charge["outcome"]["reason"]
            raise StripeError(
                402,
                _decline_message(decline),
                error_type="card_error",
                code="card_declined",
                decline_code=decline,
                extra={"charge": charge["id"]},
            )
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
        decline = _decline_for(self._instruments.get(instrument or "", instrument))
        paid = decline is None
        charge: JSON = {
            "id": _new_id("ch"),
            "object": "charge",
            "amount": amount,
            "amount_captured": amount if paid and captured else 0,
            "amount_refunded": 0,
            "balance_transaction": _new_id("txn") if paid and captured else None,
            "billing_details": {"address": None, "email": None, "name": None, "phone": None},
            "captured": paid and captured,
            "created": _now(),
            "currency": currency,
            "customer": customer,
            "description": description,
            "disputed": False,
            "failure_code": None if paid else "card_declined",
            "failure_message": None if paid else _decline_message(decline or "generic_decline"),
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
                raise _invalid("You cannot change the customer of a charge.", param="customer")
            self._ref("customer", params, "customer")
        _apply(charge, params)
        return self._render("charge", charge)

    def _capture_charge(self, charge_id: str, params: JSON) -> JSON:
        charge = self._get("charge", charge_id)
        if charge["captured"]:
            raise _invalid(f"Charge {charge_id} has already been captured.", code="charge_already_captured")
        if charge["refunded"] or charge["status"] != "succeeded":
            raise _invalid(f"Charge {charge_id} cannot be captured.", code="charge_expired_for_capture")
        amount = params.get("amount", charge["amount"])
        if not isinstance(amount, int) or not 0 < amount <= charge["amount"]:
            raise _invalid(f"Invalid amount: {amount}", param="amount")
        _capture(charge, amount)
        return self._render("charge", charge)

    # refunds ------------------------------------------------------------------------------------------------------
    def _create_refund(self, _: str, params: JSON) -> JSON:
        intent = self._ref("payment_intent", params, "payment_intent")
        charge: JSON | None
        if intent is not None:
            if intent["status"] != "succeeded" or intent["latest_charge"] is None:
                raise _invalid(
                    f"This PaymentIntent ({intent['id']}) does not have a successful charge to refund.",
                    param="payment_intent",
                )
            charge = self._store["charge"][intent["latest_charge"]]
        else:
            charge = self._ref("charge", params, "charge")
            if charge is None:
                raise _validation(
                    "One of the following params should be provided for this request: payment_intent or charge.",
                    code="parameter_missing",
                )
        if charge["status"] != "succeeded":
            raise _invalid(f"Charge {charge['id']} has failed and cannot be refunded.", param="charge")
        refundable = charge["amount"] - charge["amount_refunded"]  # what partial captures released is refunded
        if charge["refunded"] or refundable <= 0:
            raise _invalid(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded")
        amount = params.get("amount", refundable)
        if not isinstance(amount, int) or amount < 1:
            raise _validation("This value must be greater than or equal to 1.", param="amount")
        if amount > refundable:
            raise _invalid(
                f"Refund amount ({_money(amount, charge['currency'])}) is greater than unrefunded amount on charge "
                f"({_money(refundable, charge['currency'])})",
                param="amount",
            )
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] >= charge["amount"]
        refund: JSON = {
            "id": _new_id("re"),
            "object": "refund",
            "amount": amount,
            "balance_transaction": _new_id("txn") if charge["captured"] else None,
            "charge": charge["id"],
            "created": _now(),
            "currency": charge["currency"],
            "destination_details": {"card": {"type": "refund"}, "type": "card"},
            "metadata": {},
            "payment_intent": charge["payment_intent"],
            "reason": _optional_str(params, "reason"),
            "receipt_number": None,
            "source_transfer_reversal": None,
            "status": "succeeded",
            "transfer_reversal": None,
        }
        if "metadata" in params:
            _merge_metadata(refund, params["metadata"])
        return self._put("refund", refund)

    # invoices -----------------------------------------------------------------------------------------------------
    def _create_invoice(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", _require(params, "customer"), param="customer", status=400)
        collection_method = params.get("collection_method") or "charge_automatically"
        if collection_method == "send_invoice" and params.get("days_until_due") is None and not params.get("due_date"):
            raise _validation(
                "Missing required param: days_until_due.", code="parameter_missing", param="days_until_due"
            )
        subscription = self._ref("subscription", params, "subscription")
        now = _now()
        invoice: JSON = {
            "id": _new_id("in"),
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
            "default_payment_method": _optional_str(params, "default_payment_method"),
            "default_source": _optional_str(params, "default_source"),
            "description": _optional_str(params, "description"),
            "discounts": [],
            "due_date": params.get("due_date"),
            "footer": _optional_str(params, "footer"),
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
            _merge_metadata(invoice, params["metadata"])
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
            raise _invalid(
                f"This invoice can no longer be edited because it is {invoice['status']}; only its metadata, "
                "description, footer and custom_fields can be updated.",
                code="invoice_not_editable",
            )
        _apply(invoice, params, frozenset({"automatic_tax", "rendering", "shipping_cost", "discounts"}))
        return self._render("invoice", invoice)

    def _delete_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        if invoice["status"] != "draft":
            raise _invalid("You can only delete draft invoices.", code="invoice_not_editable")
        del self._store["invoice"][invoice_id]
        for item_id in [i for i, item in self._store["invoiceitem"].items() if item["invoice"] == invoice_id]:
            del self._store["invoiceitem"][item_id]
        return {"id": invoice_id, "object": "invoice", "deleted": True}

    def _finalize_invoice(self, invoice_id: str, params: JSON) -> JSON:
        invoice = self._get("invoice", invoice_id)
        if invoice["status"] != "draft":
            raise _invalid("This invoice is already finalized, you can't re-finalize a non-draft invoice.")
        now = _now()
        customer = self._store["customer"].get(invoice["customer"])
        prefix = customer["invoice_prefix"] if customer else _random(8, string.ascii_uppercase)
        sequence = customer["next_invoice_sequence"] if customer else 1
        if customer is not None:
            customer["next_invoice_sequence"] = sequence + 1
        invoice["number"] = f"{prefix}-{sequence:04d}"
        invoice["hosted_invoice_url"] = f"https://invoice.stripe.com/i/acct_fake/test_{_random(24)}"
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
            raise _invalid(
                f"You can only void open or uncollectible invoices; this invoice is {invoice['status']}.",
                code="invoice_not_editable" if invoice["status"] == "draft" else None,
            )
        invoice["status"] = "void"
        invoice["auto_advance"] = False
        invoice["status_transitions"]["voided_at"] = _now()
        return self._render("invoice", invoice)

    def _invoice_lines(self, invoice_id: str, params: JSON) -> JSON:
        self._get("invoice", invoice_id)
        lines = list(reversed(self._invoice_line_items(invoice_id)))
        return self._list("line_item", params, objects=lines, url=f"/v1/invoices/{invoice_id}/lines")

    def _invoice_line_items(self, invoice_id: str) -> list[JSON]:
        return [
            {
                "id": f"il_{item['id'][3:]}",
                "object": "line_item",
                "amount": item["amount"],
                "currency": item["currency"],
                "description": item["description"],
                "discountable": item["discountable"],
                "discounts": [],
                "invoice": invoice_id,
                "livemode": False,
                "metadata": dict(item["metadata"]),
                "parent": {
                    "invoice_item_details": {"invoice_item": item["id"], "proration": False, "subscription": None},
                    "type": "invoice_item_details",
                },
                "period": dict(item["period"]),
                "pricing": item["pricing"],
                "quantity": item["quantity"],
            }
            for item in self._store["invoiceitem"].values()
            if item["invoice"] == invoice_id
        ]

    def _create_invoiceitem(self, _: str, params: JSON) -> JSON:
        customer = self._get("customer", _require(params, "customer"), param="customer", status=400)
        invoice = self._ref("invoice", params, "invoice")
        if invoice is not None and invoice["status"] != "draft":
            raise _invalid(
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
            amount = _as_int(params, "amount")
            currency = _currency(params)
            pricing_out = None
        now = _now()
        item: JSON = {
            "id": _new_id("ii"),
            "object": "invoiceitem",
            "amount": amount,
            "currency": currency,
            "customer": customer["id"],
            "date": now,
            "description": _optional_str(params, "description"),
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
            _merge_metadata(item, params["metadata"])
        return self._put("invoiceitem", item)

    def _editable_item(self, item_id: str) -> JSON:
        item = self._get("invoiceitem", item_id)
        invoice = self._store["invoice"].get(item["invoice"] or "")
        if invoice is not None and invoice["status"] != "draft":
            raise _invalid(
                "The specified invoice can no longer be edited. Instead, consider creating additional invoice items "
                "that will be applied to the next invoice.",
                code="invoice_not_editable",
            )
        return item

    def _update_invoiceitem(self, item_id: str, params: JSON) -> JSON:
        item = self._editable_item(item_id)
        _apply(item, params, frozenset({"pricing", "price_data", "invoicing_rules", "tax_rates", "discounts"}))
        return self._render("invoiceitem", item)

    def _delete_invoiceitem(self, item_id: str, params: JSON) -> JSON:
        self._editable_item(item_id)
        del self._store["invoiceitem"][item_id]
        return {"id": item_id, "object": "invoiceitem", "deleted": True}


_ENDED = ("canceled", "incomplete_expired")
_CUSTOMER_SPECIAL = frozenset(
    {"source", "default_source", "payment_method", "tax", "tax_id_data", "cash_balance", "validate", "test_clock"}
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


def _end_subscription(subscription: JSON, details: Any) -> None:
    now = _now()
    subscription["status"] = "canceled"
    subscription["canceled_at"] = now
    subscription["ended_at"] = now
    cancellation = dict(subscription["cancellation_details"])
    if isinstance(details, dict):
        cancellation.update({k: (None if v == "" else v) for k, v in details.items()})
    cancellation["reason"] = "cancellation_requested"
    subscription["cancellation_details"] = cancellation


def _capture(charge: JSON, amount: int) -> None:
    charge["captured"] = True
    charge["amount_captured"] = amount
    charge["balance_transaction"] = _new_id("txn")
    if amount < charge["amount"]:  # Stripe refunds what is not captured
        charge["amount_refunded"] = charge["amount"] - amount


def _check_email(params: JSON) -> None:
    email = params.get("email")
    if isinstance(email, str) and email and not re.fullmatch(r"[^@\s]+@[^@\s]+", email):
        raise _validation(f"Invalid email address: {email}", code="email_invalid", param="email")


def _matches(kind: str, obj: JSON, params: JSON) -> bool:
    """Whether a stored object passes a list request's filters."""
    equal = {
        "customer": ("email",),
        "subscription": ("customer", "collection_method"),
        "payment_intent": ("customer",),
        "charge": ("customer", "payment_intent", "transfer_group"),
        "refund": ("charge", "payment_intent"),
        "invoice": ("customer", "status", "collection_method"),
        "invoiceitem": ("customer", "invoice"),
        "product": ("active", "shippable", "type", "url"),
        "price": ("active", "product", "type", "currency"),
    }.get(kind, ())
    if any(name in params and obj.get(name) != params[name] for name in equal):
        return False
    if kind == "subscription":
        status = params.get("status")
        if status is None and obj["status"] in _ENDED:
            return False  # Stripe lists subscriptions that are not canceled unless asked
        if status == "ended" and obj["status"] not in _ENDED:
            return False
        if status not in (None, "all", "ended") and obj["status"] != status:
            return False
        price = params.get("price")
        if price and all(item["price"] != price for item in obj["items"]["data"]):
            return False
    if kind == "invoice" and params.get("subscription"):
        parent = obj.get("parent") or {}
        if (parent.get("subscription_details") or {}).get("subscription") != params["subscription"]:
            return False
    if kind == "invoiceitem" and "pending" in params and (obj["invoice"] is None) != params["pending"]:
        return False
    if kind == "product" and isinstance(params.get("ids"), list) and obj["id"] not in params["ids"]:
        return False
    return not (
        kind == "price"
        and isinstance(params.get("lookup_keys"), list)
        and obj["lookup_key"] not in params["lookup_keys"]
    )


def _api_key(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip() or None
    if scheme.lower() == "basic":  # curl -u sk_test_...:
        try:
            return base64.b64decode(credentials).decode().split(":", 1)[0] or None
        except (binascii.Error, UnicodeDecodeError):
            return None
    return None


def _auth_error(api_key: str | None) -> StripeError:
    if not api_key:
        message = (
            "You did not provide an API key. You need to provide your API key in the Authorization header, using "
            "Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See "
            "https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."
        )
    else:
        message = f"Invalid API Key provided: {api_key[:8]}{'*' * 4}{api_key[-4:]}"
    return StripeError(401, message, headers={"WWW-Authenticate": 'Basic realm="Stripe"'}, saved=False)


def _key_in_use(key: str | None) -> StripeError:
    return StripeError(
        409,
        "There is currently another in-progress request using this Idempotent Key (that probably means you submitted "
        f"twice, and the other request is still going through): {key}. Please try again later.",
        code="idempotency_key_in_use",
        saved=False,
    )


def _idempotency_mismatch(first: StripeCall, call: StripeCall) -> StripeError | None:
    key = call.idempotency_key
    if (first.method, first.path) != (call.method, call.path):
        return StripeError(
            400,
            f"Keys for idempotent requests can only be used for the same endpoint they were first used for "
            f"('{first.method} {first.path}' vs '{call.method} {call.path}'). Try using a key other than '{key}' if "
            "you meant to execute a different request.",
            error_type="idempotency_error",
            saved=False,
        )
    if first.params != call.params:
        return StripeError(
            400,
            "Keys for idempotent requests can only be used with the same parameters they were first used with. Try "
            f"using a key other than '{key}' if you meant to execute a different request.",
            error_type="idempotency_error",
            saved=False,
        )
    return None


def _unrecognized(method: str, path: str) -> StripeError:
    return StripeError(
        404,
        f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or we can help at "
        "https://support.stripe.com/.",
        saved=False,
    )
