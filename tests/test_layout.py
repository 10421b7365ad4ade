"""The dependency directions of DESIGN.md §2 hold when the code is imported: nothing imports the command
line or the demo, the server never imports the SDK, the SDK never imports the server, the core neither, and the
testing kit imports neither the server nor a connector (a connector author installs it beside their plugin alone)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PRODUCTS = ("agentrein", "agentrein_server", "agentrein_cli", "agentrein_demo")
CONNECTORS = ("agentrein_http", "agentrein_stripe", "agentrein_github")


def imported_with(module: str) -> set[str]:
    """Every module loaded in a fresh interpreter by importing ``module``."""
    script = f"import importlib, json, sys; importlib.import_module({module!r}); print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("agentrein_server.app", ("agentrein", "agentrein_cli", "agentrein_demo")),
        ("agentrein", ("agentrein_server", "agentrein_cli", "agentrein_demo")),
        ("agentrein_core.engine", PRODUCTS + CONNECTORS),
        ("agentrein_demo.run", ("agentrein_cli",)),
        ("agentrein_testing", ("agentrein_server", "agentrein_cli", "agentrein_demo", *CONNECTORS)),
    ],
)
def test_a_distribution_imports_none_of_those_it_may_not_depend_on(module: str, forbidden: tuple[str, ...]) -> None:
    loaded = imported_with(module)
    assert sorted(m for m in loaded if m.split(".")[0] in forbidden) == []
