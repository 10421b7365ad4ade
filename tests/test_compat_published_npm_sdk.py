"""The published AgentRein npm SDK (``agentrein`` 1.0.43, pinned with the Octokit it wraps in
contract/compat/package.json; installed there by ``npm ci``, as .ci/run does) against a real server's ``/compat``
and the loopback fake GitHub: tests/compat_driver.mjs runs in Node as an agent would, and the outcome is read
back through the native API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import RunningServer, Tenant, agent_outcome, free_port, pending_approval

from agentrein_core.commands import NewPolicy
from agentrein_core.statuses import Role
from agentrein_testing import FakeGitHub

COMPAT = Path(__file__).parent.parent / "contract" / "compat"
DRIVER = Path(__file__).parent / "compat_driver.mjs"


@pytest.fixture(scope="session")
def published_npm_sdk() -> Path:
    """contract/compat with its pinned packages, installed by ``npm ci`` when absent."""
    if not (COMPAT / "node_modules" / "agentrein").exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm installs the published npm SDK (.ci/run installs Node and npm)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=COMPAT, check=True, capture_output=True)
    return COMPAT


@pytest.fixture
def tenant(server: RunningServer, fake_github: FakeGitHub) -> Tenant:
    """An organisation whose stored GitHub settings reach the fake: the server's undos go there."""
    fake_github.add_repo("acme", "shop")
    return server.tenant_undoing_with("github", {"baseUrl": fake_github.base_url}, {"token": "ghp_test"})


@pytest.fixture
def native(tenant: Tenant) -> Iterator[httpx.Client]:
    with tenant.native() as api:
        yield api


def start_agent(published_npm_sdk: Path, **scenario: Any) -> subprocess.Popen[str]:
    """One scenario of the driver with the published npm SDK, started."""
    return subprocess.Popen(
        ["node", "--input-type=module", "-e", DRIVER.read_text()],
        cwd=published_npm_sdk,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ["PATH"], "COMPAT_SCENARIO": json.dumps(scenario)},
    )


@pytest.fixture
def started(published_npm_sdk: Path, server: RunningServer, tenant: Tenant, fake_github: FakeGitHub) -> Any:
    """Starts a scenario as an agent with an agent key of the organisation, its server URL ``…/compat``."""
    key = server.key(tenant, Role.AGENT)

    def start(**args: Any) -> subprocess.Popen[str]:
        url = f"{server.url}/compat"
        return start_agent(published_npm_sdk, apiKey=key, serverUrl=url, githubUrl=fake_github.base_url, **args)

    return start


@pytest.fixture
def agent(started: Any) -> Any:
    """Runs a scenario to its end (:func:`started`); what the agent saw."""
    return lambda **args: agent_outcome(started(**args))


def rollback_of(native: httpx.Client, session_id: str) -> Any:
    """The session's rollback once it has ended. Their SDK sends its logs without awaiting them, so the log that
    starts the rollback may reach the server after the agent's process has ended: until then there is none."""
    deadline = time.monotonic() + 30
    while (found := native.get(f"/sessions/{session_id}/rollback", params={"wait": 30})).status_code == 404:
        assert time.monotonic() < deadline, found.text
        time.sleep(0.1)
    return found.json()


def test_the_quick_start_with_octokit_records_the_issue_it_opened_with_the_undo_that_closes_it(
    agent: Any, native: httpx.Client
) -> None:
    seen = agent(complete=True)
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert (shown["status"], shown["recordedWith"]) == ("COMPLETED", "published SDK (npm)")
    (action,) = shown["actions"]
    assert (action["apiName"], action["status"]) == ("issues.create", "SUCCESS")
    assert action["undo"] == {
        "type": "github-close-issue",
        "repo": "acme/shop",
        "number": seen["issue"],
        "requireApproval": False,
    }


def test_a_failed_octokit_call_rolls_the_session_back_and_the_server_closes_the_issue(
    agent: Any, native: httpx.Client, fake_github: FakeGitHub
) -> None:
    seen = agent(thenFail=True)
    assert seen["raised"]["status"] == 404  # the agent gets Octokit's own error back
    session_id = seen["session"]["id"]
    job = rollback_of(native, session_id)
    assert job["status"] == "SUCCEEDED", job
    issue = fake_github.issue("acme", "shop", seen["issue"])
    assert issue is not None and issue["state"] == "closed"
    shown = native.get(f"/sessions/{session_id}").json()
    assert [(a["apiName"], a["status"]) for a in shown["actions"]] == [
        ("issues.create", "ROLLED_BACK"),
        ("rest.issues.update", "FAILED"),
    ]


def test_an_octokit_comment_and_branch_are_undone_by_the_server_when_a_later_call_fails(
    agent: Any, native: httpx.Client, fake_github: FakeGitHub
) -> None:
    seen = agent(branchFrom=fake_github.refs("acme", "shop")["refs/heads/main"], thenFail=True)
    session_id = seen["session"]["id"]
    job = rollback_of(native, session_id)
    assert job["status"] == "SUCCEEDED", job
    assert fake_github.comments("acme", "shop", seen["issue"]) == []
    assert "refs/heads/fix-checkout" not in fake_github.refs("acme", "shop")
    shown = native.get(f"/sessions/{session_id}").json()
    assert sorted((a["apiName"], a["status"]) for a in shown["actions"]) == [  # its logs are not awaited
        ("git.refs.create", "ROLLED_BACK"),
        ("issues.comments.create", "ROLLED_BACK"),
        ("issues.create", "ROLLED_BACK"),
        ("rest.issues.update", "FAILED"),
    ]


HELD = {"requiresApproval": ["rest.issues.create"], "timeoutMs": 120_000}


def test_a_held_octokit_call_runs_once_a_reviewer_approves_it_and_is_confirmed_with_its_undo(
    started: Any, native: httpx.Client, fake_github: FakeGitHub
) -> None:
    agent = started(**HELD, settleMs=500)  # the confirmation of an approved call is not awaited either
    approval = pending_approval(native, agent)
    assert fake_github.issues("acme", "shop") == []  # held: not run yet
    native.post(f"/approvals/{approval['approvalId']}/approve", json={})
    seen = agent_outcome(agent)
    assert fake_github.issue("acme", "shop", seen["issue"]) is not None
    (action,) = native.get(f"/sessions/{seen['session']['id']}").json()["actions"]
    assert (action["status"], action["undo"]["number"]) == ("SUCCESS", seen["issue"])


def test_a_rejection_reaches_the_octokit_agent_as_approval_rejected_with_the_reason_and_the_call_never_runs(
    started: Any, native: httpx.Client, fake_github: FakeGitHub
) -> None:
    agent = started(**HELD)
    approval = pending_approval(native, agent)
    native.post(f"/approvals/{approval['approvalId']}/reject", json={"reason": "not this repository"})
    seen = agent_outcome(agent)
    assert (seen["raised"]["name"], seen["raised"]["reason"]) == ("ApprovalRejectedError", "not this repository")
    assert fake_github.issues("acme", "shop") == []
    shown = native.get(f"/sessions/{seen['session']['id']}").json()
    assert [a["status"] for a in shown["actions"]] == ["FAILED"]


def test_a_block_policy_undoes_the_octokit_call_on_the_server_though_the_npm_sdk_never_hears_of_it(
    server: RunningServer, tenant: Tenant, agent: Any, native: httpx.Client, fake_github: FakeGitHub
) -> None:
    """Their npm SDK logs a call that ran without awaiting the answer, so a block's 403 reaches nobody (in
    ``open`` mode it is warned; README's table says so): the server undoes the call all the same."""
    server.engine.policies.add_policy(
        tenant.org_id, NewPolicy("no new issues", "BLOCK", connector="github", api_name="issues.create")
    )
    seen = agent(failureMode="open", settleMs=500)
    assert "raised" not in seen
    job = rollback_of(native, seen["session"]["id"])
    assert job["status"] == "SUCCEEDED", job
    issue = fake_github.issue("acme", "shop", seen["issue"])
    assert issue is not None and issue["state"] == "closed"


@pytest.mark.parametrize("failure_mode", ["open", "closed"])
def test_a_server_the_npm_sdk_cannot_reach_fails_the_session_start_whatever_the_failure_mode(
    published_npm_sdk: Path, failure_mode: str
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/compat"
    scenario = {"apiKey": "ar_x", "serverUrl": nobody, "githubUrl": "", "failureMode": failure_mode}
    seen = agent_outcome(start_agent(published_npm_sdk, **scenario))
    assert seen["raised"]["name"] == "AgentReinUnavailableError"
