"""``contract/mcp-calls.json``: what the Python mcp connector records for each call to the reference servers, as the
TypeScript connector must too (``sdk-ts/test/mcp.test.ts`` reads the same file)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_servers import filesystem_server, memory_server

from agentrein import AsyncAgentRein
from agentrein_core.converter import to_wire

CONTRACT = json.loads((Path(__file__).parent.parent / "contract" / "mcp-calls.json").read_text())


def placed(value: Any, folder: Path) -> Any:
    """``value`` with ``{dir}`` standing for the filesystem server's directory."""
    return json.loads(json.dumps(value).replace("{dir}", str(folder)))


@pytest.mark.parametrize("case", CONTRACT["cases"], ids=lambda case: case["name"])
def test_the_python_connector_records_what_the_contract_says(case: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    params = memory_server(tmp_path) if case["server"] == "memory" else filesystem_server(folder)

    async def scenario() -> list[tuple[str, Any, Any]]:
        seen = []
        async with AsyncAgentRein(f"sqlite:///{tmp_path / 'a.db'}") as ar:
            s = await ar.new_session(agent_id="contract")
            async with Client(params) as raw:
                wrapped = ar.wrap(raw, s, connector="mcp", server=case["server"])
                for call in case["calls"]:
                    before = len((await ar.get_session(s)).actions)
                    await wrapped.call_tool(call["tool"], placed(call["arguments"], folder))
                    actions = (await ar.get_session(s)).actions
                    recorded = None
                    if len(actions) > before:
                        action = actions[-1]
                        recorded = {
                            "apiName": action.api_name,
                            "operationType": str(action.operation_type),
                            "about": action.payload.get("about", []),
                            "undo": to_wire(action.undo),
                        }
                    seen.append((call["tool"], recorded, placed(call["recorded"], folder)))
        return seen

    for tool, recorded, expected in asyncio.run(scenario()):
        assert recorded == expected, tool
