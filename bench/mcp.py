"""How much latency AgentRein adds to an MCP tool call, on the embedded SQLite store (DESIGN §4a).

What it measures
    The reference memory server (``contract/mcp-servers``, ``@modelcontextprotocol/server-memory``) over stdio,
    one ``tools/call`` of ``add_observations`` at a time (a write: recorded before it runs, confirmed with its
    undo after), the same call made three ways in one run:

    - DIRECT: through an ``mcp.Client`` connected to the server.
    - WRAPPED: through the same kind of client wrapped with ``AsyncAgentRein.wrap(..., connector="mcp")``
      (embedded, ``sqlite:///<tmp>/bench.db``): the write-ahead record, the call, the confirmation.
    - PROXIED: through an ``mcp.Client`` connected to ``agentrein mcp proxy -- node <server>`` (the proxy a host
      launches instead of the server; embedded on its own SQLite file), both hops over stdio.

    added = median(way) - median(DIRECT). Aim for PROXIED: <= 1 ms added. Figures are printed, never asserted.

    With the proxy, a read (``open_nodes``, which nothing records) is timed too, DIRECT and PROXIED: what the
    proxy's hop costs alone (the host's request through the proxy's MCP server and its client to the upstream,
    and the answer back), apart from recording the call.

Run: ``uv run python bench/mcp.py [--calls 200] [--rounds 3]`` (needs Node and ``npm ci`` in
``contract/mcp-servers``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, and this file (mcp.py) would stand in for the
# mcp package: look past it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from mcp import Client, StdioServerParameters  # noqa: E402

from agentrein import AsyncAgentRein  # noqa: E402

ROOT = Path(__file__).parent.parent
SERVER = ROOT / "contract" / "mcp-servers" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
AIM_MS = 1.0

Call = Callable[[int], Awaitable[Any]]


def memory_server(folder: Path) -> StdioServerParameters:
    node = shutil.which("node")
    if node is None or not (SERVER / "index.js").exists():
        sys.exit("needs Node and the reference servers: (cd contract/mcp-servers && npm ci)")
    env = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl"), "PATH": os.environ["PATH"]}
    return StdioServerParameters(command=node, args=[str(SERVER / "index.js")], env=env)


def proxy(folder: Path, upstream: StdioServerParameters) -> StdioServerParameters:
    """``agentrein mcp proxy`` in front of ``upstream``, recording embedded on a SQLite file of its own."""
    agentrein = str(Path(sys.executable).parent / "agentrein")
    database = f"sqlite:///{folder / 'proxy.db'}"
    args = ["mcp", "proxy", "--name", "memory", "--agent-id", "bench", "--database-url", database, "--"]
    return StdioServerParameters(command=agentrein, args=[*args, upstream.command, *upstream.args], env=upstream.env)


async def seed(client: Any, entity: str) -> None:
    await client.call_tool(
        "create_entities", {"entities": [{"name": entity, "entityType": "bench", "observations": []}]}
    )


def observing(client: Any, entity: str) -> Call:
    async def call(i: int) -> Any:
        return await client.call_tool(
            "add_observations", {"observations": [{"entityName": entity, "contents": [f"o{i}"]}]}
        )

    return call


def reading(client: Any, entity: str) -> Call:
    async def call(i: int) -> Any:
        return await client.call_tool("open_nodes", {"names": [entity]})

    return call


async def timed(call: Call, calls: int, warmup: int, start: int) -> list[float]:
    for i in range(warmup):
        await call(start - warmup + i)
    out = []
    for i in range(calls):
        began = time.perf_counter()
        await call(start + i)
        out.append(time.perf_counter() - began)
    return out


async def run(calls: int, rounds: int, warmup: int, proxied_too: bool) -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="agentrein-bench-mcp-"))
    upstream = memory_server(folder)
    samples: dict[str, list[float]] = {"DIRECT": [], "WRAPPED": []}
    ar = AsyncAgentRein(f"sqlite:///{folder / 'bench.db'}")
    try:
        session = await ar.new_session(agent_id="bench", intent="time MCP tool calls")
        async with AsyncExitStack() as clients:
            direct = await clients.enter_async_context(Client(upstream))
            raw = await clients.enter_async_context(Client(upstream))
            wrapped = ar.wrap(raw, session, connector="mcp", server="memory")
            ways = {"DIRECT": (direct, "d", observing), "WRAPPED": (wrapped, "w", observing)}
            if proxied_too:
                proxied = await clients.enter_async_context(Client(proxy(folder, upstream)))
                ways["PROXIED"] = (proxied, "p", observing)
                # An entity nothing writes to, so that what a read answers stays the same size all along.
                ways["DIRECT read"] = (direct, "r", reading)
                ways["PROXIED read"] = (proxied, "r", reading)
            samples |= {name: [] for name in ways}
            for entity in {entity for _, entity, _ in ways.values()}:
                await seed(direct, entity)
            n = warmup
            for _ in range(rounds):  # interleaved, so a slow stretch of the machine falls on every way alike
                for name, (client, entity, way) in ways.items():
                    samples[name] += await timed(way(client, entity), calls, warmup, n)
                n += calls + warmup
    finally:
        await ar.close()
        shutil.rmtree(folder, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--without-proxy", action="store_true", help="leave out the PROXIED way")
    options = parser.parse_args()
    samples = asyncio.run(run(options.calls, options.rounds, options.warmup, not options.without_proxy))
    print(f"{'way':<13} {'p50 ms':>8} {'p90 ms':>8} {'added p50 ms':>13}   (tools/call over stdio)")
    for name, values in samples.items():
        direct = statistics.median(samples["DIRECT read" if name.endswith("read") else "DIRECT"])
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        added = "" if name.startswith("DIRECT") else f"{(p50 - direct) * 1000:13.3f}"
        print(f"{name:<13} {p50 * 1000:8.3f} {p90 * 1000:8.3f} {added:>13}")
    print("(add_observations, a write, recorded and confirmed; a read is open_nodes, which nothing records)")
    print(f"aim: PROXIED added <= {AIM_MS:g} ms; {len(samples['DIRECT'])} calls each way, interleaved in rounds")


if __name__ == "__main__":
    main()
