"""What the AgentRein server sustains, and how fast it answers, on this machine (SQLite and PostgreSQL).

What it measures
    The real server, ``agentrein serve``, runs as a subprocess on a fresh database: a temporary SQLite file,
    then a new PostgreSQL database on the server named by ``$AGENTREIN_TEST_POSTGRES_URL`` (created, and
    dropped afterwards; the PostgreSQL rows are skipped with a note when the variable is unset). Agents are
    the SDK in server mode, ``AgentRein(base_url=..., api_key=<the operator key serve prints>)``, each with a
    session of its own and an ``httpx.Client`` wrapped with ``ar.wrap(client, session, connector="http")``,
    calling ``POST /v1/things`` on :class:`agentrein_testing.fakes.service.FakeService`, which runs in a
    process of its own (as in ``bench/overhead.py``). Each wrapped POST is one logged mutating action: the
    write-ahead record (``POST /sessions/{id}/actions``), the call to the service, and its confirmation
    (``PATCH /sessions/{id}/actions/{id}``).

    - Throughput: logged mutating actions per second with 1, 8 and 32 concurrent agents. The agents are
      threads spread over ``--agent-processes`` worker processes (default 2, one per core here: the agents
      use about 0.4 to 0.8 of a core in all, so one process would nearly do, and 4 or 8 processes only
      take CPU from the server on 2 cores and measured lower). All agents start together; the completions
      in a ``--duration`` window after a short ramp are counted. Beside actions/s: the per-action latency
      under that load, and the CPU (in cores) that the server, the agents, the fake service, PostgreSQL and
      everything else used in the window, from ``/proc``: with 2 cores, that says where the time goes, and
      whether another process on the machine disturbed the figures. Aim >= 1,500/s.
      ``--target mock`` takes the fake service out: the wrapped client then answers from an
      ``httpx.MockTransport``, leaving the record+confirm pair through the SDK and the server.
    - Added latency: the same POST made sequentially through the raw client and through the wrapped one
      (interleaved blocks, after warm-up); the table gives p50 and p99 of each, their differences, and the
      added p50 as a multiple of the raw call's p50 (one loopback round trip to the service). Aim <= 1.5x.
    - Approval wake-up: an agent thread makes a wrapped POST that requires approval; the reviewer (the main
      thread, its own ``AgentRein``) waits until the request is pending, waits a while longer (delays spread
      evenly over 2 s, the polling period, so a reviewer's click falls at every phase of a poll), notes t0
      and approves. t1 is when the agent's request to the service starts (an httpx request hook on the
      wrapped client). Reported: t1 - t0 with the SDK's long-poll (``poll_interval_ms=2000``: it asks
      ``GET /approvals/{id}?wait=2``, which answers the moment the approval is decided), and with plain 2 s
      polling emulated by hand (the same record, then ``GET /approvals/{id}`` without ``wait`` every 2 s
      with httpx, then the call and its confirmation). Aim for the long-poll: <= 50 ms at the median.

    All agents use the operator key ``serve`` prints (an agent key would behave the same; it is cached by
    the server either way). Agents use ``failure_mode="closed"`` so that a server error is counted as an
    error rather than let through unrecorded; warnings the SDK logs are counted too. Figures are printed,
    never asserted.

Run ``uv run python bench/server.py`` (about 2-3 minutes; ``--help`` for options).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import platform
import queue
import secrets
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography.fernet import Fernet

from agentrein import AgentRein
from agentrein._outbox import JOURNAL_ENV
from agentrein._served import ServedMode
from agentrein_core.commands import Confirmed, WriteAhead
from agentrein_core.statuses import ApprovalStatus, OperationType
from agentrein_testing import FakeService

POSTGRES_ENV = "AGENTREIN_TEST_POSTGRES_URL"
THROUGHPUT_AIM = 1500.0  # actions/s
ADDED_AIM_RATIO = 1.5  # added p50 / the raw call's p50
WAKE_AIM_MS = 50.0  # median, long-poll
POLL_SECONDS = 2.0  # the polling period the long-poll is compared with
BODY = {"name": "bench", "amount": 1200, "currency": "eur"}

mp = multiprocessing.get_context("spawn")


# the server under test --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """``agentrein serve`` running as a subprocess."""

    label: str
    database_url: str
    url: str
    key: str
    proc: subprocess.Popen[bytes]
    stderr: Path
    workers: int = 1

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextmanager
def run_server(label: str, database_url: str, workdir: Path, workers: int, key: str | None = None) -> Iterator[Server]:
    """Start ``agentrein serve --workers N`` on an empty database (or on one holding organisations already,
    with an operator ``key`` of its own, for serve prints none then); yield it once ``/healthz`` answers; stop it
    after."""
    port = _free_port()
    out, err = workdir / f"serve-{label}-{workers}.out", workdir / f"serve-{label}-{workers}.err"
    env = {**os.environ, "AGENTREIN_SECRET_KEY": Fernet.generate_key().decode(), "COLUMNS": "200"}
    command = [sys.executable, "-c", "from agentrein_cli.main import app; app()", "serve"]
    command += ["--port", str(port), "--database-url", database_url, "--workers", str(workers)]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        key = _wait_until_serving(proc, url, out, err, key)
        yield Server(label, database_url, url, key, proc, err, workers)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait_until_serving(proc: subprocess.Popen[bytes], url: str, out: Path, err: Path, key: str | None) -> str:
    """The operator key the server printed (or ``key``), once it answers ``GET /healthz``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agentrein serve exited with {proc.returncode}:\n{err.read_text()[-2000:]}")
        if key is None:
            key = next((ln.strip() for ln in out.read_text().splitlines() if ln.startswith("ar_")), None)
        if key is not None:
            with suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return key
        time.sleep(0.05)
    raise RuntimeError(f"agentrein serve did not start in 60 s:\n{out.read_text()}\n{err.read_text()[-2000:]}")


@contextmanager
def fresh_postgres(server_url: str) -> Iterator[str]:
    """A new database on the PostgreSQL server at ``server_url``; its SQLAlchemy URL; dropped afterwards."""
    import psycopg

    name = f"agentrein_bench_{secrets.token_hex(6)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql+psycopg://{urlsplit(server_url).netloc}/{name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# the fake service, in a process of its own -------------------------------------------------------------


def _serve(urls: multiprocessing.Queue[str], stop: Event) -> None:
    with FakeService().running() as svc:
        urls.put(svc.base_url)
        stop.wait()


@contextmanager
def service_process() -> Iterator[tuple[str, int]]:
    """Run the fake service in a child process; yield its base URL and pid."""
    urls: multiprocessing.Queue[str] = mp.Queue()
    stop = mp.Event()
    child = mp.Process(target=_serve, args=(urls, stop), daemon=True)
    child.start()
    try:
        yield urls.get(timeout=30), child.pid or 0
    finally:
        stop.set()
        child.join(10)


# CPU accounting (Linux /proc; figures are blank elsewhere) -----------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_of(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def _tree_cpu(pid: int) -> float | None:
    """CPU seconds a process and its children (``serve --workers``' processes) have used so far."""
    own = _cpu_of(pid)
    if own is None:
        return None
    with suppress(OSError):
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with suppress(OSError, IndexError, ValueError):
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    own += _cpu_of(int(stat.parent.name)) or 0.0
    return own


def _machine_busy() -> float | None:
    """CPU seconds all cores have spent busy so far."""
    try:
        ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / _TICK


def _postgres_cpu() -> dict[int, float]:
    """CPU seconds so far of each process named ``postgres`` (the database's backends and helpers)."""
    found: dict[int, float] = {}
    with suppress(OSError):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with suppress(OSError):
                    if (entry / "comm").read_text().strip() == "postgres":
                        cpu = _cpu_of(int(entry.name))
                        if cpu is not None:
                            found[int(entry.name)] = cpu
    return found


@dataclass
class CpuSample:
    server: float | None
    agents: float | None
    service: float | None
    database: dict[int, float]
    machine: float | None

    @staticmethod
    def take(server: int, agents: list[int], service: int) -> CpuSample:
        agent_cpu = [_cpu_of(pid) for pid in agents]
        total = None if any(c is None for c in agent_cpu) else sum(c for c in agent_cpu if c is not None)
        return CpuSample(_tree_cpu(server), total, _cpu_of(service), _postgres_cpu(), _machine_busy())


def _cores(before: float | None, after: float | None, seconds: float) -> float | None:
    return None if before is None or after is None else (after - before) / seconds


def _database_cores(before: dict[int, float], after: dict[int, float], seconds: float) -> float:
    """PostgreSQL's CPU in the window (a backend started in it counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) / seconds


# agents: threads in worker processes ----------------------------------------------------------------------


class _CountingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if self.first is None:
            self.first = record.getMessage()[:300]


def _mock_transport() -> httpx.MockTransport:
    ids = iter(range(1, 1 << 62))

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201, json={**BODY, "id": f"thi_{next(ids)}"})

    return httpx.MockTransport(handle)


class _Agent:
    """One agent: its own ``AgentRein`` (and so its own connection to the server), session and client."""

    def __init__(self, base_url: str, key: str, service_url: str, name: str, target: str) -> None:
        self.ar = AgentRein(base_url=base_url, api_key=key)
        session = self.ar.new_session(agent_id=name, intent="bench/server.py throughput")
        if target == "mock":
            self.raw = httpx.Client(base_url="http://mock.invalid", transport=_mock_transport())
        else:
            self.raw = httpx.Client(base_url=service_url)
        self.client = self.ar.wrap(self.raw, session, connector="http", failure_mode="closed")

    def call(self) -> None:
        response = self.client.post("/v1/things", json=BODY)
        if response.status_code != 201:
            raise RuntimeError(f"expected 201, got {response.status_code}: {response.text[:200]}")

    def run(self, t_start: float, t_end: float, out: dict[str, Any]) -> None:
        """Call until ``t_end``; count the calls that end in [t_start, t_end] and their durations."""
        clock = time.monotonic
        done, errors, durations, first_error = 0, 0, [], None
        while (start := clock()) < t_end:
            try:
                self.call()
            except Exception as exc:
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"[:300]
                time.sleep(0.01)
                continue
            end = clock()
            if t_start <= end <= t_end:
                done += 1
                durations.append(end - start)
        out.update(done=done, errors=errors, durations=durations, first_error=first_error)

    def close(self) -> None:
        self.raw.close()
        self.ar.close()


def _agent_worker(commands: multiprocessing.Queue[tuple[Any, ...]], results: multiprocessing.Queue[Any]) -> None:
    """A worker process: on ``setup`` open n agents (and warm them up), on ``run`` run them, on ``stop`` end."""
    counter = _CountingHandler()
    logging.getLogger("agentrein").addHandler(counter)
    agents: list[_Agent] = []
    while True:
        command = commands.get()
        try:
            if command[0] == "stop":
                for agent in agents:
                    agent.close()
                return
            if command[0] == "setup":
                _, base_url, key, service_url, n, target, warmup = command
                for agent in agents:
                    agent.close()
                agents = [
                    _Agent(base_url, key, service_url, f"bench-agent-{os.getpid()}-{i}", target) for i in range(n)
                ]
                for agent in agents:
                    for _ in range(warmup):
                        agent.call()
                counter.count, counter.first = 0, None
                results.put(("ready", os.getpid()))
            elif command[0] == "run":
                _, t_start, t_end = command
                outs: list[dict[str, Any]] = [{} for _ in agents]
                threads = [
                    threading.Thread(target=a.run, args=(t_start, t_end, o)) for a, o in zip(agents, outs, strict=True)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                first = next((o["first_error"] for o in outs if o["first_error"]), None)
                results.put(
                    (
                        "done",
                        sum(o["done"] for o in outs),
                        sum(o["errors"] for o in outs),
                        [d for o in outs for d in o["durations"]],
                        first or counter.first,
                        counter.count,
                    )
                )
        except Exception as exc:
            results.put(("error", f"{type(exc).__name__}: {exc}"))


class AgentPool:
    """Worker processes kept for the whole run; each ``measure`` spreads the agents over them."""

    def __init__(self, processes: int) -> None:
        self.results: multiprocessing.Queue[Any] = mp.Queue()
        self.inboxes: list[multiprocessing.Queue[tuple[Any, ...]]] = [mp.Queue() for _ in range(processes)]
        self.procs = [
            mp.Process(target=_agent_worker, args=(inbox, self.results), daemon=True) for inbox in self.inboxes
        ]
        for proc in self.procs:
            proc.start()

    @property
    def pids(self) -> list[int]:
        return [p.pid or 0 for p in self.procs]

    def _collect(self, n: int, timeout: float) -> list[tuple[Any, ...]]:
        answers = [self.results.get(timeout=timeout) for _ in range(n)]
        for answer in answers:
            if answer[0] == "error":
                raise RuntimeError(f"an agent worker failed: {answer[1]}")
        return answers

    def setup(self, server: Server, service_url: str, agents: int, target: str, warmup: int) -> None:
        for i, inbox in enumerate(self.inboxes):
            share = agents // len(self.inboxes) + (1 if i < agents % len(self.inboxes) else 0)
            inbox.put(("setup", server.url, server.key, service_url, share, target, warmup))
        self._collect(len(self.inboxes), timeout=120)

    def run(self, t_start: float, t_end: float) -> list[tuple[Any, ...]]:
        for inbox in self.inboxes:
            inbox.put(("run", t_start, t_end))
        return self._collect(len(self.inboxes), timeout=t_end - time.monotonic() + 60)

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(("stop",))
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


@dataclass
class Throughput:
    store: str
    workers: int
    agents: int
    done: int
    seconds: float
    durations: list[float]
    errors: int
    warnings: int
    first_error: str | None
    cpu: dict[str, float | None] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.done / self.seconds


def measure_throughput(
    pool: AgentPool, server: Server, service: tuple[str, int], agents: int, target: str, duration: float
) -> Throughput:
    service_url, service_pid = service
    pool.setup(server, service_url, agents, target, warmup=5)
    ramp = 0.5
    go = time.monotonic() + 0.2
    t_start, t_end = go + ramp, go + ramp + duration
    answers: list[tuple[Any, ...]] = []
    runner = threading.Thread(target=lambda: answers.extend(pool.run(t_start, t_end)))
    runner.start()
    time.sleep(max(0.0, t_start - time.monotonic()))
    before = CpuSample.take(server.pid, pool.pids, service_pid)
    time.sleep(max(0.0, t_end - time.monotonic()))
    after = CpuSample.take(server.pid, pool.pids, service_pid)
    runner.join()
    if len(answers) != len(pool.inboxes):
        raise RuntimeError("an agent worker did not answer")
    cpu = {
        "server": _cores(before.server, after.server, duration),
        "agents": _cores(before.agents, after.agents, duration),
        "service": _cores(before.service, after.service, duration),
        "database": _database_cores(before.database, after.database, duration),
        "machine": _cores(before.machine, after.machine, duration),
    }
    known = [cpu["server"], cpu["agents"], cpu["service"], cpu["database"]]
    if cpu["machine"] is not None and all(c is not None for c in known):
        cpu["other"] = cpu["machine"] - sum(c for c in known if c is not None)
    first = next((a[4] for a in answers if a[4]), None)
    return Throughput(
        server.label,
        server.workers,
        agents,
        sum(a[1] for a in answers),
        duration,
        [d for a in answers for d in a[3]],
        sum(a[2] for a in answers),
        sum(a[5] for a in answers),
        first,
        cpu,
    )


# added latency of one wrapped call --------------------------------------------------------------------


@dataclass
class Added:
    store: str
    raw_ns: list[int]
    wrapped_ns: list[int]


def _time_block(call: Callable[[], httpx.Response], n: int, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        response = call()
        out.append(clock() - start)
        if response.status_code != 201:
            raise RuntimeError(f"expected 201, got {response.status_code}: {response.text[:200]}")


def measure_added(server: Server, service_url: str, rounds: int, calls: int, warmup: int) -> Added:
    """Raw and wrapped POSTs in alternating blocks (which goes first alternates), each call timed alone."""
    with AgentRein(base_url=server.url, api_key=server.key) as ar, httpx.Client(base_url=service_url) as raw:
        session = ar.new_session(agent_id="bench-latency", intent="bench/server.py added latency")
        wrapped = ar.wrap(raw, session, connector="http", failure_mode="closed")
        calls_by_side = [lambda: raw.post("/v1/things", json=BODY), lambda: wrapped.post("/v1/things", json=BODY)]
        for call in calls_by_side:
            _time_block(call, warmup, [])
        raw_ns: list[int] = []
        wrapped_ns: list[int] = []
        for round_no in range(rounds):
            blocks = [(calls_by_side[0], raw_ns), (calls_by_side[1], wrapped_ns)]
            if round_no % 2:
                blocks.reverse()
            for call, out in blocks:
                _time_block(call, calls, out)
    return Added(server.label, raw_ns, wrapped_ns)


# approval wake-up -------------------------------------------------------------------------------------


@dataclass
class Wake:
    mode: str
    store: str
    latencies: list[float]  # seconds, click to the agent's call starting
    clicks: list[float]  # seconds the approve request itself took


def _long_poll_agent(server: Server, service_url: str, rounds: int, starts: queue.Queue[float]) -> Callable[[], None]:
    """The SDK's own path: a wrapped POST that requires approval, ``poll_interval_ms=2000`` (long-poll)."""

    def hook(request: httpx.Request) -> None:
        if request.method == "POST":
            starts.put(time.perf_counter())

    def agent() -> None:
        with AgentRein(base_url=server.url, api_key=server.key) as ar:
            session = ar.new_session(agent_id="bench-approval-long-poll", intent="bench/server.py wake-up")
            with httpx.Client(base_url=service_url, event_hooks={"request": [hook]}) as raw:
                wrapped = ar.wrap(
                    raw,
                    session,
                    connector="http",
                    requires_approval=["POST /v1/*"],
                    poll_interval_ms=int(POLL_SECONDS * 1000),
                    failure_mode="closed",
                )
                for _ in range(rounds):
                    if wrapped.post("/v1/things", json=BODY).status_code != 201:
                        raise RuntimeError("the approved call failed")

    return agent


def _polling_agent(server: Server, service_url: str, rounds: int, starts: queue.Queue[float]) -> Callable[[], None]:
    """What the guard does, by hand, but waiting by plain polling: record, ``GET /approvals/{id}`` (no
    ``wait``) every 2 s until decided, then the call and its confirmation."""

    def agent() -> None:
        backend = ServedMode(server.url, server.key)
        auth = {"Authorization": f"Bearer {server.key}"}
        try:
            session = backend.new_session("bench-approval-polling", "bench/server.py wake-up", False)
            with httpx.Client(base_url=server.url, headers=auth) as api, httpx.Client(base_url=service_url) as raw:
                for _ in range(rounds):
                    logged = backend.log_action(
                        session.id,
                        WriteAhead(
                            connector="http",
                            api_name="POST /v1/things",
                            operation_type=OperationType.CREATE,
                            payload={"method": "POST", "path": "/v1/things", "body": BODY},
                            requires_approval=True,
                            approval_timeout=timedelta(minutes=5),
                        ),
                    )
                    assert logged.approval is not None
                    path = f"/approvals/{logged.approval.approval_id}"
                    while (status := api.get(path).raise_for_status().json()["status"]) == ApprovalStatus.PENDING:
                        time.sleep(POLL_SECONDS)
                    if status != ApprovalStatus.APPROVED:
                        raise RuntimeError(f"approval {status}")
                    starts.put(time.perf_counter())
                    response = raw.post("/v1/things", json=BODY)
                    backend.confirm_action(
                        session.id, logged.action.action_id, Confirmed(response=response.json(), undo=None)
                    )
        finally:
            backend.close()

    return agent


def measure_wake(server: Server, service_url: str, rounds: int, mode: str) -> Wake:
    """The reviewer (this thread) approves each request a while after it turns up; the agent runs beside."""
    starts: queue.Queue[float] = queue.Queue()
    make = _long_poll_agent if mode == "long-poll" else _polling_agent
    errors: list[BaseException] = []

    def run_agent() -> None:
        try:
            make(server, service_url, rounds, starts)()
        except BaseException as exc:
            errors.append(exc)

    agent = threading.Thread(target=run_agent, name=f"agent-{mode}", daemon=True)
    latencies: list[float] = []
    clicks: list[float] = []
    with AgentRein(base_url=server.url, api_key=server.key) as reviewer:
        agent.start()
        for round_no in range(rounds):
            delay = POLL_SECONDS * (round_no + 0.5) / rounds  # every phase of a polling period, evenly
            deadline = time.monotonic() + 30
            while not (pending := reviewer.list_approvals(status="PENDING")):
                if errors or time.monotonic() > deadline:
                    raise RuntimeError(f"no approval request turned up ({errors[0] if errors else 'timeout'})")
                time.sleep(0.005)
            time.sleep(delay)
            t0 = time.perf_counter()
            reviewer.approve(pending[0].approval_id, reviewer="bench-reviewer")
            clicks.append(time.perf_counter() - t0)
            try:
                t1 = starts.get(timeout=30)
            except queue.Empty:
                raise RuntimeError(f"the agent did not resume ({errors[0] if errors else 'timeout'})") from None
            latencies.append(t1 - t0)
        agent.join(30)
    if errors:
        raise RuntimeError(f"the agent failed: {errors[0]}")
    return Wake(mode, server.label, latencies, clicks)


# output -----------------------------------------------------------------------------------------------


def _pct(values: list[float], q: int) -> float:
    """The q-th percentile (inclusive method); the value itself for a single sample."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _c(value: float | None) -> str:
    return f"{value:6.2f}" if value is not None else f"{'-':>6}"


def print_throughput(rows: list[Throughput], target: str, processes: int) -> None:
    what = "wrapped POST to the fake service" if target == "loopback" else "wrapped POST on a MockTransport"
    print(f"\nThroughput: logged mutating actions per second through the server ({what})")
    print(f"agents are threads over {processes} worker processes; CPU columns in cores busy during the window")
    head = (
        f"{'store':<10} {'procs':>5} {'agents':>6} {'actions/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'server':>6} {'agents':>6} {'svc':>6} {'pg':>6} {'other':>6} {'busy':>6} {'aim':>7}  verdict"
    )
    print(head)
    print("-" * len(head))
    aim = ">=" + format(THROUGHPUT_AIM, ",.0f")
    for r in rows:
        verdict = "within aim" if r.rate >= THROUGHPUT_AIM else f"under, {r.rate / THROUGHPUT_AIM:.0%} of aim"
        if r.errors or r.warnings:
            verdict += f"; {r.errors} errors, {r.warnings} SDK warnings"
        ms = [d * 1000 for d in r.durations] or [float("nan")]
        print(
            f"{r.store:<10} {r.workers:>5} {r.agents:>6} {r.rate:9.0f} "
            f"{statistics.median(ms):7.2f} {_pct(ms, 99):7.2f} "
            f"{_c(r.cpu.get('server'))} {_c(r.cpu.get('agents'))} {_c(r.cpu.get('service'))} "
            f"{_c(r.cpu.get('database'))} {_c(r.cpu.get('other'))} {_c(r.cpu.get('machine'))} {aim:>7}  {verdict}"
        )
        if r.first_error:
            print(f"{'':<10} first error: {r.first_error}")
    print("procs: server processes (serve --workers). p50/p99 ms: one wrapped call under that load.")
    print("CPU: server = agentrein serve (all its processes), agents = the worker")
    print("processes, svc = the fake service, pg = PostgreSQL's processes (serving any client on this machine),")
    print("other = busy - those (the OS, other processes), busy = all cores; 2.00 is a saturated 2-core machine")


def print_added(rows: list[Added], rounds: int, calls: int) -> None:
    print(f"\nAdded latency of a wrapped mutating call over loopback ({rounds} x {calls} sequential calls per side)")
    head = (
        f"{'store':<10} {'raw p50':>8} {'raw p99':>8} {'wrap p50':>8} {'wrap p99':>8} "
        f"{'add p50':>8} {'add p99':>8} {'x raw':>6} {'aim':>6}  verdict"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        raw = [n / 1e6 for n in r.raw_ns]
        wrapped = [n / 1e6 for n in r.wrapped_ns]
        added50 = statistics.median(wrapped) - statistics.median(raw)
        added99 = _pct(wrapped, 99) - _pct(raw, 99)
        ratio = added50 / statistics.median(raw)
        verdict = "within aim" if ratio <= ADDED_AIM_RATIO else f"over, x{ratio / ADDED_AIM_RATIO:.1f}"
        print(
            f"{r.store:<10} {statistics.median(raw):8.3f} {_pct(raw, 99):8.3f} {statistics.median(wrapped):8.3f} "
            f"{_pct(wrapped, 99):8.3f} {added50:8.3f} {added99:8.3f} {ratio:6.1f} "
            f"{'<=' + format(ADDED_AIM_RATIO, 'g'):>6}  {verdict}"
        )
    print("milliseconds per call; add p50 = wrap p50 - raw p50, add p99 = wrap p99 - raw p99;")
    print("x raw = add p50 / raw p50: what the wrapping adds, in raw calls to the service")


def print_wake(rows: list[Wake]) -> None:
    print("\nApproval wake-up: reviewer's approve request sent -> the agent's call to the service starting")
    head = (
        f"{'wait by':<30} {'store':<10} {'rounds':>6} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} "
        f"{'approve':>8} {'aim':>6}  verdict"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ms = [s * 1000 for s in r.latencies]
        p50 = statistics.median(ms)
        label = "SDK long-poll (wait=2 s)" if r.mode == "long-poll" else "plain polling, GET every 2 s"
        if r.mode == "long-poll":
            aim = f"<={WAKE_AIM_MS:g}"
            verdict = "within aim" if p50 <= WAKE_AIM_MS else f"over, x{p50 / WAKE_AIM_MS:.1f}"
        else:
            aim, verdict = "-", "reference"
        click = statistics.median(r.clicks) * 1000
        print(
            f"{label:<30.30} {r.store:<10} {len(ms):>6} {p50:8.1f} {_pct(ms, 90):8.1f} {max(ms):8.1f} "
            f"{click:8.1f} {aim:>6}  {verdict}"
        )
    print("milliseconds; approve: median duration of the reviewer's ar.approve() call (the decision request,")
    print("then the SDK's look for a rollback to follow); the agent resumes during it")


def _server_errors(server: Server) -> str:
    text = server.stderr.read_text(errors="replace").strip() if server.stderr.exists() else ""
    if not text:
        return f"server on {server.label} ({server.workers} processes): stderr empty"
    lines = text.splitlines()
    tail = "\n".join("    " + line for line in lines[-15:])
    return f"server on {server.label} ({server.workers} processes): {len(lines)} stderr lines, the last ones:\n{tail}"


# main -------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--agents", default="1,8,32", help="concurrent agent counts (default 1,8,32)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds counted per throughput row (3)")
    parser.add_argument("--agent-processes", type=int, default=2, help="worker processes for the agents (2)")
    parser.add_argument(
        "--target",
        choices=("loopback", "mock"),
        default="loopback",
        help="throughput calls go to the fake service (loopback) or to an httpx.MockTransport (mock)",
    )
    parser.add_argument("--calls", type=int, default=100, help="added latency: calls per side per round (100)")
    parser.add_argument("--rounds", type=int, default=10, help="added latency: rounds (10)")
    parser.add_argument("--approval-rounds", type=int, default=20, help="approval wake-up rounds per row (20)")
    parser.add_argument("--sqlite-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--workers",
        default="1,2",
        help="server processes (serve --workers), one throughput table row set each (default 1,2); the added "
        "latency and the wake-up are measured with the first",
    )
    args = parser.parse_args()
    agent_counts = [int(n) for n in args.agents.split(",") if n.strip()]
    worker_counts = [int(n) for n in args.workers.split(",") if n.strip()]
    if min([*agent_counts, *worker_counts, args.calls, args.rounds, args.approval_rounds, args.agent_processes]) < 1:
        parser.error("counts must be >= 1")

    started = time.perf_counter()
    print("AgentRein server benchmark: `agentrein serve` in a subprocess, agents through the SDK in server mode")
    print(
        f"Python {platform.python_version()}, httpx {version('httpx')}, litestar {version('litestar')}, "
        f"uvicorn {version('uvicorn')}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}"
    )
    before = _machine_busy()
    time.sleep(1.0)
    after = _machine_busy()
    if before is not None and after is not None:
        print(f"machine busy before the start: {after - before:.2f} of {os.cpu_count()} cores (other processes)")
    postgres = os.environ.get(POSTGRES_ENV)
    if args.sqlite_only:
        postgres = None
    elif not postgres:
        print(f"note: ${POSTGRES_ENV} is not set: the PostgreSQL rows are skipped")

    throughput: list[Throughput] = []
    added: list[Added] = []
    wakes: list[Wake] = []
    server_notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agentrein-bench-") as tmp, service_process() as service:
        workdir = Path(tmp)
        # Each agent's SDK keeps a journal (in the working directory by default): keep it in this run's folder,
        # so that no run finds (and sends) another's.
        os.environ[JOURNAL_ENV] = str(workdir / "agentrein-journal.db")
        pool = AgentPool(args.agent_processes)
        try:
            stores: list[tuple[str, Callable[[int], Any]]] = [
                ("SQLite", lambda workers: nullcontext(f"sqlite:///{workdir / f'server-{workers}.db'}"))
            ]
            if postgres:
                pg = postgres
                stores.append(("PostgreSQL", lambda workers: fresh_postgres(pg)))
            for (label, database), workers in ((store, w) for store in stores for w in worker_counts):
                with database(workers) as url, run_server(label, url, workdir, workers) as server:
                    shown = f"{label}, {workers} processes"
                    print(f"\n{shown}: serving {url} at {server.url} (pid {server.pid})", flush=True)
                    for n in agent_counts:
                        row = measure_throughput(pool, server, service, n, args.target, args.duration)
                        throughput.append(row)
                        print(f"  throughput, {n:>2} agents: {row.rate:7.0f} actions/s", flush=True)
                    if workers != worker_counts[0]:
                        server_notes.append(_server_errors(server))
                        continue
                    row_added = measure_added(server, service[0], args.rounds, args.calls, warmup=100)
                    added.append(row_added)
                    diff = statistics.median(row_added.wrapped_ns) - statistics.median(row_added.raw_ns)
                    print(f"  added latency p50: {diff / 1e6:.3f} ms", flush=True)
                    modes = ["long-poll", "polling"] if label == "SQLite" else ["long-poll"]
                    for mode in modes:
                        wake = measure_wake(server, service[0], args.approval_rounds, mode)
                        wakes.append(wake)
                        print(f"  approval wake-up, {mode}: p50 {statistics.median(wake.latencies) * 1000:.1f} ms")
                    server_notes.append(_server_errors(server))
        finally:
            pool.close()

    print_throughput(throughput, args.target, args.agent_processes)
    print_added(added, args.rounds, args.calls)
    print_wake(wakes)
    print()
    for note in server_notes:
        print(note)
    print(f"elapsed {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
