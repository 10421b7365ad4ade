"""The catalogue: products, prices and coupons."""

from __future__ import annotations

import re
import string

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.errors import invalid, validation_error
from agentrein_testing.fakes.stripe.objects import Operation, StripeObjects, new_id, random_string, timestamp
from agentrein_testing.fakes.stripe.params import apply_update, merge_metadata, optional_str, require

INTERVAL_SECONDS = {"day": 86_400, "week": 7 * 86_400, "month": 30 * 86_400, "year": 365 * 86_400}


class Catalogue(StripeObjects):
    """Products, prices and coupons."""

    __slots__ = ()

    def _create_product(self, _: str, params: JSON) -> JSON:
        name = require(params, "name")
        product_id = optional_str(params, "id") or new_id("prod", 14)
        if product_id in self._store["product"]:
            raise invalid("Product already exists.", code="resource_already_exists", param="id")
        now = timestamp()
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
        apply_update(product, params, frozenset({"id", "default_price_data", "tax_details"}))
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
                raise invalid(
                    f"The price '{default_price}' does not belong to product '{product_id}'.", param="default_price"
                )
        apply_update(product, params, frozenset({"tax_details"}))
        product["updated"] = timestamp()
        return self._render("product", product)

    def _delete_product(self, product_id: str, params: JSON) -> JSON:
        self._get("product", product_id)
        if any(price["product"] == product_id for price in self._store["price"].values()):
            raise invalid("This product cannot be deleted because it has one or more user-created prices.")
        del self._store["product"][product_id]
        return {"id": product_id, "object": "product", "deleted": True}

    def _create_price(self, _: str, params: JSON) -> JSON:
        return self._render("price", self._new_price(params, None))

    def _new_price(self, params: JSON, prefix: str | None) -> JSON:
        def param(name: str) -> str:
            return f"{prefix}[{name}]" if prefix else name

        currency = require(params, "currency") if prefix is None else params.get("currency")
        if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise validation_error(
                f"Missing required param: {param('currency')}.", code="parameter_missing", param=param("currency")
            )
        product_id = params.get("product")
        product_data = params.get("product_data")
        if product_id:
            self._get("product", product_id, param=param("product"), status=400)
        elif isinstance(product_data, dict):
            product_id = self._create_product("", product_data)["id"]
        else:
            raise validation_error(
                f"Missing required param: {param('product')}.", code="parameter_missing", param=param("product")
            )
        unit_amount = params.get("unit_amount")
        if unit_amount is None and params.get("unit_amount_decimal") not in (None, ""):
            unit_amount = int(float(params["unit_amount_decimal"]))
        if unit_amount is None and not params.get("custom_unit_amount") and not params.get("tiers"):
            raise validation_error(
                f"Missing required param: {param('unit_amount')}.", code="parameter_missing", param=param("unit_amount")
            )
        if isinstance(unit_amount, int) and unit_amount < 0:
            raise validation_error("This value must be greater than or equal to 0.", param=param("unit_amount"))
        recurring = params.get("recurring")
        if isinstance(recurring, dict):
            interval = recurring.get("interval")
            if interval not in INTERVAL_SECONDS:
                raise validation_error(
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
            "id": new_id("price"),
            "object": "price",
            "active": params.get("active", True),
            "billing_scheme": params.get("billing_scheme", "per_unit"),
            "created": timestamp(),
            "currency": currency.lower(),
            "custom_unit_amount": None,
            "livemode": False,
            "lookup_key": optional_str(params, "lookup_key"),
            "metadata": {},
            "nickname": optional_str(params, "nickname"),
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
            merge_metadata(price, params["metadata"])
        self._store["price"][price["id"]] = price
        return price

    def _update_simple(self, kind: str) -> Operation:
        def update(object_id: str, params: JSON) -> JSON:
            obj = self._get(kind, object_id)
            apply_update(obj, params, frozenset({"currency_options", "transfer_lookup_key"}))
            return self._render(kind, obj)

        return update

    def _create_coupon(self, _: str, params: JSON) -> JSON:
        coupon_id = optional_str(params, "id") or random_string(8, string.ascii_uppercase + string.digits)
        if coupon_id in self._store["coupon"]:
            raise invalid("Coupon already exists.", code="resource_already_exists", param="id")
        percent_off, amount_off = params.get("percent_off"), params.get("amount_off")
        if percent_off is None and amount_off is None:
            raise validation_error("You must pass either `percent_off` or `amount_off`.", param="percent_off")
        if amount_off is not None and not params.get("currency"):
            raise validation_error(
                "You must pass currency when passing amount_off.", code="parameter_missing", param="currency"
            )
        if isinstance(percent_off, float) and not 0 < percent_off <= 100:
            raise validation_error("Invalid percent_off: must be greater than 0 and at most 100.", param="percent_off")
        duration = params.get("duration") or "once"
        if duration not in ("once", "repeating", "forever"):
            raise validation_error(f"Invalid duration: {duration}", param="duration")
        if duration == "repeating" and params.get("duration_in_months") is None:
            raise validation_error(
                "Missing required param: duration_in_months.", code="parameter_missing", param="duration_in_months"
            )
        coupon: JSON = {
            "id": coupon_id,
            "object": "coupon",
            "amount_off": amount_off,
            "created": timestamp(),
            "currency": params["currency"].lower() if params.get("currency") else None,
            "duration": duration,
            "duration_in_months": params.get("duration_in_months"),
            "livemode": False,
            "max_redemptions": params.get("max_redemptions"),
            "metadata": {},
            "name": optional_str(params, "name"),
            "percent_off": percent_off,
            "redeem_by": params.get("redeem_by"),
            "times_redeemed": 0,
            "valid": True,
        }
        if "metadata" in params:
            merge_metadata(coupon, params["metadata"])
        return self._put("coupon", coupon)

    def _delete_coupon(self, coupon_id: str, params: JSON) -> JSON:
        self._get("coupon", coupon_id)
        del self._store["coupon"][coupon_id]
        return {"id": coupon_id, "object": "coupon", "deleted": True}
