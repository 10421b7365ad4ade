"""The dashboard's words for statuses: every stored status has them, and they name what they are the status
of ("Call: …", "Undo: …", "Rollback: …")."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agentrein_core import wording as words
from agentrein_core.model import Action, Rollback, UndoConfig
from agentrein_core.statuses import ActionStatus, DisplayStatus, OperationType, RollbackStatus, UndoStatus
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
