"""The Stripe fake, driven through the real stripe-python SDK: these tests specify what a connector built against
the fake may rely on (and so what it will meet on real Stripe)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
import stripe

from agentrein_testing.fakes.stripe import FakeStripe, parse_form

KEY = "sk_test_agentrein"


@pytest.fixture
def fake() -> Iterator[FakeStripe]:
    with FakeStripe().running() as running:
        yield running


@pytest.fixture
def client(fake: FakeStripe) -> stripe.StripeClient:
    return stripe.StripeClient(KEY, base_addresses={"api": fake.base_url}, max_network_retries=0)


@pytest.fixture
def module_style(fake: FakeStripe, monkeypatch: pytest.MonkeyPatch) -> FakeStripe:
    """The legacy global configuration, pointed at the fake and restored afterwards."""
    monkeypatch.setattr(stripe, "api_key", KEY)
    monkeypatch.setattr(stripe, "api_base", fake.base_url)
    monkeypatch.setattr(stripe, "max_network_retries", 0)
    return fake


def paying_customer(client: stripe.StripeClient) -> stripe.Customer:
    """A customer with a default card, as a subscription charged automatically needs."""
    return client.v1.customers.create(params={"email": "ada@example.com", "source": "tok_visa"})


def plain(obj: Any) -> Any:
    """A StripeObject (or a nested one the SDK types loosely) as plain dicts and lists."""
    return obj.to_dict()


def response_of(obj: stripe.StripeObject) -> stripe.StripeResponse:
    assert obj.last_response is not None
    return obj.last_response


def monthly_price(client: stripe.StripeClient, unit_amount: int = 1500) -> stripe.Price:
    product = client.v1.products.create(params={"name": "Pro plan"})
    return client.v1.prices.create(
        params={
            "product": product.id,
            "currency": "usd",
            "unit_amount": unit_amount,
            "recurring": {"interval": "month"},
        }
    )


def succeeded_payment(client: stripe.StripeClient, amount: int = 2000) -> stripe.PaymentIntent:
    return client.v1.payment_intents.create(
        params={"amount": amount, "currency": "usd", "payment_method": "pm_card_visa", "confirm": True}
    )


# customers --------------------------------------------------------------------------------------------------------
def test_a_customer_is_created_retrieved_and_updated_with_stripe_shapes(
    client: stripe.StripeClient, fake: FakeStripe
) -> None:
    created = client.v1.customers.create(
        params={"email": "ada@example.com", "name": "Ada", "metadata": {"order": "42", "agent": "a1"}}
    )
    assert created.id.startswith("cus_")
    assert created.object == "customer"
    assert created.livemode is False
    assert plain(created.metadata) == {"order": "42", "agent": "a1"}

    updated = client.v1.customers.update(created.id, params={"name": "Ada L.", "metadata": {"agent": ""}})
    assert updated.name == "Ada L."
    assert plain(updated.metadata) == {"order": "42"}  # metadata merges; an empty value removes a key

    fetched = client.v1.customers.retrieve(created.id)
    assert (fetched.email, fetched.name) == ("ada@example.com", "Ada L.")
    assert [c["id"] for c in fake.objects("customer")] == [created.id]


def test_a_deleted_customer_is_gone_but_retrieves_as_a_deleted_stub(
    client: stripe.StripeClient, fake: FakeStripe
) -> None:
    customer = client.v1.customers.create(params={"email": "ada@example.com"})

    deleted = client.v1.customers.delete(customer.id)

    assert deleted.to_dict() == {"id": customer.id, "object": "customer", "deleted": True}
    assert client.v1.customers.retrieve(customer.id).to_dict() == {
        "id": customer.id,
        "object": "customer",
        "deleted": True,
    }
    assert fake.objects("customer") == []
    assert fake.get(customer.id) is None
    assert client.v1.customers.list().data == []


def test_deleting_or_updating_a_deleted_customer_answers_404_resource_missing(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create()
    client.v1.customers.delete(customer.id)

    with pytest.raises(stripe.InvalidRequestError) as deleting:
        client.v1.customers.delete(customer.id)
    with pytest.raises(stripe.InvalidRequestError) as updating:
        client.v1.customers.update(customer.id, params={"name": "x"})

    for error in (deleting.value, updating.value):
        assert error.http_status == 404
        assert error.code == "resource_missing"
        assert error.param == "id"
        assert error.user_message == f"No such customer: '{customer.id}'"


def test_lists_are_newest_first_and_paginate_like_stripe(client: stripe.StripeClient) -> None:
    ids = [client.v1.customers.create(params={"name": f"c{i}"}).id for i in range(5)]

    page = client.v1.customers.list(params={"limit": 2})

    assert plain(page)["object"] == "list"
    assert page.url == "/v1/customers"
    assert [c.id for c in page.data] == ids[::-1][:2]
    assert page.has_more is True
    assert [c.id for c in page.auto_paging_iter()] == ids[::-1]


def test_lists_filter_like_stripe(client: stripe.StripeClient) -> None:
    client.v1.customers.create(params={"email": "a@example.com"})
    wanted = client.v1.customers.create(params={"email": "b@example.com"})

    found = client.v1.customers.list(params={"email": "b@example.com"})

    assert [c.id for c in found.data] == [wanted.id]


def test_the_module_style_api_works_against_the_fake(module_style: FakeStripe) -> None:
    customer = stripe.Customer.create(email="ada@example.com", metadata={"order": "7"}, idempotency_key="create-1")
    stripe.Customer.modify(customer.id, name="Ada")

    assert stripe.Customer.retrieve(customer.id).name == "Ada"
    assert stripe.Customer.delete(customer.id).deleted is True
    assert module_style.calls("POST", "/v1/customers")[0].idempotency_key == "create-1"
    assert module_style.objects("customer") == []


# the wire format --------------------------------------------------------------------------------------------------
def test_nested_parameters_arrive_as_stripe_sends_them(client: stripe.StripeClient, fake: FakeStripe) -> None:
    customer = paying_customer(client)
    price = monthly_price(client)

    client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [{"price": price.id, "quantity": 2}],
            "metadata": {"run": "r1"},
            "expand": ["customer"],
        }
    )

    (call,) = fake.calls("POST", "/v1/subscriptions")
    assert call.params == {
        "customer": customer.id,
        "items": [{"price": price.id, "quantity": "2"}],
        "metadata": {"run": "r1"},
        "expand": ["customer"],
    }
    assert call.idempotency_key  # the SDK sends one with every POST, random when not given
    assert call.api_key == KEY
    assert call.stripe_version == stripe.api_version


def test_the_form_decoder_reads_rails_style_brackets() -> None:
    assert parse_form("expand[]=a&expand[]=b&items[0][price]=p&items[1][price]=q&metadata[0]=x&flag=") == {
        "expand": ["a", "b"],
        "items": [{"price": "p"}, {"price": "q"}],
        "metadata": {"0": "x"},
        "flag": "",
    }


def test_get_parameters_and_expand_travel_in_the_query_string(client: stripe.StripeClient, fake: FakeStripe) -> None:
    intent = succeeded_payment(client)

    fetched = client.v1.payment_intents.retrieve(intent.id, params={"expand": ["latest_charge"]})

    assert isinstance(fetched.latest_charge, stripe.Charge)
    assert fetched.latest_charge.amount == 2000
    (call,) = fake.calls("GET", "/v1/payment_intents/*")
    assert call.params == {"expand": ["latest_charge"]}
    assert call.idempotency_key is None


def test_unknown_parameters_are_refused_like_stripe(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.customers.create(params=cast(Any, {"nmae": "typo"}))

    assert refused.value.http_status == 400
    assert refused.value.code == "parameter_unknown"
    assert refused.value.param == "nmae"


def test_missing_required_parameters_are_refused_like_stripe(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.payment_intents.create(params=cast(Any, {"currency": "usd"}))

    assert refused.value.code == "parameter_missing"
    assert refused.value.param == "amount"


def test_every_answer_carries_a_request_id(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create()
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.v1.customers.retrieve("cus_missing")

    assert (response_of(customer).request_id or "").startswith("req_")
    assert missing.value.request_id is not None
    assert missing.value.request_id.startswith("req_")


def test_an_unknown_url_answers_404_unrecognized_request(fake: FakeStripe) -> None:
    client = stripe.StripeClient(KEY, base_addresses={"api": fake.base_url}, max_network_retries=0)

    with pytest.raises(stripe.InvalidRequestError) as unknown:
        client.raw_request("get", "/v1/nothing_here")

    assert unknown.value.http_status == 404
    assert "Unrecognized request URL (GET: /v1/nothing_here)" in (unknown.value.user_message or "")


# authentication ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("api_key", ["pk_test_publishable", "sk_live_real", "nonsense"])
def test_a_key_that_is_not_a_test_secret_key_is_refused_with_401(fake: FakeStripe, api_key: str) -> None:
    client = stripe.StripeClient(api_key, base_addresses={"api": fake.base_url}, max_network_retries=0)

    with pytest.raises(stripe.AuthenticationError) as refused:
        client.v1.customers.create()

    assert refused.value.http_status == 401
    assert (refused.value.user_message or "").startswith("Invalid API Key provided")
    assert fake.objects("customer") == []


def test_a_request_without_authorization_is_refused_with_401(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.AuthenticationError) as refused:  # the SDK always sends a key: blank it
        client.v1.customers.list(options={"headers": {"Authorization": ""}})

    assert (refused.value.user_message or "").startswith("You did not provide an API key")


# idempotency ------------------------------------------------------------------------------------------------------
def test_the_same_idempotency_key_replays_the_first_answer(client: stripe.StripeClient, fake: FakeStripe) -> None:
    params: stripe.params.CustomerCreateParams = {"email": "ada@example.com", "metadata": {"order": "42"}}
    first = client.v1.customers.create(params=params, options={"idempotency_key": "order-42"})

    again = client.v1.customers.create(params=params, options={"idempotency_key": "order-42"})

    assert again.id == first.id
    assert response_of(again).headers["Idempotent-Replayed"] == "true"
    assert response_of(again).headers["Original-Request"] == response_of(first).request_id
    assert len(fake.objects("customer")) == 1
    assert [c.replayed for c in fake.calls("POST", "/v1/customers")] == [False, True]


def test_an_error_answer_is_replayed_for_its_key_too(client: stripe.StripeClient, fake: FakeStripe) -> None:
    charge = client.v1.charges.create(params={"amount": 1000, "currency": "usd", "source": "tok_visa"})
    client.v1.refunds.create(params={"charge": charge.id})
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.refunds.create(params={"charge": charge.id}, options={"idempotency_key": "refund-again"})

    with pytest.raises(stripe.InvalidRequestError) as replayed:
        client.v1.refunds.create(params={"charge": charge.id}, options={"idempotency_key": "refund-again"})

    assert replayed.value.code == "charge_already_refunded"
    assert (replayed.value.headers or {})["Idempotent-Replayed"] == "true"


def test_a_validation_error_is_not_saved_so_the_key_can_be_reused(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as invalid:
        client.v1.customers.create(params={"email": "not-an-email"}, options={"idempotency_key": "k"})

    created = client.v1.customers.create(params={"email": "ada@example.com"}, options={"idempotency_key": "k"})

    assert invalid.value.code == "email_invalid"
    assert response_of(created).headers.get("Idempotent-Replayed") is None


def test_reusing_a_key_with_other_parameters_is_an_idempotency_error(
    client: stripe.StripeClient, fake: FakeStripe
) -> None:
    client.v1.customers.create(params={"email": "ada@example.com"}, options={"idempotency_key": "k"})

    with pytest.raises(stripe.IdempotencyError) as reused:
        client.v1.customers.create(params={"email": "bob@example.com"}, options={"idempotency_key": "k"})

    assert reused.value.http_status == 400
    assert reused.value.error is not None
    assert reused.value.error.type == "idempotency_error"
    assert "same parameters" in (reused.value.user_message or "")
    assert len(fake.objects("customer")) == 1


def test_reusing_a_key_on_another_endpoint_is_an_idempotency_error(client: stripe.StripeClient) -> None:
    client.v1.customers.create(options={"idempotency_key": "k"})

    with pytest.raises(stripe.IdempotencyError) as reused:
        client.v1.products.create(params={"name": "P"}, options={"idempotency_key": "k"})

    assert "same endpoint" in (reused.value.user_message or "")


def test_a_key_whose_first_request_is_still_running_answers_409(client: stripe.StripeClient, fake: FakeStripe) -> None:
    arrived, release = fake.hold("POST", "/v1/customers")
    results: list[stripe.Customer] = []
    first = threading.Thread(
        target=lambda: results.append(client.v1.customers.create(options={"idempotency_key": "slow"}))
    )
    first.start()
    assert arrived.wait(5)

    with pytest.raises(stripe.APIError) as in_use:  # the SDK maps a 409 to APIError
        client.v1.customers.create(options={"idempotency_key": "slow"})
    release.set()
    first.join(5)

    assert in_use.value.http_status == 409
    assert in_use.value.error is not None
    assert in_use.value.error.code == "idempotency_key_in_use"
    assert len(results) == 1
    assert client.v1.customers.create(options={"idempotency_key": "slow"}).id == results[0].id


def test_idempotency_keys_on_delete_have_no_effect_as_on_stripe(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create()
    client.v1.customers.delete(customer.id, options={"idempotency_key": "undo-1"})

    with pytest.raises(stripe.InvalidRequestError) as again:
        client.v1.customers.delete(customer.id, options={"idempotency_key": "undo-1"})

    assert again.value.http_status == 404
    assert again.value.code == "resource_missing"


def test_idempotency_keys_are_scoped_by_api_key(fake: FakeStripe) -> None:
    one = stripe.StripeClient("sk_test_one", base_addresses={"api": fake.base_url})
    two = stripe.StripeClient("sk_test_two", base_addresses={"api": fake.base_url})

    first = one.v1.customers.create(options={"idempotency_key": "same"})
    second = two.v1.customers.create(options={"idempotency_key": "same"})

    assert first.id != second.id


# subscriptions ----------------------------------------------------------------------------------------------------
def test_a_subscription_is_created_for_a_customer_with_a_payment_method(client: stripe.StripeClient) -> None:
    customer = paying_customer(client)
    price = monthly_price(client)

    subscription = client.v1.subscriptions.create(params={"customer": customer.id, "items": [{"price": price.id}]})

    assert subscription.id.startswith("sub_")
    assert subscription.status == "active"
    assert subscription.customer == customer.id
    (item,) = subscription["items"].data
    assert item.id.startswith("si_")
    assert item.price.id == price.id
    assert item.price.unit_amount == 1500


def test_a_subscription_needs_a_default_payment_method_as_on_stripe(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create(params={"email": "ada@example.com"})
    price = monthly_price(client)

    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.subscriptions.create(params={"customer": customer.id, "items": [{"price": price.id}]})
    trialing = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], "trial_period_days": 14}
    )

    assert refused.value.http_status == 400
    assert "no attached payment source or default payment method" in (refused.value.user_message or "")
    assert trialing.status == "trialing"


def test_a_subscription_cannot_use_a_one_time_or_archived_price(client: stripe.StripeClient) -> None:
    customer = paying_customer(client)
    product = client.v1.products.create(params={"name": "Setup fee"})
    one_time = client.v1.prices.create(params={"product": product.id, "currency": "usd", "unit_amount": 500})
    archived = monthly_price(client)
    client.v1.prices.update(archived.id, params={"active": False})

    for price in (one_time, archived):
        with pytest.raises(stripe.InvalidRequestError) as refused:
            client.v1.subscriptions.create(params={"customer": customer.id, "items": [{"price": price.id}]})
        assert refused.value.param == "items[0][price]"


def test_cancelling_a_subscription_with_delete_keeps_it_canceled(client: stripe.StripeClient, fake: FakeStripe) -> None:
    customer = paying_customer(client)
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": monthly_price(client).id}]}
    )

    canceled = client.v1.subscriptions.cancel(subscription.id)

    assert canceled.status == "canceled"
    assert canceled.canceled_at is not None
    assert client.v1.subscriptions.retrieve(subscription.id).status == "canceled"
    assert fake.calls("DELETE", f"/v1/subscriptions/{subscription.id}")
    assert client.v1.subscriptions.list().data == []  # Stripe lists the not-canceled ones by default
    assert [s.id for s in client.v1.subscriptions.list(params={"status": "canceled"}).data] == [subscription.id]


def test_cancelling_a_subscription_twice_answers_404_as_on_stripe(client: stripe.StripeClient) -> None:
    customer = paying_customer(client)
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": monthly_price(client).id}]}
    )
    client.v1.subscriptions.cancel(subscription.id)

    with pytest.raises(stripe.InvalidRequestError) as again:
        client.v1.subscriptions.cancel(subscription.id)

    assert again.value.http_status == 404
    assert again.value.code == "resource_missing"


def test_a_canceled_subscription_only_takes_metadata_updates(client: stripe.StripeClient) -> None:
    customer = paying_customer(client)
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": monthly_price(client).id}]}
    )
    client.v1.subscriptions.cancel(subscription.id)

    tagged = client.v1.subscriptions.update(subscription.id, params={"metadata": {"undone_by": "agentrein"}})
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.subscriptions.update(subscription.id, params={"cancel_at_period_end": True})

    assert plain(tagged.metadata) == {"undone_by": "agentrein"}
    assert "A canceled subscription can only update" in (refused.value.user_message or "")


def test_deleting_a_customer_cancels_its_subscriptions(client: stripe.StripeClient) -> None:
    customer = paying_customer(client)
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": monthly_price(client).id}]}
    )

    client.v1.customers.delete(customer.id)

    assert client.v1.subscriptions.retrieve(subscription.id).status == "canceled"


# payment intents, charges and refunds -----------------------------------------------------------------------------
def test_a_payment_intent_is_authorized_then_captured(client: stripe.StripeClient) -> None:
    intent = client.v1.payment_intents.create(
        params={"amount": 5000, "currency": "usd", "capture_method": "manual", "metadata": {"order": "9"}}
    )
    assert intent.id.startswith("pi_")
    assert intent.status == "requires_payment_method"

    authorized = client.v1.payment_intents.confirm(intent.id, params={"payment_method": "pm_card_visa"})
    assert authorized.status == "requires_capture"
    assert authorized.amount_capturable == 5000

    captured = client.v1.payment_intents.capture(intent.id, params={"amount_to_capture": 4000})
    assert captured.status == "succeeded"
    assert captured.amount_received == 4000
    charge = client.v1.charges.retrieve(str(captured.latest_charge))
    assert (charge.captured, charge.amount_captured, charge.amount_refunded) == (True, 4000, 1000)


def test_cancelling_an_authorized_payment_intent_releases_the_charge(client: stripe.StripeClient) -> None:
    intent = client.v1.payment_intents.create(
        params={
            "amount": 5000,
            "currency": "usd",
            "capture_method": "manual",
            "payment_method": "pm_card_visa",
            "confirm": True,
        }
    )

    canceled = client.v1.payment_intents.cancel(intent.id, params={"cancellation_reason": "abandoned"})

    assert (canceled.status, canceled.cancellation_reason) == ("canceled", "abandoned")
    assert client.v1.charges.retrieve(str(intent.latest_charge)).refunded is True


def test_a_succeeded_payment_intent_cannot_be_canceled(client: stripe.StripeClient) -> None:
    intent = succeeded_payment(client)

    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.payment_intents.cancel(intent.id)

    assert refused.value.code == "payment_intent_unexpected_state"
    assert "status of succeeded" in (refused.value.user_message or "")


def test_a_declined_card_raises_card_error_with_402(client: stripe.StripeClient, fake: FakeStripe) -> None:
    with pytest.raises(stripe.CardError) as declined:
        client.v1.payment_intents.create(
            params={"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined", "confirm": True}
        )

    assert declined.value.http_status == 402
    assert declined.value.code == "card_declined"
    assert declined.value.error is not None
    assert declined.value.error.decline_code == "generic_decline"
    (intent,) = fake.objects("payment_intent")
    assert intent["status"] == "requires_payment_method"
    assert [c["status"] for c in fake.objects("charge")] == ["failed"]


def test_a_charge_is_captured_and_can_be_refunded_only_once(client: stripe.StripeClient) -> None:
    charge = client.v1.charges.create(params={"amount": 1000, "currency": "usd", "source": "tok_visa"})
    assert charge.id.startswith("ch_")
    assert (charge.captured, charge.paid, charge.status) == (True, True, "succeeded")

    refund = client.v1.refunds.create(params={"charge": charge.id})
    assert refund.id.startswith("re_")
    assert (refund.amount, refund.status) == (1000, "succeeded")
    assert client.v1.charges.retrieve(charge.id).refunded is True

    with pytest.raises(stripe.InvalidRequestError) as again:
        client.v1.refunds.create(params={"charge": charge.id})
    assert again.value.http_status == 400
    assert again.value.code == "charge_already_refunded"


def test_a_partial_refund_leaves_the_rest_refundable(client: stripe.StripeClient) -> None:
    charge = client.v1.charges.create(params={"amount": 1000, "currency": "usd", "source": "tok_visa"})
    client.v1.refunds.create(params={"charge": charge.id, "amount": 300})

    with pytest.raises(stripe.InvalidRequestError) as too_much:
        client.v1.refunds.create(params={"charge": charge.id, "amount": 800})
    rest = client.v1.refunds.create(params={"charge": charge.id})

    assert too_much.value.param == "amount"
    assert rest.amount == 700
    assert client.v1.charges.retrieve(charge.id).amount_refunded == 1000


def test_a_payment_intent_is_refunded_through_its_charge(client: stripe.StripeClient, fake: FakeStripe) -> None:
    intent = succeeded_payment(client)

    refund = client.v1.refunds.create(params={"payment_intent": intent.id})

    assert refund.payment_intent == intent.id
    assert refund.charge == intent.latest_charge
    assert [r["id"] for r in fake.objects("refund")] == [refund.id]


def test_a_customer_without_a_card_cannot_be_charged(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create()

    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.charges.create(params={"amount": 1000, "currency": "usd", "customer": customer.id})

    assert refused.value.code == "missing"


# invoices ---------------------------------------------------------------------------------------------------------
def test_a_draft_invoice_can_be_deleted(client: stripe.StripeClient, fake: FakeStripe) -> None:
    invoice = client.v1.invoices.create(params={"customer": client.v1.customers.create().id})
    assert invoice.id.startswith("in_")
    assert invoice.status == "draft"

    deleted = client.v1.invoices.delete(invoice.id)

    assert deleted.to_dict() == {"id": invoice.id, "object": "invoice", "deleted": True}
    assert fake.objects("invoice") == []
    with pytest.raises(stripe.InvalidRequestError) as gone:
        client.v1.invoices.retrieve(invoice.id)
    assert gone.value.http_status == 404


def test_a_finalized_invoice_cannot_be_deleted_but_can_be_voided(client: stripe.StripeClient) -> None:
    customer = client.v1.customers.create()
    invoice = client.v1.invoices.create(params={"customer": customer.id})
    client.v1.invoice_items.create(
        params={"customer": customer.id, "invoice": invoice.id, "amount": 2500, "currency": "usd"}
    )

    finalized = client.v1.invoices.finalize_invoice(invoice.id)
    assert (finalized.status, finalized.amount_due, finalized.total) == ("open", 2500, 2500)
    assert finalized.number is not None
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.invoices.delete(invoice.id)
    assert refused.value.http_status == 400

    voided = client.v1.invoices.void_invoice(invoice.id)
    assert voided.status == "void"


def test_finalizing_an_invoice_with_nothing_due_marks_it_paid_as_on_stripe(client: stripe.StripeClient) -> None:
    invoice = client.v1.invoices.create(params={"customer": client.v1.customers.create().id})

    finalized = client.v1.invoices.finalize_invoice(invoice.id)

    assert finalized.status == "paid"
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.invoices.void_invoice(invoice.id)
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.invoices.finalize_invoice(invoice.id)


# coupons, products and prices -------------------------------------------------------------------------------------
def test_coupons_take_a_given_or_random_id_and_are_deleted(client: stripe.StripeClient, fake: FakeStripe) -> None:
    named = client.v1.coupons.create(params={"id": "SPRING25", "percent_off": 25, "duration": "once"})
    unnamed = client.v1.coupons.create(params={"amount_off": 500, "currency": "usd"})

    assert named.id == "SPRING25"
    assert named.percent_off == 25
    assert len(unnamed.id) == 8
    assert client.v1.coupons.delete("SPRING25").deleted is True
    assert [c["id"] for c in fake.objects("coupon")] == [unnamed.id]
    with pytest.raises(stripe.InvalidRequestError) as duplicate:
        client.v1.coupons.create(params={"id": unnamed.id, "percent_off": 10})
    assert duplicate.value.code == "resource_already_exists"


def test_products_and_prices_are_archived_with_active_false(client: stripe.StripeClient) -> None:
    product = client.v1.products.create(params={"name": "Widget"})
    price = client.v1.prices.create(params={"product": product.id, "currency": "usd", "unit_amount": 900})
    assert product.id.startswith("prod_")
    assert price.id.startswith("price_")
    assert (price.type, price.unit_amount, price.product) == ("one_time", 900, product.id)

    client.v1.prices.update(price.id, params={"active": False})
    client.v1.products.update(product.id, params={"active": False})

    assert client.v1.prices.retrieve(price.id).active is False
    assert client.v1.products.retrieve(product.id).active is False
    assert client.v1.prices.list(params={"active": True}).data == []


def test_a_product_with_prices_cannot_be_deleted(client: stripe.StripeClient) -> None:
    product = client.v1.products.create(params={"name": "Widget"})
    client.v1.prices.create(params={"product": product.id, "currency": "usd", "unit_amount": 900})
    bare = client.v1.products.create(params={"name": "Bare"})

    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.products.delete(product.id)

    assert "has one or more user-created prices" in (refused.value.user_message or "")
    assert client.v1.products.delete(bare.id).deleted is True


def test_a_price_for_an_unknown_product_is_refused_with_400(client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.prices.create(params={"product": "prod_missing", "currency": "usd", "unit_amount": 900})

    assert refused.value.http_status == 400  # a missing object named in a parameter: 400, not 404
    assert (refused.value.code, refused.value.param) == ("resource_missing", "product")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/customers/cus_missing", "customer"),
        ("/v1/subscriptions/sub_missing", "subscription"),
        ("/v1/payment_intents/pi_missing", "payment_intent"),
        ("/v1/charges/ch_missing", "charge"),
        ("/v1/refunds/re_missing", "refund"),
        ("/v1/invoices/in_missing", "invoice"),
        ("/v1/coupons/missing", "coupon"),
        ("/v1/products/prod_missing", "product"),
        ("/v1/prices/price_missing", "price"),
    ],
)
def test_an_unknown_id_answers_404_resource_missing(client: stripe.StripeClient, path: str, name: str) -> None:
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.raw_request("get", path)

    assert missing.value.http_status == 404
    assert missing.value.code == "resource_missing"
    assert missing.value.user_message == f"No such {name}: '{path.rsplit('/', 1)[1]}'"


# faults -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "exception"),
    [
        (400, stripe.InvalidRequestError),
        (402, stripe.CardError),
        (404, stripe.InvalidRequestError),
        (409, stripe.APIError),
        (429, stripe.RateLimitError),
        (500, stripe.APIError),
        (503, stripe.APIError),
    ],
)
def test_an_injected_status_raises_the_sdk_exception_for_it(
    client: stripe.StripeClient, fake: FakeStripe, status: int, exception: type[stripe.StripeError]
) -> None:
    fake.fail_next("POST", "/v1/customers", status)

    with pytest.raises(exception) as failed:
        client.v1.customers.create()

    assert failed.value.http_status == status
    assert fake.objects("customer") == []  # failed before the effect
    assert fake.calls("POST", "/v1/customers")[0].status == status
    assert client.v1.customers.create().id  # only the next request failed


def test_a_response_lost_after_the_effect_replays_on_retry_with_the_same_key(
    client: stripe.StripeClient, fake: FakeStripe
) -> None:
    fake.fail_next("POST", "/v1/customers", 500, after_effect=True)
    with pytest.raises(stripe.APIError):
        client.v1.customers.create(params={"email": "ada@example.com"}, options={"idempotency_key": "once"})
    (created,) = fake.objects("customer")  # it happened, the client never learned

    retried = client.v1.customers.create(params={"email": "ada@example.com"}, options={"idempotency_key": "once"})

    assert retried.id == created["id"]
    assert response_of(retried).headers["Idempotent-Replayed"] == "true"
    assert len(fake.objects("customer")) == 1


def test_the_sdks_own_retry_replays_a_dropped_response_instead_of_acting_twice(fake: FakeStripe) -> None:
    client = stripe.StripeClient(KEY, base_addresses={"api": fake.base_url}, max_network_retries=1)
    fake.fail_next("POST", "/v1/refunds", None, after_effect=True)
    charge = client.v1.charges.create(params={"amount": 1000, "currency": "usd", "source": "tok_visa"})

    refund = client.v1.refunds.create(params={"charge": charge.id})  # no key given: the SDK made one

    first, second = fake.calls("POST", "/v1/refunds")
    assert first.idempotency_key == second.idempotency_key
    assert (first.status, second.status, second.replayed) == (None, 200, True)
    assert [r["id"] for r in fake.objects("refund")] == [refund.id]


def test_a_dropped_connection_raises_api_connection_error(client: stripe.StripeClient, fake: FakeStripe) -> None:
    fake.fail_next("DELETE", "/v1/customers/*", None)
    customer = client.v1.customers.create()

    with pytest.raises(stripe.APIConnectionError):
        client.v1.customers.delete(customer.id)

    assert [c["id"] for c in fake.objects("customer")] == [customer.id]


def test_an_injected_fault_can_override_the_error_body(client: stripe.StripeClient, fake: FakeStripe) -> None:
    fake.fail_next("POST", "/v1/charges", 402, code="expired_card", message="Your card has expired.")

    with pytest.raises(stripe.CardError) as failed:
        client.v1.charges.create(params={"amount": 1000, "currency": "usd", "source": "tok_visa"})

    assert (failed.value.code, failed.value.user_message) == ("expired_card", "Your card has expired.")
