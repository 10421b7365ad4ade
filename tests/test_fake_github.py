"""The fake GitHub, driven by the real PyGithub: what it answers, what it remembers, how it fails, and what
PyGithub itself does on top of it (its retries and its lazy loading) that a connector has to live with."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import github
import pytest
import requests
from github.GithubException import BadCredentialsException, GithubException, UnknownObjectException

from agentrein_testing import FakeGitHub


def client(fake: FakeGitHub, token: str | None = "ghp_test", **options: Any) -> github.Github:
    """PyGithub as a connector would build it, minus its write throttle (1 s between writes by default)."""
    options.setdefault("seconds_between_requests", None)
    options.setdefault("seconds_between_writes", None)
    auth = github.Auth.Token(token) if token is not None else None
    return github.Github(auth=auth, base_url=fake.base_url, **options)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.add_repo("acme", "shop")
    with fake.running():
        yield fake


@pytest.fixture
def gh(fake: FakeGitHub) -> Iterator[github.Github]:
    gh = client(fake)
    yield gh
    gh.close()


@pytest.fixture
def repo(gh: github.Github) -> Any:
    return gh.get_repo("acme/shop")


# users and authentication -----------------------------------------------------------------------------
def test_the_token_authenticates_its_user(gh: github.Github) -> None:
    me = gh.get_user()
    assert isinstance(me, github.AuthenticatedUser.AuthenticatedUser)
    assert (me.login, me.type) == ("octocat", "User")


def test_a_request_without_a_token_is_refused_with_401(fake: FakeGitHub) -> None:
    with pytest.raises(GithubException) as refused:
        _ = client(fake, token=None).get_user().login
    assert refused.value.status == 401
    assert refused.value.data["message"] == "Requires authentication"


def test_an_unknown_token_is_refused_as_bad_credentials(fake: FakeGitHub) -> None:
    with pytest.raises(BadCredentialsException) as refused:
        client(fake, token="ghp_wrong").get_repo("acme/shop")
    assert refused.value.status == 401


def test_a_public_repo_is_readable_without_a_token_but_not_writable(fake: FakeGitHub) -> None:
    anonymous = client(fake, token=None).get_repo("acme/shop")
    assert anonymous.full_name == "acme/shop"
    with pytest.raises(GithubException) as refused:
        anonymous.create_issue("Drive-by")
    assert refused.value.status == 401
    assert fake.issues("acme", "shop") == []


def test_a_private_repo_of_someone_else_answers_404(fake: FakeGitHub) -> None:
    fake.add_user("mallory", token="ghp_mallory")
    fake.add_repo("octocat", "secret", private=True)
    with pytest.raises(UnknownObjectException):
        client(fake, token="ghp_mallory").get_repo("octocat/secret")


def test_writes_without_push_access_are_forbidden_but_issues_may_be_opened(fake: FakeGitHub) -> None:
    fake.add_user("mallory", token="ghp_mallory")
    outsider = client(fake, token="ghp_mallory").get_repo("acme/shop")
    with pytest.raises(GithubException) as refused:
        outsider.create_file("evil.txt", "sneak in", "boo")
    assert refused.value.status == 403
    issue = outsider.create_issue("Found a bug", labels=["bug"])  # labels are dropped without push access
    assert (issue.user.login, issue.labels) == ("mallory", [])


# repositories -----------------------------------------------------------------------------------------
def test_a_seeded_repo_answers_with_urls_pointing_back_at_the_fake(fake: FakeGitHub, repo: Any) -> None:
    assert isinstance(repo, github.Repository.Repository)
    assert (repo.full_name, repo.default_branch, repo.private) == ("acme/shop", "main", False)
    assert repo.url == f"{fake.base_url}/repos/acme/shop"
    assert repo.owner.url == f"{fake.base_url}/users/acme"
    assert repo.owner.type == "Organization"
    assert repo.permissions.push is True


def test_a_created_repo_can_be_deleted_and_then_answers_404(fake: FakeGitHub, gh: github.Github) -> None:
    created = gh.get_user().create_repo("scratch", description="temporary", private=True)
    assert (created.full_name, created.private, created.description) == ("octocat/scratch", True, "temporary")
    assert fake.repo_exists("octocat", "scratch")
    created.delete()
    assert not fake.repo_exists("octocat", "scratch")
    with pytest.raises(UnknownObjectException):
        gh.get_repo("octocat/scratch")


def test_creating_a_repo_whose_name_is_taken_fails_validation(gh: github.Github) -> None:
    gh.get_user().create_repo("dup")
    with pytest.raises(GithubException) as refused:
        gh.get_user().create_repo("DUP")
    assert refused.value.status == 422
    assert refused.value.data["message"] == "Repository creation failed."
    assert refused.value.data["errors"][0]["message"] == "name already exists on this account"


def test_an_organization_is_fetched_and_its_members_create_repos_in_it(fake: FakeGitHub, gh: github.Github) -> None:
    org = gh.get_organization("acme")
    assert isinstance(org, github.Organization.Organization)
    assert (org.login, org.url) == ("acme", f"{fake.base_url}/orgs/acme")
    created = org.create_repo("api", auto_init=True)
    assert (created.full_name, created.owner.login) == ("acme/api", "acme")
    assert fake.file("acme", "api", "README.md") == b"# api\n"


def test_only_members_create_repos_in_an_organization(fake: FakeGitHub) -> None:
    fake.add_user("mallory", token="ghp_mallory")
    org = client(fake, token="ghp_mallory").get_organization("acme")
    with pytest.raises(GithubException) as refused:
        org.create_repo("takeover")
    assert refused.value.status == 403
    assert not fake.repo_exists("acme", "takeover")


# issues -----------------------------------------------------------------------------------------------
def test_an_issue_is_created_read_back_and_listed(fake: FakeGitHub, repo: Any) -> None:
    created = repo.create_issue("Checkout is broken", body="500 on pay")
    assert isinstance(created, github.Issue.Issue)
    assert (created.number, created.state, created.user.login) == (1, "open", "octocat")
    assert created.url == f"{fake.base_url}/repos/acme/shop/issues/1"
    assert created.comments_url == f"{created.url}/comments"
    assert created.repository_url == f"{fake.base_url}/repos/acme/shop"
    assert created.node_id and created.id and created.created_at is not None
    read = repo.get_issue(1)
    assert (read.id, read.title, read.body) == (created.id, "Checkout is broken", "500 on pay")
    assert [i.number for i in repo.get_issues()] == [1]
    assert [i["title"] for i in fake.issues("acme", "shop")] == ["Checkout is broken"]


def test_issues_are_listed_by_state(repo: Any) -> None:
    for title in ("one", "two", "three"):
        repo.create_issue(title)
    repo.get_issue(2).edit(state="closed")
    assert [i.title for i in repo.get_issues()] == ["three", "one"]  # open ones, newest first
    assert [i.title for i in repo.get_issues(state="closed")] == ["two"]
    assert [i.title for i in repo.get_issues(state="all", direction="asc")] == ["one", "two", "three"]


def test_an_issue_is_edited_in_place(fake: FakeGitHub, repo: Any) -> None:
    issue = repo.create_issue("Typo", labels=["docs"])
    issue.edit(title="Typo in README", body="line 3", labels=["docs", "good first issue"], assignees=["octocat"])
    assert (issue.title, issue.body) == ("Typo in README", "line 3")
    assert [label.name for label in issue.labels] == ["docs", "good first issue"]
    assert [a.login for a in issue.assignees] == ["octocat"]
    stored = fake.issue("acme", "shop", issue.number)
    assert stored is not None and stored["title"] == "Typo in README"


def test_closing_an_issue_records_who_closed_it_and_when(fake: FakeGitHub, repo: Any) -> None:
    issue = repo.create_issue("Stale")
    issue.edit(state="closed", state_reason="not_planned")
    assert (issue.state, issue.state_reason, issue.closed_by.login) == ("closed", "not_planned", "octocat")
    assert issue.closed_at is not None
    assert [i["state"] for i in fake.issues("acme", "shop", state="closed")] == ["closed"]
    issue.edit(state="open")
    assert (issue.state, issue.closed_at, issue.state_reason) == ("open", None, "reopened")


def test_a_blank_title_fails_validation_naming_the_field(fake: FakeGitHub, repo: Any) -> None:
    with pytest.raises(GithubException) as refused:
        repo.create_issue("")
    assert refused.value.status == 422
    assert refused.value.data["message"] == "Validation Failed"
    assert refused.value.data["errors"] == [{"resource": "Issue", "field": "title", "code": "missing_field"}]
    assert fake.issues("acme", "shop") == []


def test_an_unknown_assignee_fails_validation(repo: Any) -> None:
    with pytest.raises(GithubException) as refused:
        repo.create_issue("Who?", assignees=["nobody"])
    assert refused.value.status == 422
    assert refused.value.data["errors"][0]["field"] == "assignees"


def test_a_missing_issue_answers_not_found_as_github_does(repo: Any) -> None:
    with pytest.raises(UnknownObjectException) as missing:
        repo.get_issue(99)
    assert missing.value.status == 404
    assert missing.value.data["message"] == "Not Found"
    assert missing.value.data["documentation_url"].startswith("https://docs.github.com/")


# comments and labels ----------------------------------------------------------------------------------
def test_a_comment_is_created_edited_and_deleted(fake: FakeGitHub, repo: Any) -> None:
    issue = repo.create_issue("Discuss")
    comment = issue.create_comment("first!")
    assert isinstance(comment, github.IssueComment.IssueComment)
    assert comment.url == f"{fake.base_url}/repos/acme/shop/issues/comments/{comment.id}"
    assert issue.get_comment(comment.id).body == "first!"
    comment.edit("second thoughts")
    assert [c["body"] for c in fake.comments("acme", "shop", issue.number)] == ["second thoughts"]
    assert repo.get_issue(issue.number).comments == 1
    comment.delete()
    assert fake.comments("acme", "shop") == []
    assert fake.calls("DELETE")[-1].status == 204


def test_a_deleted_comment_answers_404(repo: Any) -> None:
    issue = repo.create_issue("Discuss")
    comment = issue.create_comment("oops")
    comment.delete()
    with pytest.raises(UnknownObjectException):
        comment.delete()


def test_labels_are_added_to_and_removed_from_an_issue(fake: FakeGitHub, repo: Any) -> None:
    issue = repo.create_issue("Needs triage")
    issue.add_to_labels("bug", "p1")
    assert [label.name for label in issue.get_labels()] == ["bug", "p1"]
    issue.remove_from_labels("bug")
    assert [label.name for label in repo.get_issue(issue.number).labels] == ["p1"]
    assert fake.labels("acme", "shop") == ["bug", "p1"]  # the repository keeps the label it created


def test_removing_a_label_the_issue_lacks_answers_404(repo: Any) -> None:
    issue = repo.create_issue("Plain")
    with pytest.raises(GithubException) as refused:
        issue.remove_from_labels("wontfix")
    assert refused.value.status == 404
    assert refused.value.data["message"] == "Label does not exist"


# pagination -------------------------------------------------------------------------------------------
def test_lists_are_paginated_by_link_headers(fake: FakeGitHub, repo: Any) -> None:
    for n in range(5):
        repo.create_issue(f"issue {n}")
    paged = client(fake, per_page=2).get_repo("acme/shop")
    assert [i.number for i in paged.get_issues(direction="asc")] == [1, 2, 3, 4, 5]
    pages = [c.query.get("page", "1") for c in fake.calls("GET", "/repos/acme/shop/issues")]
    assert pages == ["1", "2", "3"]
    assert all(c.query["per_page"] == "2" for c in fake.calls("GET", "/repos/acme/shop/issues"))


def test_total_count_is_read_from_the_last_link(repo: Any) -> None:
    for n in range(4):
        repo.create_issue(f"issue {n}")
    assert repo.get_issues().totalCount == 4


# pull requests ----------------------------------------------------------------------------------------
def branch_with_change(repo: Any, branch: str, path: str = "feature.txt", text: str = "new") -> None:
    repo.create_git_ref(f"refs/heads/{branch}", repo.get_branch("main").commit.sha)
    repo.create_file(path, f"add {path}", text, branch=branch)


def test_a_pull_request_from_a_branch_is_merged_into_its_base(fake: FakeGitHub, repo: Any) -> None:
    branch_with_change(repo, "feature")
    pull = repo.create_pull(base="main", head="feature", title="Add feature", body="please")
    assert isinstance(pull, github.PullRequest.PullRequest)
    assert (pull.number, pull.head.ref, pull.base.ref, pull.mergeable, pull.merged) == (
        1,
        "feature",
        "main",
        True,
        False,
    )
    assert pull.url == f"{fake.base_url}/repos/acme/shop/pulls/1"
    status = pull.merge(merge_method="squash")
    assert (status.merged, status.message) == (True, "Pull Request successfully merged")
    assert pull.is_merged()
    merged = repo.get_pull(1)
    assert (merged.state, merged.merged, merged.merged_by.login, merged.merge_commit_sha) == (
        "closed",
        True,
        "octocat",
        status.sha,
    )
    assert fake.file("acme", "shop", "feature.txt") == b"new"
    assert fake.refs("acme", "shop")["refs/heads/main"] == status.sha


def test_a_second_pull_request_for_the_same_branch_fails_validation(repo: Any) -> None:
    branch_with_change(repo, "feature")
    repo.create_pull(base="main", head="feature", title="First")
    with pytest.raises(GithubException) as refused:
        repo.create_pull(base="main", head="acme:feature", title="Again")
    assert refused.value.status == 422
    assert refused.value.data["errors"][0]["message"] == "A pull request already exists for acme:feature."


def test_a_pull_request_without_commits_fails_validation(repo: Any) -> None:
    repo.create_git_ref("refs/heads/empty", repo.get_branch("main").commit.sha)
    with pytest.raises(GithubException) as refused:
        repo.create_pull(base="main", head="empty", title="Nothing")
    assert refused.value.data["errors"][0]["message"] == "No commits between main and empty"


def test_a_pull_request_is_closed_without_merging(fake: FakeGitHub, repo: Any) -> None:
    branch_with_change(repo, "feature")
    pull = repo.create_pull(base="main", head="feature", title="Maybe")
    pull.edit(state="closed")
    assert (pull.state, pull.merged) == ("closed", False)
    assert [p["state"] for p in fake.pulls("acme", "shop")] == ["closed"]
    with pytest.raises(GithubException) as refused:
        pull.merge()
    assert (refused.value.status, refused.value.data["message"]) == (405, "Pull Request is not mergeable")


def test_merging_with_a_stale_head_sha_conflicts(repo: Any) -> None:
    branch_with_change(repo, "feature")
    pull = repo.create_pull(base="main", head="feature", title="Racy")
    with pytest.raises(GithubException) as refused:
        pull.merge(sha="0" * 40)
    assert refused.value.status == 409


def test_pull_requests_are_listed_among_the_issues(fake: FakeGitHub, repo: Any) -> None:
    repo.create_issue("An issue")
    branch_with_change(repo, "feature")
    repo.create_pull(base="main", head="feature", title="A pull")
    listed = list(repo.get_issues())
    assert [(i.number, i.pull_request is not None) for i in listed] == [(2, True), (1, False)]
    assert [i["number"] for i in fake.issues("acme", "shop")] == [1]  # the accessor keeps them apart


# git refs ---------------------------------------------------------------------------------------------
def test_a_git_ref_is_created_read_and_deleted(fake: FakeGitHub, repo: Any) -> None:
    sha = repo.get_git_ref("heads/main").object.sha
    created = repo.create_git_ref("refs/heads/topic", sha)
    assert isinstance(created, github.GitRef.GitRef)
    assert (created.ref, created.object.sha) == ("refs/heads/topic", sha)
    assert created.url == f"{fake.base_url}/repos/acme/shop/git/refs/heads/topic"
    read = repo.get_git_ref("heads/topic")
    assert read.object.sha == sha
    read.delete()
    assert "refs/heads/topic" not in fake.refs("acme", "shop")
    with pytest.raises(UnknownObjectException):
        repo.get_git_ref("heads/topic")


def test_a_ref_that_exists_cannot_be_created_again(repo: Any) -> None:
    sha = repo.get_branch("main").commit.sha
    with pytest.raises(GithubException) as refused:
        repo.create_git_ref("refs/heads/main", sha)
    assert (refused.value.status, refused.value.data["message"]) == (422, "Reference already exists")


def test_deleting_a_ref_twice_fails_the_second_time(repo: Any) -> None:
    ref = repo.create_git_ref("refs/heads/gone", repo.get_branch("main").commit.sha)
    ref.delete()
    with pytest.raises(GithubException) as refused:
        ref.delete()
    assert (refused.value.status, refused.value.data["message"]) == (422, "Reference does not exist")


# contents ---------------------------------------------------------------------------------------------
def test_a_file_is_created_updated_and_deleted_by_its_blob_sha(fake: FakeGitHub, repo: Any) -> None:
    created = repo.create_file("config/app.toml", "add config", "debug = false\n")
    assert isinstance(created["content"], github.ContentFile.ContentFile)
    assert isinstance(created["commit"], github.Commit.Commit)
    assert repo.get_contents("config/app.toml").decoded_content == b"debug = false\n"
    updated = repo.update_file("config/app.toml", "tweak", "debug = true\n", created["content"].sha)
    assert fake.file("acme", "shop", "config/app.toml") == b"debug = true\n"
    deleted = repo.delete_file("config/app.toml", "drop config", updated["content"].sha)
    assert deleted["commit"].sha == fake.refs("acme", "shop")["refs/heads/main"]
    assert fake.file("acme", "shop", "config/app.toml") is None
    with pytest.raises(UnknownObjectException):
        repo.get_contents("config/app.toml")


def test_updating_a_file_without_its_sha_fails_validation(repo: Any) -> None:
    with pytest.raises(GithubException) as refused:
        repo.create_file("README.md", "overwrite", "mine now")
    assert refused.value.status == 422
    assert refused.value.data["message"] == 'Invalid request.\n\n"sha" wasn\'t supplied.'


def test_updating_a_file_with_a_stale_sha_conflicts(fake: FakeGitHub, repo: Any) -> None:
    with pytest.raises(GithubException) as refused:
        repo.update_file("README.md", "overwrite", "mine now", "0" * 40)
    assert refused.value.status == 409
    assert fake.file("acme", "shop", "README.md") == b"# shop\n"


def test_a_directory_lists_its_entries(fake: FakeGitHub) -> None:
    fake.add_repo("acme", "site", files={"index.html": "<h1>", "css/a.css": "a{}", "css/b.css": "b{}"})
    site = client(fake).get_repo("acme/site")
    root, css = site.get_contents(""), site.get_contents("css")
    assert isinstance(root, list) and isinstance(css, list)  # a directory answers with a list of entries
    assert [(c.path, c.type) for c in root] == [("css", "dir"), ("index.html", "file")]
    assert [c.name for c in css] == ["a.css", "b.css"]


# PyGithub's lazy loading ------------------------------------------------------------------------------
def test_get_repo_fetches_at_once_but_get_user_waits_for_an_attribute(fake: FakeGitHub, gh: github.Github) -> None:
    gh.get_repo("acme/shop")
    assert [c.path for c in fake.calls()] == ["/repos/acme/shop"]
    me = gh.get_user()
    assert len(fake.calls()) == 1
    assert me.login == "octocat"
    assert [c.path for c in fake.calls()] == ["/repos/acme/shop", "/user"]


def test_a_lazy_client_fetches_on_first_attribute_access(fake: FakeGitHub) -> None:
    lazy = client(fake, lazy=True)
    repo = lazy.get_repo("acme/shop")
    repo.create_issue("Made without reading the repo")
    issue = repo.get_issue(1)
    assert [(c.method, c.path) for c in fake.calls()] == [("POST", "/repos/acme/shop/issues")]
    assert issue.title == "Made without reading the repo"
    assert fake.calls()[-1].path == "/repos/acme/shop/issues/1"


def test_a_created_file_completes_lazily_from_its_url(fake: FakeGitHub, repo: Any) -> None:
    content = repo.create_file("notes.txt", "add notes", "hello")["content"]
    before = len(fake.calls())
    assert content.decoded_content == b"hello"  # the PUT answer has no content: PyGithub fetches its url
    assert [(c.path, c.query) for c in fake.calls()[before:]] == [
        ("/repos/acme/shop/contents/notes.txt", {"ref": "main"})
    ]


# PyGithub's retries against lost responses ------------------------------------------------------------
def test_pygithub_reposts_after_a_lost_response_and_duplicates_the_issue(fake: FakeGitHub, repo: Any) -> None:
    fake.fail_next("POST", "/repos/acme/shop/issues", 502, after_effect=True)
    issue = repo.create_issue("Only once, please")
    assert issue.number == 2
    assert [i["title"] for i in fake.issues("acme", "shop")] == ["Only once, please"] * 2
    assert [c.status for c in fake.calls("POST", "/repos/acme/shop/issues")] == [502, 201]


def test_pygithub_reposts_after_a_dropped_connection_and_duplicates_the_issue(fake: FakeGitHub, repo: Any) -> None:
    fake.fail_next("POST", "/repos/acme/shop/issues", None, after_effect=True)
    repo.create_issue("Only once, please")
    assert len(fake.issues("acme", "shop")) == 2
    assert [c.status for c in fake.calls("POST", "/repos/acme/shop/issues")] == [None, 201]


@pytest.mark.parametrize("retry", [None, 0])
def test_without_retries_a_lost_response_raises_and_the_issue_exists_once(fake: FakeGitHub, retry: int | None) -> None:
    repo = client(fake, retry=retry).get_repo("acme/shop")
    fake.fail_next("POST", "/repos/acme/shop/issues", 502, after_effect=True)
    with pytest.raises(GithubException) as lost:
        repo.create_issue("Only once, please")
    assert lost.value.status == 502
    assert len(fake.issues("acme", "shop")) == 1


def test_without_retries_a_dropped_connection_raises_a_requests_connection_error(fake: FakeGitHub) -> None:
    repo = client(fake, retry=None).get_repo("acme/shop")
    fake.fail_next("POST", "/repos/acme/shop/issues", None, after_effect=True)
    with pytest.raises(requests.exceptions.ConnectionError):  # not a GithubException
        repo.create_issue("Only once, please")
    assert len(fake.issues("acme", "shop")) == 1


def test_pygithub_does_not_retry_patch(fake: FakeGitHub, repo: Any) -> None:
    issue = repo.create_issue("Rename me")
    fake.fail_next("PATCH", "/repos/acme/shop/issues/1", 502, after_effect=True)
    with pytest.raises(GithubException) as lost:
        issue.edit(title="Renamed")
    assert lost.value.status == 502
    assert len(fake.calls("PATCH")) == 1
    assert [i["title"] for i in fake.issues("acme", "shop")] == ["Renamed"]


def test_a_retried_file_put_after_a_lost_response_fails_for_want_of_the_sha(fake: FakeGitHub, repo: Any) -> None:
    fake.fail_next("PUT", "/repos/acme/shop/contents/*", 502, after_effect=True)
    with pytest.raises(GithubException) as refused:
        repo.create_file("once.txt", "add", "once")
    assert refused.value.status == 422  # the retry found the file the lost attempt had written
    assert fake.file("acme", "shop", "once.txt") == b"once"


def test_a_retried_delete_after_a_lost_response_answers_404(fake: FakeGitHub, repo: Any) -> None:
    comment = repo.create_issue("Discuss").create_comment("bye")
    fake.fail_next("DELETE", "/repos/acme/shop/issues/comments/*", 502, after_effect=True)
    with pytest.raises(UnknownObjectException):
        comment.delete()
    assert fake.comments("acme", "shop") == []
    assert [c.status for c in fake.calls("DELETE")] == [502, 404]


def test_persistent_server_errors_end_in_a_retry_error_after_eleven_attempts(fake: FakeGitHub, repo: Any) -> None:
    fake.fail_next("GET", "/repos/acme/shop/issues", 503, times=100)
    with pytest.raises(requests.exceptions.RetryError):  # not a GithubException
        list(repo.get_issues())
    assert len(fake.calls("GET", "/repos/acme/shop/issues")) == 11


def test_a_rate_limit_with_retry_after_is_waited_out_and_retried(fake: FakeGitHub, repo: Any) -> None:
    limited = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}
    fake.fail_next("POST", "/repos/acme/shop/issues", 403, body=limited, headers={"Retry-After": "0"})
    repo.create_issue("After the pause")
    assert [c.status for c in fake.calls("POST")] == [403, 201]
    assert len(fake.issues("acme", "shop")) == 1


# the fake's own tools ---------------------------------------------------------------------------------
def test_a_fault_before_effect_changes_nothing(fake: FakeGitHub) -> None:
    repo = client(fake, retry=None).get_repo("acme/shop")
    fake.fail_next("POST", "/repos/acme/shop/issues", 500)
    with pytest.raises(GithubException) as failed:
        repo.create_issue("Not yet")
    assert failed.value.status == 500
    assert fake.issues("acme", "shop") == []


def test_calls_record_method_path_query_and_json_body(fake: FakeGitHub, repo: Any) -> None:
    repo.create_issue("Recorded", body="with a body")
    list(repo.get_issues(state="closed"))
    post = fake.calls("POST", "/repos/acme/shop/issues")[0]
    assert (post.body, post.authorization, post.status) == (
        {"title": "Recorded", "body": "with a body"},
        "token ghp_test",
        201,
    )
    assert fake.calls("GET", "/repos/acme/shop/issues")[0].query == {"state": "closed"}


def test_a_held_request_takes_effect_only_once_released(fake: FakeGitHub, repo: Any) -> None:
    arrived, release = fake.hold("POST", "/repos/acme/shop/issues")
    worker = threading.Thread(target=repo.create_issue, args=("Held",))
    worker.start()
    assert arrived.wait(10)
    assert fake.issues("acme", "shop") == []
    release.set()
    worker.join(10)
    assert [i["title"] for i in fake.issues("acme", "shop")] == ["Held"]
