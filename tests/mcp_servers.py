"""The reference MCP servers from npm (pinned in ``contract/mcp-servers``), as the MCP tests launch them over
stdio. ``.ci/run`` installs them; a checkout that has not is installed at the first use (``npm ci``), so that
``uv run pytest`` needs nothing more than Node."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from mcp import StdioServerParameters

PACKAGES = Path(__file__).parent.parent / "contract" / "mcp-servers"
SERVERS = PACKAGES / "node_modules" / "@modelcontextprotocol"
_installing = threading.Lock()


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("the MCP tests launch the reference MCP servers with Node.js (>= 20): install it")
    return found


def script(package: str) -> str:
    """The server's entry point, installed first if this checkout has not installed the servers yet."""
    entry = SERVERS / package / "dist" / "index.js"
    with _installing:
        if not entry.exists():
            npm = shutil.which("npm") or "npm"
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGES, check=True, capture_output=True)
    return str(entry)


def memory_server(folder: Path) -> StdioServerParameters:
    """The reference knowledge-graph server, keeping its graph in a file in ``folder``."""
    env = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl"), "PATH": os.environ["PATH"]}
    return StdioServerParameters(command=node(), args=[script("server-memory")], env=env)


def filesystem_server(folder: Path) -> StdioServerParameters:
    """The reference filesystem server, allowed ``folder`` alone."""
    args = [script("server-filesystem"), str(folder)]
    return StdioServerParameters(command=node(), args=args, env={"PATH": os.environ["PATH"]})
