"""The README is true: its quick start runs as written (against the loopback fake service instead of
api.example.com), its links lead somewhere, its commands exist, and its way of making a server's keys works."""

from __future__ import annotations

import json
import re
import shlex
import threading
from pathlib import Path

import httpx
import pytest
import typer
from serving import RunningServer
from typer.testing import CliRunner

from agentrein import ActionStatus, AgentRein, SessionStatus
from agentrein_cli.main import app
from agentrein_testing import FakeService

README = Path(__file__).parent.parent / "README.md"


def test_the_quick_start_runs_and_a_rejection_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: FakeService, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # AgentRein() writes ./agentrein.db
    monkeypatch.delenv("AGENTREIN_DATABASE_URL", raising=False)
    match = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    code = match.group(1).replace("https://api.example.com", service.base_url)
    code = code.replace('requires_approval=["DELETE *"],', 'requires_approval=["DELETE *"], poll_interval_ms=20,')

    def reviewer() -> None:
        ar = AgentRein()
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.02)
        ar.reject(pending[0].approval_id, reviewer="lead@example.com", reason="not this customer")
        ar.close()

    thread = threading.Thread(target=reviewer)
    thread.start()
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    thread.join()
    assert "rejected: not this customer" in capsys.readouterr().out
    ar = namespace["ar"]
    assert isinstance(ar, AgentRein)
    session = ar.get_session(ar.list_sessions()[0])
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert session.status is SessionStatus.ROLLED_BACK
    assert (tmp_path / "agentrein.db").exists()


def test_every_relative_link_in_the_readme_leads_to_a_file() -> None:
    links = [link.partition("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", README.read_text())]
    relative = [link for link in links if link and "://" not in link and not link.startswith("mailto:")]
    assert relative  # the connectors' READMEs and CONTRIBUTING.md at least
    assert [link for link in relative if not (README.parent / link).is_file()] == []


def test_the_readme_links_to_the_readme_of_every_connector() -> None:
    text = README.read_text()
    connectors = sorted(path.parent.name for path in (README.parent / "connectors").glob("*/pyproject.toml"))
    assert connectors
    assert [name for name in connectors if f"](connectors/{name}/README.md)" not in text] == []


def readme_commands() -> list[list[str]]:
    """The words of every ``agentrein`` command the README shows (in console blocks and in inline code)."""
    text = README.read_text()
    shown = [line for block in re.findall(r"```console\n(.*?)```", text, re.S) for line in block.splitlines()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    shown += [" ".join(code.split()) for code in re.findall(r"`([^`]+)`", prose)]
    commands = [re.match(r"(?:uv run )?agentrein (.*)", line) for line in shown]
    return [shlex.split(found.group(1), comments=True) for found in commands if found]


def test_every_command_the_readme_shows_exists_with_the_options_it_gives() -> None:
    root = typer.main.get_command(app)
    commands = readme_commands()
    assert len(commands) > 10
    for words in commands:
        command, context, rest = root, typer.Context(root, info_name="agentrein"), list(words)
        while rest and hasattr(command, "list_commands") and rest[0].split("|")[0] in command.list_commands(context):
            *alternatives, last = rest.pop(0).split("|")
            assert all(command.get_command(context, name) for name in alternatives), words
            command = command.get_command(context, last)
            context = typer.Context(command, parent=context, info_name=last)
        assert not hasattr(command, "list_commands"), f"{words}: no such command"
        options = {name for param in command.params for name in getattr(param, "opts", [])}
        own = rest[: rest.index("--")] if "--" in rest else rest  # after `--`: another program's words
        assert [w for w in own if w.startswith("--") and w.split("=")[0] not in options] == [], words


def test_the_readme_makes_an_agent_key_in_the_server_not_in_the_database_at_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: RunningServer
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTREIN_DATABASE_URL", raising=False)
    AgentRein().close()  # the demo's ./agentrein.db, with its organisation 'default'
    assert "export AGENTREIN_URL=http://127.0.0.1:8000 AGENTREIN_API_KEY=ar_…" in README.read_text()
    (make_key,) = (words for words in readme_commands() if words[:2] == ["keys", "create"] and "--org" not in words)
    operator = server.tenant(http_undo=False)  # the organisation and operator key `serve` makes and prints
    env = {"AGENTREIN_URL": operator.url, "AGENTREIN_API_KEY": operator.key, "COLUMNS": "120"}
    made = CliRunner().invoke(app, make_key, env=env)
    assert made.exit_code == 0, made.output
    agent_key = made.stdout.splitlines()[-1]
    answer = httpx.get(f"{operator.url}/sessions", headers={"Authorization": f"Bearer {agent_key}"})
    assert answer.status_code == 200, answer.text


def test_every_package_the_typescript_tests_install_supports_the_node_version_the_readme_names() -> None:
    (named,) = re.findall(r"Node (\d+) or newer", README.read_text())
    lock = json.loads((README.parent / "sdk-ts" / "package-lock.json").read_text())
    wanting_more = {}
    for where, package in lock["packages"].items():
        wanted = package.get("engines", {}).get("node") if isinstance(package.get("engines"), dict) else None
        if wanted is None:
            continue
        # the lowest major version any alternative accepts (">=20", ">= 14", "^18.17.0 || >=20", "*")
        lowest = min(
            int(m[1]) if (m := re.match(r"\s*(?:>=|\^|~)?\s*v?(\d+)", alt)) else 0 for alt in wanted.split("||")
        )
        if lowest > int(named):
            wanting_more[where] = wanted
    assert wanting_more == {}, f"`npm ci` warns EBADENGINE on Node {named}"
