"""The `agentrein` command line."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from typer.testing import CliRunner

from agentrein import ActionStatus, AgentRein, DisplayStatus
from agentrein_server.cli import app
from agentrein_server.demo.fake_service import FakeService

runner = CliRunner()


def test_demo_fails_on_step_four_and_shows_the_lifo_rollback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--database-url", url], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        out.index("DELETE /v1/tickets/") < out.index("DELETE /v1/subscriptions/") < out.index("DELETE /v1/customers/")
    )
    assert "display status: REVERTED" in out
    assert "Left on the service: 0 customers, 0 subscriptions, 0 tickets, 0 invoices" in out
    # the records are really in the database the demo was pointed at
    ar = AgentRein(url)
    (session,) = ar.list_sessions()
    assert session.display_status is DisplayStatus.REVERTED
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK] * 3 + [ActionStatus.FAILED]


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
