"""The http connector on its own, against respx routes (no socket): what it records and how it undoes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from agentrein_core.errors import UndoError, ValidationError
from agentrein_core.model import UndoConfig
from agentrein_core.statuses import OperationType
from agentrein_http import HttpConnector

connector = HttpConnector()


@pytest.mark.parametrize(
    ("method", "operation"),
    [
        ("post", OperationType.CREATE),
        ("put", OperationType.UPDATE),
        ("patch", OperationType.UPDATE),
        ("delete", OperationType.DELETE),
    ],
)
def test_mutating_methods_are_classified(method: str, operation: OperationType) -> None:
    client = httpx.Client(base_url="https://api.test")
    args: tuple[str, ...] = ("/v1/items/7?verbose=1",)
    call = connector.prepare(client, (method,), args, {} if method == "delete" else {"json": {}})
    assert call is not None
    assert (call.api_name, call.operation_type) == (f"{method.upper()} /v1/items/7", operation)


@pytest.mark.parametrize("path", [("get",), ("head",), ("options",), ("close",), ("build_request",)])
def test_reads_and_helpers_pass_through(path: tuple[str, ...]) -> None:
    assert connector.prepare(httpx.Client(), path, ("https://api.test/x",), {}) is None


def test_a_request_in_method_form_is_classified_by_its_method() -> None:
    client = httpx.Client()
    assert connector.prepare(client, ("request",), ("GET", "https://a.test/x"), {}) is None
    call = connector.prepare(client, ("request",), ("DELETE", "https://a.test/x/1"), {})
    assert call is not None and call.operation_type is OperationType.DELETE


def test_streamed_writes_are_refused_rather_than_passed_through_unrecorded() -> None:
    with pytest.raises(ValidationError, match=r"use client\.request"):
        connector.prepare(httpx.Client(), ("stream",), ("POST", "https://a.test/x"), {})


@respx.mock
def test_run_puts_the_idempotency_key_on_every_attempt() -> None:
    route = respx.post("https://api.test/v1/items").mock(return_value=httpx.Response(201, json={"id": "i1"}))
    call = connector.prepare(httpx.Client(), ("post",), ("https://api.test/v1/items",), {"json": {"a": 1}})
    assert call is not None
    call.run("key-1")
    call.run("key-1")
    assert [c.request.headers["Idempotency-Key"] for c in route.calls] == ["key-1", "key-1"]


@respx.mock
def test_undo_of_an_async_client_is_awaitable_and_counts_404_as_done() -> None:
    respx.delete("https://api.test/v1/items/i1").mock(return_value=httpx.Response(404))
    undo = UndoConfig("http-delete", {"url": "https://api.test/v1/items/i1"})

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            await connector.run_undo(undo, client, "k-undo")

    asyncio.run(run())
    assert respx.calls.last.request.headers["Idempotency-Key"] == "k-undo"


@respx.mock
def test_an_undo_refused_by_the_service_is_an_undo_error() -> None:
    respx.delete("https://api.test/v1/items/i1").mock(return_value=httpx.Response(409))
    with pytest.raises(UndoError, match="answered 409"):
        connector.run_undo(UndoConfig("http-delete", {"url": "https://api.test/v1/items/i1"}), httpx.Client(), "k")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (
            httpx.HTTPStatusError("x", request=httpx.Request("POST", "https://a.test"), response=httpx.Response(503)),
            True,
        ),
        (
            httpx.HTTPStatusError("x", request=httpx.Request("POST", "https://a.test"), response=httpx.Response(500)),
            False,
        ),
        (
            httpx.HTTPStatusError("x", request=httpx.Request("POST", "https://a.test"), response=httpx.Response(429)),
            True,
        ),
        (ValueError("bug"), False),
    ],
)
def test_transient_errors(error: BaseException, transient: bool) -> None:
    assert connector.is_transient(error) is transient
