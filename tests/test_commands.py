"""A command (agentrein_core.commands) crosses the wire as the REST body that carries it: what the SDK sends
(through the converter) is what the server decodes into its body, field for field, and back into the same
command, so no layer in between has to list the command's fields again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentrein_core.commands import ExecutedCall, Failed, NewPolicy, WriteAhead
from agentrein_core.converter import to_wire
from agentrein_core.model import UndoConfig
from agentrein_core.statuses import OperationType, PolicyEffect
from agentrein_server.api import bodies


def received(data: Any, body: type[bodies.Body]) -> bodies.Body:
    """What the server decodes from ``data`` sent as JSON (unknown fields are refused)."""
    return msgspec.json.decode(msgspec.json.encode(data), type=body)


def test_a_new_policy_reaches_the_server_as_the_same_command() -> None:
    sent = NewPolicy(
        "hold refunds",
        PolicyEffect.REQUIRE_APPROVAL,
        connector="stripe",
        api_name="refunds.*",
        agent_id="billing-*",
        operation_type="CREATE",
        before_execution=True,
        approval_timeout_ms=90_000,
    )
    decoded = received(to_wire(sent), bodies.NewPolicy)
    assert NewPolicy(**msgspec.structs.asdict(decoded)) == sent


def test_a_write_ahead_record_reaches_the_server_with_its_approval_timeout_in_whole_milliseconds() -> None:
    sent = WriteAhead("http", "POST /v1/orders", OperationType.CREATE, {"n": 1}, True, timedelta(seconds=1.5004))
    decoded = received(to_wire(sent), bodies.NewAction)
    assert isinstance(decoded, bodies.NewAction)
    assert (decoded.connector, decoded.api_name, decoded.operation_type) == ("http", "POST /v1/orders", "CREATE")
    assert (decoded.payload, decoded.requires_approval, decoded.approval_timeout_ms) == ({"n": 1}, True, 1500)


@pytest.mark.parametrize("timeout", [timedelta(0), timedelta(microseconds=400)])
def test_an_approval_timeout_under_a_millisecond_travels_as_one(timeout: timedelta) -> None:
    sent = WriteAhead("http", "POST /v1/orders", OperationType.CREATE, {}, approval_timeout=timeout)
    assert to_wire(sent)["approvalTimeoutMs"] == 1


def test_a_call_that_ran_unrecorded_travels_with_every_field_of_the_replayed_body() -> None:
    call = ExecutedCall(
        "agentrein-journal-1",
        "http",
        "POST /v1/orders",
        OperationType.CREATE,
        {"n": 1},
        succeeded=True,
        response={"id": "o_1"},
        undo=UndoConfig("http-delete", {"path": "/v1/orders/o_1"}),
    )
    fields = set(to_wire(call)) - {"succeeded"} | {"status"}
    assert fields == {f.encode_name for f in msgspec.structs.fields(bodies.ExecutedAction)}


def test_a_failure_travels_as_the_error_of_an_outcome() -> None:
    decoded = received({"status": "FAILED", **to_wire(Failed("boom"))}, bodies.ActionOutcome)
    assert isinstance(decoded, bodies.ActionOutcome)
    assert (decoded.status, decoded.error) == ("FAILED", "boom")
