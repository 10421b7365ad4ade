"""The objects a fake Stripe holds, the ids it makes, and how the API renders and lists them."""

from __future__ import annotations

import copy
import secrets
import string
import time
from collections.abc import Callable
from typing import Any

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.stripe.errors import no_such, validation_error

Operation = Callable[[str, JSON], JSON]  # (object id or "", params) -> the answer

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

COLLECTIONS = {
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

_URLS = {kind: f"/v1/{collection}" for collection, kind in COLLECTIONS.items()}

ALPHANUMERIC = string.ascii_letters + string.digits

ENDED = ("canceled", "incomplete_expired")  # subscriptions that are over


def random_string(length: int, alphabet: str = ALPHANUMERIC) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def new_id(prefix: str, length: int = 24) -> str:
    return f"{prefix}_{random_string(length)}"


def timestamp() -> int:
    return int(time.time())


class StripeObjects:
    """What a fake Stripe holds, and how the API shows it: the store of every kind of object, lookups that answer
    Stripe's "No such ..." errors, rendering (with expansions) and list pages."""

    __slots__ = ()
    _store: dict[str, dict[str, JSON]]  # kind -> id -> the stored object
    _deleted_customers: set[str]
    _instruments: dict[str, str]  # card_... -> the test token it was made from

    def _get(self, kind: str, object_id: Any, *, param: str = "id", status: int = 404) -> JSON:
        obj = self._store[kind].get(object_id) if isinstance(object_id, str) else None
        if obj is None:
            raise no_such(kind, str(object_id), param=param, status=status)
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
            raise validation_error(
                f"This value must be less than or equal to 100 (it currently is '{limit}')."
                if isinstance(limit, int)
                else f"Invalid integer: {limit}",
                param="limit",
            )
        ids = [obj["id"] for obj in objects]
        starting_after, ending_before = params.get("starting_after"), params.get("ending_before")
        if starting_after:
            if starting_after not in ids:
                raise no_such(kind, str(starting_after), param="starting_after", status=400)
            after = objects[ids.index(starting_after) + 1 :]
            page, has_more = after[:limit], len(after) > limit
        elif ending_before:
            if ending_before not in ids:
                raise no_such(kind, str(ending_before), param="ending_before", status=400)
            before = objects[: ids.index(ending_before)]
            page, has_more = before[-limit:], len(before) > limit
        else:
            page, has_more = objects[:limit], len(objects) > limit
        return {"object": "list", "data": page, "has_more": has_more, "url": url or _URLS[kind]}

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
        if status is None and obj["status"] in ENDED:
            return False  # Stripe lists subscriptions that are not canceled unless asked
        if status == "ended" and obj["status"] not in ENDED:
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
