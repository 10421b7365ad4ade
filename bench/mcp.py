"""How much latency ``agentrein mcp proxy`` adds to an MCP host's tool calls, embedded on SQLite.

What it measures
    The reference memory server (``contract/mcp-servers``, run with node) is reached over stdio by the official
    Python client twice: directly, and through ``agentrein mcp proxy --database-url sqlite:///<tmp>/bench.db``
    in front of a second instance of it (each instance with a graph file of its own). The same calls are made
    on both connections, and the added latency is ``median(proxied) - median(direct)``:

    - READ ``read_graph``: the proxy's forwarding and the guard's classification (a read-only tool passes
      through unrecorded).
    - WRITE ``create_entities`` of one new entity: the same, plus the write-ahead record before the call and its
      confirmation after it. Both graphs grow alike, call for call.

    Aim: <= 1 ms added (the issue's figure, for either row).

How
    Both connections are opened and warmed up first (the proxy opens its AgentRein session at the first call).
    Direct and proxied calls then run in alternating blocks (``--rounds`` rounds of ``--calls`` calls per side;
    which side goes first alternates by round), each call timed alone with ``time.perf_counter_ns``. Figures are
    printed, never asserted.

Run ``uv run python bench/mcp.py`` (``--help`` for options), after ``(cd contract/mcp-servers && npm ci)``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from itertools import count
from pathlib import Path
from typing import Any

# This file is named as the issue pins it, and so shadows the mcp SDK for `python bench/mcp.py`, whose folder
# comes first on the path: the SDK is imported from the environment, not from here.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MEMORY_SERVER = ROOT / "contract/mcp-servers/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
AGENTREIN = Path(sys.executable).parent / "agentrein"
AIM_NS = 1_000_000

Call = Callable[[Client], Awaitable[Any]]


def memory(folder: Path, name: str) -> dict[str, str]:
    """The environment of a memory server keeping its graph in ``folder/name``, without AgentRein's own."""
    own = {k: v for k, v in os.environ.items() if not k.startswith("AGENTREIN_")}
    return {**own, "MEMORY_FILE_PATH": str(folder / name)}


async def timed(client: Client, call: Call, n: int, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        result = await call(client)
        out.append(clock() - start)
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")


async def measure(direct: Client, proxied: Client, call: Call, rounds: int, calls: int) -> tuple[list[int], ...]:
    await timed(direct, call, calls, [])
    await timed(proxied, call, calls, [])
    raw: list[int] = []
    through: list[int] = []
    for round_no in range(rounds):
        blocks = [(direct, raw), (proxied, through)]
        if round_no % 2:
            blocks.reverse()
        for client, out in blocks:
            await timed(client, call, calls, out)
    return raw, through


def read_graph(client: Client) -> Awaitable[Any]:
    return client.call_tool("read_graph", {})


def creating() -> Call:
    """``create_entities`` of a new entity each call; the two sides name theirs alike (one counter each)."""
    numbers: dict[int, count[int]] = {}

    def create(client: Client) -> Awaitable[Any]:
        n = next(numbers.setdefault(id(client), count()))
        entity = {"name": f"e{n}", "entityType": "thing", "observations": ["made by the bench"]}
        return client.call_tool("create_entities", {"entities": [entity]})

    return create


def row(label: str, raw: list[int], through: list[int]) -> str:
    added = statistics.median(through) - statistics.median(raw)
    verdict = "ok" if added <= AIM_NS else "over"
    p50s = f"{statistics.median(raw) / 1000:9.0f} {statistics.median(through) / 1000:9.0f}"
    return f"{label:<22} {p50s} {added / 1000:9.0f} us  (aim <= {AIM_NS / 1000:.0f} us: {verdict})"


async def main(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = f"sqlite:///{folder / 'bench.db'}"
        proxy_args = ["mcp", "proxy", "--database-url", database, "--name", "memory", "--", "node", str(MEMORY_SERVER)]
        async with AsyncExitStack() as stack:
            errors = stack.enter_context((folder / "stderr.log").open("w"))
            direct_server = StdioServerParameters(
                command="node", args=[str(MEMORY_SERVER)], env=memory(folder, "direct.jsonl")
            )
            proxy = StdioServerParameters(command=str(AGENTREIN), args=proxy_args, env=memory(folder, "proxied.jsonl"))
            direct = await stack.enter_async_context(Client(stdio_client(direct_server, errlog=errors), mode="legacy"))
            proxied = await stack.enter_async_context(Client(stdio_client(proxy, errlog=errors), mode="legacy"))
            print(f"{'call':<22} {'direct':>9} {'proxied':>9} {'added':>9}   (p50, us; {rounds} x {calls} per side)")
            for label, call in (("READ read_graph", read_graph), ("WRITE create_entities", creating())):
                raw, through = await measure(direct, proxied, call, rounds, calls)
                print(row(label, raw, through))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=50)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.calls))
