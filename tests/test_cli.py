"""The `agentrein` command line."""

from __future__ import annotations

from pathlib import Path

from agentrein import ActionStatus, AgentRein, DisplayStatus
from agentrein_server.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def test_demo_fails_on_step_four_and_shows_the_lifo_rollback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--database-url", url], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        out.index("DELETE /v1/tickets/")
        < out.index("DELETE /v1/subscriptions/")
        < out.index("DELETE /v1/customers/")
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
