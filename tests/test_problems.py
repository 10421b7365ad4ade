"""The error wire protocol: a named error travels as problem+json (its status, slug, message and fields) and
comes back, in the SDK and the command line, as the same error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from serving import RunningServer, Tenant

from agentrein import AdminClient, AgentRein
from agentrein_core.commands import NewPolicy
from agentrein_core.engine import Engine
from agentrein_core.errors import (
    PROBLEM_TYPES,
    AgentReinError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
    ForbiddenError,
    InvalidTransitionError,
    LeaseLostError,
    NotFoundError,
    PolicyBlockedError,
    RollbackRefusedError,
    UnauthorizedError,
    UndoError,
    UndoUnavailableError,
    UnknownConnectorError,
    ValidationError,
    from_problem,
    to_problem,
)
from agentrein_core.intent import VerifierError
from agentrein_core.statuses import Role

#: One error of every registered class.
SAMPLES: list[AgentReinError] = [
    AgentReinError("something broke"),
    NotFoundError("user", "lead@example.com", key="email"),
    ValidationError("limit", "must be at least 1"),
    UnauthorizedError("missing or unknown API key"),
    ForbiddenError("an agent key may not configure connectors"),
    InvalidTransitionError("approval apr_1 is already APPROVED by lead"),
    RollbackRefusedError("nothing to roll back"),
    LeaseLostError("the lease on the undo of action act_1 has ended, or another process holds it"),
    PolicyBlockedError("act_1", "no deletes"),
    ApprovalRejectedError("wrong customer", "apr_1", "act_1"),
    ApprovalTimeoutError("apr_1", "act_1"),
    AgentReinUnavailableError("the database does not answer"),
    UndoError("the inverse answered 500"),
    UndoUnavailableError("no stripe client in this process"),
    VerifierError("the verifier did not answer within 30 s"),
]
CLIENT_ERRORS = [error for error in SAMPLES if error.status < 500]
SERVER_FAILURES = [error for error in SAMPLES if error.status == 500]


def fields(error: AgentReinError) -> dict[str, Any]:
    return {attribute: getattr(error, attribute) for attribute in error.problem_fields.values()}


def name(error: AgentReinError) -> str:
    return type(error).__name__


def test_the_samples_hold_every_registered_error_class() -> None:
    assert {type(error) for error in SAMPLES} == set(PROBLEM_TYPES.values())


@pytest.mark.parametrize("error", CLIENT_ERRORS, ids=name)
def test_a_client_error_comes_back_as_its_class_with_its_message_and_fields(error: AgentReinError) -> None:
    back = from_problem(error.status, to_problem(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert fields(back) == fields(error)


@pytest.mark.parametrize("error", SERVER_FAILURES, ids=name)
def test_a_server_failure_comes_back_as_a_plain_error_not_as_unavailable(error: AgentReinError) -> None:
    """A server that answers 500 is up and failing: ``failure_mode="open"`` must not run the call unrecorded."""
    back = from_problem(error.status, to_problem(error))
    assert type(back) is AgentReinError
    assert str(back) == f"the AgentRein server failed: {error}"


def test_an_unavailable_server_comes_back_unavailable_with_its_detail() -> None:
    back = from_problem(503, to_problem(AgentReinUnavailableError("the database does not answer")))
    assert isinstance(back, AgentReinUnavailableError)
    assert str(back) == "the AgentRein server is unavailable: the database does not answer"


@pytest.mark.parametrize(("status", "unavailable"), [(500, False), (502, True), (503, True), (504, True)])
def test_only_an_unavailable_server_lets_open_mode_run_calls_unrecorded(status: int, unavailable: bool) -> None:
    problem = {"type": "https://agentrein.dev/problems/internal-error", "status": status, "detail": "boom"}
    error = from_problem(status, problem)
    assert isinstance(error, AgentReinError)
    assert isinstance(error, AgentReinUnavailableError) is unavailable


@pytest.mark.parametrize(
    ("error", "parent"),
    [
        (UnknownConnectorError("nope", ["http", "stripe"]), ValidationError),
    ],
    ids=name,
)
def test_a_subclass_without_a_problem_type_of_its_own_comes_back_as_its_parent(
    error: AgentReinError, parent: type[AgentReinError]
) -> None:
    back = from_problem(error.status, to_problem(error))
    assert type(back) is parent
    assert str(back) == str(error)
    assert fields(back) == fields(error)


@pytest.mark.parametrize(
    ("error", "body"),
    [
        (
            NotFoundError("session", "ses_1"),
            {
                "title": "Not Found",
                "status": 404,
                "detail": "no session with id 'ses_1'",
                "rollsBack": False,
                "kind": "session",
                "id": "ses_1",
            },
        ),
        (
            ValidationError("limit", "must be at least 1"),
            {
                "title": "Bad Request",
                "status": 400,
                "detail": "limit: must be at least 1",
                "rollsBack": True,
                "field": "limit",
            },
        ),
        (
            PolicyBlockedError("act_1", "no deletes"),
            {
                "title": "Forbidden",
                "status": 403,
                "detail": "blocked by policy 'no deletes'; the call was not made",
                "rollsBack": False,
                "actionId": "act_1",
                "policyName": "no deletes",
            },
        ),
        (
            ApprovalRejectedError(None, "apr_1", "act_1"),
            {
                "title": "Forbidden",
                "status": 403,
                "detail": "approval rejected",
                "rollsBack": False,
                "actionId": "act_1",
                "approvalId": "apr_1",
                "reason": None,
            },
        ),
        (
            RollbackRefusedError("nothing to roll back"),
            {"title": "Conflict", "status": 409, "detail": "nothing to roll back", "rollsBack": False},
        ),
    ],
    ids=lambda value: name(value) if isinstance(value, AgentReinError) else "",
)
def test_a_problem_body_carries_the_wire_names_clients_read(error: AgentReinError, body: dict[str, Any]) -> None:
    assert to_problem(error) == {"type": f"https://agentrein.dev/problems/{error.problem_type}", **body}


@pytest.mark.parametrize("error", SAMPLES, ids=name)
def test_whether_an_error_rolls_the_session_back_travels_with_it(error: AgentReinError) -> None:
    back = from_problem(error.status, to_problem(error))
    assert back.rolls_back is type(error).rolls_back


def test_bad_input_and_agentrein_failing_roll_back_while_decisions_states_and_rights_do_not() -> None:
    rolling = {type(error).__name__ for error in SAMPLES if error.rolls_back}
    assert rolling == {
        "AgentReinError",
        "ValidationError",
        "AgentReinUnavailableError",
        "UndoError",
        "UndoUnavailableError",
        "VerifierError",
    }


def test_a_client_reads_whether_an_error_rolls_back_from_the_answer_before_its_class() -> None:
    problem = {"type": "https://agentrein.dev/problems/not-found", "status": 404, "rollsBack": True}
    assert from_problem(404, problem).rolls_back is True
    assert from_problem(404, problem | {"rollsBack": False}).rolls_back is False
    assert from_problem(400, {"type": "https://agentrein.dev/problems/method-not-allowed"}).rolls_back is True


def test_a_client_error_of_a_type_nobody_registered_is_a_validation_error_with_the_servers_detail() -> None:
    problem = {
        "type": "https://agentrein.dev/problems/method-not-allowed",
        "status": 405,
        "detail": "Method Not Allowed",
    }
    back = from_problem(405, problem)
    assert type(back) is ValidationError
    assert (str(back), back.field) == ("Method Not Allowed", "request")


def test_an_answer_that_is_not_a_problem_names_its_status() -> None:
    back = from_problem(404, None)
    assert type(back) is ValidationError
    assert str(back) == "HTTP 404 from the AgentRein server"


def test_fields_missing_from_a_problem_keep_their_defaults() -> None:
    back = from_problem(404, {"type": "https://agentrein.dev/problems/not-found", "status": 404, "detail": "Not Found"})
    assert isinstance(back, NotFoundError)
    assert (str(back), back.kind, back.record_id) == ("Not Found", "record", "?")


def test_two_error_classes_may_not_claim_one_problem_type() -> None:
    with pytest.raises(TypeError, match="problem type 'not-found' is NotFoundError's"):

        class AnotherNotFound(AgentReinError):
            problem_type = "not-found"

    assert PROBLEM_TYPES["not-found"] is NotFoundError


# Through a real server -----------------------------------------------------------------------------------

#: A mistake made on the engine in the tenant's organisation, and the same mistake made through the server.
Mistake = tuple[Callable[[Engine, str, str], object], Callable[[AgentRein, AdminClient, str], object]]
MISTAKES: dict[str, Mistake] = {
    "unknown session": (
        lambda engine, org_id, _: engine.recording.get_session(org_id, "ses_missing"),
        lambda ar, _, __: ar.get_session("ses_missing"),
    ),
    "unknown policy": (
        lambda engine, org_id, _: engine.policies.delete_policy(org_id, "pol_missing"),
        lambda ar, _, __: ar.remove_policy("pol_missing"),
    ),
    "unknown policy effect": (
        lambda engine, org_id, _: engine.policies.add_policy(org_id, NewPolicy("maybe", "MAYBE")),
        lambda ar, _, __: ar.add_policy("maybe", "MAYBE"),
    ),
    "unknown approval": (
        lambda engine, org_id, _: engine.reviews.approve(org_id, "apr_missing", "lead"),
        lambda ar, _, __: ar.approve("apr_missing", reviewer="lead"),
    ),
    "rollback of a session with nothing executed": (
        lambda engine, org_id, session_id: engine.rollbacks.request_rollback(
            org_id, session_id, caller_role=Role.OPERATOR, requested_by="lead", trigger="requested"
        ),
        lambda _, admin, session_id: admin.request_rollback(session_id),
    ),
}


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


def raised(call: Callable[[], object]) -> AgentReinError:
    with pytest.raises(AgentReinError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("mistake", MISTAKES)
def test_through_a_server_the_sdk_raises_the_error_the_engine_raised(server: RunningServer, mistake: str) -> None:
    tenant = server.tenant()
    session_id = server.engine.recording.new_session(tenant.org_id, "agent").session_id
    on_engine, through_server = MISTAKES[mistake]
    expected = raised(lambda: on_engine(server.engine, tenant.org_id, session_id))
    with tenant.client() as ar, AdminClient(tenant.url, tenant.key) as admin:
        error = raised(lambda: through_server(ar, admin, session_id))
    assert (type(error), str(error), fields(error)) == (type(expected), str(expected), fields(expected))


def test_a_key_the_server_does_not_know_is_unauthorized(tenant: Tenant) -> None:
    with AdminClient(tenant.url, "ar_not-a-key") as admin:
        error = raised(admin.list_connectors)
    assert type(error) is UnauthorizedError


def test_an_agent_key_may_not_configure_connectors(server: RunningServer, tenant: Tenant) -> None:
    with AdminClient(tenant.url, server.key(tenant, Role.AGENT)) as admin:
        error = raised(lambda: admin.configure_connector("http", enabled=False))
    assert type(error) is ForbiddenError and "configure connectors" in str(error)


def test_an_unknown_connector_is_not_found_by_name(tenant: Tenant) -> None:
    with AdminClient(tenant.url, tenant.key) as admin:
        error = raised(lambda: admin.get_connector("nope"))
    assert isinstance(error, NotFoundError)
    assert (str(error), error.kind, error.record_id) == (
        "no installed connector with name 'nope'",
        "installed connector",
        "nope",
    )
