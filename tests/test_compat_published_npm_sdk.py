"""The published AgentRein npm SDK (``agentrein`` 1.0.43, pinned with the Octokit it wraps in
contract/compat/package.json; installed there by ``npm ci``, as .ci/run does) against a real server's ``/compat``
and the loopback fake GitHub: tests/compat_driver.mjs runs in Node as an agent would, and the outcome is read
back through the native API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import RunningServer, Tenant

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


@pytest.fixture
def agent(published_npm_sdk: Path, server: RunningServer, tenant: Tenant, fake_github: FakeGitHub) -> Any:
    """Runs a scenario as an agent with an agent key of the organisation; what the agent saw."""
    key = server.key(tenant, Role.AGENT)

    def run(**args: Any) -> dict[str, Any]:
        scenario = {"apiKey": key, "serverUrl": f"{server.url}/compat", "githubUrl": fake_github.base_url, **args}
        done = subprocess.run(
            ["node", "--input-type=module", "-e", DRIVER.read_text()],
            cwd=published_npm_sdk,
            capture_output=True,
            text=True,
            timeout=300,
            env={"PATH": os.environ["PATH"], "COMPAT_SCENARIO": json.dumps(scenario)},
        )
        assert done.returncode == 0, done.stderr
        seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return seen

    return run


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
    job = native.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
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
    job = native.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
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
