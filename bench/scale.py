"""Whether AgentRein's reads stay fast as the data grows, on this machine (SQLite and PostgreSQL).

    A database is seeded with ``--sessions`` sessions (100,000) holding ``--actions`` actions (1,000,000) in a
    few organisations, with the mix a busy deployment has: sessions active, completed, abandoned, failed,
    reverted, partially reverted, being rolled back (an undo waiting for its approval), failed in their
    rollback, and waiting for an approval (thousands of pending approvals), each consistent with the status
    rules so that every read answers. One session of the organisation read has 1,000 actions. The rows are
    inserted in bulk through the store's tables (``agentrein_core.store.schema``, executemany), then ``ANALYZE``.

    Then ``agentrein serve`` runs as a subprocess on that database (as ``bench/server.py`` runs it) and each
    request is timed over loopback: ``GET /sessions`` (the first page, and a later one through
    ``nextCursor``) unfiltered and with each filter (``displayStatus`` with each display status), ``GET
    /approvals`` (all, ``?status=PENDING``, with ``include=``), ``GET /sessions/{id}`` of the 1,000-action
    session (its first page) and ``GET /sessions/{id}/actions?limit=1000`` (all of them, as the SDK's
    ``get_session`` reads them), and the dashboard's sessions, approvals and session pages. Any 4xx/5xx answer
    is reported.

    Then, embedded: a rollback of a 1,000-action session through an ``httpx.MockTransport`` client (undos/s),
    and the embedded executor's memory over a long run (``--calls`` wrapped calls in sessions that complete),
    measured with tracemalloc.

Run ``uv run python bench/scale.py`` (about 10 minutes at full scale on 2 cores; ``--sessions 10000
--actions 100000`` takes about 2). PostgreSQL runs when ``$AGENTREIN_TEST_POSTGRES_URL`` names a server (a
fresh database is created and dropped). Figures vary between machines; the aim is p50 <= 50 ms a request.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from agentrein import AgentRein
from agentrein_core.engine import Engine
from agentrein_core.ids import new_id
from agentrein_core.model import DEFAULT_ORGANISATION
from agentrein_core.statuses import DisplayStatus, Plan, Role, UserRole
from agentrein_core.store import Store, schema
from server import POSTGRES_ENV, fresh_postgres, run_server  # bench/server.py, beside this script

AIM_MS = 50.0
TIMEOUT = 60.0  # seconds a request may take before it is reported as unanswered
AIM_UNDOS = 200.0
PASSWORD = "bench scale password"
ADMIN = "admin@bench.example"
BIG = 1_000  # actions of the session read whole and of the session rolled back
NOW = datetime.now(UTC)

# the seed -------------------------------------------------------------------------------------------------

#: The kinds of session seeded, by what they display, with their share of the sessions.
KINDS: dict[DisplayStatus, float] = {
    DisplayStatus.COMPLETED: 0.40,
    DisplayStatus.ACTIVE: 0.24,
    DisplayStatus.REVERTED: 0.10,
    DisplayStatus.ABANDONED: 0.06,
    DisplayStatus.FAILED: 0.05,
    DisplayStatus.AWAITING_APPROVAL: 0.08,
    DisplayStatus.PARTIALLY_REVERTED: 0.04,
    DisplayStatus.ROLLBACK_FAILED: 0.02,
    DisplayStatus.ROLLING_BACK: 0.01,
}


class Seed:
    """Rows for one organisation's sessions, built as dicts of the store's columns and inserted in batches."""

    def __init__(self, conn: sa.Connection, rng: random.Random) -> None:
        self.conn, self.rng = conn, rng
        self.rows: dict[sa.Table, list[dict[str, Any]]] = {
            t: [] for t in (schema.sessions, schema.actions, schema.approvals, schema.rollbacks)
        }

    def flush(self, limit: int = 0) -> None:
        """Insert what is gathered once the actions reach ``limit`` rows; sessions first (the others refer
        to them)."""
        if len(self.rows[schema.actions]) < limit:
            return
        for table, rows in self.rows.items():
            if rows:
                self.conn.execute(table.insert(), rows)
                rows.clear()

    def session(self, org_id: str, kind: DisplayStatus, n: int, created: datetime) -> str:
        sid = new_id("ses")
        stored = {
            DisplayStatus.REVERTED: "ROLLED_BACK",
            DisplayStatus.ROLLBACK_FAILED: "FAILED",
            DisplayStatus.FAILED: "FAILED",
            DisplayStatus.COMPLETED: "COMPLETED",
            DisplayStatus.ABANDONED: "ABANDONED",
        }.get(kind, "ACTIVE")
        recent = stored == "ACTIVE"  # never idle for 24 h: the server's abandonment worker leaves them be
        last = NOW - timedelta(minutes=self.rng.randint(1, 600)) if recent else created + timedelta(minutes=n)
        last = max(last, created)
        self.rows[schema.sessions].append(
            {
                "session_id": sid,
                "org_id": org_id,
                "agent_id": f"agent-{self.rng.randint(1, 50)}",
                "intent": "refund the duplicate charges of last week's orders",
                "sandbox": False,
                "status": stored,
                "last_seq": n,
                "created_at": created,
                "last_activity_at": last,
                "completed_at": last if stored in ("COMPLETED", "ROLLED_BACK", "FAILED") else None,
            }
        )
        statuses = ["SUCCESS"] * n
        undos = ["NONE"] * n
        pending: tuple[int, str] | None = None  # (index, purpose) of a pending approval
        rollback: str | None = None
        if kind is DisplayStatus.REVERTED:
            statuses, undos, rollback = ["ROLLED_BACK"] * n, ["DONE"] * n, "SUCCEEDED"
        elif kind is DisplayStatus.FAILED:
            statuses[-1] = "FAILED"
            undos[:-1] = ["SKIPPED"] * (n - 1)
        elif kind is DisplayStatus.PARTIALLY_REVERTED:
            statuses[0], undos[0] = "ROLLED_BACK", "DONE"
        elif kind is DisplayStatus.ROLLBACK_FAILED:
            at = self.rng.randrange(n)
            statuses[at + 1 :], undos[at + 1 :] = ["ROLLED_BACK"] * (n - at - 1), ["DONE"] * (n - at - 1)
            statuses[at], undos[at], rollback = "ROLLBACK_FAILED", "FAILED", "FAILED"
        elif kind is DisplayStatus.ROLLING_BACK:
            at = self.rng.randrange(n)
            statuses[at + 1 :], undos[at + 1 :] = ["ROLLED_BACK"] * (n - at - 1), ["DONE"] * (n - at - 1)
            undos[at], pending, rollback = "AWAITING_APPROVAL", (at, "ROLLBACK"), "WAITING_APPROVAL"
        elif kind is DisplayStatus.AWAITING_APPROVAL:
            if self.rng.random() < 0.5:
                statuses[-1], pending = "PENDING_APPROVAL", (n - 1, "BEFORE_EXECUTION")
            else:
                pending = (n - 1, "AFTER_EXECUTION")
        elif kind is DisplayStatus.ACTIVE and self.rng.random() < 0.2:
            statuses[-1] = "CLEARED"
        rollback_id = new_id("rbk") if rollback else None
        if rollback_id:
            self.rows[schema.rollbacks].append(
                {
                    "rollback_id": rollback_id,
                    "org_id": org_id,
                    "session_id": sid,
                    "whole_session": True,
                    "approval_timeout_ms": None,
                    "status": rollback,
                    "trigger": "a call failed",
                    "requested_by": "agent",
                    "lease_token": None,
                    "lease_until": None,
                    "created_at": last,
                    "finished_at": None if rollback == "WAITING_APPROVAL" else last,
                    "error": "the service answered 500" if rollback == "FAILED" else None,
                }
            )
        decided = kind is DisplayStatus.COMPLETED and self.rng.random() < 0.1
        for i in range(n):
            aid = new_id("act")
            at = created + timedelta(seconds=i)
            done = statuses[i] not in ("CLEARED", "PENDING_APPROVAL", "FAILED")
            no_undo = undos[i] == "SKIPPED"
            self.rows[schema.actions].append(
                {
                    "action_id": aid,
                    "session_id": sid,
                    "org_id": org_id,
                    "seq": i + 1,
                    "connector": "http",
                    "api_name": "POST /v1/refunds",
                    "operation_type": "OTHER" if no_undo else "CREATE",
                    "payload": {"charge": f"ch_{i}", "amount": 1200 + i},
                    "response": {"id": f"re_{i}", "status": "succeeded"} if done else None,
                    "status": statuses[i],
                    "undo": (
                        {"type": "none", "requireApproval": False}
                        if no_undo
                        else {
                            "url": f"http://127.0.0.1:9/v1/refunds/re_{i}",
                            "type": "http-delete",
                            "requireApproval": undos[i] == "AWAITING_APPROVAL",
                        }
                    )
                    if done
                    else None,
                    "undo_status": undos[i],
                    "idempotency_key": new_id("idem"),
                    "error": "the service answered 500" if statuses[i] == "FAILED" else None,
                    "policy_name": None,
                    "review_after": pending is not None and pending == (i, "AFTER_EXECUTION"),
                    "undo_requested": kind is DisplayStatus.PARTIALLY_REVERTED and i == 0,
                    "created_at": at,
                    "updated_at": at,
                }
            )
            if pending is not None and pending[0] == i:
                self._approval(org_id, sid, aid, pending[1], "PENDING", at, rollback_id)
            elif i == 0 and (decided or kind is DisplayStatus.PARTIALLY_REVERTED):
                outcome = "REJECTED" if kind is DisplayStatus.PARTIALLY_REVERTED else "APPROVED"
                purpose = "AFTER_EXECUTION" if outcome == "REJECTED" else "BEFORE_EXECUTION"
                self._approval(org_id, sid, aid, purpose, outcome, at, None)
        return sid

    def _approval(
        self, org_id: str, sid: str, aid: str, purpose: str, status: str, at: datetime, rollback_id: str | None
    ) -> None:
        pending = status == "PENDING"
        self.rows[schema.approvals].append(
            {
                "approval_id": new_id("apr"),
                "org_id": org_id,
                "session_id": sid,
                "action_id": aid,
                "purpose": purpose,
                "status": status,
                "requested_at": at,
                # Far ahead: the server's expiry worker leaves the seeded pending approvals pending.
                "timeout_at": NOW + timedelta(days=30) if pending else at + timedelta(hours=1),
                "resolved_at": None if pending else at + timedelta(minutes=3),
                "resolved_by": None if pending else "reviewer@bench.example",
                "reason": None if pending or status == "APPROVED" else "not this customer",
                "rollback_id": rollback_id if purpose == "ROLLBACK" else None,
            }
        )


class Seeded:
    """A seeded database: where it is, the operator key of the organisation read, and what it holds."""

    def __init__(self, url: str, key: str, org_id: str, big: str, counts: dict[str, int], seconds: float) -> None:
        self.url, self.key, self.org_id, self.big, self.counts, self.seconds = url, key, org_id, big, counts, seconds


def seed(url: str, sessions: int, actions: int, rng: random.Random) -> Seeded:
    """Seed ``url`` (an empty database): ``sessions`` sessions holding about ``actions`` actions, 70% of them
    in the organisation ``default`` (the one read), the rest in three others."""
    started = time.perf_counter()
    store = Store(url)
    engine = Engine(store)
    org = engine.accounts.create_organisation(DEFAULT_ORGANISATION, Plan.TEAM)
    others = [engine.accounts.create_organisation(f"bench-{i}", Plan.TEAM).org_id for i in range(3)]
    key = engine.accounts.create_api_key(org.org_id, Role.OPERATOR)[1]
    engine.accounts.create_user(org.org_id, ADMIN, UserRole.ADMIN, PASSWORD)
    kinds, weights = list(KINDS), list(KINDS.values())
    mean = max(1.0, (actions - BIG) / max(1, sessions - 1))
    span = timedelta(days=90)
    with store.engine.begin() as conn:
        rows = Seed(conn, rng)
        for i in range(sessions - 1):
            created = NOW - span + span * (i / sessions)
            org_id = org.org_id if rng.random() < 0.7 else rng.choice(others)
            kind = rng.choices(kinds, weights)[0]
            rows.session(org_id, kind, max(1, round(rng.uniform(0.5, 2 * mean - 0.5))), created)
            rows.flush(limit=20_000)
        big = rows.session(org.org_id, DisplayStatus.COMPLETED, BIG, NOW - timedelta(hours=1))
        rows.flush()
    with store.engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))
        counts = {
            t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())
            for t in (schema.sessions, schema.actions, schema.approvals, schema.rollbacks)
        }
        p = schema.approvals
        pending = sa.select(sa.func.count()).where(p.c.status == "PENDING", p.c.org_id == org.org_id)
        counts["pending approvals (default)"] = int(conn.execute(pending).scalar_one())
    store.close()
    return Seeded(url, key, org.org_id, big, counts, time.perf_counter() - started)


# timing requests ------------------------------------------------------------------------------------------


class Row:
    def __init__(self, label: str, samples: list[float], aim: str, met: bool, note: str = "") -> None:
        self.label, self.samples, self.aim, self.met, self.note = label, samples, aim, met, note


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fetch: Callable[[], httpx.Response], repeat: int, budget: float) -> tuple[list[float], str]:
    """Milliseconds of ``repeat`` fetches (fewer if they take longer than ``budget`` seconds in all, at least
    3), after one that warms up; and any answer that was not 2xx."""
    bad = ""
    try:
        first = fetch()
    except httpx.TimeoutException:
        return [TIMEOUT * 1000], f"no answer in {TIMEOUT:.0f} s"
    if first.status_code >= 400:
        bad = f"{first.status_code}: {first.text[:200]}"
    samples: list[float] = []
    spent = 0.0
    while len(samples) < repeat and (spent < budget or len(samples) < 3):
        t0 = time.perf_counter()
        answer = fetch()
        took = time.perf_counter() - t0
        if answer.status_code >= 400 and not bad:
            bad = f"{answer.status_code}: {answer.text[:200]}"
        samples.append(took * 1000)
        spent += took
    return samples, bad


class Dashboard:
    """The dashboard as a browser uses it: signed in, with its cookies (``Secure`` ones too, over loopback)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http, self.cookies = http, {}  # type: ignore[var-annotated]
        login = self.get("/dashboard/login")
        csrf = re.search(r'name="_csrf_token" value="([^"]+)"', login.text)
        form = {"_csrf_token": csrf.group(1) if csrf else "", "email": ADMIN, "password": PASSWORD}
        signed = self.request("POST", "/dashboard/login", data=form)
        if signed.status_code != 303:
            raise RuntimeError(f"dashboard sign-in failed: {signed.status_code}")

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        answer = self.http.request(method, path, headers=headers, **kwargs)
        for raw in answer.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(raw).items():
                self.cookies[name] = morsel.value
        return answer

    def get(self, path: str) -> httpx.Response:
        return self.request("GET", path)


Fetch = Callable[[], httpx.Response]


def requests_of(seeded: Seeded, api: httpx.Client, pages: Dashboard) -> Iterator[tuple[str, Fetch]]:
    """Each request timed, by its label."""

    def get(path: str, params: Any = None) -> Callable[[], httpx.Response]:
        return lambda: api.get(path, params=params)

    def later(params: dict[str, str], pages_on: int = 3) -> Callable[[], httpx.Response] | None:
        """The request of the page ``pages_on`` pages after the first, through each page's ``nextCursor``."""
        cursor = None
        for _ in range(pages_on):
            cursor = (
                api.get("/sessions", params={**params, **({"cursor": cursor} if cursor else {})})
                .json()
                .get("nextCursor")
            )
            if cursor is None:
                return None
        return get("/sessions", {**params, "cursor": cursor})

    week = {
        "createdAfter": (NOW - timedelta(days=14)).isoformat(),
        "createdBefore": (NOW - timedelta(days=7)).isoformat(),
    }
    filters: list[tuple[str, dict[str, str]]] = [
        ("", {}),
        ("status=COMPLETED", {"status": "COMPLETED"}),
        ("status=ROLLED_BACK", {"status": "ROLLED_BACK"}),
        ("agentId=agent-7", {"agentId": "agent-7"}),
        ("createdAfter..Before (a week)", week),
    ]
    filters += [(f"displayStatus={d}", {"displayStatus": d.value}) for d in DisplayStatus]
    for label, params in filters:
        yield f"GET /sessions {label}".rstrip(), get("/sessions", params)
        deeper = later(params)
        if deeper is not None:
            yield f"  … 4th page (nextCursor) {label}".rstrip(), deeper
    yield "GET /approvals", get("/approvals")
    yield "GET /approvals?status=PENDING", get("/approvals", {"status": "PENDING"})
    yield (
        "GET /approvals?status=PENDING&include=purpose,consequences",
        get("/approvals", [("status", "PENDING"), ("include", "purpose"), ("include", "consequences")]),
    )
    yield f"GET /sessions/{{id}} ({BIG} actions: the first 100 shown)", get(f"/sessions/{seeded.big}")
    yield "  … every action, as get_session reads them", get(f"/sessions/{seeded.big}/actions", {"limit": BIG})
    yield "dashboard sessions page", lambda: pages.get("/dashboard/sessions")
    yield "dashboard sessions page, ROLLING_BACK", lambda: pages.get("/dashboard/sessions?display_status=ROLLING_BACK")
    yield "dashboard approvals page", lambda: pages.get("/dashboard/approvals")
    yield f"dashboard session page ({BIG} actions)", lambda: pages.get(f"/dashboard/sessions/{seeded.big}")


def measure_server(seeded: Seeded, workdir: Path, label: str, repeat: int) -> list[Row]:
    rows = []
    with run_server(label, seeded.url, workdir, 1, key=seeded.key) as server:
        headers = {"authorization": f"Bearer {seeded.key}"}
        with (
            httpx.Client(base_url=server.url, headers=headers, timeout=TIMEOUT) as api,
            httpx.Client(base_url=server.url, timeout=TIMEOUT) as browser,
        ):
            pages = Dashboard(browser)
            for name, fetch in requests_of(seeded, api, pages):
                samples, bad = timed(fetch, repeat, budget=20)
                p50 = statistics.median(samples)
                rows.append(Row(name, samples, f"<= {AIM_MS:.0f} ms", p50 <= AIM_MS and not bad, bad))
                print(f"  {name}: {p50:.1f} ms{'  ' + bad if bad else ''}", file=sys.stderr, flush=True)
    return rows


# embedded: a long rollback, and the executor's memory ----------------------------------------------------


def _service() -> httpx.MockTransport:
    made = iter(range(1, 10**9))

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, json={"id": f"re_{next(made)}"})
        return httpx.Response(204 if request.method == "DELETE" else 200)

    return httpx.MockTransport(handle)


def measure_rollback(url: str, label: str) -> Row:
    """Undos per second of a rollback of a ``BIG``-action session, embedded, on the seeded database."""
    ar = AgentRein(url)
    try:
        session = ar.new_session(agent_id="bench-rollback", intent="bench/scale.py rollback")
        with httpx.Client(base_url="http://127.0.0.1:9", transport=_service()) as raw:
            client = ar.wrap(raw, session, connector="http")
            for i in range(BIG):
                client.post("/v1/refunds", json={"charge": f"ch_{i}"})
            t0 = time.perf_counter()
            after = ar.rollback_session(session)
            seconds = time.perf_counter() - t0
    finally:
        ar.close()
    rate = BIG / seconds
    note = "" if after.display_status is DisplayStatus.REVERTED else f"ended {after.display_status}"
    return Row(
        f"rollback of {BIG} actions, embedded ({label})",
        [seconds * 1000],
        f">= {AIM_UNDOS:.0f} undos/s",
        rate >= AIM_UNDOS and not note,
        f"{rate:.0f} undos/s {note}".strip(),
    )


def measure_memory(workdir: Path, calls: int, per_session: int) -> Row:
    """What the embedded executor keeps per wrapped call over ``calls`` calls in sessions that complete."""
    ar = AgentRein(f"sqlite:///{workdir}/memory.db")
    try:
        with httpx.Client(base_url="http://127.0.0.1:9", transport=_service()) as raw:

            def run(n: int) -> None:
                for _ in range(n // per_session):
                    session = ar.new_session(agent_id="bench-memory", intent="bench/scale.py memory")
                    client = ar.wrap(raw, session, connector="http")
                    for i in range(per_session):
                        client.post("/v1/refunds", json={"charge": f"ch_{i}"})
                    ar.complete_session(session)

            run(per_session * 2)  # warm: caches, statements, imports
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            run(calls)
            gc.collect()
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
    finally:
        ar.close()
    kept = sum(s.size_diff for s in after.compare_to(before, "filename"))
    per_call = kept / calls
    return Row(
        f"embedded memory kept per wrapped call ({calls} calls)",
        [per_call],
        "bounded (~0 B)",
        per_call < 20,
        f"{per_call:.0f} B/call, {kept / 1024:.0f} KiB in all",
    )


# the run ------------------------------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    width = max(len(r.label) for r in rows)
    print(f"{'request':<{width}}  {'p50':>9}  {'p90':>9}  {'aim':<16}  verdict")
    for r in rows:
        if "ms" in r.aim:
            p50, p90 = f"{statistics.median(r.samples):.1f} ms", f"{percentile(r.samples, 0.9):.1f} ms"
        else:
            p50, p90 = r.note.split(" ")[0] + " " + r.note.split(" ")[1], ""
        verdict = "meets" if r.met else "MISSES"
        extra = f"  ({r.note})" if r.note and "ms" in r.aim else ""
        print(f"{r.label:<{width}}  {p50:>9}  {p90:>9}  {r.aim:<16}  {verdict}{extra}")


def seeded_at(url: str, args: argparse.Namespace, label: str, kept: Path | None) -> Seeded:
    """A seeded database at ``url``: the one ``kept`` describes when it was seeded by an earlier run with
    ``--keep``, else a new seed (described in ``kept`` for the next run)."""
    if kept is not None and kept.exists():
        seeded = Seeded(**json.loads(kept.read_text()))
        print(f"[{label}] reusing the seed {kept} describes", file=sys.stderr, flush=True)
        return seeded
    print(f"[{label}] seeding {args.sessions} sessions, {args.actions} actions …", file=sys.stderr, flush=True)
    seeded = seed(url, args.sessions, args.actions, random.Random(14))
    if kept is not None:
        kept.write_text(json.dumps(vars(seeded)))
    return seeded


def one_database(label: str, url: str, args: argparse.Namespace, workdir: Path, kept: Path | None = None) -> list[Row]:
    seeded = seeded_at(url, args, label, kept)
    held = ", ".join(f"{v} {k}" for k, v in seeded.counts.items())
    print(f"[{label}] seeded in {seeded.seconds:.0f} s: {held}", file=sys.stderr, flush=True)
    rows = measure_server(seeded, workdir, label, args.repeat)
    rows.append(measure_rollback(url, label))
    return [Row(f"[{label}] {r.label}", r.samples, r.aim, r.met, r.note) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--actions", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15, help="timed requests of each kind")
    parser.add_argument("--calls", type=int, default=50_000, help="wrapped calls of the memory run")
    parser.add_argument("--skip", choices=("sqlite", "postgresql", "memory"), action="append", default=[])
    parser.add_argument(
        "--keep",
        type=Path,
        help="a folder to keep the SQLite seed in and reuse on the next run (its rollback runs add a session)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="agentrein-scale-") as tmp:
        workdir = Path(tmp)
        if "sqlite" not in args.skip:
            where = args.keep or workdir
            where.mkdir(parents=True, exist_ok=True)
            kept = where / "scale.json" if args.keep else None
            rows += one_database("sqlite", f"sqlite:///{where}/scale.db", args, workdir, kept)
        postgres = __import__("os").environ.get(POSTGRES_ENV)
        if postgres and "postgresql" not in args.skip:
            with fresh_postgres(postgres) as url:
                rows += one_database("postgresql", url, args, workdir)
        if "memory" not in args.skip:
            rows.append(measure_memory(workdir, args.calls, per_session=100))
    print(
        f"AgentRein at scale: {args.sessions} sessions, {args.actions} actions (run took "
        f"{time.perf_counter() - started:.0f} s)"
    )
    print_table(rows)


if __name__ == "__main__":
    main()
