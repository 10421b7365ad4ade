"""Stripe's parameters: which each endpoint accepts, how a form body decodes, and how values are checked and
applied."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.errors import validation_error


def _keys(names: str) -> frozenset[str]:
    return frozenset(names.split())


# Top-level parameters each endpoint accepts (besides ``expand``), from stripe-python 16's parameter types.
PARAMS: dict[tuple[str, str], frozenset[str]] = {
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


_KEY = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")


def parse_form(text: str) -> JSON:
    """Decode a Stripe form body or query string: ``a[b]=1&c[0][d]=2&e[]=3`` → ``{"a": {"b": "1"}, "c": [{"d":
    "2"}], "e": ["3"]}``. Values stay strings; hashes whose keys are all indices become lists (not metadata)."""
    root: JSON = {}
    for raw_key, value in parse_qsl(text, keep_blank_values=True):
        match = _KEY.match(raw_key)
        if match is None:
            raise validation_error(f"Invalid parameter name: {raw_key}", code="parameter_invalid_empty", param=raw_key)
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


def coerce(value: Any, key: str, param: str) -> Any:
    """Numbers and booleans from their form strings, checked like Stripe checks them."""
    if key == "metadata":
        return value
    if isinstance(value, dict):
        return {k: coerce(v, k, f"{param}[{k}]") for k, v in value.items()}
    if isinstance(value, list):
        return [coerce(v, key, f"{param}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or value == "":
        return value
    if key in _INTEGERS:
        if not re.fullmatch(r"-?\d+", value):
            raise validation_error(f"Invalid integer: {value}", code="parameter_invalid_integer", param=param)
        return int(value)
    if key in _BOOLEANS:
        if value not in ("true", "false"):
            raise validation_error(f"Invalid boolean: {value}", param=param)
        return value == "true"
    if key in _DECIMALS:
        try:
            return float(value)
        except ValueError:
            raise validation_error(f"Invalid decimal: {value}", param=param) from None
    return value


def require(params: JSON, name: str) -> Any:
    value = params.get(name)
    if value is None or value == "":
        raise validation_error(f"Missing required param: {name}.", code="parameter_missing", param=name)
    return value


def as_int(params: JSON, name: str, *, minimum: int | None = None) -> int:
    value = require(params, name)
    if not isinstance(value, int):
        raise validation_error(f"Invalid integer: {value}", code="parameter_invalid_integer", param=name)
    if minimum is not None and value < minimum:
        raise validation_error(f"This value must be greater than or equal to {minimum}.", param=name)
    return value


def optional_str(params: JSON, name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise validation_error(f"Invalid string: {value!r}", param=name)
    return value


def currency_param(params: JSON) -> str:
    currency = require(params, "currency")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
        raise validation_error(f"Invalid currency: {currency}", param="currency")
    return currency.lower()


def check_amount(amount: int, currency: str) -> None:
    if amount < 1:
        raise validation_error("This value must be greater than or equal to 1.", param="amount")
    if currency == "usd" and amount < 50:
        raise validation_error("Amount must be at least $0.50 usd", code="amount_too_small", param="amount")


def apply_update(obj: JSON, params: JSON, exclude: frozenset[str] | set[str] = frozenset()) -> None:
    """Stripe's update semantics: ``""`` unsets, hashes merge, ``metadata[k]=""`` removes one key."""
    for key, value in params.items():
        if key in exclude or key == "expand":
            continue
        if key == "metadata":
            merge_metadata(obj, value)
        elif value == "":
            obj[key] = None
        elif isinstance(value, dict) and isinstance(obj.get(key), dict):
            merged = dict(obj[key])
            for sub_key, sub_value in value.items():
                merged[sub_key] = None if sub_value == "" else sub_value
            obj[key] = merged
        else:
            obj[key] = value


def merge_metadata(obj: JSON, value: Any) -> None:
    if value == "":
        obj["metadata"] = {}
        return
    if not isinstance(value, dict):
        raise validation_error("Invalid object", param="metadata")
    metadata = dict(obj.get("metadata") or {})
    for key, item in value.items():
        if not isinstance(item, str):
            raise validation_error("Metadata values must be strings.", param=f"metadata[{key}]")
        if len(key) > 40:
            raise validation_error(
                "Metadata keys can have a maximum length of 40 characters.", param=f"metadata[{key}]"
            )
        if len(item) > 500:
            raise validation_error(
                "Metadata values can have a maximum length of 500 characters.", param=f"metadata[{key}]"
            )
        if item == "":
            metadata.pop(key, None)
        else:
            metadata[key] = item
    if len(metadata) > 50:
        raise validation_error("Metadata can have a maximum of 50 keys.", param="metadata")
    obj["metadata"] = metadata
