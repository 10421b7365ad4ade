"""The published AgentRein Python SDK (``agentrein`` 0.1.1 on PyPI, pinned in contract/compat/requirements.txt)
against a real server's ``/compat`` and the loopback fake Stripe: each test runs tests/compat_driver.py in the
SDK's own virtual environment (its import name is ours too), as an agent would run it, and reads the outcome
back through the native API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from serving import RunningServer, ServerProcess, Tenant, agent_outcome, free_port, pending_approval

from agentrein_core.commands import NewPolicy
from agentrein_core.statuses import Role
from agentrein_testing import FakeStripe

COMPAT = Path(__file__).parent.parent / "contract" / "compat"
REQUIREMENTS = COMPAT / "requirements.txt"
DRIVER = Path(__file__).parent / "compat_driver.py"


def published_sdk_python(venv: Path) -> Path:
    """The virtual environment of the published SDK, made (by ``uv``, as .ci/run makes it) when absent or when
    the pinned versions changed since; its Python."""
    python = venv / "bin" / "python"
    stamp = venv / "agentrein-requirements.txt"
    pinned = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == pinned:
        return python
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv is not None, "uv makes the published SDK's environment (.ci/run installs it)"
    subprocess.run([uv, "venv", "--quiet", "--allow-existing", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(pinned)
    return python


@pytest.fixture(scope="session")
def published_python() -> Path:
    return published_sdk_python(COMPAT / ".venv")


@pytest.fixture
def tenant(server: RunningServer, fake_stripe: FakeStripe) -> Tenant:
    """An organisation whose stored Stripe settings reach the fake: the server's undos go there."""
    return server.tenant_undoing_with("stripe", {"apiBase": fake_stripe.base_url}, {"apiKey": "sk_test_1"})


@pytest.fixture
def native(tenant: Tenant) -> Iterator[httpx.Client]:
    with tenant.native() as api:
        yield api


def start_agent(python: Path, **args: Any) -> subprocess.Popen[str]:
    """One scenario of the driver with the published SDK, started."""
    command = [str(python), "-I", str(DRIVER), json.dumps(args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={})


def run_agent(python: Path, **args: Any) -> dict[str, Any]:
    return agent_outcome(start_agent(python, **args))


@pytest.fixture
def started(published_python: Path, server: RunningServer, tenant: Tenant, fake_stripe: FakeStripe) -> Any:
    """Starts a scenario as an agent with an agent key of the organisation, its server URL ``…/compat``."""
    key = server.key(tenant, Role.AGENT)

    def start(**args: Any) -> subprocess.Popen[str]:
        return start_agent(
            published_python, apiKey=key, serverUrl=f"{server.url}/compat", stripeUrl=fake_stripe.base_url, **args
        )

    return start


@pytest.fixture
def agent(started: Any) -> Any:
    """Runs a scenario to its end (:func:`started`); what the agent saw."""
    return lambda **args: agent_outcome(started(**args))


def rollback_of(native: httpx.Client, session_id: str) -> dict[str, Any]:
    """The session once its rollback has ended (the server's workers run it)."""
    job = native.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
    assert job["status"] in ("SUCCEEDED", "FAILED"), job
    shown: dict[str, Any] = native.get(f"/sessions/{session_id}").json()
    return shown


def test_the_quick_start_records_the_call_and_completes_the_session(
    agent: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    seen = agent(complete=True)
    assert seen["completed"] == "COMPLETED"
    assert fake_stripe.get(seen["customer"]) is not None
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert shown["recordedWith"] == "published SDK (Python)"
    (action,) = shown["actions"]
    assert (action["apiName"], action["status"], action["undo"]["id"]) == (
        "customers.create",
        "SUCCESS",
        seen["customer"],
    )


def test_the_stripe_module_style_is_recorded_as_the_client_style_is(agent: Any, native: httpx.Client) -> None:
    seen = agent(module=True)
    (action,) = native.get(f"/sessions/{seen['session']['id']}").json()["actions"]
    assert (action["apiName"], action["undo"]["id"]) == ("customers.create", seen["customer"])


def test_a_failed_call_rolls_the_session_back_on_the_server_with_the_stored_stripe_settings(
    agent: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    seen = agent(thenFail=True)
    assert seen["raised"]["class"] == "InvalidRequestError"  # the agent gets Stripe's own error back
    shown = rollback_of(native, seen["session"]["id"])
    assert shown["status"] == "ROLLED_BACK"
    assert [(a["apiName"], a["status"]) for a in shown["actions"]] == [
        ("customers.create", "ROLLED_BACK"),
        ("customers.update", "FAILED"),
    ]
    assert fake_stripe.get(seen["customer"]) is None


def test_a_block_policy_reaches_the_agent_as_agentrein_denied_policy_blocked_and_the_call_is_undone(
    server: RunningServer, tenant: Tenant, agent: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("no new customers", "BLOCK", connector="stripe", api_name="customers.create")
    )
    seen = agent()
    raised = seen["raised"]
    assert (raised["class"], raised["status"], raised["type"]) == ("AgentReinDeniedError", 403, "policy-blocked")
    shown = rollback_of(native, seen["session"]["id"])
    (action,) = shown["actions"]
    assert action["status"] == "ROLLED_BACK"
    assert fake_stripe.objects("customer") == []


@pytest.mark.parametrize("failure_mode", ["open", "closed"])
def test_a_server_that_cannot_be_reached_fails_the_session_start_whatever_the_failure_mode(
    published_python: Path, failure_mode: str
) -> None:
    """Their SDK raises AgentReinUnavailableError when a session cannot be opened, whatever ``failure_mode``
    says (WIRE.md): an agent cannot start while the server is away."""
    nobody = f"http://127.0.0.1:{free_port()}/compat"
    seen = run_agent(published_python, apiKey="ar_x", serverUrl=nobody, stripeUrl="", failureMode=failure_mode)
    assert seen["raised"] == "AgentReinUnavailableError"


HELD = {"requiresApproval": ["v1.customers.create"], "timeoutMs": 120_000}


def test_a_held_call_runs_once_a_reviewer_approves_it_and_is_confirmed_with_its_undo(
    started: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    agent = started(**HELD)
    approval = pending_approval(native, agent)
    assert fake_stripe.objects("customer") == []  # held: not run yet
    native.post(f"/approvals/{approval['approvalId']}/approve", json={})
    seen = agent_outcome(agent)
    assert fake_stripe.get(seen["customer"]) is not None
    (action,) = native.get(f"/sessions/{seen['session']['id']}").json()["actions"]
    assert (action["status"], action["undo"]["id"]) == ("SUCCESS", seen["customer"])


def test_a_rejection_reaches_the_agent_as_approval_rejected_with_the_reason_and_the_call_never_runs(
    started: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    agent = started(**HELD)
    approval = pending_approval(native, agent)
    native.post(f"/approvals/{approval['approvalId']}/reject", json={"reason": "not this customer"})
    seen = agent_outcome(agent)
    assert seen["raised"] == {"class": "ApprovalRejectedError", "reason": "not this customer"}
    assert fake_stripe.objects("customer") == []
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert [a["status"] for a in shown["actions"]] == ["FAILED"]


def test_an_approval_nobody_decides_reaches_the_agent_as_approval_timeout_and_the_call_never_runs(
    agent: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    seen = agent(requiresApproval=["v1.customers.create"], timeoutMs=5000)  # the shortest their SDK takes
    assert seen["raised"] == {"class": "ApprovalTimeoutError", "timeoutMs": 5000}
    assert fake_stripe.objects("customer") == []
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert [a["status"] for a in shown["actions"]] == ["FAILED"]
    assert [p["status"] for p in shown["approvals"]] in (["REJECTED"], ["EXPIRED"])


def customer_made_before(fake_stripe: FakeStripe) -> dict[str, Any]:
    """A customer that exists before the agent runs, its email ``old@example.com``."""
    made: dict[str, Any] = httpx.post(
        f"{fake_stripe.base_url}/v1/customers",
        data={"email": "old@example.com"},
        headers={"Authorization": "Bearer sk_test_1"},
    ).json()
    return made


def test_an_update_is_undone_from_the_before_state_the_server_read_through_its_stored_settings(
    agent: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    made = customer_made_before(fake_stripe)
    seen = agent(updateCustomer=made["id"])
    assert fake_stripe.get(made["id"])["email"] == "new@example.com"
    session_id = seen["session"]["id"]
    (action,) = native.get(f"/sessions/{session_id}").json()["actions"]
    assert (action["apiName"], action["undo"]["type"]) == ("customers.update", "stripe-restore")
    native.post(f"/sessions/{session_id}/rollback", json={})
    assert rollback_of(native, session_id)["status"] == "ROLLED_BACK"
    assert fake_stripe.get(made["id"])["email"] == "old@example.com"


def test_an_update_held_for_approval_is_undone_from_the_before_state_read_before_it_was_held(
    started: Any, native: httpx.Client, fake_stripe: FakeStripe
) -> None:
    made = customer_made_before(fake_stripe)
    agent = started(updateCustomer=made["id"], requiresApproval=["v1.customers.update"], timeoutMs=120_000)
    native.post(f"/approvals/{pending_approval(native, agent)['approvalId']}/approve", json={})
    session_id = agent_outcome(agent)["session"]["id"]
    assert fake_stripe.get(made["id"])["email"] == "new@example.com"
    native.post(f"/sessions/{session_id}/rollback", json={})
    assert rollback_of(native, session_id)["status"] == "ROLLED_BACK"
    assert fake_stripe.get(made["id"])["email"] == "old@example.com"


def test_against_agentrein_serve_itself_a_failed_call_is_rolled_back_with_the_settings_stored_through_its_api(
    published_python: Path, tmp_path: Path, fake_stripe: FakeStripe
) -> None:
    """``agentrein serve`` in a process of its own, set up through its REST API as an operator would."""
    serve = ServerProcess(f"sqlite:///{tmp_path / 'server.db'}", Fernet.generate_key().decode())
    try:
        (operator_key,) = serve.printed_keys
        with httpx.Client(base_url=serve.url, headers={"Authorization": f"Bearer {operator_key}"}, timeout=60) as api:
            stripe_settings = {
                "enabled": True,
                "config": {"apiBase": fake_stripe.base_url},
                "credentials": {"apiKey": "sk_test_1"},
            }
            assert api.put("/connectors/stripe", json=stripe_settings).status_code == 200
            agent_key = api.post("/api-keys", json={"role": "agent"}).json()["key"]
            seen = run_agent(
                published_python,
                apiKey=agent_key,
                serverUrl=f"{serve.url}/compat",
                stripeUrl=fake_stripe.base_url,
                thenFail=True,
            )
            assert rollback_of(api, seen["session"]["id"])["status"] == "ROLLED_BACK"
    finally:
        serve.stop()
    assert fake_stripe.get(seen["customer"]) is None


def test_the_sdk_asks_a_before_state_for_an_update_and_neither_for_a_create_nor_a_delete_that_needs_none(
    agent: Any, native: httpx.Client
) -> None:
    """It reads ``GET /registry`` once, which lists the update with ``captureBeforeState`` and the delete without."""
    seen = agent(createUpdateDelete=True)
    assert seen["precaptured"] == ["stripe.v1.customers.update"]
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert [(a["apiName"], a["undo"]["type"]) for a in shown["actions"]] == [
        ("customers.create", "stripe-delete"),
        ("customers.update", "stripe-restore"),
        ("customers.delete", "none"),
    ]
