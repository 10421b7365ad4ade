"""Third-party plugins as their users get them: built and installed for real (by uv, offline, from the source
tree) into a directory of the test session's own, which the session then puts on ``sys.path``. Only the test
process sees them; the workspace's environment never has them installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The worked example of CONTRIBUTING.md's plugin guide: a distribution of its own, with its own tests.
EXAMPLE_PLUGIN = Path(__file__).parent / "plugins" / "todo"


def uv() -> str:
    """The uv that runs the tests (``uv run`` says which), else the one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        raise RuntimeError("the tests install the example plugin with uv: run them with `uv run pytest`")
    return found


def install(source: Path, target: Path) -> None:
    """``pip install source`` into ``target``, as a user would, but nothing fetched: its dependencies are the
    workspace's own (``--no-deps``) and its build backend, hatchling, is a dev dependency (``--no-build-isolation``).
    ``--no-cache``: uv would otherwise reuse a build of an earlier state of the source tree."""
    command = [
        *(uv(), "pip", "install", "--offline", "--no-cache", "--no-deps", "--no-build-isolation"),
        *("--python", sys.executable, "--target", str(target), str(source)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"installing {source.name} failed:\n{done.stdout}{done.stderr}")
