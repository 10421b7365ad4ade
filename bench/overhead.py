"""How much latency AgentRein adds to an agent's API calls (http, Stripe, GitHub), on the embedded SQLite store.

What it measures
    Each client is wrapped with ``ar.wrap(client, session, connector=...)`` on one embedded
    ``AgentRein("sqlite:///<tmp>/bench.db")``, in a session of its own. The same call is then made through the
    raw client and through the wrapped one, against the same fake, in one run, and the added latency is
    ``median(wrapped) - median(raw)``.

    An ``httpx.Client``, ``connector="http"``:

    - READ ``GET /v1/things/<id>`` over loopback: the proxy alone (reads are never recorded). Aim <= 5 us.
    - READ ``GET`` on a client whose transport is ``httpx.MockTransport`` answering 200 at once: the same
      proxy cost without a network, whose jitter on loopback can swamp a few microseconds.
    - WRITE ``POST /v1/things`` over loopback: the write-ahead record before the call and its confirmation
      after it (two store transactions), plus the connector's describing of the request and its undo.
      Aim <= 300 us.
    - WRITE ``POST`` on a ``MockTransport`` answering 201 with an id: the same, without a network.

    The real ``stripe`` SDK, ``stripe.StripeClient("sk_test_x", base_addresses={"api": <fake>},
    max_network_retries=0)`` against :class:`~agentrein_testing.fakes.stripe.FakeStripe`,
    ``connector="stripe"``:

    - READ ``client.v1.customers.retrieve(id)``: the whole attribute chain goes through the proxy each call
      (``v1`` and ``customers`` are service objects it wraps in turn); the connector sees a read and lets it
      through unrecorded. Aim <= 5 us.
    - WRITE ``client.v1.customers.create(params={...})``: recorded and confirmed as above, plus the connector
      binding the call to the method's signature and adding its idempotency key to ``options``. Aim <= 300 us.

    Real PyGithub, ``github.Github(auth=github.Auth.Token("ghp_test"), base_url=<fake>, retry=None,
    seconds_between_requests=None, seconds_between_writes=None)`` against
    :class:`~agentrein_testing.fakes.github.FakeGitHub`, ``connector="github"``; the wrapped side uses the
    repository that ``ar.wrap(gh, ...).get_repo("acme/shop")`` returns (a read, whose ``Repository`` the proxy
    wraps so that its calls are guarded):

    - READ ``repo.get_issue(n)``: passes through unrecorded, but the ``Issue`` it returns is wrapped in turn.
      Aim <= 5 us.
    - WRITE ``repo.create_issue(title=...)``: recorded and confirmed, the issue's body carrying AgentRein's
      marker of the action's key (GitHub has no idempotency keys). Aim <= 300 us. The fake numbers an issue by
      scanning the repository's issues, so each block of writes (warm-up included) gets a fresh repository,
      made untimed just before it; the issue lists stay at most ``--calls`` long and the two sides alike.

    The physical floor of a recorded call, measured in the same run, interleaved like the rows: two raw
    ``sqlite3`` transactions on a WAL file of their own with ``synchronous=NORMAL`` (AgentRein's settings),
    an INSERT of a ~300-byte row and a guarded UPDATE of it (``WHERE id = ? AND status = ?``): the least a
    durable record-then-confirm can cost. Each WRITE row's added latency is also given as a multiple of it;
    the aim is <= 10x the floor (the 300 us beside it is the older absolute aim).

    What a commit costs is mostly the pages it writes to the WAL, so the run also counts them (SQLite's own
    count, the frames a checkpoint finds): per recorded call, AgentRein's two transactions (the second marks
    the call's intent check wanted; the supervisor queues it later, in a batch), against the floor's two.

    Each fake (:class:`agentrein_testing.fakes.service.FakeService` for the loopback http rows, FakeStripe,
    FakeGitHub) is started once in a process of its own (as a real service would be, so its threads do not
    compete with the agent's for the GIL or, on two cores, for the measured process's CPU).

How
    Every path is warmed up first. Raw and wrapped calls then run in alternating blocks (``--rounds`` rounds
    of ``--calls`` calls per side; which side goes first alternates by round) so that drift - CPU frequency,
    a growing database, a neighbour on the machine - affects both alike. Each call is timed alone with
    ``time.perf_counter_ns``; the table gives the median (p50) and p90 of raw and wrapped calls and the
    difference of the medians, beside the aim. Figures are printed, never asserted.

Run ``uv run python bench/overhead.py`` (``--help`` for options; ``--profile`` adds a cProfile of the wrapped
http POST over loopback).
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import os
import platform
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from itertools import count
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import github
import httpx
import stripe
from github.Issue import Issue
from github.Repository import Repository
from stripe.params import CustomerCreateParams

from agentrein import AgentRein
from agentrein_testing import FakeGitHub, FakeService, FakeStripe

READ_AIM_NS = 5_000
WRITE_AIM_NS = 300_000
FLOOR_AIM = 10.0  # a WRITE row's added latency, in floors
GITHUB_TOKEN = "ghp_test"
GITHUB_REPO = "acme/shop"
GITHUB_ORG = GITHUB_REPO.split("/")[0]

Fake = FakeService | FakeStripe | FakeGitHub

Call = Callable[[], Any]


@dataclass(frozen=True)
class Row:
    """One row of the table: the same call made raw and wrapped.

    ``expected_status`` checks an ``httpx.Response``; the SDK rows leave it ``None`` (their SDKs raise on an
    error status). ``before_block``, if given, runs untimed before every block of calls, warm-ups included."""

    label: str
    raw: Call
    wrapped: Call
    expected_status: int | None
    aim_ns: int
    before_block: Callable[[], None] | None = None


@dataclass(frozen=True)
class Result:
    """Per-call durations (ns) of one row's raw and wrapped calls."""

    label: str
    raw_ns: list[int]
    wrapped_ns: list[int]
    aim_ns: int

    @property
    def added_ns(self) -> float:
        return statistics.median(self.wrapped_ns) - statistics.median(self.raw_ns)


# timing -----------------------------------------------------------------------------------------------


def _time_block(row: Row, call: Call, n: int, out: list[int]) -> None:
    """Make ``n`` calls, appending each one's duration in ns to ``out`` (the status check is not timed)."""
    if row.before_block is not None:
        row.before_block()
    expected_status = row.expected_status
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        response = call()
        out.append(clock() - start)
        if expected_status is not None and response.status_code != expected_status:
            got = f"{response.status_code}: {response.text[:200]}"
            raise RuntimeError(f"expected {expected_status}, got {got}")


def measure(row: Row, rounds: int, calls: int, warmup: int) -> Result:
    """Warm both sides up, then interleave raw and wrapped blocks, alternating which goes first."""
    _time_block(row, row.raw, warmup, [])
    _time_block(row, row.wrapped, warmup, [])
    raw: list[int] = []
    wrapped: list[int] = []
    for round_no in range(rounds):
        blocks = [(row.raw, raw), (row.wrapped, wrapped)]
        if round_no % 2:
            blocks.reverse()
        for call, out in blocks:
            _time_block(row, call, calls, out)
    return Result(row.label, raw, wrapped, row.aim_ns)


def _p90(values: list[int]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


# the floor ----------------------------------------------------------------------------------------------


class Floor:
    """Two raw sqlite3 WAL transactions per call: the write-ahead INSERT and the guarded UPDATE that confirms it."""

    ROW = "x" * 300

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE records (id TEXT PRIMARY KEY, status TEXT NOT NULL, payload TEXT, response TEXT)")
        self.ids = count(1)

    def call(self) -> None:
        record_id = f"act_{next(self.ids):032x}"
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO records VALUES (?, 'CLEARED', ?, NULL)", (record_id, self.ROW))
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "UPDATE records SET status = 'SUCCESS', response = ? WHERE id = ? AND status = 'CLEARED'",
            ('{"id": "thi_1"}', record_id),
        )
        db.execute("COMMIT")


# the service and the clients ----------------------------------------------------------------------------


def _mock_transport() -> httpx.MockTransport:
    ids = count(1)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, json={"id": f"thi_{next(ids)}"})
        return httpx.Response(200)

    return httpx.MockTransport(handle)


@contextmanager
def _clients(ar: AgentRein, base_url: str | None) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """A raw client and the same client wrapped in a session of its own."""
    if base_url is None:
        raw = httpx.Client(base_url="http://mock.invalid", transport=_mock_transport())
    else:
        raw = httpx.Client(base_url=base_url)
    session = ar.new_session(agent_id="bench-overhead", intent="measure the wrapped client's overhead")
    with raw:
        yield raw, ar.wrap(raw, session, connector="http")


def stripe_rows(ar: AgentRein, base_url: str) -> list[Row]:
    """READ and WRITE rows of the real stripe SDK against FakeStripe, raw and wrapped."""
    raw = stripe.StripeClient("sk_test_x", base_addresses={"api": base_url}, max_network_retries=0)
    session = ar.new_session(agent_id="bench-overhead", intent="measure the wrapped stripe client's overhead")
    wrapped = ar.wrap(raw, session, connector="stripe")
    customer_id = raw.v1.customers.create(params={"email": "read@example.com", "name": "read me"}).id
    params: CustomerCreateParams = {"email": "bench@example.com", "name": "bench"}
    return [
        Row(
            "READ  stripe customers.retrieve",
            lambda: raw.v1.customers.retrieve(customer_id),
            lambda: wrapped.v1.customers.retrieve(customer_id),
            None,
            READ_AIM_NS,
        ),
        Row(
            "WRITE stripe customers.create",
            lambda: raw.v1.customers.create(params=params),
            lambda: wrapped.v1.customers.create(params=params),
            None,
            WRITE_AIM_NS,
        ),
    ]


class _FreshRepo:
    """A repository of its own for each block of GitHub writes: ``advance()`` makes one (untimed) and points
    ``raw`` at it and ``wrapped`` at the same repository reached through the wrapped client."""

    def __init__(self, gh: github.Github, wrapped_gh: github.Github) -> None:
        self._org = gh.get_organization(GITHUB_ORG)
        self._wrapped_gh = wrapped_gh
        self._names = count(1)
        self.raw: Repository | None = None
        self.wrapped: Repository | None = None

    def advance(self) -> None:
        self.raw = self._org.create_repo(f"bench-writes-{next(self._names)}")
        self.wrapped = self._wrapped_gh.get_repo(self.raw.full_name)

    def create_raw(self) -> Issue:
        assert self.raw is not None
        return self.raw.create_issue(title="bench")

    def create_wrapped(self) -> Issue:
        assert self.wrapped is not None
        return self.wrapped.create_issue(title="bench")


@contextmanager
def github_rows(ar: AgentRein, base_url: str) -> Iterator[list[Row]]:
    """READ and WRITE rows of real PyGithub against FakeGitHub, raw and wrapped."""
    gh = github.Github(
        auth=github.Auth.Token(GITHUB_TOKEN),
        base_url=base_url,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    session = ar.new_session(agent_id="bench-overhead", intent="measure the wrapped github client's overhead")
    wrapped_gh = ar.wrap(gh, session, connector="github")
    raw_repo = gh.get_repo(GITHUB_REPO)
    wrapped_repo = wrapped_gh.get_repo(GITHUB_REPO)  # a read: the Repository comes back wrapped
    number = raw_repo.create_issue(title="read me").number
    fresh = _FreshRepo(gh, wrapped_gh)
    try:
        yield [
            Row(
                "READ  github repo.get_issue",
                lambda: raw_repo.get_issue(number),
                lambda: wrapped_repo.get_issue(number),
                None,
                READ_AIM_NS,
            ),
            Row(
                "WRITE github repo.create_issue",
                fresh.create_raw,
                fresh.create_wrapped,
                None,
                WRITE_AIM_NS,
                before_block=fresh.advance,
            ),
        ]
    finally:
        gh.close()


# output -------------------------------------------------------------------------------------------------


def _us(ns: float) -> str:
    return f"{ns / 1000:9.1f}"


def print_table(results: list[Result], floor: Result) -> None:
    columns = ("raw p50", "raw p90", "wrap p50", "wrap p90", "added")
    head = f"{'call':<36} " + " ".join(f"{c:>9}" for c in columns) + f" {'aim':>7} {'floors':>7}  verdict"
    print(head)
    print("-" * len(head))
    floor_ns = floor.added_ns
    for r in [*results, floor]:
        added = r.added_ns
        floors = ""
        if r is floor:
            verdict = "the floor"
        elif r.aim_ns == WRITE_AIM_NS:
            floors = f"{added / floor_ns:7.1f}"
            within = added <= FLOOR_AIM * floor_ns
            verdict = (
                "within aim" if within else f"over, x{added / (FLOOR_AIM * floor_ns):.1f} of <={FLOOR_AIM:g} floors"
            )
        else:
            verdict = "within aim" if added <= r.aim_ns else f"over, x{added / r.aim_ns:.1f}"
        print(
            f"{r.label:<36} {_us(statistics.median(r.raw_ns))} {_us(_p90(r.raw_ns))} "
            f"{_us(statistics.median(r.wrapped_ns))} {_us(_p90(r.wrapped_ns))} {_us(added)} "
            f"{'<=' + format(r.aim_ns / 1000, 'g'):>7} {floors:>7}  {verdict}"
        )
    print("all figures in microseconds per call; added = wrap p50 - raw p50; floors = added / the floor's added")
    print("(the floor: two raw sqlite3 WAL transactions, INSERT + guarded UPDATE, measured in this run); aim for")
    print(f"WRITE rows: <= {FLOOR_AIM:g} floors")


def _store_summary(db_file: Path) -> str:
    with closing(sqlite3.connect(db_file)) as db:
        rows = db.execute("SELECT status, COUNT(*) FROM actions GROUP BY status ORDER BY status").fetchall()
    return ", ".join(f"{n} {status}" for status, n in rows) or "no actions"


def wal_pages_per_call(db_file: Path, call: Call, calls: int = 40, settle: float = 1.0) -> float:
    """Pages that ``calls`` calls write to ``db_file``'s WAL, per call: what their commits cost is mostly
    copying these (4 KiB each; no fsync with synchronous=NORMAL). Counted by SQLite itself (the frames a
    checkpoint finds); ``settle`` seconds before and after let the embedded intent-check thread finish, so the
    count includes whatever the supervisor writes for them meanwhile (after a long run it may still be catching
    up for a few seconds: the emptying checkpoint is tried again until it gets through). Few enough calls that no
    automatic checkpoint (at 1,000 frames) runs in between."""
    with closing(sqlite3.connect(db_file, isolation_level=None)) as db:
        for _ in range(10):
            time.sleep(settle)
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                break
        for _ in range(calls):
            call()
        time.sleep(settle)
        busy_after, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if busy or busy_after or frames >= 1000:
        raise RuntimeError(f"the WAL could not be counted (busy {busy}/{busy_after}, {frames} frames)")
    return float(frames) / calls


def _bucket(filename: str, name: str) -> str:
    """Where a profiled function lives: a site-packages distribution, an AgentRein module, C or stdlib."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/src/agentrein" in filename:
        return "agentrein: " + Path(filename).name
    if filename == "~":  # C functions: "<method 'recv' of '_socket.socket' objects>", "<built-in method ...>"
        inner = name.strip("<>")
        if " of '" in inner:
            return "C: " + inner.split(" of '", 1)[1].split("'", 1)[0] + " methods"
        return "C: " + inner.removeprefix("built-in method ")
    return "stdlib: " + Path(filename).name


def profile_writes(wrapped: httpx.Client, calls: int, top: int = 15) -> None:
    """cProfile ``calls`` wrapped POSTs: self time by package, then the heaviest functions (cumulative)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        wrapped.post("/v1/things", json={"name": "profiled"})
    profiler.disable()
    stats = pstats.Stats(profiler)
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    entries = stats.stats  # type: ignore[attr-defined]  # untyped in typeshed
    by_package: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, self_time, _cum, _callers) in entries.items():
        key = _bucket(filename, name)
        by_package[key] = by_package.get(key, 0.0) + self_time
    total = sum(by_package.values())
    print(f"\ncProfile of {calls} wrapped POSTs over loopback (profiler overhead inflates Python-heavy code)")
    print(f"{'self time by package':<52} {'us/call':>8} {'share':>6}")
    for key, seconds in sorted(by_package.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{key:<52} {seconds * 1e6 / calls:8.1f} {100 * seconds / total:5.1f}%")
    print()
    stats.sort_stats("cumulative").print_stats(r"agentrein|sqlalchemy/(engine|sql)/(base|elements|dml)", top + 10)


# main ---------------------------------------------------------------------------------------------------


def _fake_github() -> FakeGitHub:
    fake = FakeGitHub(token=GITHUB_TOKEN)
    owner, name = GITHUB_REPO.split("/")
    fake.add_repo(owner, name)  # its owner becomes an organisation the token's user may create repositories in
    return fake


def _serve(make_fake: Callable[[], Fake], urls: multiprocessing.Queue[str], stop: Event) -> None:
    with make_fake().running() as fake:
        urls.put(fake.base_url)
        stop.wait()


@contextmanager
def _service_process(make_fake: Callable[[], Fake] = FakeService) -> Iterator[str]:
    """Run a fake (by default the http FakeService) in a child process; yield its base URL."""
    urls: multiprocessing.Queue[str] = multiprocessing.Queue()
    stop = multiprocessing.Event()
    child = multiprocessing.Process(target=_serve, args=(make_fake, urls, stop), daemon=True)
    child.start()
    try:
        yield urls.get(timeout=30)
    finally:
        stop.set()
        child.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="calls per side per round (default 200)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of raw/wrapped blocks (default 20)")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up calls per side (default 200)")
    parser.add_argument("--profile", action="store_true", help="also cProfile the wrapped POST path")
    args = parser.parse_args()
    if min(args.calls, args.rounds) < 1 or args.warmup < 0:
        parser.error("--calls and --rounds must be >= 1, --warmup >= 0")

    started = time.perf_counter()
    print("AgentRein overhead: raw client vs ar.wrap(client, session, connector=...) for http, stripe, github")
    print(
        f"Python {platform.python_version()}, httpx {version('httpx')}, stripe {version('stripe')}, "
        f"PyGithub {version('pygithub')}, requests {version('requests')}, "
        f"SQLAlchemy {version('sqlalchemy')}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"
    )
    plan = f"{args.rounds} rounds x {args.calls} calls per side per row, interleaved"
    print(f"{plan}; warm-up {args.warmup} calls per side")

    with (
        tempfile.TemporaryDirectory(prefix="agentrein-bench-") as tmp,
        _service_process() as base_url,
        _service_process(FakeStripe) as stripe_url,
        _service_process(_fake_github) as github_url,
    ):
        db_file = Path(tmp) / "bench.db"
        ar = AgentRein(f"sqlite:///{db_file}")
        try:
            with httpx.Client(base_url=base_url) as setup:
                item_path = f"/v1/things/{setup.post('/v1/things', json={'name': 'read me'}).json()['id']}"
            print(f"store: embedded SQLite {db_file}")
            fakes = f"FakeService {base_url}, FakeStripe {stripe_url}, FakeGitHub {github_url}"
            print(f"fakes, each in a process of its own: {fakes}\n")

            results: list[Result] = []
            with (
                _clients(ar, base_url) as (raw, wrapped),
                _clients(ar, None) as (mraw, mwrapped),
                github_rows(ar, github_url) as gh_rows,
            ):
                body = {"name": "bench", "amount": 1200, "currency": "eur"}
                rows = [
                    Row(
                        "READ  GET  loopback (proxy only)",
                        lambda: raw.get(item_path),
                        lambda: wrapped.get(item_path),
                        200,
                        READ_AIM_NS,
                    ),
                    Row(
                        "READ  GET  MockTransport (no net)",
                        lambda: mraw.get("/v1/things/thi_1"),
                        lambda: mwrapped.get("/v1/things/thi_1"),
                        200,
                        READ_AIM_NS,
                    ),
                    Row(
                        "WRITE POST loopback (record+confirm)",
                        lambda: raw.post("/v1/things", json=body),
                        lambda: wrapped.post("/v1/things", json=body),
                        201,
                        WRITE_AIM_NS,
                    ),
                    Row(
                        "WRITE POST MockTransport (no net)",
                        lambda: mraw.post("/v1/things", json=body),
                        lambda: mwrapped.post("/v1/things", json=body),
                        201,
                        WRITE_AIM_NS,
                    ),
                    *stripe_rows(ar, stripe_url),
                    *gh_rows,
                ]
                floor = Floor(Path(tmp) / "floor.db")
                floor_row = Row("FLOOR two raw sqlite3 WAL transactions", lambda: None, floor.call, None, WRITE_AIM_NS)
                floor_result = measure(floor_row, args.rounds, args.calls, args.warmup)
                for row in rows:
                    results.append(measure(row, args.rounds, args.calls, args.warmup))
                print_table(results, floor_result)
                ours = wal_pages_per_call(db_file, lambda: mwrapped.post("/v1/things", json=body))
                least = wal_pages_per_call(Path(tmp) / "floor.db", floor.call, settle=0)
                print(
                    f"WAL pages written per recorded call (POST, MockTransport; marking its intent check): {ours:.1f}; "
                    f"floor: {least:.1f}"
                )
                elapsed = time.perf_counter() - started
                print(f"store after the run: {_store_summary(db_file)}; elapsed {elapsed:.1f} s")
                if args.profile:
                    profile_writes(wrapped, max(args.calls, 500))
        finally:
            ar.close()


if __name__ == "__main__":
    main()
