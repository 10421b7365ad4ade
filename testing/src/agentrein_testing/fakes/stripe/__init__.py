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

from agentrein_testing.fakes.stripe.errors import StripeError
from agentrein_testing.fakes.stripe.fake import DEFAULT_API_VERSION, FakeStripe, StripeCall, StripeFault
from agentrein_testing.fakes.stripe.objects import KINDS
from agentrein_testing.fakes.stripe.params import parse_form

__all__ = ["DEFAULT_API_VERSION", "KINDS", "FakeStripe", "StripeCall", "StripeError", "StripeFault", "parse_form"]
