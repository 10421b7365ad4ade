"""Organisation policies: the strictest enabled match decides, on the write-ahead record."""

from __future__ import annotations

import httpx
import pytest

from agentrein import (
    ActionStatus,
    AgentRein,
    ApprovalPurpose,
    PolicyBlockedError,
    PolicyEffect,
    SessionStatus,
    ValidationError,
)
from agentrein_testing import FakeService


def start(ar: AgentRein, service: FakeService, agent_id: str = "billing-agent") -> tuple[httpx.Client, str]:
    session = ar.new_session(agent_id=agent_id, intent="i")
    return ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http"), session.id


def test_a_blocked_call_never_runs_and_is_stored_failed(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="no deletes", effect="BLOCK", operation_type="DELETE")
    client, session_id = start(ar, service)
    order = client.post("/v1/orders", json={}).json()
    with pytest.raises(PolicyBlockedError) as raised:
        client.delete(f"/v1/orders/{order['id']}")
    assert raised.value.policy_name == "no deletes"
    assert service.calls("DELETE") == []
    session = ar.get_session(session_id)
    assert [a.status for a in session.actions] == [ActionStatus.SUCCESS, ActionStatus.FAILED]
    assert session.actions[1].error == "blocked by policy 'no deletes'"
    # a refusal is not a failure of the run: the agent may go on, nothing is rolled back
    assert session.status is SessionStatus.ACTIVE
    client.post("/v1/orders", json={})


def test_the_strictest_matching_policy_wins(ar: AgentRein, service: FakeService) -> None:
    ar.add_policy(name="allow orders", effect="ALLOW", api_name="POST /v1/orders")
    ar.add_policy(name="review posts", effect="REQUIRE_APPROVAL", api_name="POST *")
    ar.add_policy(name="block billing posts", effect="BLOCK", agent_id="billing-*", api_name="POST *")
    billing, _ = start(ar, service, agent_id="billing-agent")
    with pytest.raises(PolicyBlockedError, match="block billing posts"):
        billing.post("/v1/orders", json={})
    support, _ = start(ar, service, agent_id="support-agent")
    support.post("/v1/orders", json={})
    (approval,) = ar.list_approvals()
    assert approval.purpose is ApprovalPurpose.AFTER_EXECUTION


def test_a_disabled_policy_does_not_apply(ar: AgentRein, service: FakeService) -> None:
    policy = ar.add_policy(name="no posts", effect="BLOCK", connector="http")
    assert policy.enabled and policy.effect is PolicyEffect.BLOCK
    assert ar.set_policy_enabled(policy.policy_id, False).enabled is False
    client, _ = start(ar, service)
    client.post("/v1/orders", json={})
    assert len(service.calls("POST")) == 1


def test_a_removed_policy_does_not_apply(ar: AgentRein, service: FakeService) -> None:
    policy = ar.add_policy(name="no posts", effect="BLOCK", connector="http")
    assert [p.name for p in ar.list_policies()] == ["no posts"]
    ar.remove_policy(policy.policy_id)
    client, _ = start(ar, service)
    client.post("/v1/orders", json={})
    assert ar.list_policies() == []


def test_policies_of_one_organisation_do_not_touch_another(
    ar: AgentRein, database_url: str, service: FakeService
) -> None:
    ar.add_policy(name="block all", effect="BLOCK")
    other = AgentRein(database_url, organisation="another-org")
    try:
        session = other.new_session(agent_id="a", intent="i")
        other.wrap(httpx.Client(base_url=service.base_url), session, connector="http").post("/v1/x", json={})
        assert other.list_policies() == []
        assert len(service.calls("POST")) == 1
    finally:
        other.close()


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"effect": "DENY"}, "effect", "not a policy effect"),
        ({"effect": "BLOCK", "api_name": "POST [abc"}, "api_name", "no closing"),
        ({"effect": "BLOCK", "operation_type": "WRITE"}, "operation_type", "matches no operation type"),
        ({"effect": "BLOCK", "agent_id": ""}, "agent_id", "non-empty"),
        ({"effect": "BLOCK", "name": ""}, "name", "must not be empty|length >= 1"),  # the engine's, the server's
    ],
)
def test_an_invalid_policy_names_the_field_and_is_not_stored(
    ar: AgentRein, kwargs: dict[str, str], field: str, message: str
) -> None:
    kwargs = {"name": "p", **kwargs}
    with pytest.raises(ValidationError, match=message) as raised:
        ar.add_policy(**kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert ar.list_policies() == []


def test_policy_names_are_unique_in_an_organisation(ar: AgentRein) -> None:
    ar.add_policy(name="p", effect="ALLOW")
    with pytest.raises(ValidationError, match="already exists"):
        ar.add_policy(name="p", effect="BLOCK")
