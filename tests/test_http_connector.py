"""The http connector on its own, against respx routes and mock transports (no socket; the loopback fake where
a request must really go out): what it records, how it undoes, how it reopens a closed client."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
import respx
from attrs import evolve

from agentrein_core.connector import PreparedCall, Undoable, plain_undo
from agentrein_core.errors import UndoError, ValidationError
from agentrein_core.model import Action, UndoConfig
from agentrein_core.statuses import ActionStatus, OperationType
from agentrein_core.wording import words_of
from agentrein_http import HttpConnector
from agentrein_testing import FakeService

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


# Reopening a client the agent closed (``with httpx.Client(...) as raw:``) ---------------------------------


def mocked(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    return httpx.MockTransport(handle)


def test_only_a_closed_httpx_client_is_closed() -> None:
    client = httpx.Client()
    assert not connector.is_closed(client)
    client.close()
    assert connector.is_closed(client)


@pytest.mark.parametrize("kind", [httpx.Client, httpx.AsyncClient])
def test_a_reopened_client_keeps_the_closed_ones_settings(kind: type[httpx.Client] | type[httpx.AsyncClient]) -> None:
    seen: list[httpx.Request] = []
    hooked: list[str] = []

    def hook(request: httpx.Request) -> None:
        hooked.append(request.method)

    async def async_hook(request: httpx.Request) -> None:
        hook(request)

    closed = kind(
        base_url="http://127.0.0.1:9/api",
        headers={"X-Tenant": "acme"},
        cookies={"sid": "c-1"},
        params={"region": "eu"},
        timeout=7.5,
        follow_redirects=True,
        max_redirects=3,
        trust_env=False,
        event_hooks={"request": [async_hook if kind is httpx.AsyncClient else hook]},
        transport=mocked(seen),
    )
    closed.auth = ("agent", "s3cret")  # type: ignore[assignment]
    if isinstance(closed, httpx.AsyncClient):
        asyncio.run(closed.aclose())
    else:
        closed.close()
    reopened = connector.reopen(closed)
    assert type(reopened) is kind and not reopened.is_closed
    assert (reopened.timeout, reopened.follow_redirects, reopened.max_redirects, reopened.trust_env) == (
        httpx.Timeout(7.5),
        True,
        3,
        False,
    )

    async def send_async() -> None:
        assert isinstance(reopened, httpx.AsyncClient)
        async with reopened:
            await reopened.delete("orders/1")

    if isinstance(reopened, httpx.AsyncClient):
        asyncio.run(send_async())
    else:
        with reopened:
            reopened.delete("orders/1")
    (request,) = seen  # through the closed client's own transport
    assert str(request.url) == "http://127.0.0.1:9/api/orders/1?region=eu"
    assert (request.headers["X-Tenant"], request.headers["Cookie"]) == ("acme", "sid=c-1")
    assert request.headers["Authorization"].startswith("Basic ")
    assert hooked == ["DELETE"]


def test_a_reopened_client_keeps_the_transports_mounted_on_the_closed_one() -> None:
    seen: list[httpx.Request] = []
    closed = httpx.Client(mounts={"http://127.0.0.1:9": mocked(seen)})
    closed.close()
    connector.reopen(closed).delete("http://127.0.0.1:9/v1/orders/1")
    assert [str(r.url) for r in seen] == ["http://127.0.0.1:9/v1/orders/1"]


def test_without_httpx_s_private_transports_a_client_reopens_on_httpx_s_default_one(
    service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    """A version of httpx that keeps its transports elsewhere: the client still reopens, with what httpx shows
    of it, and a warning says that its transport settings (here a mock) were not carried over."""
    seen: list[httpx.Request] = []
    closed = httpx.Client(base_url=service.base_url, headers={"Authorization": "Bearer a"}, transport=mocked(seen))
    closed.close()
    del closed._transport, closed._mounts
    connector.reopen(closed).delete("/v1/orders/ord_1")
    assert seen == []
    assert [(r.path, r.authorization) for r in service.calls("DELETE")] == [("/v1/orders/ord_1", "Bearer a")]
    assert "without its transport settings" in caplog.text


def recorded(call: PreparedCall, response: httpx.Response | None = None) -> Action:
    """The record of ``call`` as a reader sees it: before it ran (no ``response``), or once it ran."""
    now = datetime.now(UTC)
    held = Action("act_1", "ses_1", "org", 1, "http", call.api_name, call.operation_type, call.payload,
                  ActionStatus.PENDING_APPROVAL, "key-1", now, now)  # fmt: skip
    if response is None:
        return held
    undo = connector.undo_for(call, response, None)
    return evolve(held, status=ActionStatus.SUCCESS, response=connector.record_result(call, response), undo=undo)


@respx.mock
def test_a_delete_is_described_in_words_and_its_undo_is_left_to_the_agents_code() -> None:
    respx.delete("https://api.example.com/v1/orders/ord_14").mock(return_value=httpx.Response(204))
    call = connector.prepare(httpx.Client(), ("delete",), ("https://api.example.com/v1/orders/ord_14",), {})
    assert call is not None
    before = recorded(call)
    assert connector.describe(before) == "Delete order ord_14 on api.example.com"
    assert connector.target_host(before) == "api.example.com"
    outlook = connector.foresee_undo(before)
    assert outlook.undoable is Undoable.UNKNOWN
    assert "only by an undo the agent's code gives, which the server learns once the call has run" in outlook.how
    ran = recorded(call, call.run("key-1"))
    assert connector.describe_undo(ran) == "a DELETE has no inverse of its own, and the agent's code gave none"


@respx.mock
def test_a_create_is_described_with_what_it_made_and_undone_by_a_delete_of_it() -> None:
    made = httpx.Response(201, json={"id": "ord_15"})
    respx.post("https://api.example.com/v1/orders").mock(return_value=made)
    call = connector.prepare(httpx.Client(), ("post",), ("https://api.example.com/v1/orders",), {"json": {}})
    assert call is not None
    before = recorded(call)
    assert connector.describe(before) == "Create order on api.example.com"
    assert connector.foresee_undo(before).undoable is Undoable.YES
    ran = recorded(call, call.run("key-1"))
    assert connector.describe(ran) == "Create order ord_15 on api.example.com"
    assert connector.describe_undo(ran) == "Delete /v1/orders/ord_15 on api.example.com"


@respx.mock
def test_an_undo_whose_url_cannot_be_read_is_described_in_the_words_of_its_record() -> None:
    respx.post("https://api.example.com/v1/orders").mock(return_value=httpx.Response(201, json={"id": "ord_1"}))
    call = connector.prepare(httpx.Client(), ("post",), ("https://api.example.com/v1/orders",), {"json": {}})
    assert call is not None
    broken = UndoConfig("http-delete", {"url": "https://api.example.com/v1/orders/ord_1\x01"})
    ran = evolve(recorded(call, call.run("key-1")), undo=broken)
    words = words_of(connector, ran)
    assert words.undo.how == plain_undo(ran)  # not "Delete / on ": a reviewer would read that as the root
    assert "ord_1" in words.undo.how


@pytest.mark.parametrize(
    ("method", "url", "words"),
    [
        ("post", "https://api.example.com/v1/orders/ord_14/cancel", "Cancel order ord_14 on api.example.com"),
        ("post", "https://api.example.com/v1/orders/ord_14/items", "Create item in order ord_14 on api.example.com"),
        ("patch", "https://api.example.com/v1/categories/7", "Update category 7 on api.example.com"),
        ("post", "http://127.0.0.1:8080/search", "POST /search on 127.0.0.1:8080"),
    ],
)
def test_a_path_is_read_as_collections_and_ids(method: str, url: str, words: str) -> None:
    call = connector.prepare(httpx.Client(), (method,), (url,), {"json": {}})
    assert call is not None
    assert connector.describe(recorded(call)) == words
