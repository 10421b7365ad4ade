"""The stripe connector: the real stripe-python SDK, wrapped, against a stateful fake of Stripe on loopback.
Each scenario runs embedded (inverses through the wrapped client) and through a server (inverses run by the
server with the organisation's stored Stripe key)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx
import pytest
import stripe
from serving import RunningServer

from agentrein import ActionStatus, AgentRein, ApprovalPurpose, DisplayStatus, UndoStatus
from agentrein_core.connector import Undoable, UndoOutlook
from agentrein_core.model import Action
from agentrein_core.statuses import OperationType
from agentrein_stripe import StripeConnector
from agentrein_testing import FakeStripe

KEY = "sk_test_agentrein"


@pytest.fixture
def fake() -> Iterator[FakeStripe]:
    with FakeStripe().running() as running:
        yield running


@pytest.fixture(params=["embedded", "server"])
def ar(request: pytest.FixtureRequest, database_url: str, fake: FakeStripe) -> Iterator[AgentRein]:
    """AgentRein embedded, or through a server whose organisation has enabled the stripe connector."""
    if request.param == "embedded":
        import uuid

        client = AgentRein(database_url, organisation=f"stripe-{uuid.uuid4().hex[:8]}")
    else:
        server: RunningServer = request.getfixturevalue("server")
        tenant = server.tenant()
        settings = {"enabled": True, "config": {"apiBase": fake.base_url}, "credentials": {"apiKey": KEY}}
        headers = {"Authorization": f"Bearer {tenant.key}"}
        assert httpx.put(f"{tenant.url}/connectors/stripe", json=settings, headers=headers).status_code == 200
        client = tenant.client()
    yield client
    client.close()


def stripe_client(fake: FakeStripe) -> stripe.StripeClient:
    return stripe.StripeClient(KEY, base_addresses={"api": fake.base_url}, max_network_retries=0)


def wrapped(ar: AgentRein, fake: FakeStripe, **options: Any) -> tuple[stripe.StripeClient, str]:
    session = ar.new_session(agent_id="billing-agent", intent="onboard a customer")
    return ar.wrap(stripe_client(fake), session, connector="stripe", **options), session.id


def test_a_wrapped_client_is_still_a_stripe_client_and_reads_pass_through(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    assert isinstance(client, stripe.StripeClient)
    created = client.v1.customers.create(params={"email": "a@example.com"})
    assert isinstance(created, stripe.Customer)  # returned data is the SDK's own object, not a proxy
    assert client.v1.customers.retrieve(created.id).email == "a@example.com"
    assert [c.id for c in client.v1.customers.list().auto_paging_iter()] == [created.id]
    (action,) = ar.get_session(session_id).actions
    assert (action.api_name, action.status) == ("customers.create", ActionStatus.SUCCESS)
    assert action.payload == {"params": {"email": "a@example.com"}}
    assert action.undo is not None and action.undo.type == "stripe-delete"


def test_a_failed_run_is_undone_last_first_with_the_right_inverse_for_each(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "a@example.com", "source": "tok_visa"})
    product = client.v1.products.create(params={"name": "Team plan"})
    price = client.v1.prices.create(
        params={"product": product.id, "unit_amount": 4900, "currency": "eur", "recurring": {"interval": "month"}}
    )
    subscription = client.v1.subscriptions.create(params={"customer": customer.id, "items": [{"price": price.id}]})
    coupon = client.v1.coupons.create(params={"percent_off": 10, "duration": "once"})
    fake.fail_next("POST", "/v1/invoices", status=400, message="the agent got something wrong")
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.invoices.create(params={"customer": customer.id})
    session = ar.get_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 5 + [ActionStatus.FAILED]
    assert fake.get(coupon.id) is None
    assert (fake.get(subscription.id) or {}).get("status") == "canceled"
    assert (fake.get(price.id) or {}).get("active") is False
    assert (fake.get(product.id) or {}).get("active") is False
    assert fake.objects("customer") == []
    undo_calls = [
        (c.method, c.path.split("/")[2]) for c in fake.calls() if c.method == "DELETE" or "active" in c.params
    ]
    assert undo_calls == [
        ("DELETE", "coupons"),
        ("DELETE", "subscriptions"),
        ("POST", "prices"),
        ("POST", "products"),
        ("DELETE", "customers"),
    ]


def test_an_update_is_undone_by_restoring_what_it_changed(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "old@example.com", "metadata": {"tier": "gold"}})
    client.v1.customers.update(customer.id, params={"email": "new@example.com", "metadata": {"tier": "x", "vip": "1"}})
    ar.rollback_session(session_id)
    assert fake.objects("customer") == []  # the create is undone too, last
    _agents_update, restore = fake.calls("POST", f"/v1/customers/{customer.id}")
    assert restore.params == {"email": "old@example.com", "metadata": {"tier": "gold", "vip": ""}}


def test_refunding_a_charge_waits_for_a_reviewer(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    charge = client.v1.charges.create(params={"amount": 2000, "currency": "eur", "source": "tok_visa"})
    rolled = threading.Thread(target=ar.rollback_session, args=(session_id,), kwargs={"timeout_ms": 30_000})
    rolled.start()
    while not (pending := ar.list_approvals(status="PENDING")):
        threading.Event().wait(0.05)
    assert pending[0].purpose is ApprovalPurpose.ROLLBACK and pending[0].api_name == "charges.create"
    assert fake.objects("refund") == []  # nothing moved before the reviewer said so
    ar.approve(pending[0].approval_id, reviewer="finance@example.com")
    rolled.join(timeout=30)
    (refund,) = fake.objects("refund")
    assert refund["charge"] == charge.id
    (action,) = ar.get_session(session_id).actions
    assert (action.status, action.undo_status) == (ActionStatus.ROLLED_BACK, UndoStatus.DONE)


def test_a_finalized_invoice_is_voided_on_rollback(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "a@example.com"})
    invoice = client.v1.invoices.create(
        params={"customer": customer.id, "collection_method": "send_invoice", "days_until_due": 30}
    )
    client.v1.invoice_items.create(
        params={"customer": customer.id, "invoice": invoice.id, "amount": 500, "currency": "eur"}
    )
    client.v1.invoices.finalize_invoice(invoice.id)
    session = ar.rollback_session(session_id)
    assert (fake.get(invoice.id) or {}).get("status") == "void"
    assert fake.objects("customer") == []
    # the invoice item has no inverse of its own (it goes with its voided invoice): left SUCCESS, skipped
    assert [a.api_name for a in session.actions if a.undo_status is UndoStatus.SKIPPED] == ["invoice_items.create"]
    assert session.display_status is DisplayStatus.PARTIALLY_REVERTED


def test_a_retried_update_whose_answer_was_lost_restores_what_was_there_before_its_first_attempt(
    ar: AgentRein, fake: FakeStripe
) -> None:
    customer = stripe_client(fake).v1.customers.create(params={"email": "old@example.com"})
    client, session_id = wrapped(ar, fake, retryable=["customers.update"])
    fake.fail_next("POST", f"/v1/customers/{customer.id}", status=500, after_effect=True)
    client.v1.customers.update(customer.id, params={"email": "new@example.com"})
    (action,) = ar.get_session(session_id).actions
    assert action.undo is not None and action.undo.params["params"] == {"email": "old@example.com"}
    ar.rollback_session(session_id)
    assert fake.get(customer.id)["email"] == "old@example.com"  # type: ignore[index]


def test_an_updates_undo_leaves_out_a_secret_it_could_not_keep_and_says_so(ar: AgentRein, fake: FakeStripe) -> None:
    """Its record is redacted: restored as stored, the marker would be written over the customer's own value."""
    customer = stripe_client(fake).v1.customers.create(
        params={"email": "old@example.com", "metadata": {"api_key": "k_old", "tier": "gold"}}
    )
    client, session_id = wrapped(ar, fake)
    client.v1.customers.update(
        customer.id, params={"email": "new@example.com", "metadata": {"api_key": "k_new", "tier": "x"}}
    )
    (action,) = ar.get_session(session_id).actions
    assert StripeConnector().describe_undo(action) == (
        f"Restore email, metadata of Stripe customer {customer.id} as they were "
        "(metadata.api_key held a secret, which AgentRein does not keep: not restored)"
    )
    ar.rollback_session(session_id)
    assert ar.get_session(session_id).actions[0].status is ActionStatus.ROLLED_BACK
    _agents_update, restore = fake.calls("POST", f"/v1/customers/{customer.id}")
    assert restore.params == {"email": "old@example.com", "metadata": {"tier": "gold"}}


def test_an_update_that_changed_only_secrets_is_recorded_with_no_undo_saying_why(
    ar: AgentRein, fake: FakeStripe
) -> None:
    customer = stripe_client(fake).v1.customers.create(params={"metadata": {"api_key": "k_old"}})
    client, session_id = wrapped(ar, fake)
    client.v1.customers.update(customer.id, params={"metadata": {"api_key": "k_new"}})
    (action,) = ar.get_session(session_id).actions
    assert action.undo is not None and action.undo.is_none
    assert action.undo.params["why"] == (
        "metadata.api_key held a secret, which AgentRein does not keep, so no undo can restore what it changed"
    )


def test_a_retried_create_whose_answer_was_lost_makes_one_customer(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake, retryable=["customers.create"])
    fake.fail_next("POST", "/v1/customers", status=500, after_effect=True)
    client.v1.customers.create(params={"email": "a@example.com"})
    assert len(fake.objects("customer")) == 1
    first, retry = fake.calls("POST", "/v1/customers")
    (action,) = ar.get_session(session_id).actions
    assert first.idempotency_key == retry.idempotency_key == action.idempotency_key
    assert retry.replayed


def test_the_legacy_module_style_is_recorded_and_undone(
    ar: AgentRein, fake: FakeStripe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stripe, "api_key", KEY)
    monkeypatch.setattr(stripe, "api_base", fake.base_url)
    monkeypatch.setattr(stripe, "max_network_retries", 0)
    session = ar.new_session(agent_id="legacy-agent", intent="old code")
    module = ar.wrap(stripe, session, connector="stripe")
    customer = module.Customer.create(email="a@example.com")
    module.Customer.modify(customer.id, email="b@example.com")
    assert [a.api_name for a in ar.get_session(session).actions] == ["customers.create", "customers.update"]
    ar.rollback_session(session)
    assert fake.objects("customer") == []


def test_async_methods_are_recorded_too(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)

    async def agent() -> str:
        created = await client.v1.customers.create_async(params={"email": "a@example.com"})
        return str(created.id)

    customer_id = asyncio.run(agent())
    (action,) = ar.get_session(session_id).actions
    assert (action.api_name, action.response and action.response["id"]) == ("customers.create", customer_id)


def test_secrets_never_reach_the_store(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    intent = client.v1.payment_intents.create(params={"amount": 100, "currency": "eur"})
    assert intent.client_secret
    (action,) = ar.get_session(session_id).actions
    assert intent.client_secret not in repr(action)
    assert action.response is not None and action.response["client_secret"] == "[REDACTED]"


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (stripe.APIConnectionError("reset"), True),
        (stripe.RateLimitError("slow down", http_status=429), True),
        (stripe.APIError("boom", http_status=502), True),
        (stripe.APIError("in use", http_status=409, json_body={"error": {"code": "idempotency_key_in_use"}}), True),
        (stripe.IdempotencyError("other params", http_status=400), False),
        (stripe.CardError("declined", None, "card_declined", http_status=402), False),
        (stripe.InvalidRequestError("no such customer", "id", code="resource_missing", http_status=404), False),
    ],
)
def test_what_is_worth_retrying(error: Exception, transient: bool) -> None:
    assert StripeConnector().is_transient(error) is transient


def test_the_deprecated_service_paths_are_recorded_under_the_same_names(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    with pytest.warns(DeprecationWarning):
        services = client.customers
    services.create(params={"email": "a@example.com"})
    assert [a.api_name for a in ar.get_session(session_id).actions] == ["customers.create"]
    ar.rollback_session(session_id)
    assert fake.objects("customer") == []


def test_a_payment_intent_not_yet_paid_is_cancelled_and_a_subscription_update_restored(
    ar: AgentRein, fake: FakeStripe
) -> None:
    client, session_id = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "a@example.com", "source": "tok_visa"})
    price = client.v1.prices.create(
        params={
            "product_data": {"name": "Team"},
            "unit_amount": 900,
            "currency": "eur",
            "recurring": {"interval": "month"},
        }
    )
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], "metadata": {"seats": "5"}}
    )
    client.v1.subscriptions.update(subscription.id, params={"metadata": {"seats": "50"}})
    intent = client.v1.payment_intents.create(params={"amount": 500, "currency": "eur"})
    ar.rollback_session(session_id)
    assert (fake.get(intent.id) or {}).get("status") == "canceled"
    restored = next(c for c in reversed(fake.calls("POST", f"/v1/subscriptions/{subscription.id}")))
    assert restored.params == {"metadata": {"seats": "5"}}
    assert (fake.get(subscription.id) or {}).get("status") == "canceled"


@pytest.mark.parametrize(
    "undo",
    [
        {"type": "stripe-delete", "resource": "accounts", "id": "acct_1Platform"},
        {"type": "stripe-delete", "resource": "webhook_endpoints", "id": "we_1"},
        {"type": "stripe-restore", "resource": "customers", "id": "cus_1", "params": {"invoice_settings": {}}},
        {"type": "stripe-restore", "resource": "prices", "id": "price_1", "params": {"unit_amount": 1}},
        {"type": "stripe-delete", "resource": "customers", "id": "cus_1/../../accounts/acct_1"},
        {"type": "stripe-refund", "charge": "ch_1", "requireApproval": False},
    ],
)
def test_a_server_refuses_an_undo_outside_what_the_connector_means(
    server: RunningServer, undo: dict[str, object]
) -> None:
    tenant = server.tenant()
    api = httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"})
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    body = {"connector": "stripe", "apiName": "customers.create", "operationType": "CREATE", "payload": {}}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    refused = api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "undo": undo})
    assert refused.status_code == 400, refused.text


def test_legacy_class_helpers_pass_through_and_isinstance_holds(
    ar: AgentRein, fake: FakeStripe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stripe, "api_key", KEY)
    monkeypatch.setattr(stripe, "api_base", fake.base_url)
    session = ar.new_session(agent_id="legacy-agent", intent="old code")
    module = ar.wrap(stripe, session, connector="stripe")
    assert module.Customer.class_url() == "/v1/customers"
    assert ar.get_session(session).actions == []


def test_an_update_of_nothing_restorable_is_recorded_without_an_undo(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "a@example.com"})
    client.v1.customers.update(customer.id, params={"source": "tok_visa"})  # a new card: not taken back
    update = ar.get_session(session_id).actions[1]
    assert (update.status, update.undo and update.undo.type) == (ActionStatus.SUCCESS, "none")


def test_an_undo_goes_to_the_connected_account_the_call_went_to(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    client.v1.coupons.create(params={"percent_off": 5, "duration": "once"}, options={"stripe_account": "acct_123"})
    (action,) = ar.get_session(session_id).actions
    assert action.undo is not None and action.undo.params["stripe_account"] == "acct_123"


def test_a_client_made_for_a_connected_account_has_its_calls_undone_and_snapshot_in_that_account(
    ar: AgentRein, fake: FakeStripe
) -> None:
    session = ar.new_session(agent_id="billing-agent", intent="onboard a customer")
    connected = stripe.StripeClient(
        KEY, stripe_account="acct_123", base_addresses={"api": fake.base_url}, max_network_retries=0
    )
    client = ar.wrap(connected, session, connector="stripe")
    customer = client.v1.customers.create(params={"email": "a@example.com"})
    client.v1.customers.update(customer.id, params={"email": "b@example.com"})
    created, updated = ar.get_session(session).actions
    assert created.payload["options"] == {"stripe_account": "acct_123"}
    assert created.undo is not None and created.undo.params["stripe_account"] == "acct_123"
    assert updated.undo is not None and updated.undo.params["stripe_account"] == "acct_123"
    (snapshot,) = [c for c in fake.calls("GET") if c.path == f"/v1/customers/{customer.id}"]
    assert snapshot.account == "acct_123"


def test_an_update_in_a_connected_account_is_snapshot_in_that_account(ar: AgentRein, fake: FakeStripe) -> None:
    client, _ = wrapped(ar, fake)
    customer = client.v1.customers.create(params={"email": "a@example.com"}, options={"stripe_account": "acct_123"})
    client.v1.customers.update(customer.id, params={"email": "b@example.com"}, options={"stripe_account": "acct_123"})
    (snapshot,) = [c for c in fake.calls("GET") if c.path == f"/v1/customers/{customer.id}"]
    assert snapshot.account == "acct_123"


def test_a_confirmed_payment_intent_is_refunded_after_approval_not_cancelled(ar: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(ar, fake)
    intent = client.v1.payment_intents.create(params={"amount": 700, "currency": "eur"})
    client.v1.payment_intents.confirm(intent.id, params={"payment_method": "pm_card_visa"})
    confirm = ar.get_session(session_id).actions[1]
    assert confirm.undo is not None and (confirm.undo.type, confirm.undo.require_approval) == ("stripe-refund", True)


def test_raw_requests_and_nested_legacy_classes_are_recorded_too(
    ar: AgentRein, fake: FakeStripe, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, session_id = wrapped(ar, fake)
    client.raw_request("post", "/v1/customers", email="raw@example.com")
    assert [a.api_name for a in ar.get_session(session_id).actions] == ["raw_request POST /v1/customers"]
    monkeypatch.setattr(stripe, "api_key", KEY)
    monkeypatch.setattr(stripe, "api_base", fake.base_url)
    monkeypatch.setattr(stripe, "max_network_retries", 0)
    session = ar.new_session(agent_id="legacy-agent", intent="checkout")
    module = ar.wrap(stripe, session, connector="stripe")
    with pytest.raises(stripe.StripeError):  # the fake has no checkout: what matters is that it was recorded
        module.checkout.Session.create(mode="payment", success_url="https://example.com")
    (action,) = ar.get_session(session).actions
    assert (action.api_name, action.status) == ("checkout.sessions.create", ActionStatus.FAILED)


def test_a_customer_create_and_its_undo_are_described_in_words(agentrein: AgentRein, fake: FakeStripe) -> None:
    client, session_id = wrapped(agentrein, fake)
    customer = client.v1.customers.create(params={"email": "ada@example.com"})
    client.v1.customers.update(customer.id, params={"name": "Ada"})
    created, updated = agentrein.get_session(session_id).actions
    connector = StripeConnector()
    assert connector.describe(created) == "Create Stripe customer ada@example.com"
    assert connector.describe_undo(created) == f"Delete Stripe customer {customer.id}"
    assert connector.foresee_undo(attrs.evolve(created, undo=None)) == UndoOutlook(
        Undoable.YES, "Delete the customer it creates"
    )
    assert connector.describe(updated) == f"Update Stripe customer {customer.id}: name"
    assert connector.describe_undo(updated) == f"Restore name of Stripe customer {customer.id} as they were"


def test_a_refund_is_foreseen_as_money_that_cannot_be_called_back() -> None:
    now = datetime.now(UTC)
    payload = {"params": {"charge": "ch_1", "amount": 4200, "currency": "usd"}}
    refund = Action("act_1", "ses_1", "org", 1, "stripe", "refunds.create", OperationType.CREATE, payload,
                    ActionStatus.PENDING_APPROVAL, "key-1", now, now)  # fmt: skip
    connector = StripeConnector()
    assert connector.describe(refund) == "Create Stripe refund of 42.00 USD for charge ch_1"
    assert connector.foresee_undo(refund) == UndoOutlook(
        Undoable.NO, "money that left cannot be called back by an API call"
    )
