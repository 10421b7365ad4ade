"""The http connector keeps the connector contract (agentrein_testing), against the loopback fake service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentrein_core.connector import Connector
from agentrein_core.statuses import OperationType
from agentrein_http import HttpConnector
from agentrein_testing import ConnectorContract, FakeService, Sample

CREATE = Sample(
    ("post",),
    ("/v1/orders",),
    {"json": {"sku": "A1"}},
    api_name="POST /v1/orders",
    operation_type=OperationType.CREATE,
    undo_type="http-delete",
)


class TestHttpConnector(ConnectorContract):
    samples = (
        CREATE,
        Sample(
            ("put",),
            ("/v1/orders/o1",),
            {"json": {}},
            api_name="PUT /v1/orders/o1",
            operation_type=OperationType.UPDATE,
        ),
        Sample(("delete",), ("/v1/orders/o1",), api_name="DELETE /v1/orders/o1", operation_type=OperationType.DELETE),
        Sample(("get",), ("/v1/orders",)),
        Sample(("head",), ("/v1/orders",)),
    )
    create = CREATE
    transient_errors = (
        httpx.ConnectError("refused"),
        httpx.HTTPStatusError("busy", request=httpx.Request("POST", "http://x"), response=httpx.Response(503)),
    )
    permanent_errors = (
        httpx.HTTPStatusError("bad", request=httpx.Request("POST", "http://x"), response=httpx.Response(400)),
    )
    secret = Sample(("post",), ("/v1/orders",), {"json": {"password": "hunter2"}}, api_name="POST /v1/orders")
    secret_value = "hunter2"

    @pytest.fixture
    def connector(self) -> Connector:
        return HttpConnector()

    @pytest.fixture
    def client(self, service: FakeService) -> Iterator[httpx.Client]:
        with httpx.Client(base_url=service.base_url) as client:
            yield client

    def exists(self, service: Any, result: Any) -> bool:
        return str(result.json()["id"]) in service.collection("orders")

    def idempotency_keys(self, service: Any) -> list[str | None]:
        return [r.idempotency_key for r in service.requests]

    def count(self, service: Any) -> int:
        return len(service.collection("orders"))

    def lose_next_answer(self, service: Any) -> None:
        service.fail_next("POST", "/v1/orders", status=502, after_effect=True)
