"""The `agentrein` command line."""

from __future__ import annotations

import getpass
import io
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import typer
import uvicorn
from attrs import frozen
from click.testing import Result
from cryptography.fernet import Fernet
from peers import eventually
from rich.console import Console
from serving import LOOPBACK_HTTP, RunningServer
from test_dashboard import session_that_ran
from typer.testing import CliRunner

from agentrein import ActionStatus, AgentRein, DisplayStatus, PolicyBlockedError, SessionInfo
from agentrein_cli.approvals import INCLUDED
from agentrein_cli.main import app
from agentrein_core.engine import Engine
from agentrein_core.errors import UnauthorizedError
from agentrein_core.plugins import installed_connectors
from agentrein_core.statuses import ApprovalPurpose, ApprovalStatus, Role
from agentrein_core.store import Store
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_core.vault import SECRET_KEY_ENV
from agentrein_demo.run import run_demo
from agentrein_testing import FakeService

runner = CliRunner()


def test_demo_fails_on_the_github_comment_and_undoes_both_services_last_first(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--database-url", url], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "✗ 4  GitHub  issues.comments.create  GithubException: 500 Internal Server Error" in out
    # the undo calls, in the order the fakes received them: GitHub first, then Stripe, last step first
    closed = out.index('PATCH /repos/acme/onboarding/issues/1 {"state": "closed", "state_reason": "not_planned"} → 200')
    assert closed < out.index("DELETE /v1/subscriptions/sub_") < out.index("DELETE /v1/customers/cus_")
    assert "display status: REVERTED" in out
    assert "Left on the services: Stripe: 0 customers, 0 active subscriptions; GitHub: 0 open issues" in out
    # the records are really in the database the demo was pointed at
    ar = AgentRein(url)
    (listed,) = ar.list_sessions()
    session = ar.get_session(listed)
    assert listed.display_status is session.display_status is DisplayStatus.REVERTED
    assert [(a.connector, a.api_name, a.status) for a in session.actions] == [
        ("stripe", "customers.create", ActionStatus.ROLLED_BACK),
        ("stripe", "subscriptions.create", ActionStatus.ROLLED_BACK),
        ("github", "issues.create", ActionStatus.ROLLED_BACK),
        ("github", "issues.comments.create", ActionStatus.FAILED),
    ]
    undone = sorted(session.actions[:3], key=lambda a: a.updated_at)
    assert [a.seq for a in undone] == [3, 2, 1]
    assert not session.approvals


def test_at_80_columns_the_demo_s_rollback_table_cuts_no_heading_and_no_value(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    out = runner.invoke(app, ["demo", "--database-url", url], env={"COLUMNS": "80"}).output
    table = out[out.index("Rollback of ") : out.index("Session status:")]
    assert all(len(line) <= 80 for line in table.splitlines())
    assert all(heading in table for heading in ("seq", "api name", "status", "undone by", "undo status"))
    said = " ".join(table.split())
    assert "4 issues.comments.create FAILED — NONE" in said
    assert "3 issues.create ROLLED_BACK Close issue DONE acme/onboarding#1 as not planned" in said  # wrapped
    assert "2 subscriptions.create ROLLED_BACK Cancel Stripe DONE subscription sub_" in said  # as its connector says


def test_demo_with_approval_says_how_to_approve_and_approves_itself(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    args = ["demo", "--approval", "--approve-after", "0.5", "--database-url", url]
    result = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    ar = AgentRein(url)
    (approval,) = ar.get_session(*ar.list_sessions()).approvals
    command = f"/agentrein approvals approve {approval.approval_id} --database-url {url}"
    assert command in out
    assert "Nobody decided within 0.5 s: the demo approves it as agentrein-demo (auto)." in out
    assert "approved by agentrein-demo (auto)" in out
    assert approval.status is ApprovalStatus.APPROVED and approval.resolved_by == "agentrein-demo (auto)"
    assert "display status: REVERTED" in out
    assert "Left on the services: Stripe: 0 customers, 0 active subscriptions; GitHub: 0 open issues" in out
    # the command shown names this very approval, in this very database
    again = runner.invoke(app, command.split()[1:], env={"COLUMNS": "160"})
    assert again.exit_code == 1
    assert "already APPROVED by agentrein-demo (auto)" in again.output


def test_the_demo_gives_a_human_a_minute_and_a_command_that_works_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    printed = io.StringIO()
    demo = threading.Thread(
        target=run_demo, args=("sqlite:///demo.db", Console(file=printed, width=200)), kwargs={"approval": True}
    )
    demo.start()
    while demo.is_alive() and "approvals approve" not in printed.getvalue():
        threading.Event().wait(0.05)
    line = next(line for line in printed.getvalue().splitlines() if "approvals approve" in line)
    command = shlex.split(line)
    env = {k: v for k, v in os.environ.items() if k != "AGENTREIN_DATABASE_URL"}
    # a separate process, in another directory, starting as slowly as it does
    done = subprocess.run(
        [*command, "--reviewer", "human"], cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True
    )
    demo.join()
    assert done.returncode == 0, done.stderr
    out = printed.getvalue()
    assert "If nobody decides within 60 s, the demo approves it itself." in out
    assert "approved by human" in out and "Nobody decided" not in out
    assert Path(command[0]).is_absolute() and command[-1] == f"sqlite:///{tmp_path / 'demo' / 'demo.db'}"


#: What ``agentrein --help`` must not wait for: the database, the server, HTTP, the connectors, the demo.
HEAVY = ("sqlalchemy", "alembic", "litestar", "uvicorn", "httpx", "pluggy", "stripe", "github", "agentrein")
HEAVY += ("agentrein_server", "agentrein_http", "agentrein_stripe", "agentrein_github", "agentrein_demo.run")


def test_help_lists_every_command_without_importing_what_the_commands_use() -> None:
    script = (
        "import sys\n"
        "from agentrein_cli.main import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('imported:', sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY})))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={"COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    assert "imported: []" in done.stdout
    assert all(f"│ {command} " in done.stdout for command in ("serve", "rollback", "sessions", "demo"))


def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = runner.invoke(app, ["db", "upgrade", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "Schema up to date" in result.output
    assert (tmp_path / "fresh.db").exists()


def test_a_bad_database_url_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["db", "upgrade", "--database-url", "mysql://x/y"])
    assert result.exit_code == 1
    assert "unsupported database 'mysql'" in result.output
    result = runner.invoke(app, ["db", "upgrade", "--database-url", "postgresql+psycopg2://x@127.0.0.1/y"])
    assert result.exit_code == 1
    assert "unsupported driver 'psycopg2' (use postgresql+psycopg)" in result.output


def test_a_waiting_agent_is_approved_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    ar = AgentRein(url)
    session = ar.new_session(agent_id="ops-agent", intent="Clean up")
    outcome: list[int] = []
    with FakeService().running() as service:
        client = ar.wrap(
            httpx.Client(base_url=service.base_url),
            session,
            connector="http",
            requires_approval=["POST *"],
            poll_interval_ms=50,
        )
        agent = threading.Thread(target=lambda: outcome.append(client.post("/v1/jobs", json={}).status_code))
        agent.start()
        listed = ""
        while "PENDING" not in listed:
            listed = runner.invoke(app, ["approvals", "list", "--database-url", url], env={"COLUMNS": "250"}).output
        approval_id = next(word for word in listed.split() if word.startswith("apr_"))
        result = runner.invoke(
            app, ["approvals", "approve", approval_id, "--reviewer", "oncall", "--reason", "ok", "--database-url", url]
        )
        agent.join(10)
    assert result.exit_code == 0, result.output
    assert "APPROVED by oncall" in result.output
    assert outcome == [201]
    shown = runner.invoke(app, ["sessions", "show", session.id, "--database-url", url], env={"COLUMNS": "200"})
    assert "POST /v1/jobs" in shown.output and "SUCCESS" in shown.output


# The commands that work on a server or on a database, tested in both modes -----------------------------

#: Every invocation is hermetic: no server or database from the caller's environment, and a secret key for
#: connector credentials (on PostgreSQL the key file would otherwise land in the working directory).
ENV: dict[str, str | None] = {
    "COLUMNS": "160",
    SECRET_KEY_ENV: Fernet.generate_key().decode(),
    "AGENTREIN_URL": None,
    "AGENTREIN_API_KEY": None,
    "AGENTREIN_DATABASE_URL": None,
}


def cli(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return runner.invoke(app, list(args), env={**ENV, **(env or {})})


@frozen
class Target:
    """Where the commands under test work (their options), an agent's AgentRein on the same records, and the
    engine behind both, to check what the commands stored."""

    mode: str
    options: list[str]
    agent: AgentRein
    engine: Engine
    org_id: str
    reviewer: str  # how a decision without --reviewer is recorded


@pytest.fixture(params=["database", "server"])
def target(request: pytest.FixtureRequest, database_url: str) -> Iterator[Target]:
    if request.param == "server":
        with served(request.getfixturevalue("server")) as on_server:
            yield on_server
        return
    org = f"cli-{uuid.uuid4().hex[:8]}"
    with AgentRein(database_url, organisation=org) as agent, closing(Store(database_url)) as store:
        engine = Engine(store)
        org_id = engine.accounts.organisation_named(org).org_id
        options = ["--database-url", database_url, "--org", org]
        yield Target("database", options, agent, engine, org_id, getpass.getuser())


@contextmanager
def served(server: RunningServer) -> Iterator[Target]:
    """The commands on ``server``, in an organisation of their own, with its operator key."""
    tenant = server.tenant(http_undo=False)
    options = ["--url", tenant.url, "--api-key", tenant.key]
    with tenant.client() as agent:
        yield Target("server", options, agent, server.engine, tenant.org_id, f"operator key {tenant.key[:10]}…")


def place_orders(target: Target, service: FakeService, count: int, **wrap: Any) -> tuple[SessionInfo, list[str]]:
    """An agent's session that created ``count`` orders on the fake service: the session and the order ids."""
    session = target.agent.new_session(agent_id="order-agent", intent="Place the orders")
    api = target.agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http", **wrap)
    ids = [api.post("/v1/orders", json={"number": n}).json()["id"] for n in range(count)]
    return session, ids


def table_rows(output: str) -> list[list[str]]:
    """The cells of each body row of the tables in ``output``."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in output.splitlines() if line.startswith("│")]


def enable_http(target: Target) -> None:
    """Let rollbacks run http inverses against the loopback fake service."""
    result = cli("connectors", "enable", "http", "--config", json.dumps(LOOPBACK_HTTP), *target.options)
    assert result.exit_code == 0, result.output


def test_sessions_are_listed_and_shown(target: Target, service: FakeService) -> None:
    session, _ = place_orders(target, service, 2)
    listed = cli("sessions", "list", *target.options)
    assert listed.exit_code == 0, listed.output
    assert session.id in listed.output and "order-agent" in listed.output and "ACTIVE" in listed.output
    # each action is listed, then its intent check, once the agent's supervisor has queued the checks its
    # calls want (every few seconds: they are found from the session's watermark, not queued by the calls)
    shown = eventually(
        lambda: cli("sessions", "show", session.id, *target.options),
        lambda result: result.output.count("POST /v1/orders") == 4,
    )
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("SUCCESS") == 2
    assert shown.output.count("POST /v1/orders") == 4 and "intent check" in shown.output
    assert "intent: Place the orders" in shown.output


def test_an_unknown_session_is_a_clear_error(target: Target) -> None:
    for command in (["sessions", "show"], ["rollback"]):
        result = cli(*command, "ses_missing", *target.options)
        assert result.exit_code == 1
        assert "error: no session with id 'ses_missing'" in result.output


def test_rollback_shows_its_progress_and_undoes_last_first(target: Target, service: FakeService) -> None:
    session, ids = place_orders(target, service, 3)
    enable_http(target)
    result = cli("rollback", session.id, *target.options)
    assert result.exit_code == 0, result.output
    assert service.collection("orders") == {}
    assert [call.path for call in service.calls("DELETE")] == [f"/v1/orders/{i}" for i in reversed(ids)]
    out = result.output
    assert "undoing" in out and "3/3" in out
    rows = table_rows(out)  # the outcomes, in the order the chain went, in words (the stored values in brackets)
    assert [(row[0], row[1], row[3]) for row in rows] == [
        (str(seq), "POST /v1/orders", "rolled back [ROLLED_BACK]") for seq in (3, 2, 1)
    ]
    assert [row[4] for row in rows] == [
        f"done: Delete /v1/orders/{i} on {urlsplit(service.base_url).netloc} [DONE]" for i in reversed(ids)
    ]
    assert "(display status REVERTED)" in out
    assert target.agent.get_session(session).display_status is DisplayStatus.REVERTED


def test_rollback_through_a_server_says_when_it_waits_on_an_undo_in_the_agents_process(server: RunningServer) -> None:
    # An MCP tool call whose server the organisation's settings do not name: the server hands its undo to the
    # agent's process; the command says so rather than show a bar that does not move.
    tenant = server.tenant(http_undo=False)
    undo = {"type": "mcp-tools", "server": "memory", "calls": [{"tool": "delete_entities", "arguments": {}}]}
    with tenant.native() as api:
        session_id = session_that_ran(api, ("mcp", "memory.create_entities", "CREATE", undo))
    hermetic = {name: value for name, value in ENV.items() if value is not None}
    env = {**{k: v for k, v in os.environ.items() if k not in ENV}, **hermetic, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-c", "from agentrein_cli.main import app; app()", "rollback", session_id]
    rollback = subprocess.Popen(
        [*command, "--url", tenant.url, "--api-key", tenant.key],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert rollback.stdout is not None
    printed, lines = rollback.stdout, list[str]()
    reading = threading.Thread(target=lambda: lines.extend(iter(printed.readline, "")), daemon=True)
    reading.start()

    def said(text: str) -> str:
        return eventually(lambda: "".join(lines), lambda out: text in out, timeout=30)  # type: ignore[no-any-return]

    offered = said("#1: Undo: offered to the agent's process")
    assert "(the process that wrapped its client takes it; offered until" in offered
    taken = server.engine.rollbacks.claim_handed_undo(tenant.org_id, [session_id], ["mcp"], 0)  # as the agent would
    assert taken is not None and taken.handoff.lease_id is not None
    assert "it reports the outcome by" in said("#1: Undo: running in the agent's process")
    server.engine.rollbacks.renew_handed_undo(tenant.org_id, taken.action.action_id, taken.handoff.lease_id)
    time.sleep(1)  # the command looks again meanwhile (every 0.25 s) and sees the later report-by time
    server.engine.rollbacks.report_handed_undo(tenant.org_id, taken.action.action_id, taken.handoff.lease_id, True)
    assert rollback.wait(timeout=60) == 0
    reading.join(timeout=10)
    out = "".join(lines)
    assert out.count("offered to the agent's process") == 1 and "(display status REVERTED)" in out
    assert out.count("running in the agent's process") == 1  # said once, not again at each renewal


def test_a_failed_undo_stops_the_chain_and_the_command_fails(target: Target, service: FakeService) -> None:
    session, ids = place_orders(target, service, 3)
    enable_http(target)
    service.fail_next("DELETE", "/v1/orders/*", status=500)  # the first undo (of the last order) fails
    result = cli("rollback", session.id, *target.options)
    assert result.exit_code == 1
    assert len(service.collection("orders")) == 3
    assert [call.path for call in service.calls("DELETE")] == [f"/v1/orders/{ids[2]}"]
    out = result.output
    assert "1/3" in out and "ROLLBACK_FAILED" in out and "undo failed" in out
    assert "(display status ROLLBACK_FAILED)" in out and "error: the rollback failed" in out


def test_sessions_show_says_why_an_undo_failed_and_lists_the_approvals_in_words_at_80_columns(
    target: Target, service: FakeService
) -> None:
    review = ["--effect", "REQUIRE_APPROVAL", "--api-name", "POST /v1/orders"]
    assert cli("policies", "add", "review orders", *review, *target.options).exit_code == 0
    session, ids = place_orders(target, service, 2)
    enable_http(target)
    service.fail_next("DELETE", "/v1/orders/*", status=500)
    assert cli("rollback", session.id, *target.options).exit_code == 1
    (failed,) = [a for a in target.agent.get_session(session).actions if a.status is ActionStatus.ROLLBACK_FAILED]
    assert failed.error
    shown = cli("sessions", "show", session.id, *target.options, env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "status Rollback failed (an undo failed: the rollback stopped there) [FAILED]" in said
    assert " ".join(failed.error.split()) in said  # the reason the REST API's JSON has
    host = service.base_url.removeprefix("http://")
    assert f"failed: Delete /v1/orders/{ids[1]} on {host} [FAILED]" in said
    assert "not undone yet: Delete /v1/orders/" in said and "[NONE]" in said  # not "no undo"
    for approval in target.agent.get_session(session).approvals:
        assert f"approval {approval.approval_id}" in said
    assert said.count("review after it ran") == 2 and said.count("Waiting for a decision") == 2
    assert all(len(line) <= 80 for line in shown.stdout.splitlines())


def test_an_undo_that_needs_approval_waits_for_the_reviewer(target: Target, service: FakeService) -> None:
    session, _ = place_orders(target, service, 1, undo={"POST *": {"requireApproval": True}})
    enable_http(target)
    waiting = cli("rollback", session.id, *target.options)
    assert waiting.exit_code == 0, waiting.output
    assert "The rollback waits for a reviewer" in waiting.output and "(display status ROLLING_BACK)" in waiting.output
    assert len(service.collection("orders")) == 1
    listed = cli("approvals", "list", "--status", "PENDING", *target.options)
    (approval,) = target.agent.list_approvals(status="PENDING")
    assert approval.approval_id in listed.output and "ROLLBACK" in listed.output
    approved = cli("approvals", "approve", approval.approval_id, *target.options)
    assert approved.exit_code == 0, approved.output
    assert f"APPROVED by {target.reviewer}" in approved.output
    if target.mode == "database":  # no server to carry on: the command line runs the rest
        assert f"agentrein rollback {session.id}" in approved.output
        resumed = cli("rollback", session.id, *target.options)
        assert resumed.exit_code == 0, resumed.output
    assert service.collection("orders") == {}
    assert target.agent.get_session(session).display_status is DisplayStatus.REVERTED


def test_a_rejection_with_a_reason_undoes_the_reviewed_call(target: Target, service: FakeService) -> None:
    review = ["--effect", "REQUIRE_APPROVAL", "--api-name", "POST /v1/orders"]
    assert cli("policies", "add", "review orders", *review, *target.options).exit_code == 0
    session, ids = place_orders(target, service, 1)
    (approval,) = target.agent.list_approvals(status="PENDING")
    assert approval.purpose is ApprovalPurpose.AFTER_EXECUTION
    enable_http(target)
    result = cli("approvals", "reject", approval.approval_id, "--reason", "wrong customer", *target.options)
    assert result.exit_code == 0, result.output
    assert f"REJECTED by {target.reviewer}" in result.output
    assert target.agent.get_approval(approval.approval_id).reason == "wrong customer"
    if target.mode == "database":
        assert cli("rollback", session.id, *target.options).exit_code == 0
    assert service.collection("orders") == {}
    assert [call.path for call in service.calls("DELETE")] == [f"/v1/orders/{ids[0]}"]


def test_policies_are_added_listed_and_removed(target: Target, service: FakeService) -> None:
    block = ["--effect", "BLOCK", "--connector", "http", "--api-name", "DELETE *"]
    added = cli("policies", "add", "no deletes", *block, *target.options)
    assert added.exit_code == 0, added.output
    (policy,) = target.agent.list_policies()
    assert (policy.name, policy.effect, policy.api_name, policy.agent_id) == ("no deletes", "BLOCK", "DELETE *", None)
    assert f"Added policy {policy.policy_id} 'no deletes': BLOCK, blocks the call" in " ".join(added.output.split())
    listed = cli("policies", "list", *target.options)
    row = [policy.policy_id, "BLOCK", "-", "yes", "http", "DELETE *", "*", "*", "no deletes"]
    assert table_rows(listed.output) == [row]
    session = target.agent.new_session(agent_id="cleaner")
    api = target.agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    with pytest.raises(PolicyBlockedError):
        api.delete("/v1/orders/ord_1")
    removed = cli("policies", "remove", policy.policy_id, *target.options)
    assert removed.exit_code == 0 and f"Removed policy {policy.policy_id}" in removed.output
    assert target.agent.list_policies() == []
    missing = cli("policies", "remove", policy.policy_id, *target.options)
    assert missing.exit_code == 1 and f"no policy with id '{policy.policy_id}'" in missing.output
    unknown = cli("policies", "add", "maybe", "--effect", "MAYBE", *target.options)
    assert unknown.exit_code == 2 and "'MAYBE' is not one of 'ALLOW', 'REQUIRE_APPROVAL', 'BLOCK'" in unknown.output
    assert target.agent.list_policies() == []


def test_a_policy_added_with_before_execution_says_it_holds_calls(target: Target) -> None:
    options = ["--effect", "REQUIRE_APPROVAL", "--api-name", "POST /v1/refunds", "--before-execution"]
    added = cli("policies", "add", "hold refunds", *options, "--approval-timeout", "90", *target.options)
    assert added.exit_code == 0, added.output
    (policy,) = target.agent.list_policies()
    assert policy.before_execution is True and policy.approval_timeout_ms == 90 * 60_000
    assert "holds the call until a reviewer approves it (the agent waits, for 90 minutes)" in " ".join(
        added.output.split()
    )
    cli("policies", "add", "review posts", "--effect", "REQUIRE_APPROVAL", "--api-name", "POST *", *target.options)
    rows = {row[-1]: row for row in table_rows(cli("policies", "list", *target.options).output)}
    assert rows["hold refunds"][1:3] == ["REQUIRE_APPROVAL", "before it runs"]
    assert rows["review posts"][1:3] == ["REQUIRE_APPROVAL", "after it ran"]


def test_connectors_are_listed_enabled_and_disabled(target: Target) -> None:
    listed = cli("connectors", "list", *target.options)
    assert listed.exit_code == 0, listed.output
    rows = {row[0]: row for row in table_rows(listed.output)}
    assert set(rows) == set(installed_connectors().names())
    assert rows["http"] == ["http", "no", "—", "{}"]
    secret = {"headers": {"Authorization": "Bearer s3cret"}}
    config = ["--config", json.dumps(LOOPBACK_HTTP), "--credentials", json.dumps(secret)]
    enabled = cli("connectors", "enable", "http", *config, *target.options)
    assert enabled.exit_code == 0, enabled.output
    assert 'Connector http enabled; config {"allowedHosts": ["127.0.0.1"]}; credentials stored' in enabled.output
    stored = target.engine.accounts.connector_config(target.org_id, "http")
    assert stored is not None and stored.enabled and stored.credentials and "s3cret" not in stored.credentials
    relisted = {row[0]: row for row in table_rows(cli("connectors", "list", *target.options).output)}
    assert relisted["http"] == ["http", "yes", "stored", '{"allowedHosts": ["127.0.0.1"]}']
    disabled = cli("connectors", "disable", "http", *target.options)
    assert disabled.exit_code == 0, disabled.output
    assert 'Connector http disabled; config {"allowedHosts": ["127.0.0.1"]}; credentials stored' in disabled.output
    stored = target.engine.accounts.connector_config(target.org_id, "http")
    assert stored is not None and not stored.enabled


def test_bad_connector_settings_are_clear_errors(target: Target) -> None:
    cases = [
        (["http", "--config", "{allowedHosts"], "--config: is not valid JSON"),
        (["http", "--credentials", "[1, 2]"], "--credentials: must be a JSON object"),
        (["http", "--config", '{"allowedHosts": 5}'], "config.allowedHosts: must be a list"),
        (["nope"], "connector"),
    ]
    for args, message in cases:
        result = cli("connectors", "enable", *args, *target.options)
        assert result.exit_code == 1, result.output
        assert message in result.output
    assert target.engine.accounts.connector_config(target.org_id, "http") is None  # nothing was stored


def test_a_connectors_api_address_on_a_private_address_is_refused_naming_the_variable_that_allows_it(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    settings = ["--config", '{"apiBase": "http://127.0.0.1:18204"}', "--credentials", '{"apiKey": "sk_test_1"}']
    result = cli("connectors", "enable", "stripe", *settings, *target.options)
    assert result.exit_code == 1, result.output
    assert "config.apiBase" in result.output and "private or local" in result.output
    assert ALLOW_PRIVATE_ENV in result.output
    assert target.engine.accounts.connector_config(target.org_id, "stripe") is None


def test_rollback_on_a_database_needs_the_connector_enabled(database_url: str, service: FakeService) -> None:
    with AgentRein(database_url, organisation=f"cli-{uuid.uuid4().hex[:8]}") as agent:
        session = agent.new_session(agent_id="order-agent")
        api = agent.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        api.post("/v1/orders", json={})
        result = cli("rollback", session.id, "--database-url", database_url, "--org", agent.organisation)
        assert result.exit_code == 1
        assert "error: nothing was rolled back" in result.output and "'http' is not enabled" in result.output
        assert len(service.collection("orders")) == 1
        assert agent.get_session(session).display_status is DisplayStatus.ACTIVE


def test_the_server_and_its_key_come_from_the_environment(server: RunningServer) -> None:
    tenant = server.tenant()
    with tenant.client() as client:
        session = client.new_session(agent_id="env-agent")
    listed = cli("sessions", "list", env={"AGENTREIN_URL": tenant.url, "AGENTREIN_API_KEY": tenant.key})
    assert listed.exit_code == 0, listed.output
    assert session.id in listed.output
    for command in (["sessions", "list"], ["connectors", "list"]):
        result = cli(*command, "--url", tenant.url)
        assert result.exit_code == 1
        assert "API key" in result.output
    wrong = cli("sessions", "list", "--url", tenant.url, "--api-key", "ar_not-a-key")
    assert wrong.exit_code == 1 and "error:" in wrong.output


def test_dashboard_users_are_created_with_a_prompted_password_listed_and_removed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    engine = Engine(Store(url))
    org = engine.accounts.ensure_organisation()
    created = runner.invoke(
        app,
        ["users", "create", "Lead@Example.com", "--role", "admin", "--database-url", url],
        input="long password\n" * 2,
    )
    assert created.exit_code == 0, created.output
    assert "lead@example.com can now sign in to the dashboard as admin of 'default'" in created.output
    assert engine.accounts.sign_in("lead@example.com", "long password").role == "admin"
    listed = runner.invoke(app, ["users", "list", "--database-url", url])
    assert "lead@example.com" in listed.output and "admin" in listed.output
    short = runner.invoke(app, ["users", "create", "x@example.com", "--password", "short", "--database-url", url])
    assert short.exit_code == 1 and "password: must be at least 10 characters" in short.output
    last = runner.invoke(app, ["users", "remove", "lead@example.com", "--database-url", url])
    assert last.exit_code == 1 and "last admin" in last.output
    runner.invoke(app, ["users", "create", "r@example.com", "--password", "long password", "--database-url", url])
    removed = runner.invoke(app, ["users", "remove", "r@example.com", "--database-url", url])
    assert removed.exit_code == 0 and [u.email for u in engine.accounts.list_users(org.org_id)] == ["lead@example.com"]
    engine.store.close()


# What the commands print: ids whole, JSON for scripts, and which records they used -------------------------

#: An id as the commands print one ("ses_" and 32 hex digits); a cut one stops short of its end.
ID = re.compile(r"\b(?:ses|act|apr|pol|key)_\w*")


def records_of_every_kind(target: Target, service: FakeService) -> tuple[SessionInfo, str]:
    """Through the commands and an agent: a policy, a session whose order waits for its review, the http
    connector enabled and an agent key. The session, and the key's secret."""
    review = ["--effect", "REQUIRE_APPROVAL", "--api-name", "POST /v1/orders"]
    assert cli("policies", "add", "review orders", *review, *target.options).exit_code == 0
    session, _ = place_orders(target, service, 1)
    enable_http(target)
    created = cli("keys", "create", "--role", "agent", *target.options)
    assert created.exit_code == 0, created.output
    return target.agent.get_session(session), created.stdout.splitlines()[-1]


def every_id(target: Target, session: SessionInfo) -> set[str]:
    keys = {key.key_id for key in target.engine.accounts.list_api_keys(target.org_id)}
    policies = {policy.policy_id for policy in target.agent.list_policies()}
    return {session.id, *(a.approval_id for a in session.approvals), *policies, *keys}


#: Every list, and the show.
LISTINGS = (["sessions", "list"], ["approvals", "list"], ["policies", "list"], ["connectors", "list"], ["keys", "list"])


def test_at_80_columns_no_id_is_cut_and_the_approval_id_shown_is_approved(target: Target, service: FakeService) -> None:
    session, _ = records_of_every_kind(target, service)
    whole = every_id(target, session)
    for command in [*LISTINGS, ["sessions", "show", session.id]]:
        shown = cli(*command, *target.options, env={"COLUMNS": "80"})
        assert shown.exit_code == 0, shown.output
        assert set(ID.findall(shown.stdout)) <= whole, (command, shown.stdout)
    listed = cli("approvals", "list", *target.options, env={"COLUMNS": "80"}).stdout
    (approval_id,) = {word for word in ID.findall(listed) if word.startswith("apr_")}  # the table, its outcomes
    approved = cli("approvals", "approve", approval_id, *target.options, env={"COLUMNS": "80"})
    assert approved.exit_code == 0, approved.output
    assert target.agent.get_approval(session.approvals[0].approval_id).status is ApprovalStatus.APPROVED


def test_piped_into_another_program_no_id_is_cut(target: Target, service: FakeService) -> None:
    session, _ = records_of_every_kind(target, service)
    whole = every_id(target, session)
    hermetic = {name: value for name, value in ENV.items() if value is not None and name != "COLUMNS"}
    env = {**{k: v for k, v in os.environ.items() if k not in ENV}, **hermetic}
    for command in (["sessions", "list"], ["approvals", "list"]):
        done = subprocess.run(
            [sys.executable, "-c", "from agentrein_cli.main import app; app()", *command, *target.options],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        printed = set(ID.findall(done.stdout))
        assert printed and printed <= whole, done.stdout


def field_names(answer: Any) -> list[list[str]]:
    """The field names of a record (a list's first), and of its first action and approval when it has them."""
    record = answer[0] if isinstance(answer, list) else answer
    names = [sorted(record)]
    names += [sorted(record[nested][0]) for nested in ("actions", "approvals") if record.get(nested)]
    return names


def test_every_list_and_show_answers_json_with_the_field_names_of_the_rest_api(
    target: Target, server: RunningServer, service: FakeService
) -> None:
    session, _ = records_of_every_kind(target, service)
    with ExitStack() as stack:
        # the REST API's answers, about the same kinds of records in an organisation of the server
        reference = target if target.mode == "server" else stack.enter_context(served(server))
        shown = session if reference is target else records_of_every_kind(reference, service)[0]
        url, key = reference.options[1], reference.options[3]
        rest = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"})
        stack.callback(rest.close)
        answers = {
            "sessions list": rest.get("/sessions").json()["sessions"],
            "sessions show": rest.get(f"/sessions/{shown.id}").json(),
            "approvals list": rest.get("/approvals", params={"include": list(INCLUDED)}).json(),
            "policies list": rest.get("/policies").json(),
            "connectors list": rest.get("/connectors").json(),
            "keys list": rest.get("/api-keys").json(),
        }
    for command, answer in answers.items():
        if command == "sessions show":
            printed = cli(*command.split(), session.id, "--json", *target.options)
        else:
            printed = cli(*command.split(), "--json", *target.options)
        assert printed.exit_code == 0, printed.output
        parsed = json.loads(printed.stdout)
        assert answer and field_names(parsed) == field_names(answer), command
        if target.mode == "server" and command not in ("sessions list", "sessions show", "approvals list"):
            assert parsed == answer, command  # the very records (a session's intent checks may move meanwhile)
    approvals = json.loads(cli("approvals", "list", "--json", *target.options).stdout)
    assert [a["approvalId"] for a in approvals] == [a.approval_id for a in session.approvals]
    assert {"description", "consequences", "outcome"} <= approvals[0].keys()  # what the README says each has


def test_each_command_says_on_stderr_which_server_or_database_it_used_and_no_password(target: Target) -> None:
    listed = cli("policies", "list", "--json", *target.options)
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []  # stdout is the answer alone
    where = target.options[1]
    if target.mode == "server":
        assert listed.stderr == f"Using the server {where}\n"
        return
    password = urlsplit(where).password
    shown = where.replace(f":{password}@", ":***@") if password else where
    org = target.options[3]
    assert listed.stderr == f"Using the database {shown} (organisation {org})\n"
    assert not password or f":{password}@" not in listed.output


#: The commands that only read.
READS = (*LISTINGS, ["sessions", "show", "ses_1"], ["orgs", "list"], ["users", "list"])


def test_a_read_in_a_directory_without_a_database_says_how_to_point_at_one_and_creates_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for command in READS:
        result = cli(*command)
        assert result.exit_code == 1, (command, result.output)
        said = " ".join(result.stderr.split())
        assert f"error: no database at {Path.cwd() / 'agentrein.db'} (and this command creates none)" in said
        assert "--database-url sqlite:///PATH.db or $AGENTREIN_DATABASE_URL" in said
    assert list(tmp_path.iterdir()) == []


def test_a_read_in_an_organisation_that_does_not_exist_names_those_there_and_creates_none(database_url: str) -> None:
    with AgentRein(database_url, organisation=f"cli-{uuid.uuid4().hex[:8]}") as agent:
        result = cli("sessions", "list", "--database-url", database_url, "--org", "typo")
        assert result.exit_code == 1, result.output
        assert "error: no organisation 'typo' in this database" in result.output
        assert repr(agent.organisation) in result.output
        with closing(Store(database_url)) as store:
            assert "typo" not in {org.name for org in Engine(store).accounts.list_organisations()}


def test_api_keys_are_created_listed_and_revoked(target: Target) -> None:
    created = cli("keys", "create", "--role", "agent", *target.options)
    assert created.exit_code == 0, created.output
    secret = created.stdout.splitlines()[-1]
    key = target.engine.accounts.authenticate(secret)
    assert (key.role, key.org_id) == (Role.AGENT, target.org_id)
    assert f"Created agent key {key.key_id}. The key, shown only now:" in created.stdout
    rows = {row[0]: row for row in table_rows(cli("keys", "list", *target.options).output)}
    assert rows[key.key_id][1:3] == ["agent", f"{secret[:10]}…"] and rows[key.key_id][4] == "—"
    revoked = cli("keys", "revoke", key.key_id, *target.options)
    assert revoked.exit_code == 0, revoked.output
    assert f"Revoked {key.key_id}" in revoked.output
    with pytest.raises(UnauthorizedError):
        target.engine.accounts.authenticate(secret)
    rows = {row[0]: row for row in table_rows(cli("keys", "list", *target.options).output)}
    assert rows[key.key_id][4] != "—"
    if target.mode == "server":  # and the server itself refuses it now
        answer = httpx.get(f"{target.options[1]}/sessions", headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 401


def test_organisations_and_dashboard_users_are_listed_as_json_without_password_hashes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'people.db'}"
    with closing(Store(url)) as store:
        engine = Engine(store)
        org = engine.accounts.ensure_organisation()
        user = engine.accounts.create_user(org.org_id, "lead@example.com", "admin", "long password")
    orgs = cli("orgs", "list", "--json", "--database-url", url)
    assert orgs.exit_code == 0, orgs.output
    assert json.loads(orgs.stdout) == [
        {"orgId": org.org_id, "name": "default", "plan": "team", "createdAt": org.created_at.isoformat()}
    ]
    users = cli("users", "list", "--json", "--database-url", url)
    assert users.exit_code == 0, users.output
    assert json.loads(users.stdout) == [
        {"userId": user.user_id, "email": "lead@example.com", "role": "admin", "createdAt": user.created_at.isoformat()}
    ]


def test_help_texts_stand_on_their_own() -> None:
    root = typer.main.get_command(app)
    texts: list[str] = []

    def gather(command: Any, context: typer.Context) -> None:
        texts.append(command.help or "")
        texts.extend(getattr(param, "help", None) or "" for param in command.params)
        for name in command.list_commands(context) if hasattr(command, "list_commands") else ():
            found = command.get_command(context, name)
            gather(found, typer.Context(found, parent=context, info_name=name))

    gather(root, typer.Context(root, info_name="agentrein"))
    assert len(texts) > 100  # every command and option was read
    assert [text for text in texts if "§" in text or "status reference" in text.lower()] == []


def test_at_80_columns_no_help_breaks_a_stored_value_in_two() -> None:
    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def gather(command: Any, context: typer.Context, path: list[str]) -> None:
        paths.append(path)
        for name in command.list_commands(context) if hasattr(command, "list_commands") else ():
            found = command.get_command(context, name)
            gather(found, typer.Context(found, parent=context, info_name=name), [*path, name])

    gather(root, typer.Context(root, info_name="agentrein"), [])
    broken = {}
    for path in paths:
        wide = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"}).output
        narrow = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).output
        values = set(re.findall(r"\b[A-Z]{4,}(?:_[A-Z]+)*\b", wide))  # PENDING, REQUIRE_APPROVAL
        count = {
            value: (len(re.findall(rf"\b{value}\b", wide)), len(re.findall(rf"\b{value}\b", narrow)))
            for value in values
        }
        if cut := {value for value, (whole, kept) in count.items() if kept < whole}:
            broken[" ".join(path)] = cut
    assert len(paths) > 20 and broken == {}


def test_a_database_typed_on_the_command_line_wins_over_the_server_in_the_environment(
    server: RunningServer, database_url: str
) -> None:
    tenant = server.tenant(http_undo=False)
    from_environment = {"AGENTREIN_URL": tenant.url, "AGENTREIN_API_KEY": tenant.key}
    with AgentRein(database_url, organisation=f"cli-{uuid.uuid4().hex[:8]}") as agent:
        kept = agent.new_session(agent_id="local-agent")
        options = ["--database-url", database_url, "--org", agent.organisation]
        listed = cli("sessions", "list", "--json", *options, env=from_environment)
        assert listed.exit_code == 0, listed.output
        assert [s["id"] for s in json.loads(listed.stdout)] == [kept.id]
        assert listed.stderr.startswith("Using the database ")
    both = cli("sessions", "list", "--url", tenant.url, "--database-url", database_url, env=from_environment)
    assert both.exit_code == 1 and "give a server (--url) or a database, not both" in both.output
    org = cli("sessions", "list", "--org", "acme", env=from_environment)
    assert org.exit_code == 1 and "--org: on a server the API key decides the organisation" in org.output


def test_serve_on_a_database_that_has_organisations_says_how_to_make_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    AgentRein(url).close()  # an embedded agent's database: organisation 'default', no key, no dashboard user
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # what serve prints before it serves
    started = cli("serve", "--database-url", url)
    assert started.exit_code == 0, started.output
    said = " ".join(started.output.split())
    assert "This database has its organisations already, so no key or password is printed." in said
    assert f"An operator key: `agentrein keys create --role operator --database-url {url}`" in said
    assert f"a dashboard admin: `agentrein users create EMAIL --role admin --database-url {url}`" in said


def test_serve_on_a_database_embedded_agents_wrote_says_so_and_how_to_start_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    AgentRein(url).close()
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    said = " ".join(cli("serve", "--database-url", url).output.split())
    assert "This database was written by embedded agents (AgentRein() with no server)" in said
    assert "this server's workers will roll back their sessions in it" in said
    clean = f"sqlite:///{tmp_path / 'agentrein-server.db'}"
    assert f"To start clean, give the server a database of its own: `agentrein serve --database-url {clean}`" in said


def test_serve_on_its_own_database_again_says_nothing_of_embedded_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    assert "Created organisation 'default'" in cli("serve", "--database-url", url).output
    again = " ".join(cli("serve", "--database-url", url).output.split())
    assert "no key or password is printed" in again and "embedded agents" not in again


def test_serve_without_a_database_url_keeps_a_file_of_its_own_not_the_embedded_agents_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTREIN_DATABASE_URL", raising=False)
    AgentRein().close()  # an embedded agent's ./agentrein.db
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    started = cli("serve")
    assert started.exit_code == 0, started.output
    said = " ".join(started.output.split())
    assert "Created organisation 'default' (plan team)" in said
    assert f"database: sqlite:///{tmp_path / 'agentrein-server.db'}" in said
    with closing(Store("sqlite:///agentrein.db")) as store:
        engine = Engine(store)
        (org,) = engine.accounts.list_organisations()
        assert engine.accounts.list_api_keys(org.org_id) == []  # the agents' database was left alone


def test_serve_without_a_database_url_beside_a_servers_records_of_an_older_version_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTREIN_DATABASE_URL", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    assert cli("serve", "--database-url", "sqlite:///agentrein.db").exit_code == 0  # as an older version did
    again = cli("serve")
    assert again.exit_code == 1
    said = " ".join(again.output.split())
    assert f"{tmp_path / 'agentrein.db'} holds a server's records" in said
    assert f"`agentrein serve --database-url sqlite:///{tmp_path / 'agentrein.db'}`" in said
    assert not (tmp_path / "agentrein-server.db").exists()  # no second, empty organisation was made


def test_the_approval_list_says_what_approving_and_rejecting_would_do(target: Target, service: FakeService) -> None:
    review = ["--effect", "REQUIRE_APPROVAL", "--api-name", "POST /v1/orders"]
    assert cli("policies", "add", "review orders", *review, *target.options).exit_code == 0
    _, (order,) = place_orders(target, service, 1)
    (approval,) = target.agent.list_approvals(status="PENDING")
    host = service.base_url.removeprefix("http://")
    listed = cli("approvals", "list", *target.options, env={"COLUMNS": "80"})
    assert listed.exit_code == 0, listed.output
    assert f"{approval.approval_id}: Create order {order} on {host}" in listed.output
    assert re.search(r"time left +\d+h \d\dm\n", listed.output)  # as people write it, not 86381s
    assert f"  Reject: This one action is undone: Delete /v1/orders/{order} on {host}." in listed.output
    approved = cli("approvals", "approve", approval.approval_id, *target.options)
    assert "Approved: the action stays done." in approved.output


def test_connector_settings_on_a_database_are_stored_by_the_engine_without_the_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'settings.db'}"
    assert runner.invoke(app, ["orgs", "create", "default", "--database-url", url]).exit_code == 0
    script = (
        "import sys\n"
        "from agentrein_cli.main import app\n"
        "try:\n"
        f"    app(['connectors', 'enable', 'http', '--config', '{{\"allowedHosts\": [\"api.example.com\"]}}',"
        f" '--database-url', {url!r}])\n"
        "except SystemExit as done:\n    assert not done.code, done.code\n"
        "print('server:', sorted(m for m in sys.modules if m.startswith('agentrein_server')))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert "Connector http enabled" in done.stdout and "server: []" in done.stdout
