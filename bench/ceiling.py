"""The floor under the server's figures: what the HTTP stack alone costs on this machine, beside AgentRein.

What it measures
    A trivial Litestar app under uvicorn (as ``agentrein serve`` runs it: httptools, uvloop), whose one route takes
    a JSON body of the size the SDK sends and answers a small JSON object, in two forms: on the event loop, and
    ``sync_to_thread=True`` as AgentRein's handlers are (the thread hop). Beside it, the real ``agentrein serve``
    on a fresh SQLite file: ``GET /healthz`` (one small query) and a wrapped call (``POST /v1/things`` on an
    ``httpx.MockTransport``, through the SDK in server mode: one ``POST /sessions/{id}/actions`` per call, each
    carrying the one before's confirmation).

    - Throughput of the trivial app, 8 agents (threads over 2 processes, as in ``bench/server.py``), each
      agent's client an ``httpx.Client`` or httpx's own pool (``httpcore``, as the SDK sends its requests): the
      most any server of this stack answers here with its clients on the same 2 cores.
    - CPU per request, sequential (one client, httpcore): the server's (from ``/proc``, whole process) for
      each of the rows above, and the client's own (``time.thread_time``) for the wrapped call.

    The trivial app's figures are what a request costs before AgentRein does anything; the difference to the
    AgentRein rows is AgentRein's own work. Figures are printed, never asserted.

Run ``uv run python bench/ceiling.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpcore
import httpx
import msgspec

from agentrein import AgentRein
from server import _free_port, _mock_transport, _tree_cpu, run_server  # bench/server.py, beside this script

TRIVIAL_APP = """
from litestar import Litestar, post

ANSWER = {"actionId": "act_0123456789abcdef0123456789abcdef", "seq": 1, "status": "CLEARED", "refusedConfirmations": []}

@post("/loop/{session_id:str}/actions", sync_to_thread=False)
def on_loop(session_id: str, data: dict) -> dict:
    return ANSWER

@post("/thread/{session_id:str}/actions", sync_to_thread=True)
def in_thread(session_id: str, data: dict) -> dict:
    return ANSWER

app = Litestar([on_loop, in_thread])
"""
#: A body of the size the SDK sends for one wrapped POST (its record, carrying the call before's confirmation).
BODY = {
    "connector": "http",
    "apiName": "POST /v1/things",
    "operationType": "CREATE",
    "payload": {"method": "POST", "url": "http://127.0.0.1:9/v1/things", "json": {"name": "widget"}},
    "confirm": [
        {
            "actionId": "act_0123456789abcdef0123456789abcdef",
            "response": {"status": 201, "body": {"id": "thing_1"}},
            "undo": {"type": "http-delete", "params": {"url": "http://127.0.0.1:9/v1/things/thing_1"}},
        }
    ],
}


@contextmanager
def trivial_server(workdir: Path) -> Iterator[tuple[str, int]]:
    """The trivial app under uvicorn in a process of its own; its URL and pid."""
    (workdir / "trivial_app.py").write_text(TRIVIAL_APP)
    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", "trivial_app:app", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(command, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.post(f"{url}/loop/s/actions", json=BODY)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def _poster(url: str, client: str) -> Callable[[], None]:
    """One request of the trivial kind, through ``client``."""
    content = msgspec.json.encode(BODY)
    if client == "httpx":
        http = httpx.Client()
        return lambda: http.post(url, json=BODY).raise_for_status()
    pool = httpcore.ConnectionPool()
    headers = [(b"Content-Type", b"application/json")]

    def post() -> None:
        assert pool.request("POST", url, headers=headers, content=content).status == 201

    return post


def _agents(url: str, client: str, threads: int, seconds: float, results: Any) -> None:
    counts = [0] * threads
    start = time.monotonic() + 1.0  # a second of warm-up, then count
    end = start + seconds

    def run(i: int) -> None:
        post = _poster(url, client)
        while time.monotonic() < start:
            post()
        while time.monotonic() < end:
            post()
            counts[i] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put(sum(counts))


def throughput(url: str, client: str, agents: int, processes: int, seconds: float) -> float:
    results: Any = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=_agents, args=(url, client, agents // processes, seconds, results))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    total = sum(results.get(timeout=seconds + 60) for _ in procs)
    for proc in procs:
        proc.join()
    return total / seconds


def server_cpu(pid: int, request: Callable[[], object], n: int) -> float:
    """The server's CPU per request, in microseconds, over ``n`` sequential requests after a warm-up."""
    for _ in range(200):
        request()
    before = _tree_cpu(pid) or 0.0
    for _ in range(n):
        request()
    return ((_tree_cpu(pid) or 0.0) - before) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds counted per throughput row (4)")
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per CPU row (2000)")
    args = parser.parse_args()
    print("The HTTP stack's own floor, beside AgentRein's server (uvicorn + Litestar, clients on the same machine)")
    print(f"Python {sys.version.split()[0]}, httpx {httpx.__version__}, httpcore {httpcore.__version__}\n")
    with tempfile.TemporaryDirectory(prefix="agentrein-ceiling-") as tmp:
        workdir = Path(tmp)
        with trivial_server(workdir) as (url, pid):
            print(f"{'trivial app, 8 agents over 2 processes':<52} {'requests/s':>10}")
            print("-" * 63)
            for route in ("loop", "thread"):
                for client in ("httpx", "httpcore"):
                    rate = throughput(f"{url}/{route}/s/actions", client, 8, 2, args.seconds)
                    print(f"{f'handler on the {route}, clients: {client}':<52} {rate:>10,.0f}")
            print()
            print(f"{'sequential, one client (httpcore)':<52} {'server CPU':>10} {'client CPU':>10}")
            print("-" * 74)
            for route in ("loop", "thread"):
                post = _poster(f"{url}/{route}/s/actions", "httpcore")
                cpu = server_cpu(pid, post, args.requests)
                print(f"{f'trivial app, handler on the {route}':<52} {cpu:>10,.0f} {'':>10}")
        with run_server("ceiling", f"sqlite:///{workdir / 'agentrein.db'}", workdir, 1) as server:
            pool = httpcore.ConnectionPool()
            auth = [(b"Authorization", f"Bearer {server.key}".encode())]
            health = server_cpu(server.pid, lambda: pool.request("GET", f"{server.url}/healthz", headers=auth), 2000)
            print(f"{'agentrein serve, GET /healthz':<52} {health:>10,.0f} {'':>10}")
            with AgentRein(base_url=server.url, api_key=server.key, journal_path=workdir / "journal.db") as ar:
                session = ar.new_session(agent_id="ceiling", intent="measure")
                raw = httpx.Client(transport=_mock_transport(), base_url="http://127.0.0.1:9")
                wrapped = ar.wrap(raw, session, connector="http", failure_mode="closed")
                for _ in range(200):
                    wrapped.post("/v1/things", json={"name": "widget"})
                before, mine = _tree_cpu(server.pid) or 0.0, time.thread_time()
                for _ in range(args.requests):
                    wrapped.post("/v1/things", json={"name": "widget"})
                client_cpu = (time.thread_time() - mine) / args.requests * 1e6
                cpu = ((_tree_cpu(server.pid) or 0.0) - before) / args.requests * 1e6
                print(
                    f"{'agentrein serve, one wrapped call (SDK, MockTransport)':<52} {cpu:>10,.0f} {client_cpu:>10,.0f}"
                )
    print("microseconds per request; client CPU: the agent's thread, its raw MockTransport call included")


if __name__ == "__main__":
    main()
