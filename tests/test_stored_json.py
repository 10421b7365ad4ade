"""A record's JSON (a payload, a response) reads back as it was recorded. Stored JSON is read by msgspec, and by
Python's ``json`` where msgspec refuses what ``json`` wrote, so no record written by this or an older version
becomes unreadable."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from agentrein_core.commands import Confirmed, WriteAhead
from agentrein_core.engine import Engine
from agentrein_core.ids import new_id
from agentrein_core.model import Action
from agentrein_core.statuses import OperationType
from agentrein_core.store import Store, schema

VARIED = {
    "name": "Zoë's café ☕",
    "emoji": "👩‍💻",
    "separator": "\u2028",
    "beyond_64_bits": 2**70 + 1,  # not a float's: read as a float, it would come back different
    "twenty_digits": 19_999_999_999_999_999_999,
    "negative": -(2**65) - 1,
    "fraction": 0.1,
    "large": 1.5e300,
    "nested": [[], {}, [1, [2, [3]]], {"a": None, "b": True}],
}


def recorded(engine: Engine, payload: Any, response: Any) -> tuple[str, str, str]:
    """An organisation, a session and a confirmed action of it with ``payload`` and ``response``."""
    org = engine.accounts.create_organisation(new_id("json"))  # the PostgreSQL database is shared by the tests
    session = engine.recording.new_session(org.org_id, agent_id="json", intent="record some JSON")
    logged = engine.recording.log_action(
        org.org_id,
        session.session_id,
        WriteAhead(connector="http", api_name="POST /v1/things", operation_type=OperationType.CREATE, payload=payload),
    )
    engine.recording.confirm_action(org.org_id, logged.action.action_id, Confirmed(response=response))
    return org.org_id, session.session_id, logged.action.action_id


def read_back(engine: Engine, org_id: str, session_id: str) -> Action:
    (action,) = engine.recording.get_session(org_id, session_id).actions
    return action


def test_a_records_json_reads_back_as_it_was_recorded(database_url: str) -> None:
    engine = Engine(Store(database_url))
    org_id, session_id, _ = recorded(engine, VARIED, {"id": "thi_1", **VARIED})
    action = read_back(engine, org_id, session_id)
    assert action.payload == VARIED
    assert action.response == {"id": "thi_1", **VARIED}
    assert all(type(action.payload[k]) is int for k in ("beyond_64_bits", "twenty_digits", "negative"))


def test_a_lone_surrogate_that_only_pythons_json_reads_still_reads_back(database_url: str) -> None:
    # json.dumps writes it as an escape, and both databases keep it; msgspec refuses to decode it.
    engine = Engine(Store(database_url))
    org_id, session_id, _ = recorded(engine, {"text": "half of a pair: \ud800"}, {"id": "thi_1"})
    assert read_back(engine, org_id, session_id).payload == {"text": "half of a pair: \ud800"}


def test_a_nan_stored_by_an_older_version_still_reads_back_from_sqlite(tmp_path: Path) -> None:
    # Values were once stored unchecked, and json.dumps writes NaN; msgspec refuses it. PostgreSQL refuses
    # NaN when it is written, so only SQLite can hold one.
    store = Store(f"sqlite:///{tmp_path / 'agentrein.db'}")
    engine = Engine(store)
    org_id, session_id, action_id = recorded(engine, {"name": "x"}, {"id": "thi_1"})
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(schema.actions)
            .where(schema.actions.c.action_id == action_id)
            .values(response=sa.literal_column("'{\"ratio\": NaN}'"))
        )
    action = read_back(engine, org_id, session_id)
    assert action.response is not None and math.isnan(action.response["ratio"])
