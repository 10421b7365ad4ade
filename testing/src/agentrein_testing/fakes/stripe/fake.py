"""The fake Stripe itself: what it records, how it refuses, replays and fails, and which operation each URL runs."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Hashable
from typing import ClassVar
from urllib.parse import urlsplit

from attrs import define, field

from agentrein_testing.fakes.base import JSON, Fault, LoopbackFake, Reply, Request, Saved
from agentrein_testing.fakes.stripe.billing import Billing
from agentrein_testing.fakes.stripe.customers import Customers
from agentrein_testing.fakes.stripe.errors import (
    StripeError,
    auth_error,
    fault_error,
    key_in_use,
    unrecognized,
    validation_error,
)
from agentrein_testing.fakes.stripe.objects import COLLECTIONS, KINDS, Operation, new_id
from agentrein_testing.fakes.stripe.params import PARAMS, coerce, parse_form
from agentrein_testing.fakes.stripe.payments import Payments

#: what the fake answers in ``Stripe-Version`` when a request names none (the SDK always names one)
DEFAULT_API_VERSION = "2026-10-28.endive"


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
    account: str | None = None  # the connected account it acted for (``Stripe-Account``); one store serves all


@define
class StripeFault(Fault):
    message: str | None = None
    code: str | None = None
    error_type: str | None = None
    should_retry: bool | None = None


@define
class FakeStripe(LoopbackFake[StripeCall, StripeFault], Customers, Billing, Payments):
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>`` (give it to the SDK as is)."""

    thread_name: ClassVar[str] = "fake-stripe"

    _store: dict[str, dict[str, JSON]] = field(factory=lambda: {kind: {} for kind in KINDS}, init=False)
    _deleted_customers: set[str] = field(factory=set, init=False)
    _instruments: dict[str, str] = field(factory=dict, init=False)  # card_... -> the test token it was made from

    # test controls and inspection ----------------------------------------------------------------------------------
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

    # HTTP -----------------------------------------------------------------------------------------------------------
    def _record(self, request: Request) -> StripeCall:
        return StripeCall(
            request.method,
            urlsplit(request.target).path,
            request.headers.get("idempotency-key"),
            {},
            _api_key(request.headers.get("authorization")),
            request.headers.get("stripe-version"),
            request_id=new_id("req", 14),
            account=request.headers.get("stripe-account"),
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
            return self._error_reply(call, auth_error(call.api_key))
        return None

    def _idempotency_scope(self, call: StripeCall) -> Hashable | None:
        """Stripe's idempotency covers POSTs only, each API key's keys apart."""
        if call.idempotency_key is None or call.method != "POST":
            return None
        return (call.api_key, call.idempotency_key)

    def _key_in_use(self, call: StripeCall) -> Reply:
        return self._error_reply(call, key_in_use(call.idempotency_key))

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
        error = fault_error(status, fault.message, fault.code, fault.error_type)
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

    # routing --------------------------------------------------------------------------------------------------------
    def _dispatch(self, method: str, path: str, raw: JSON) -> JSON:
        parts = [p for p in path.split("/") if p]
        if len(parts) < 2 or parts[0] != "v1" or parts[1] not in COLLECTIONS or len(parts) > 4:
            raise unrecognized(method, path)
        kind = COLLECTIONS[parts[1]]
        shape = "/".join(["{id}", *parts[3:]]) if len(parts) > 2 else ""
        route = self._routes(kind).get((method, shape))
        if route is None:
            raise unrecognized(method, path)
        operation, handler = route
        allowed = PARAMS.get((kind, operation), frozenset())
        for name in raw:
            if name != "expand" and name not in allowed:
                raise validation_error(f"Received unknown parameter: {name}", code="parameter_unknown", param=name)
        params = {k: coerce(v, k, k) for k, v in raw.items()}
        expand = params.pop("expand", [])
        if isinstance(expand, str):
            expand = [expand]
        if not isinstance(expand, list) or not all(isinstance(e, str) for e in expand):
            raise validation_error("Invalid array", param="expand")
        result = handler(parts[2] if len(parts) > 2 else "", params)
        for expansion in expand:
            result = self._expand(result, expansion.split("."))
        return result

    def _routes(self, kind: str) -> dict[tuple[str, str], tuple[str, Operation]]:
        def listing(_: str, params: JSON) -> JSON:
            return self._list(kind, params)

        def retrieve(object_id: str, params: JSON) -> JSON:
            return self._retrieve(kind, object_id)

        routes: dict[tuple[str, str], tuple[str, Operation]] = {
            ("GET", ""): ("list", listing),
            ("GET", "{id}"): ("retrieve", retrieve),
        }
        creates: dict[str, Operation] = {
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
        updates: dict[str, Operation] = {
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
        deletes: dict[str, tuple[str, Operation]] = {
            "customer": ("delete", self._delete_customer),
            "subscription": ("cancel", self._cancel_subscription),
            "invoice": ("delete", self._delete_invoice),
            "invoiceitem": ("delete", self._delete_invoiceitem),
            "coupon": ("delete", self._delete_coupon),
            "product": ("delete", self._delete_product),
        }
        actions: dict[tuple[str, str, str], tuple[str, Operation]] = {
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
