"""The stripe connector: calls made through a ``stripe.StripeClient`` (sync and ``*_async``), its deprecated
``client.customers`` paths, or the legacy ``stripe`` module (``stripe.Customer.create(...)``).

- The api name is the service path without ``v1``: ``customers.create``, ``subscriptions.cancel``,
  ``invoices.finalize_invoice``, ``checkout.sessions.create``. Reads (``retrieve``, ``list``, ``search``)
  pass through unrecorded; the proxy descends into service objects only, never into returned data.
- Every recorded call carries ``options={"idempotency_key": ...}`` (one key for every retry of the action, a
  key of its own for the undo).
- Inverses are derived from the call and its result (see ``INVERSES`` and the README's table); an update is
  undone by restoring the fields it changed, read just before it ran.
- Transient: connection errors, rate limits, 5xx and ``idempotency_key_in_use``; an ``IdempotencyError`` is
  never retried. An undo that finds its object already gone, cancelled, voided or refunded has succeeded.
- The server's undos carry the organisation's key to its ``apiBase``, if it sets one (a target the engine
  checks when stored and before each undo), through a pinned connection (:mod:`agentrein_core.targets`):
  public addresses only, unless the server sets ``AGENTREIN_ALLOW_PRIVATE_TARGETS=1``.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any, ClassVar

import httpx
import stripe
from stripe._stripe_service import StripeService

from agentrein_core.connector import (
    JSON,
    NOT_RESTORED,
    UNDO_NONE,
    Action,
    Connector,
    OperationType,
    PreparedCall,
    Redactor,
    Setting,
    SettingKind,
    Undoable,
    UndoConfig,
    UndoError,
    UndoOutlook,
    ValidationError,
    bind_call,
    merge_undo,
    not_undone,
    pinned_client,
    secret_fields,
    without_secrets,
)

STRIPE_DELETE = "stripe-delete"
STRIPE_CANCEL = "stripe-cancel"
STRIPE_REFUND = "stripe-refund"
STRIPE_VOID = "stripe-void"
STRIPE_RESTORE = "stripe-restore"

#: How each call is undone; a call not listed here is recorded with undo ``none``.
INVERSES: Mapping[str, str] = {
    "customers.create": STRIPE_DELETE,
    "customers.update": STRIPE_RESTORE,
    "subscriptions.create": STRIPE_CANCEL,
    "subscriptions.update": STRIPE_RESTORE,
    "payment_intents.create": STRIPE_CANCEL,  # or a refund, once it has captured money
    "charges.create": STRIPE_REFUND,
    "payment_intents.confirm": STRIPE_REFUND,  # money moved when it was confirmed (or captured)
    "payment_intents.capture": STRIPE_REFUND,
    "invoices.create": STRIPE_DELETE,
    "invoices.finalize_invoice": STRIPE_VOID,
    "coupons.create": STRIPE_DELETE,
    "products.create": STRIPE_RESTORE,  # deactivated: a product with prices cannot be deleted
    "prices.create": STRIPE_RESTORE,  # prices cannot be deleted at all
}
#: Why a call Stripe cannot take back has no inverse (see the README's table).
IRREVERSIBLE: Mapping[str, str] = {
    **dict.fromkeys(
        ("refunds.create", "payouts.create", "transfers.create"),
        "money that left cannot be called back by an API call",
    ),
    **dict.fromkeys(
        ("subscriptions.cancel", "customers.delete", "invoices.void_invoice", "invoices.pay"),
        "Stripe cannot revive or un-pay it",
    ),
}
#: What names the object a call makes, in the words of a reviewer ("Create Stripe customer ada@example.com").
LABELS = ("email", "name", "nickname", "description")
#: What a call is for, when it names it ("… for customer cus_1").
FOR = ("customer", "charge", "payment_intent", "invoice", "product", "subscription")
#: Currencies without a minor unit (an amount of 500 JPY is 500 yen).
ZERO_DECIMAL = frozenset(
    {"bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"}
)
#: What each undo type may touch, when an agent (or anyone) sends it: the server checks it on arrival.
UNDOABLE_RESOURCES: Mapping[str, frozenset[str]] = {
    STRIPE_DELETE: frozenset({"customers", "invoices", "coupons"}),
    STRIPE_CANCEL: frozenset({"subscriptions", "payment_intents"}),
    STRIPE_VOID: frozenset({"invoices"}),
    STRIPE_RESTORE: frozenset({"customers", "subscriptions", "products", "prices"}),
}
#: The fields an update's undo writes back (others, such as subscription items or a new card, are not undone).
RESTORABLE: Mapping[str, frozenset[str]] = {
    "customers": frozenset({"email", "name", "description", "phone", "metadata", "address", "shipping"}),
    "subscriptions": frozenset({"metadata", "description", "cancel_at_period_end", "days_until_due"}),
    "products": frozenset({"active"}),
    "prices": frozenset({"active"}),
}
#: Legacy class methods that send a request; other class attributes are helpers.
LEGACY_WRITES = frozenset(
    {
        "create",
        "update",
        "delete",
        "cancel",
        "void_invoice",
        "finalize_invoice",
        "pay",
        "capture",
        "confirm",
        "mark_uncollectible",
        "send_invoice",
        "attach",
        "detach",
        "close",
        "refund",
        "resume",
        "pause",
    }
)
_OBJECT_ID = re.compile(r"[A-Za-z0-9_]+")
_ACCOUNT_ID = re.compile(r"acct_[A-Za-z0-9]+")
#: Updates restore what they changed: the object is read just before the update runs.
SNAPSHOT_BEFORE = frozenset(
    name for name, undo in INVERSES.items() if undo == STRIPE_RESTORE and name.endswith(".update")
)

#: Calls that change nothing: reads, and ``oauth.authorize_url``, which builds a URL and sends nothing.
READS = frozenset({"retrieve", "list", "search", "auto_paging_iter", "authorize_url"})
OPERATIONS = {
    "create": OperationType.CREATE,
    "update": OperationType.UPDATE,
    "modify": OperationType.UPDATE,
    "delete": OperationType.DELETE,
    "cancel": OperationType.DELETE,
    "close": OperationType.DELETE,
}
#: Legacy module-style method names, as their StripeClient equivalents, and back.
LEGACY_NAMES = {"modify": "update"}
LEGACY_METHODS = {v: k for k, v in LEGACY_NAMES.items()}
#: The module's resource class of each resource the tables update or delete (``stripe.Customer``).
MODULE_CLASSES: Mapping[str, tuple[str, ...]] = {
    "customers": ("Customer",),
    "subscriptions": ("Subscription",),
}
#: Request options a legacy call takes among its parameters; they are not part of the recorded payload.
REQUEST_OPTIONS = frozenset({"api_key", "idempotency_key", "stripe_version", "stripe_account", "stripe_context"})
TRANSIENT_CODES = frozenset({"idempotency_key_in_use", "lock_timeout"})
GONE_CODES = frozenset({"resource_missing", "charge_already_refunded"})


class StripeConnector(Connector):
    name: ClassVar[str] = "stripe"
    #: On top of the defaults: client secrets, bank and identity numbers, and Stripe Apps secret payloads.
    sensitive_fields: ClassVar[frozenset[str]] = frozenset(
        {"clientsecret", "number", "routingnumber", "ssnlast4", "payload"}
    )
    undo_types: ClassVar[frozenset[str]] = frozenset(
        {STRIPE_DELETE, STRIPE_CANCEL, STRIPE_REFUND, STRIPE_VOID, STRIPE_RESTORE}
    )
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "apiKey",
            "API key",
            "The secret or restricted key (sk_… or rk_…) undos are made with: it must be allowed to write "
            "what your agents change.",
            secret=True,
            required=True,
            example="sk_live_…",
        ),
        Setting(
            "apiBase",
            "API address",
            "Another address for the Stripe API (a proxy, a test server). Empty: Stripe's own.",
            SettingKind.URL,
            example="https://api.stripe.com",
        ),
    )

    def accepts(self, client: Any) -> bool:
        return isinstance(client, stripe.StripeClient) or client is stripe

    def descend(self, value: Any) -> bool:
        """Services (``client.v1.customers``), and in the legacy style resource classes and the modules that
        hold them (``stripe.checkout.Session``); never returned data."""
        if isinstance(value, StripeService):
            return True
        if isinstance(value, ModuleType):
            return value.__name__.startswith("stripe.")
        return isinstance(value, type) and issubclass(value, stripe.APIResource)

    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | None:
        if path == ("raw_request",) or path == ("raw_request_async",):
            return _raw_request(client, path, args, kwargs)
        resource, method_name, is_async = _describe_path(client, path)
        if resource is None or method_name in READS or method_name.startswith(("list_", "retrieve_")):
            return None
        if client is stripe and method_name not in LEGACY_WRITES:
            return None  # class helpers (class_url, construct_from…) send nothing
        api_name = f"{resource}.{method_name}"
        method = _resolve(client, path)
        call = _Call(method, args, kwargs, legacy=client is stripe)
        account = call.account or _client_account(client)
        context: dict[str, Any] = {"object_id": call.object_id, "resource": resource, "stripe_account": account}

        def run(idempotency_key: str) -> Any:
            # Read once, before the first attempt: a retry after a lost answer would read the update's own effect.
            if api_name not in SNAPSHOT_BEFORE or "before" in context:
                return call.run(idempotency_key)
            read = _reader(client, path, is_async, account)
            if is_async:
                return _snapshot_then_async(read, call, idempotency_key, context)
            context["before"] = read(call.object_id)
            return call.run(idempotency_key)

        return PreparedCall(
            api_name=api_name,
            operation_type=OPERATIONS.get(method_name, OperationType.OTHER),
            payload=_payload(call.object_id, call.params, account),
            run=run,
            is_async=is_async,
            context=context,
        )

    def recorded(self, path: tuple[str, ...], payload: Any, before: JSON | None = None) -> PreparedCall | None:
        """``StripeClient`` paths (``customers.create``, ``v1.customers.create``) and the module's
        (``Customer.create``), with the payload the published SDKs send: the keyword arguments, or the first
        positional one (an id, or a ``StripeClient`` call's params)."""
        legacy = True
        resource, method_name, _ = _describe_path(stripe, path)
        if resource is None:
            legacy = False
            resource, method_name, _ = _describe_path(None, path)
        if resource is None or method_name in READS or method_name.startswith(("list_", "retrieve_")):
            return None
        object_id, params, account = _reported(payload, legacy)
        api_name = f"{resource}.{method_name}"
        context: dict[str, Any] = {"object_id": object_id, "resource": resource, "stripe_account": account}
        if before is not None:
            context["before"] = before

        def never_run(_key: str) -> Any:
            raise UndoError(f"{api_name} was reported after it ran; it is not run again")

        return PreparedCall(
            api_name=api_name,
            operation_type=OPERATIONS.get(method_name, OperationType.OTHER),
            payload=_payload(object_id, params, account),
            run=never_run,
            context=context,
        )

    def reads_before(self, call: PreparedCall) -> bool:
        return call.api_name in SNAPSHOT_BEFORE

    def reported_changes(self) -> Iterable[tuple[str, ...]]:
        """The updates and deletes of the connector's tables, by every path that reaches them: ``StripeClient``'s
        (``customers.update``, ``v1.customers.update``) and the module's (``Customer.modify``)."""
        for api_name in sorted({*INVERSES, *IRREVERSIBLE}):
            resource, _, method = api_name.rpartition(".")
            if OPERATIONS.get(method) not in (OperationType.UPDATE, OperationType.DELETE):
                continue
            path = (*resource.split("."), method)
            yield path
            yield ("v1", *path)
            if resource in MODULE_CLASSES:
                yield (*MODULE_CLASSES[resource], LEGACY_METHODS.get(method, method))

    def read_before(self, call: PreparedCall, server_client: Callable[[], Any]) -> JSON | None:
        """An update's object (``customers.update``, ``subscriptions.update``), as its undo restores it."""
        if not self.reads_before(call):
            return None
        object_id = call.context["object_id"]
        if not object_id:
            raise UndoError(
                f"{call.api_name} names no object: pass its id by name (customer='cus_…', or sid= for the module)"
            )
        options: Any = {"stripe_account": call.context["stripe_account"]} if call.context["stripe_account"] else {}
        try:
            service = _service(server_client(), call.context["resource"])
            return _as_dict(service.retrieve(object_id, options=options))
        except stripe.StripeError as exc:
            raise UndoError(f"Stripe did not give {object_id} to read before the update ({exc})") from exc

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        """The result's own fields (nested objects and lists are left out: they can be large)."""
        data = _as_dict(result)
        return {k: v for k, v in data.items() if isinstance(v, str | int | float | bool) or v is None}

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        kind = INVERSES.get(call.api_name)
        data = _as_dict(result)
        resource = call.context["resource"]
        derived = UndoConfig(UNDO_NONE)
        if kind is None:
            pass
        elif kind == STRIPE_RESTORE and call.api_name in SNAPSHOT_BEFORE:
            params = call.payload.get("params", {})
            restore = _restore(params, _as_dict(call.context.get("before")), RESTORABLE[resource])
            restore, secret = _without_secrets(restore, self.redactor)
            # Not undone: an update of nothing restorable (subscription items, say), or one reported after it
            # ran whose object nobody read before (restoring without it would clear the fields it set).
            object_id = call.context["object_id"] or data.get("id")
            read = _as_dict(call.context.get("before")).get("id")
            # A before-state read of another object than the one changed is never restored onto it.
            usable = "before" in call.context and object_id and read in (None, object_id)
            if usable and restore:
                restored: JSON = {"resource": resource, "id": object_id, "params": restore}
                derived = UndoConfig(STRIPE_RESTORE, {**restored, NOT_RESTORED: secret} if secret else restored)
            elif usable and secret:
                derived = not_undone(f"{secret_fields(secret)}, so no undo can restore what it changed")
        elif kind == STRIPE_RESTORE:  # products and prices: deactivated
            derived = UndoConfig(
                STRIPE_RESTORE, {"resource": resource, "id": data.get("id"), "params": {"active": False}}
            )
        elif call.api_name.startswith("payment_intents."):
            derived = _payment_intent_undo(data)
        elif kind == STRIPE_REFUND:
            derived = UndoConfig(STRIPE_REFUND, {"charge": data.get("id")}, require_approval=True)
        else:
            # A finalization voids the invoice it names, or the one it returned (its id passed positionally).
            target = (call.context["object_id"] or data.get("id")) if kind == STRIPE_VOID else data.get("id")
            derived = UndoConfig(kind, {"resource": resource, "id": target})
        account = call.context.get("stripe_account")
        if account and derived.type in self.undo_types:  # the undo goes to the account the call went to
            derived = UndoConfig(derived.type, {**derived.params, "stripe_account": account}, derived.require_approval)
        return merge_undo(derived, override)

    def check_undo(self, undo: UndoConfig) -> None:
        super().check_undo(undo)
        params = undo.params
        if undo.type == STRIPE_REFUND and not any(isinstance(params.get(k), str) for k in ("charge", "payment_intent")):
            raise ValidationError("undo", "a stripe-refund undo names the 'charge' or 'payment_intent' to refund")
        if undo.type == STRIPE_REFUND and not undo.require_approval:
            raise ValidationError("undo.requireApproval", "a refund always waits for a human's approval")
        account = params.get("stripe_account")
        if account is not None and (not isinstance(account, str) or not _ACCOUNT_ID.fullmatch(account)):
            raise ValidationError("undo.stripe_account", "must be a connected account id (acct_…)")
        if undo.type in UNDOABLE_RESOURCES:
            resource, object_id = params.get("resource"), params.get("id")
            if resource not in UNDOABLE_RESOURCES[undo.type]:
                allowed = ", ".join(sorted(UNDOABLE_RESOURCES[undo.type]))
                raise ValidationError("undo.resource", f"a {undo.type} undo applies to {allowed}, not {resource!r}")
            if not isinstance(object_id, str) or not _OBJECT_ID.fullmatch(object_id):
                raise ValidationError("undo.id", "must be the id of a Stripe object")
            restored = params.get("params", {})
            if undo.type == STRIPE_RESTORE and (
                not isinstance(restored, dict) or not set(restored) <= RESTORABLE[str(resource)]
            ):
                raise ValidationError("undo.params", f"may restore only {', '.join(sorted(RESTORABLE[str(resource)]))}")
            secret = params.get(NOT_RESTORED, [])  # read by reviewers: field names (a metadata key), nothing else
            fields = RESTORABLE.get(str(resource), frozenset())
            if not (isinstance(secret, list) and all(_restorable_name(x, fields) for x in secret)):
                raise ValidationError(f"undo.{NOT_RESTORED}", "names the fields (metadata.KEY) a restore left out")

    def is_transient(self, error: BaseException) -> bool:
        if isinstance(error, stripe.IdempotencyError):
            return False
        if isinstance(error, stripe.APIConnectionError | stripe.RateLimitError):
            return True
        if isinstance(error, stripe.StripeError) and _code(error) in TRANSIENT_CODES:
            return True  # 409 idempotency_key_in_use arrives as a plain APIError
        return isinstance(error, stripe.StripeError) and (error.http_status or 0) >= 500

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> None:
        if undo.type not in self.undo_types:
            super().run_undo(undo, client, idempotency_key)
            return
        api = client if isinstance(client, stripe.StripeClient) else _client_like_the_module()
        params = undo.params
        options: Any = {"idempotency_key": idempotency_key}
        if params.get("stripe_account"):
            options["stripe_account"] = params["stripe_account"]
        try:
            if undo.type == STRIPE_REFUND:
                target = {k: params[k] for k in ("charge", "payment_intent") if k in params}
                api.v1.refunds.create(params=target, options=options)  # type: ignore[arg-type]
                return
            service = _service(api, params["resource"])
            if undo.type == STRIPE_DELETE:
                service.delete(params["id"], options=options)
            elif undo.type == STRIPE_CANCEL:
                service.cancel(params["id"], options=options)
            elif undo.type == STRIPE_VOID:
                service.void_invoice(params["id"], options=options)
            else:
                service.update(params["id"], params=params.get("params", {}), options=options)
        except stripe.StripeError as exc:
            if _already_undone(exc) or _voided_instead(api, undo):
                return  # gone, cancelled, voided or refunded already: the effect is undone
            raise

    def describe(self, action: Action) -> str:
        if action.api_name.startswith("raw_request "):
            return f"Send {action.api_name.removeprefix('raw_request ')} to Stripe (a raw request)"
        resource, _, method = action.api_name.rpartition(".")
        thing = _singular(resource)
        params = action.payload.get("params")
        params = params if isinstance(params, dict) else {}
        object_id = action.payload.get("id")
        if method == "create":
            label = next((str(params[k]) for k in LABELS if isinstance(params.get(k), str) and params[k]), "")
            money = _money(params)
            purpose = next(
                (f" for {k.replace('_', ' ')} {params[k]}" for k in FOR if isinstance(params.get(k), str)), ""
            )
            return (
                f"Create Stripe {thing}" + (f" {label}" if label else "") + (f" of {money}" if money else "") + purpose
            )
        if method == "update":
            fields = f": {', '.join(sorted(params))}" if params else ""
            return f"Update Stripe {thing} {object_id}{fields}"
        verb = _words(method.removesuffix("_" + resource.rpartition(".")[2].removesuffix("s"))).capitalize()
        return f"{verb} Stripe {thing}" + (f" {object_id}" if object_id else "")

    def describe_undo(self, action: Action) -> str:
        undo = action.undo
        if undo is None or undo.type not in self.undo_types:
            if action.api_name in IRREVERSIBLE:
                return IRREVERSIBLE[action.api_name]
            if action.api_name in INVERSES:
                return (
                    "Stripe left nothing to undo it with (a payment processing or cancelled, or no field it restores)"
                )
            return f"the stripe connector has no inverse for {action.api_name}"
        p = undo.params
        if undo.type == STRIPE_REFUND:
            target = "charge" if "charge" in p else "payment_intent"
            return f"Refund Stripe {_words(target)} {p.get(target)}"
        thing, object_id = _singular(str(p.get("resource", ""))), p.get("id")
        if undo.type == STRIPE_RESTORE:
            restored = p["params"] if isinstance(p.get("params"), dict) else {}
            if restored == {"active": False}:
                return f"Deactivate Stripe {thing} {object_id}"
            secret = p.get(NOT_RESTORED)
            unsaid = f" ({secret_fields(secret)}: not restored)" if isinstance(secret, list) and secret else ""
            return f"Restore {', '.join(sorted(restored))} of Stripe {thing} {object_id} as they were{unsaid}"
        verb = {STRIPE_DELETE: "Delete", STRIPE_CANCEL: "Cancel", STRIPE_VOID: "Void"}[undo.type]
        return f"{verb} Stripe {thing} {object_id}"

    def foresee_undo(self, action: Action) -> UndoOutlook:
        kind = INVERSES.get(action.api_name)
        if kind is None:
            return UndoOutlook(Undoable.NO, self.describe_undo(action))
        thing = _singular(action.api_name.rpartition(".")[0])
        if action.api_name == "payment_intents.create":
            how = "Cancel the payment intent it creates (or refund it, after a reviewer approves, once it took money)"
        elif kind == STRIPE_REFUND:
            how = "Refund the money it moves, after a reviewer approves the refund"
        elif kind == STRIPE_RESTORE and action.api_name in SNAPSHOT_BEFORE:
            how = f"Restore the fields of the {thing} it changes, as they were just before"
        elif kind == STRIPE_RESTORE:
            how = f"Deactivate the {thing} it creates (Stripe cannot delete it)"
        elif kind == STRIPE_VOID:
            how = "Void the invoice it finalizes"
        else:
            how = f"{'Delete' if kind == STRIPE_DELETE else 'Cancel'} the {thing} it creates"
        return UndoOutlook(Undoable.YES, how)

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        unknown = sorted(set(config) - {"apiBase"})
        if unknown:
            raise ValidationError(f"config.{unknown[0]}", "unknown setting (allowed: apiBase)")
        base = config.get("apiBase")
        if base is not None and (not isinstance(base, str) or not base.startswith(("https://", "http://"))):
            raise ValidationError("config.apiBase", "must be the http(s) address of the Stripe API")
        key = credentials.get("apiKey")
        if set(credentials) - {"apiKey"} or not isinstance(key, str) or not key.startswith(("sk_", "rk_")):
            raise ValidationError("credentials.apiKey", "needs the secret or restricted key (sk_… or rk_…) alone")

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> stripe.StripeClient:
        base = config.get("apiBase")
        # Our own retries (same undo key every attempt) replace the SDK's. Stripe's own address is trusted (and
        # reached through the server's proxy, if any); one the organisation chose is reached pinned.
        return stripe.StripeClient(
            credentials["apiKey"],
            base_addresses={"api": base} if base else {},
            max_network_retries=0,
            http_client=_PinnedHTTPClient() if base else None,
        )


class _PinnedHTTPClient(stripe.HTTPClient):
    """Stripe's HTTP through :func:`agentrein_core.connector.pinned_client`: the key goes only to an address
    checked as the request connects, however ``apiBase`` resolves by then (DESIGN §8)."""

    name = "agentrein-pinned"

    def __init__(self) -> None:
        super().__init__()
        self._http = pinned_client("config.apiBase", timeout=80.0, follow_redirects=False)

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        post_data: Any = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[str, int, Mapping[str, str]]:
        try:
            answer = self._http.request(method, url, headers=headers, content=post_data)
        except httpx.TransportError as exc:  # as Stripe's own clients say it, so it is retried as transient
            failed = f"Stripe could not be reached ({exc})"
            raise stripe.APIConnectionError(failed, should_retry=True) from exc  # type: ignore[no-untyped-call]
        return answer.text, answer.status_code, answer.headers

    def close(self) -> None:
        self._http.close()


class _Call:
    """A Stripe method call, its arguments bound, that can be made with an idempotency key.

    Service methods take ``(id, params, options)`` (the id positional-only); legacy class methods take
    ``(id, **params)`` with request options such as ``idempotency_key`` among the keyword arguments."""

    def __init__(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], legacy: bool):
        self.method = method
        self.legacy = legacy
        self.args = args
        self.kwargs = kwargs
        self.bound: inspect.BoundArguments | None = None
        if not legacy:
            self.bound = bind_call(method, args, kwargs)

    @property
    def object_id(self) -> str | None:
        if self.bound is None:
            return self.args[0] if self.args and isinstance(self.args[0], str) else None
        named = self.bound.arguments.items()
        return next((v for k, v in named if k not in ("params", "options") and isinstance(v, str)), None)

    @property
    def account(self) -> str | None:
        """The connected account the call acts on (``stripe_account``), if any."""
        if self.bound is None:
            account = self.kwargs.get("stripe_account")
        else:
            account = (self.bound.arguments.get("options") or {}).get("stripe_account")
        return account if isinstance(account, str) else None

    @property
    def params(self) -> JSON:
        if self.bound is None:
            return {k: v for k, v in self.kwargs.items() if k not in REQUEST_OPTIONS}
        return dict(self.bound.arguments.get("params") or {})

    def run(self, idempotency_key: str) -> Any:
        if self.bound is None:
            return self.method(*self.args, **{**self.kwargs, "idempotency_key": idempotency_key})
        arguments = dict(self.bound.arguments)
        arguments["options"] = {**(arguments.get("options") or {}), "idempotency_key": idempotency_key}
        call = inspect.BoundArguments(self.bound.signature, arguments)
        return self.method(*call.args, **call.kwargs)


def _reported(payload: Any, legacy: bool) -> tuple[str | None, JSON, str | None]:
    """(object id, params, connected account) of a payload a published SDK reported: a module call's keyword
    arguments (the id as ``sid`` or ``id``, request options among them), or a ``StripeClient`` call's (the id
    under its own name, ``params`` and ``options``), or the one positional argument (an id, or the params)."""
    if isinstance(payload, str):
        return payload, {}, None
    if not isinstance(payload, Mapping):
        return None, {}, None
    if legacy:
        object_id = payload.get("sid", payload.get("id"))
        params = {k: v for k, v in payload.items() if k not in REQUEST_OPTIONS and k not in ("sid", "id")}
        account = payload.get("stripe_account")
    elif "params" in payload or "options" in payload:
        object_id = next((v for k, v in payload.items() if k not in ("params", "options") and isinstance(v, str)), None)
        given, options = payload.get("params"), payload.get("options")
        params = dict(given) if isinstance(given, Mapping) else {}
        account = options.get("stripe_account") if isinstance(options, Mapping) else None
    else:  # the params alone, passed positionally
        object_id, params, account = None, dict(payload), None
    return (
        object_id if isinstance(object_id, str) else None,
        dict(params),
        account if isinstance(account, str) and _ACCOUNT_ID.fullmatch(account) else None,  # sent as a header
    )


def _client_account(client: Any) -> str | None:
    """The connected account a ``StripeClient`` made with ``stripe_account=`` sends every call on (a call's own
    ``options`` override it), kept by stripe-python in its requestor's options; None for the ``stripe`` module."""
    account = getattr(getattr(getattr(client, "_requestor", None), "_options", None), "stripe_account", None)
    return account if isinstance(account, str) else None


def _payload(object_id: str | None, params: JSON, account: str | None) -> JSON:
    """What a call's record keeps: its object, its params and the connected account it acted on, under
    ``options`` as a ``StripeClient`` call passes it. The record is all a held call is described from again once
    it is confirmed (through ``/compat``): without the account there, its undo would go to the platform account,
    whose 404 counts as undone."""
    payload: JSON = {"id": object_id, "params": params} if object_id else {"params": params}
    if account:
        payload["options"] = {"stripe_account": account}
    return payload


async def _snapshot_then_async(
    read: Callable[[str | None], Any], call: _Call, idempotency_key: str, context: dict[str, Any]
) -> Any:
    context["before"] = await read(call.object_id)
    return await call.run(idempotency_key)


def _describe_path(client: Any, path: tuple[str, ...]) -> tuple[str | None, str, bool]:
    """(resource, method, is_async) of a call path: ``("v1", "customers", "create_async")`` is
    ``("customers", "create", True)``; the legacy ``("Customer", "modify")`` is ``("customers", "update", False)``."""
    *head, last = path
    is_async = last.endswith("_async")
    method = last.removesuffix("_async")
    if client is stripe:
        resource_class: Any = stripe
        for name in head:  # stripe.Customer, stripe.checkout.Session
            resource_class = getattr(resource_class, name, None)
        if not (isinstance(resource_class, type) and issubclass(resource_class, stripe.APIResource)):
            return None, method, is_async
        # The abstract bases (``APIResource``, ``CreateableAPIResource``…) name no object and have no URL.
        if not isinstance(getattr(resource_class, "OBJECT_NAME", None), str):
            return None, method, is_async
        resource = resource_class.class_url().removeprefix("/v1/").replace("/", ".")
        return resource, LEGACY_NAMES.get(method, method), is_async
    head = head[1:] if head[:1] == ["v1"] else head
    return (".".join(head) or None), method, is_async


def _raw_request(
    client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> PreparedCall | None:
    """``client.raw_request("post", "/v1/…", …)``: a write is recorded (as ``raw_request POST /v1/…``, undo
    ``none``); the caller gives its own ``idempotency_key`` if it wants one."""
    method_name = str(args[0] if args else kwargs.get("method_", "")).upper()
    url = str(args[1] if len(args) > 1 else kwargs.get("url_", ""))
    if method_name == "GET":
        return None
    send = getattr(client, path[0])
    params = {k: v for k, v in kwargs.items() if k not in ("method_", "url_")}
    return PreparedCall(
        api_name=f"raw_request {method_name} {url.partition('?')[0]}",
        operation_type=OPERATIONS.get(method_name.lower(), OperationType.OTHER),
        payload={"params": params},
        run=lambda _key: send(*args, **kwargs),
        is_async=path[0].endswith("_async"),
        context={"resource": None, "object_id": None},
    )


def _resolve(client: Any, path: tuple[str, ...]) -> Callable[..., Any]:
    target = client
    for name in path:
        target = getattr(target, name)
    return target  # type: ignore[no-any-return]


def _reader(client: Any, path: tuple[str, ...], is_async: bool, account: str | None) -> Callable[[str | None], Any]:
    """The ``retrieve`` beside the method at ``path`` (its async form for an async call), in the connected
    ``account`` the call acts on, if any: the snapshot must be of the object the update changes."""
    owner = _resolve(client, path[:-1])
    retrieve: Callable[..., Any] = getattr(owner, "retrieve_async" if is_async else "retrieve")
    if account is None:
        return retrieve
    if client is stripe:  # the legacy resource classes take request options as keywords
        return functools.partial(retrieve, stripe_account=account)
    return functools.partial(retrieve, options={"stripe_account": account})


def _service(api: stripe.StripeClient, resource: str) -> Any:
    target: Any = api.v1
    for name in resource.split("."):
        target = getattr(target, name)
    return target


def _client_like_the_module() -> stripe.StripeClient:
    """Legacy module-style callers configure the module; their undos go through the same key and address."""
    if not stripe.api_key:
        raise UndoError("stripe.api_key is not set, so the undo cannot authenticate")
    return stripe.StripeClient(stripe.api_key, base_addresses={"api": stripe.api_base}, max_network_retries=0)


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, stripe.StripeObject):
        return value.to_dict()
    return dict(value) if isinstance(value, Mapping) else {}


def _payment_intent_undo(intent: Mapping[str, Any]) -> UndoConfig:
    """A payment intent as a call left it: paid is refunded (after approval), still cancellable is cancelled."""
    status = intent.get("status")
    if status == "succeeded":
        return UndoConfig(STRIPE_REFUND, {"payment_intent": intent.get("id")}, require_approval=True)
    if status in ("requires_payment_method", "requires_confirmation", "requires_action", "requires_capture"):
        return UndoConfig(STRIPE_CANCEL, {"resource": "payment_intents", "id": intent.get("id")})
    return UndoConfig(UNDO_NONE)  # processing or canceled: nothing an API call can take back now


def _restore(changed: Mapping[str, Any], before: Mapping[str, Any], restorable: frozenset[str]) -> JSON:
    """The values of the restorable fields an update changes, as they were before it; ``""`` unsets what was
    unset (Stripe's way to clear a field or a metadata key). JSON-safe, as it is stored."""
    restore: JSON = {}
    for field in changed:
        if field not in restorable:
            continue
        old = before.get(field)
        if field == "metadata" and isinstance(changed[field], Mapping):
            previous = old if isinstance(old, Mapping) else {}
            restore["metadata"] = {k: previous.get(k, "") for k in changed[field]}
        else:
            restore[field] = "" if old is None else old
    safe: JSON = json.loads(json.dumps(restore, default=str))  # Decimal and the like, as Stripe takes them
    return safe


def _restorable_name(name: Any, fields: frozenset[str]) -> bool:
    """A field a restore of one of ``fields`` may name as left out: one of them, or a metadata key."""
    if not isinstance(name, str):
        return False
    key = name.removeprefix("metadata.")
    return name in fields or (key != name and "metadata" in fields and 0 < len(key) <= 40 and key.isprintable())


def _without_secrets(restore: JSON, redactor: Redactor) -> tuple[JSON, list[str]]:
    """``restore`` without the values its record cannot keep (:func:`without_secrets`; a before-state read
    through ``/compat`` was redacted when kept): each field whole, each metadata key alone, whose names
    (``metadata.api_key``) are said to reviewers."""
    metadata = restore.get("metadata")
    by_key = isinstance(metadata, Mapping)
    kept, left_out = without_secrets({k: v for k, v in restore.items() if not (by_key and k == "metadata")}, redactor)
    if isinstance(metadata, Mapping):
        kept_metadata, secret = without_secrets(metadata, redactor)
        left_out += [f"metadata.{key}" for key in secret]
        if kept_metadata:
            kept["metadata"] = kept_metadata
    return kept, left_out


def _voided_instead(api: stripe.StripeClient, undo: UndoConfig) -> bool:
    """A finalized invoice cannot be deleted; once voided (by the undo of its finalization) it is undone."""
    if undo.type != STRIPE_DELETE or undo.params.get("resource") != "invoices":
        return False
    return bool(api.v1.invoices.retrieve(undo.params["id"]).status == "void")


def _code(error: stripe.StripeError) -> str | None:
    """Stripe's error code: on the exception for some classes, on its ``error`` object for the others."""
    code = getattr(error, "code", None) or getattr(error.error, "code", None)
    return code if isinstance(code, str) else None


def _already_undone(error: stripe.StripeError) -> bool:
    if error.http_status == 404 or _code(error) in GONE_CODES:
        return True
    message = str(error).lower()
    return "already" in message and any(word in message for word in ("cancel", "void", "refund", "deleted"))


def _words(name: str) -> str:
    return name.replace(".", " ").replace("_", " ")


def _singular(resource: str) -> str:
    """``payment_intents`` -> ``payment intent``, ``checkout.sessions`` -> ``checkout session``."""
    words = _words(resource)
    return words[:-1] if words.endswith("s") else words


def _money(params: Mapping[str, Any]) -> str:
    """``4200`` and ``usd`` -> ``42.00 USD``."""
    amount, currency = params.get("amount", params.get("unit_amount")), params.get("currency")
    if not isinstance(amount, int) or isinstance(amount, bool):
        return ""
    if not isinstance(currency, str):
        return f"amount {amount}"
    if currency.lower() in ZERO_DECIMAL:
        return f"{amount} {currency.upper()}"
    return f"{amount / 100:.2f} {currency.upper()}"
