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
from serving import RunningServer, Tenant, free_port

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
    tenant = server.tenant()
    server.services.configuration.configure_connector(
        tenant.org_id,
        "stripe",
        enabled=True,
        config={"apiBase": fake_stripe.base_url},
        credentials={"apiKey": "sk_test_1"},
    )
    return tenant


@pytest.fixture
def native(tenant: Tenant) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=60) as api:
        yield api


def run_agent(python: Path, **args: Any) -> dict[str, Any]:
    """One scenario of the driver with the published SDK; what the agent saw."""
    done = subprocess.run(
        [str(python), "-I", str(DRIVER), json.dumps(args)], capture_output=True, text=True, timeout=300, env={}
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


@pytest.fixture
def agent(published_python: Path, server: RunningServer, tenant: Tenant, fake_stripe: FakeStripe) -> Any:
    """Runs a scenario as an agent with an agent key of the organisation, its server URL ``…/compat``."""
    key = server.key(tenant, Role.AGENT)

    def run(**args: Any) -> dict[str, Any]:
        return run_agent(
            published_python, apiKey=key, serverUrl=f"{server.url}/compat", stripeUrl=fake_stripe.base_url, **args
        )

    return run


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
