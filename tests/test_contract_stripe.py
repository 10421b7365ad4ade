"""The stripe connector keeps the connector contract (agentrein_testing), against the fake of Stripe."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import stripe

from agentrein_core.connector import Connector
from agentrein_core.statuses import OperationType
from agentrein_stripe import StripeConnector
from agentrein_testing import ConnectorContract, FakeStripe, Sample

CREATE = Sample(
    ("v1", "customers", "create"),
    kwargs={"params": {"email": "a@example.com"}},
    api_name="customers.create",
    operation_type=OperationType.CREATE,
    undo_type="stripe-delete",
)


class TestStripeConnector(ConnectorContract):
    samples = (
        CREATE,
        Sample(
            ("v1", "coupons", "create"),
            kwargs={"params": {"percent_off": 5, "duration": "once"}},
            api_name="coupons.create",
            operation_type=OperationType.CREATE,
            undo_type="stripe-delete",
        ),
        Sample(
            ("v1", "products", "create"),
            kwargs={"params": {"name": "Plan"}},
            api_name="products.create",
            operation_type=OperationType.CREATE,
            undo_type="stripe-restore",
        ),
        Sample(
            ("v1", "charges", "create"),
            kwargs={"params": {"amount": 100, "currency": "eur", "source": "tok_visa"}},
            api_name="charges.create",
            operation_type=OperationType.CREATE,
            undo_type="stripe-refund",
        ),
        Sample(("v1", "customers", "list")),
        Sample(("v1", "customers", "search"), kwargs={"params": {"query": "email:'a@example.com'"}}),
    )
    create = CREATE
    transient_errors = (
        stripe.APIConnectionError("reset"),
        stripe.APIError("down", http_status=503),
    )
    permanent_errors = (stripe.IdempotencyError("other parameters", http_status=400),)
    secret = Sample(
        ("v1", "customers", "create"),
        kwargs={"params": {"email": "b@example.com", "metadata": {"api_key": "sk_live_leaked"}}},
        api_name="customers.create",
    )
    secret_value = "sk_live_leaked"

    @pytest.fixture
    def connector(self) -> Connector:
        return StripeConnector()

    @pytest.fixture
    def service(self) -> Iterator[FakeStripe]:
        with FakeStripe().running() as fake:
            yield fake

    @pytest.fixture
    def client(self, service: FakeStripe) -> stripe.StripeClient:
        return stripe.StripeClient("sk_test_contract", base_addresses={"api": service.base_url}, max_network_retries=0)

    def exists(self, service: Any, result: Any) -> bool:
        return any(c["id"] == result.id for c in service.objects("customer"))

    def idempotency_keys(self, service: Any) -> list[str | None]:
        return [c.idempotency_key for c in service.calls()]

    def count(self, service: Any) -> int:
        return len(service.objects("customer"))

    def lose_next_answer(self, service: Any) -> None:
        service.fail_next("POST", "/v1/customers", status=500, after_effect=True)
