"""The github connector: real PyGithub, wrapped, against a stateful fake of the GitHub API on loopback. Each
scenario runs embedded and through a server (which undoes with the organisation's stored token)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import attrs
import github
import httpx
import pytest
from serving import RunningServer

from agentrein import ActionStatus, AgentRein, DisplayStatus, ValidationError
from agentrein_core.connector import Undoable, UndoOutlook
from agentrein_github import GitHubConnector
from agentrein_testing import FakeGitHub

TOKEN = "ghp_test"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(token=TOKEN)
    fake.add_repo("acme", "shop")
    with fake.running() as running:
        yield running


@pytest.fixture(params=["embedded", "server"])
def ar(request: pytest.FixtureRequest, database_url: str, fake: FakeGitHub) -> Iterator[AgentRein]:
    if request.param == "embedded":
        client = AgentRein(database_url, organisation=f"github-{uuid.uuid4().hex[:8]}")
    else:
        server: RunningServer = request.getfixturevalue("server")
        tenant = server.tenant()
        settings = {"enabled": True, "config": {"baseUrl": fake.base_url}, "credentials": {"token": TOKEN}}
        headers = {"Authorization": f"Bearer {tenant.key}"}
        assert httpx.put(f"{tenant.url}/connectors/github", json=settings, headers=headers).status_code == 200
        client = tenant.client()
    yield client
    client.close()


def gh(fake: FakeGitHub, **options: object) -> github.Github:
    return github.Github(
        auth=github.Auth.Token(TOKEN),
        base_url=fake.base_url,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
        **options,  # type: ignore[arg-type]
    )


def wrapped(ar: AgentRein, fake: FakeGitHub, **options: object) -> tuple[github.Github, str]:
    session = ar.new_session(agent_id="triage-agent", intent="file and discuss an issue")
    return ar.wrap(gh(fake), session, connector="github", **options), session.id  # type: ignore[arg-type]


def test_returned_objects_are_wrapped_so_their_calls_are_recorded(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    repo = client.get_repo("acme/shop")
    assert isinstance(repo, github.Repository.Repository) and repo.full_name == "acme/shop"
    issue = repo.create_issue(title="Checkout is slow", body="p99 at 4 s")
    issue.create_comment("Looking into it")
    issue.add_to_labels("bug")
    assert [i.title for i in repo.get_issues()] == ["Checkout is slow"]  # PaginatedList still works
    names = [a.api_name for a in ar.get_session(session_id).actions]
    assert names == ["issues.create", "issues.comments.create", "labels.add"]


def test_a_failed_run_is_undone_last_first(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    repo = client.get_repo("acme/shop")
    issue = repo.create_issue(title="Checkout is slow")
    comment = issue.create_comment("Looking into it")
    issue.add_to_labels("bug")
    fake.fail_next("POST", "/repos/acme/shop/issues", status=422)
    with pytest.raises(github.GithubException):
        repo.create_issue(title="A second one")
    session = ar.get_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    (stored,) = fake.issues("acme", "shop")
    assert (stored["state"], stored["state_reason"]) == ("closed", "not_planned")
    assert stored["labels"] == []
    assert all(c["id"] != comment.id for c in fake.comments("acme", "shop"))
    undo_order = [(c.method, c.path.rsplit("/", 2)[-2]) for c in fake.calls() if c.method in ("DELETE", "PATCH")]
    assert undo_order == [("DELETE", "labels"), ("DELETE", "comments"), ("PATCH", "issues")]


def test_labels_added_through_a_stale_issue_are_undone_by_removing_only_those_it_did_not_have(
    ar: AgentRein, fake: FakeGitHub
) -> None:
    client, session_id = wrapped(ar, fake)
    issue = client.get_repo("acme/shop").create_issue(title="Checkout is slow")
    gh(fake).get_repo("acme/shop").get_issue(issue.number).add_to_labels("bug")  # someone else, meanwhile
    issue.add_to_labels("bug", "ux")
    _create, added = ar.get_session(session_id).actions
    assert added.undo is not None and added.undo.params["labels"] == ["ux"]
    ar.rollback_session(session_id)
    (stored,) = fake.issues("acme", "shop")
    assert [label["name"] for label in stored["labels"]] == ["bug"]


def test_an_issue_edit_is_undone_by_restoring_its_fields(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    issue = client.get_repo("acme/shop").create_issue(title="Old title", body="old body")
    issue.edit(title="New title", body="new body")
    ar.rollback_session(session_id)
    (stored,) = fake.issues("acme", "shop")
    assert (stored["title"], stored["state"]) == ("Old title", "closed")
    assert stored["body"].startswith("old body")


#: A token as GitHub issues them, in what an agent changed: what AgentRein's records never keep.
LEAKED = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"


def test_an_issue_edit_restores_every_field_but_one_that_held_a_secret_and_says_so(
    ar: AgentRein, fake: FakeGitHub
) -> None:
    client, session_id = wrapped(ar, fake)
    issue = client.get_repo("acme/shop").create_issue(title="Old title", body=f"deploy with {LEAKED}")
    issue.edit(title="New title", body="no secrets here")
    _, edit = ar.get_session(session_id).actions
    assert edit.undo is not None and edit.undo.params["notRestored"] == ["body"]
    described = GitHubConnector().describe_undo(edit)
    assert described.endswith("as they were (body held a secret, which AgentRein does not keep: not restored)")
    ar.rollback_session(session_id)
    (stored,) = fake.issues("acme", "shop")
    assert (stored["title"], stored["body"]) == ("Old title", "no secrets here")  # never the redaction marker


def test_a_file_update_whose_earlier_content_held_a_secret_is_recorded_with_no_undo_saying_why(
    ar: AgentRein, fake: FakeGitHub
) -> None:
    repo = gh(fake).get_repo("acme/shop")
    repo.create_file("deploy.env", "add", f"TOKEN={LEAKED}\n")
    client, session_id = wrapped(ar, fake)
    wrapped_repo = client.get_repo("acme/shop")
    current = wrapped_repo.get_contents("deploy.env")
    wrapped_repo.update_file("deploy.env", "rotate", "TOKEN=from-the-vault\n", current.sha)  # type: ignore[union-attr]
    (update,) = ar.get_session(session_id).actions
    assert update.undo is not None and update.undo.type == "none"
    assert "its content before held a secret" in update.undo.params["why"]
    assert LEAKED not in repr(ar.get_session(session_id))  # stored nowhere, not even in base64


def test_a_retried_create_whose_answer_was_lost_makes_one_issue(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake, retryable=["issues.create"])
    repo = client.get_repo("acme/shop")
    fake.fail_next("POST", "/repos/acme/shop/issues", status=502, after_effect=True)
    issue = repo.create_issue(title="Only once", body="please")
    (stored,) = fake.issues("acme", "shop")
    assert stored["number"] == issue.number
    (action,) = ar.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS and f"agentrein:{action.idempotency_key}" in stored["body"]


def test_a_created_repository_is_deleted_only_after_approval(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    client.get_user().create_repo("scratch")
    session = ar.rollback_session(session_id, timeout_ms=300)  # nobody approves in time
    assert fake.repo_exists("octocat", "scratch")
    assert session.approvals[-1].status == "EXPIRED"


def test_a_client_that_retries_posts_itself_is_refused(ar: AgentRein, fake: FakeGitHub) -> None:
    session = ar.new_session(agent_id="a", intent="i")
    unsafe = github.Github(auth=github.Auth.Token(TOKEN), base_url=fake.base_url)
    with pytest.raises(ValidationError, match="retry=None"):
        ar.wrap(unsafe, session, connector="github")


def a_branch(repo: github.Repository.Repository, name: str) -> None:
    """A branch with one commit of its own, made with the raw client (set-up, not part of the agent's run)."""
    repo.create_git_ref(f"refs/heads/{name}", repo.get_branch("main").commit.sha)
    repo.create_file(f"{name}.txt", "work", "content", branch=name)


def test_pulls_refs_and_files_are_undone_with_their_own_inverses(ar: AgentRein, fake: FakeGitHub) -> None:
    a_branch(gh(fake).get_repo("acme/shop"), "feature")
    client, session_id = wrapped(ar, fake)
    repo = client.get_repo("acme/shop")
    pull = repo.create_pull("main", "feature", title="A feature")
    repo.create_git_ref("refs/heads/scratch", repo.get_branch("main").commit.sha)
    repo.create_file("NOTES.md", "notes", "first notes")
    readme = repo.get_contents("README.md")
    repo.update_file("README.md", "rewrite", "rewritten", readme.sha)  # type: ignore[union-attr]
    session = ar.rollback_session(session_id)
    assert session.display_status is DisplayStatus.REVERTED
    assert fake.file("acme", "shop", "README.md") != b"rewritten"
    assert fake.file("acme", "shop", "NOTES.md") is None
    assert "refs/heads/scratch" not in fake.refs("acme", "shop")
    (stored,) = fake.pulls("acme", "shop")
    assert (stored["number"], stored["state"]) == (pull.number, "closed")


@pytest.mark.parametrize("create", ["pull", "ref"])
def test_a_retried_create_told_it_exists_answers_with_what_the_lost_attempt_made(
    ar: AgentRein, fake: FakeGitHub, create: str
) -> None:
    a_branch(gh(fake).get_repo("acme/shop"), "feature")
    client, session_id = wrapped(ar, fake, retryable=["pulls.create", "git.refs.create"])
    repo = client.get_repo("acme/shop")
    if create == "pull":
        fake.fail_next("POST", "/repos/acme/shop/pulls", status=502, after_effect=True)
        made = repo.create_pull("main", "feature", title="A feature")
        assert [p["number"] for p in fake.pulls("acme", "shop")] == [made.number]
    else:
        fake.fail_next("POST", "/repos/acme/shop/git/refs", status=502, after_effect=True)
        made = repo.create_git_ref("refs/heads/scratch", repo.get_branch("main").commit.sha)
        assert made.ref == "refs/heads/scratch"
    (action,) = ar.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS and action.undo is not None


@pytest.mark.parametrize(
    "undo",
    [
        {"type": "github-delete-ref", "repo": "acme/shop", "ref": "../../prod"},
        {"type": "github-delete-comment", "repo": "acme/shop", "id": "../../../prod"},
        {"type": "github-close-issue", "repo": "acme/../prod", "number": 1},
        {"type": "github-restore-issue", "repo": "acme/shop", "number": 1, "fields": {"private": False}},
        {"type": "github-delete-file", "repo": "acme/shop", "path": "../../prod"},
        {"type": "github-delete-repo", "repo": "acme/prod", "requireApproval": False},
    ],
)
def test_a_server_refuses_an_undo_that_would_reach_beyond_its_object(
    server: RunningServer, fake: FakeGitHub, undo: dict[str, object]
) -> None:
    tenant = server.tenant()
    api = httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"})
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    body = {"connector": "github", "apiName": "issues.create", "operationType": "CREATE", "payload": {}}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    refused = api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "undo": undo})
    assert refused.status_code == 400, refused.text
    assert api.get(f"/sessions/{session_id}").json()["actions"][0]["status"] == "CLEARED"


def test_calls_are_recorded_by_argument_name_even_through_attributes(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    repo = client.get_repo("acme/shop")
    issue = repo.create_issue("Positional title", "positional body")  # body given positionally
    issue.repository.create_issue(title="Reached through an attribute")
    (first, second) = ar.get_session(session_id).actions
    target = f"{fake.base_url}/repos/acme/shop"  # where the call was made, for the words a reviewer reads
    assert first.payload == {"title": "Positional title", "body": "positional body", "target": target}
    assert second.api_name == "issues.create"
    assert "positional body" in (fake.issue("acme", "shop", issue.number) or {})["body"]


def test_secret_values_set_through_the_api_are_redacted() -> None:
    from agentrein_core.redaction import Redactor
    from agentrein_github import GitHubConnector

    redacted = Redactor(GitHubConnector.sensitive_fields).redact({"name": "DEPLOY", "unencrypted_value": "ghp_x"})
    assert redacted == {"name": "DEPLOY", "unencrypted_value": "[REDACTED]"}


def test_writes_on_any_object_reached_by_slices_pages_or_attributes_are_recorded(
    ar: AgentRein, fake: FakeGitHub
) -> None:
    seed = gh(fake).get_repo("acme/shop")
    for n in range(3):
        seed.create_issue(title=f"old {n}")
    client, session_id = wrapped(ar, fake)
    repo = client.get_repo("acme/shop")
    for issue in repo.get_issues()[0:2]:
        issue.edit(state="closed")
    repo.get_issues().get_page(0)[0].create_comment("from a page")
    assert repo.get_issue(1) == repo.get_issue(1) and len({repo.get_issue(1), repo.get_issue(1)}) == 1
    names = [a.api_name for a in ar.get_session(session_id).actions]
    assert names == ["issues.update", "issues.update", "issues.comments.create"]


def test_a_retried_repository_create_whose_answer_was_lost_makes_one(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake, retryable=["repos.create"])
    fake.fail_next("POST", "/user/repos", status=502, after_effect=True)
    made = client.get_user().create_repo("scratch")
    assert made.full_name == "octocat/scratch" and fake.repo_exists("octocat", "scratch")
    (action,) = ar.get_session(session_id).actions
    assert action.status is ActionStatus.SUCCESS and action.undo is not None


def test_undoing_an_edit_leaves_fields_it_did_not_change_as_others_set_them(ar: AgentRein, fake: FakeGitHub) -> None:
    client, session_id = wrapped(ar, fake)
    issue = client.get_repo("acme/shop").create_issue(title="Old title", body="old body")
    gh(fake).get_repo("acme/shop").get_issue(issue.number).edit(body="a human's better body")
    issue.edit(title="New title")
    ar.rollback_session(session_id)
    stored = fake.issue("acme", "shop", issue.number) or {}
    assert (stored["title"], stored["body"]) == ("Old title", "a human's better body")


def test_an_issue_closed_as_not_planned_and_a_new_one_are_described_in_words(
    embedded: AgentRein, fake: FakeGitHub
) -> None:
    client, session_id = wrapped(embedded, fake)
    repo = client.get_repo("acme/shop")
    issue = repo.create_issue(title="Checkout is slow")
    issue.edit(state="closed", state_reason="not_planned")
    created, closed = embedded.get_session(session_id).actions
    connector = GitHubConnector()
    number = issue.number
    assert connector.describe(created) == "Create issue “Checkout is slow” in acme/shop"
    assert connector.describe_undo(created) == f"Close issue acme/shop#{number} as not planned"
    assert connector.describe(closed) == f"Close issue acme/shop#{number} as not planned"
    assert connector.describe_undo(closed) == f"Restore state of issue acme/shop#{number} as they were"
    assert connector.target_host(closed) == fake.base_url.removeprefix("http://")
    assert connector.foresee_undo(attrs.evolve(created, undo=None)) == UndoOutlook(
        Undoable.YES, "Close the issue it opens, as not planned"
    )
    merged = attrs.evolve(created, api_name="pulls.merge", undo=None)
    assert connector.foresee_undo(merged) == UndoOutlook(
        Undoable.NO, "a merge cannot be taken back through GitHub's API"
    )
