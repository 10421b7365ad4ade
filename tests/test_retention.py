"""Events, webhook deliveries, intent checks and before-states are pruned once settled and older than the
retention; what agents did (sessions, actions, approvals) is never pruned, and nothing still waiting to go out is."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from test_engine import Clock

from agentrein_core.commands import Confirmed, NewPolicy, WriteAhead
from agentrein_core.engine import Engine
from agentrein_core.errors import NotFoundError, ValidationError
from agentrein_core.plugins import installed_connectors
from agentrein_core.retention import RETENTION_ENV
from agentrein_core.statuses import DeliveryStatus, OperationType
from agentrein_core.store import Store
from agentrein_core.verifier_plugins import IntentChecks


def test_settled_records_older_than_the_retention_are_pruned_and_the_work_itself_kept(database_url: str) -> None:
    clock = Clock()
    engine = Engine(Store(database_url), clock, connectors=installed_connectors(), retention=timedelta(days=30))
    org = engine.accounts.ensure_organisation(f"t-{uuid.uuid4().hex[:8]}").org_id
    engine.accounts.update_settings(org, webhook_hosts=["127.0.0.1"])
    hook = engine.outbox.add_webhook(org, "http://127.0.0.1:9/hook", ["*"], secret="token")  # never sent to here
    session = engine.recording.new_session(org, "agent", "pay invoices").session_id

    def review_one_call() -> None:
        engine.policies.add_policy(org, NewPolicy(f"review {uuid.uuid4().hex[:6]}", "REQUIRE_APPROVAL"))
        logged = engine.recording.log_action(
            org,
            session,
            WriteAhead(connector="http", api_name="POST /v1/x", operation_type=OperationType.CREATE, payload={}),
        )
        engine.recording.confirm_action(
            org, logged.action.action_id, Confirmed()
        )  # an after-execution review opens: an event

    review_one_call()
    (review,) = engine.reviews.list_approvals(org)
    engine.reviews.approve(org, review.approval_id, "lead@example.com")
    while (claimed := engine.outbox.next_delivery()) is not None:
        engine.outbox.record_delivery(claimed[0], status=204, error=None)  # delivered: settled
    engine.outbox.dispatch_events(lambda _event: None)
    while engine.intent_checks.verify_next(IntentChecks(engine, installed_connectors()), org) is not None:
        pass  # no verifier here: every check is settled "no verifier configured"
    clock.advance(days=31)
    review_one_call()  # recent: kept, and its delivery still waits to go out
    assert engine.intent_checks.queue_wanted(org) == 1  # its check, queued by a round of the supervisor: kept too

    report = engine.maintenance.maintain()

    assert report.pruned == 5  # the old requested and decided events, their deliveries, the old action's check
    deliveries = engine.outbox.list_deliveries(org, hook.webhook_id)
    assert [d.status for d in deliveries] == [DeliveryStatus.PENDING]
    assert len(engine.outbox.list_events(org)) == 1
    view = engine.recording.get_session(org, session)
    assert len(view.actions) == 2 and len(view.approvals) == 2
    assert [a.verification is not None for a in view.actions] == [False, True]
    engine.store.close()


def test_a_retention_that_is_not_a_positive_number_of_days_is_refused(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RETENTION_ENV, "forever")
    with pytest.raises(ValidationError, match=RETENTION_ENV):
        Engine(Store(database_url))


def test_a_before_state_older_than_the_retention_is_pruned_and_a_recent_one_and_a_waiting_calls_kept(
    database_url: str,
) -> None:
    clock = Clock()
    engine = Engine(Store(database_url), clock, connectors=installed_connectors(), retention=timedelta(days=30))
    org = engine.accounts.ensure_organisation(f"t-{uuid.uuid4().hex[:8]}").org_id
    session = engine.recording.new_session(org, "agent", "update customers").session_id
    recording = engine.recording
    old = recording.keep_before_state(org, session, "stripe", "customers.update", {"id": "cus_1"}).precapture_id
    held = recording.keep_before_state(org, session, "stripe", "customers.update", {"id": "cus_3"}).precapture_id
    update = WriteAhead("stripe", "customers.update", OperationType.UPDATE, {}, True, timedelta(days=60))  # held
    recording.log_action(org, session, update, before_state=held)
    clock.advance(days=31)
    recent = recording.keep_before_state(org, session, "stripe", "customers.update", {"id": "cus_2"}).precapture_id

    engine.maintenance.maintain()

    with pytest.raises(NotFoundError):
        recording.before_state(org, session, old)
    assert recording.before_state(org, session, recent).state == {"id": "cus_2"}
    assert recording.before_state(org, session, held).state == {"id": "cus_3"}
    engine.store.close()
