"""AgentRein's durable call beside a peer's: a DBOS step on SQLite, timed in the same run.

What it measures
    The same ``POST`` on an ``httpx.Client`` whose transport is ``httpx.MockTransport`` (no network: what is
    left is the durability each library adds), made three ways, each against the raw call in interleaved blocks
    (``bench/overhead.py``'s ``measure``):

    - **AgentRein**: ``ar.wrap(client, session, connector="http").post(...)`` on an embedded
      ``AgentRein("sqlite:///<tmp>/agentrein.db")``: the write-ahead record before the call and its
      confirmation after it.
    - **DBOS, as shipped**: a ``@DBOS.workflow()`` whose one ``@DBOS.step()`` makes the call, on DBOS's SQLite
      system database with DBOS's own settings (SQLite's rollback journal, ``synchronous=FULL``). A step is
      durable only inside a workflow (DBOS checkpoints the workflow's start, the step's output and the
      workflow's end), so the workflow around one step is DBOS's unit of one durable call.
    - **DBOS, like for like**: the same, with DBOS's database in WAL mode and ``synchronous=NORMAL``, the
      settings AgentRein's SQLite store uses (durable across a crash of the process; the last commits may be
      lost if the machine loses power). This row is the one the ratio is held to.

    The ratio printed is DBOS's added p50 over AgentRein's; the aim is >= 3 (we stay ahead by 3x or more).

How
    Run ``uv run --group peers python bench/peers.py`` (``--help`` for options). DBOS comes from the optional
    ``peers`` dependency group and is never installed by the tests. DBOS opens no connection of its own unless
    a Conductor key is configured (none is here); everything stays on this machine. Figures are printed, never
    asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from dbos import DBOS
from overhead import WRITE_AIM_NS, Result, Row, _mock_transport, _p90, _us, measure
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agentrein import AgentRein

RATIO_AIM = 3.0
BODY = {"name": "bench", "amount": 1200, "currency": "eur"}


@contextmanager
def _dbos_post(db_file: Path, *, like_for_like: bool) -> Iterator[Callable[[], Any]]:
    """Launch DBOS on ``db_file`` and yield a call that runs one workflow of one step making the POST."""
    if like_for_like:
        with closing(sqlite3.connect(db_file)) as db:
            db.execute("PRAGMA journal_mode=WAL")  # kept in the file: every later connection is in WAL mode

        def normal(dbapi_conn: Any, _record: Any) -> None:
            # synchronous is a connection's setting, not the file's: set it on DBOS's connections only
            if any(Path(row[2]) == db_file for row in dbapi_conn.execute("PRAGMA database_list") if row[2]):
                dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        event.listen(Engine, "connect", normal)
    client = httpx.Client(base_url="http://mock.invalid", transport=_mock_transport())

    @DBOS.step()
    def post() -> httpx.Response:
        return client.post("/v1/things", json=BODY)

    @DBOS.workflow()
    def one_durable_call() -> httpx.Response:
        return post()

    DBOS(config={"name": "agentrein-peers", "system_database_url": f"sqlite:///{db_file}", "log_level": "WARNING"})
    DBOS.launch()
    try:
        yield one_durable_call
    finally:
        DBOS.destroy(destroy_registry=True)
        client.close()
        if like_for_like:
            event.remove(Engine, "connect", normal)


def _print(results: list[Result], ours: Result) -> None:
    columns = ("raw p50", "raw p90", "call p50", "call p90", "added")
    head = f"{'durable POST (MockTransport)':<34} " + " ".join(f"{c:>9}" for c in columns) + f" {'x ours':>7}"
    print(head)
    print("-" * len(head))
    for r in results:
        ratio = "" if r is ours else f"{r.added_ns / ours.added_ns:7.1f}"
        print(
            f"{r.label:<34} {_us(statistics.median(r.raw_ns))} {_us(_p90(r.raw_ns))} "
            f"{_us(statistics.median(r.wrapped_ns))} {_us(_p90(r.wrapped_ns))} {_us(r.added_ns)} {ratio:>7}"
        )
    print("microseconds per call; added = call p50 - raw p50; x ours = the row's added / AgentRein's added")
    like = results[-1]
    ratio = like.added_ns / ours.added_ns
    verdict = "within aim" if ratio >= RATIO_AIM else "BELOW aim"
    print(f"ratio held to (DBOS like for like / AgentRein): {ratio:.1f}x, aim >= {RATIO_AIM:g}x: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=100, help="calls per side per round (default 100)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of raw/durable blocks (default 10)")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up calls per side (default 100)")
    args = parser.parse_args()
    if min(args.calls, args.rounds) < 1 or args.warmup < 0:
        parser.error("--calls and --rounds must be >= 1, --warmup >= 0")

    print("A durable call: AgentRein's embedded wrapped client beside a DBOS workflow of one step, on SQLite")
    print(
        f"Python {platform.python_version()}, dbos {version('dbos')}, httpx {version('httpx')}, "
        f"SQLAlchemy {version('sqlalchemy')}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}"
    )
    print(f"{args.rounds} rounds x {args.calls} calls per side per row, interleaved; warm-up {args.warmup}\n")
    with tempfile.TemporaryDirectory(prefix="agentrein-peers-") as tmp:
        raw = httpx.Client(base_url="http://mock.invalid", transport=_mock_transport())
        ar = AgentRein(f"sqlite:///{Path(tmp) / 'agentrein.db'}")
        try:
            session = ar.new_session(agent_id="bench-peers", intent="time a durable call beside DBOS")
            wrapped = ar.wrap(raw, session, connector="http")

            def raw_post() -> httpx.Response:
                return raw.post("/v1/things", json=BODY)

            def row(label: str, durable: Callable[[], Any]) -> Result:
                return measure(Row(label, raw_post, durable, 201, WRITE_AIM_NS), args.rounds, args.calls, args.warmup)

            ours = row("AgentRein wrap (embedded SQLite)", lambda: wrapped.post("/v1/things", json=BODY))
            results = [ours]
            for label, like in (("DBOS step, as shipped", False), ("DBOS step, WAL + sync NORMAL", True)):
                db_file = Path(tmp) / f"dbos-{'wal' if like else 'shipped'}.sqlite"
                with _dbos_post(db_file, like_for_like=like) as durable:
                    results.append(row(label, durable))
        finally:
            ar.close()
            raw.close()
    _print(results, ours)


if __name__ == "__main__":
    main()
