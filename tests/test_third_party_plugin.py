"""A connector shipped as its own distribution (tests/plugins/todo) is installed the way its users install it, found
through the entry point alone, passes its own tests with nothing but agentrein-testing, and is recorded through a
server like the built-in ones; the workspace itself does not have it installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from agentrein_todo import TodoClient
from serving import RunningServer
from third_party import EXAMPLE_PLUGIN, uv

from agentrein import AgentRein
from agentrein_core.plugins import installed_connectors

WORKSPACE = Path(__file__).parent.parent


def test_the_plugin_is_found_through_its_entry_point_alone() -> None:
    assert "todo" in installed_connectors().names()
    assert type(installed_connectors().get("todo")).__module__ == "agentrein_todo"


def test_the_plugins_own_tests_pass_with_agentrein_testing_alone(
    pytester: pytest.Pytester, plugins_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process of its own, rooted at the plugin (its pyproject.toml), so none of this repository's conftest
    # applies: the contract kit and the fixtures come from the installed agentrein-testing.
    monkeypatch.setenv("PYTHONPATH", str(plugins_site))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    result = pytester.runpytest_subprocess(str(EXAMPLE_PLUGIN / "tests"), "-p", "no:cacheprovider", timeout=300)
    assert f"rootdir: {EXAMPLE_PLUGIN}" in result.stdout.str()
    result.assert_outcomes(passed=10)


def test_through_a_server_the_plugins_calls_are_recorded_like_any_other(server: RunningServer) -> None:
    ar = server.tenant().client()
    todo = TodoClient()
    session = ar.new_session(agent_id="chores", intent="shopping list")
    wrapped = ar.wrap(todo, session, connector="todo")
    wrapped.add_item("buy milk")
    wrapped.add_item("buy bread")
    assert [(a.connector, a.api_name) for a in ar.get_session(session).actions] == [("todo", "items.create")] * 2
    assert len(todo.items) == 2
    ar.close()


def test_the_workspace_itself_does_not_list_the_plugin(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agentrein.db'}"
    AgentRein(url).close()  # the default organisation, for the command to list the connectors of
    command = [uv(), "run", "--no-sync", "agentrein", "connectors", "list", "--database-url", url]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"COLUMNS": "200"}
    listed = subprocess.run(command, cwd=WORKSPACE, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names = {line.split()[1] for line in listed.stdout.splitlines() if line.startswith("│")}
    assert {"http", "stripe", "github"} <= names
    assert "todo" not in names
