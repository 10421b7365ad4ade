"""The dashboard's words for statuses: every stored status has them, and they name what they are the status
of ("Call: …", "Undo: …", "Rollback: …")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve

from agentrein_core import wording as words
from agentrein_core.model import Action, Rollback, UndoConfig, UndoHandoff
from agentrein_core.statuses import (
    ActionStatus,
    DisplayStatus,
    HandoffOutcome,
    OperationType,
    RollbackStatus,
    UndoStatus,
)
from agentrein_server.dashboard import rendering

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def action(status: ActionStatus, undo_status: UndoStatus, kind: OperationType = OperationType.CREATE) -> Action:
    undo = UndoConfig("none") if kind is OperationType.DELETE else UndoConfig("http-delete", {"url": "u"})
    return Action(
        "act_1", "ses_1", "org_1", 1, "http", f"{kind} /v1/x", kind, {}, status, "key", NOW, NOW,
        undo=undo, undo_status=undo_status,
    )  # fmt: skip


@pytest.mark.parametrize("status", list(ActionStatus))
@pytest.mark.parametrize("undo_status", list(UndoStatus))
def test_every_call_and_undo_status_is_said_in_words_naming_what_it_is_the_status_of(
    status: ActionStatus, undo_status: UndoStatus
) -> None:
    recorded = action(status, undo_status)
    assert words.call(recorded).text.startswith("Call: ")
    assert words.undo(recorded).text.startswith("Undo: ")
    for job_status in RollbackStatus:
        job = Rollback("rbk_1", "org_1", "ses_1", job_status, "test", "someone", NOW)
        assert words.rollback(job).text.startswith("Rollback: ")
        assert words.step(recorded, job).text.startswith("Undo: ")


def test_every_session_status_has_a_name_in_words() -> None:
    assert {words.display_name(status) for status in DisplayStatus} >= {"Partially reverted", "Reverted"}


def test_a_delete_that_stays_says_why_and_is_not_shown_as_good_news() -> None:
    skipped = action(ActionStatus.SUCCESS, UndoStatus.SKIPPED, OperationType.DELETE)
    assert words.undo(skipped).why == "DELETE /v1/x stays deleted: a delete has no inverse"
    assert words.call(skipped).tone == "plain"
    pending = action(ActionStatus.SUCCESS, UndoStatus.NONE, OperationType.DELETE)
    assert (words.undo(pending).text, words.undo(pending).why) == ("Undo: none possible", "a delete has no inverse")


@pytest.mark.parametrize(
    "value",
    [
        {"b": [1, 2.5, {"é": "ünïcode", "z": None}], "a": {}, "c": [], "big": 10**30, "tag": "<b>&</b>"},
        [],
        "text",
        {"complex": 1 + 2j},  # not JSON data: msgspec cannot encode it, so json.dumps lays it out (default=str)
    ],
)
def test_json_on_a_page_is_laid_out_as_json_dumps_lays_it_out_sorted_and_indented(value: object) -> None:
    assert rendering.pretty(value) == json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def test_an_undo_handed_to_the_agents_process_is_said_as_it_stands_there_until_its_outcome_is_in() -> None:
    under_way = action(ActionStatus.SUCCESS, UndoStatus.IN_PROGRESS)
    job = Rollback("rbk_1", "org_1", "ses_1", RollbackStatus.RUNNING, "test", "someone", NOW)
    offered = UndoHandoff("hnd_1", "org_1", "ses_1", "rbk_1", "act_1", "mcp", NOW, NOW + timedelta(seconds=60))
    assert (words.step(under_way, job, handoff=offered).text, words.step(under_way, job, handoff=offered).why) == (
        "Undo: offered to the agent's process",
        "the process that wrapped its client takes it; offered until 00:01:00 UTC",
    )
    taken = evolve(offered, lease_id="lease_1", leased_until=NOW + timedelta(seconds=120))
    assert words.step(under_way, job, handoff=taken).text == "Undo: running in the agent's process"
    reported = evolve(taken, outcome=HandoffOutcome.DONE)
    assert words.step(under_way, job, handoff=reported).text == words.step(under_way, job).text == "Undo: running"
