"""The fake GitHub itself: seeding, inspection, faults, and which endpoint each URL runs."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from http.client import responses
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote

from attrs import define, field

from agentrein_testing.fakes.base import JSON, Fault, LoopbackFake, Reply, Request
from agentrein_testing.fakes.github.contents import Contents
from agentrein_testing.fakes.github.issues import Issues
from agentrein_testing.fakes.github.repos import Repositories
from agentrein_testing.fakes.github.state import DOCS, Account, Answer, ApiCall, ApiError, Repo, not_found

RATE_LIMIT = 5000


@define
class GitHubFault(Fault):
    body: Any = None  # the error body; None: {"message": <reason>, "documentation_url": ...}
    headers: dict[str, str] = field(factory=dict)  # e.g. {"Retry-After": "0"}


@define
class Recorded:
    method: str
    path: str  # without the query string
    query: dict[str, str]
    body: Any  # parsed JSON (or the raw text when it was not JSON)
    authorization: str | None = None
    status: int | None = None  # what the fake answered; None: the connection was dropped


@define
class FakeGitHub(LoopbackFake[Recorded, GitHubFault], Repositories, Issues, Contents):
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>``.

    ``login`` is the user that ``token`` authenticates (``GET /user``); more users and tokens come with
    :meth:`add_user`, organisations with :meth:`add_org`, seeded repositories with :meth:`add_repo`.
    """

    thread_name: ClassVar[str] = "fake-github"

    login: str = "octocat"
    token: str = "ghp_test"
    _accounts: dict[str, Account] = field(factory=dict, init=False)  # by lower-cased login
    _tokens: dict[str, str] = field(factory=dict, init=False)  # token -> login
    _repos: dict[str, Repo] = field(factory=dict, init=False)  # by lower-cased "owner/name"
    _ids: Iterator[int] = field(factory=lambda: itertools.count(1), init=False)
    _rate_used: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self.add_user(self.login, token=self.token)

    # seeding -------------------------------------------------------------------------------------------------------
    def add_user(self, login: str, *, token: str | None = None, name: str | None = None) -> None:
        """A user (created if new); ``token`` then authenticates as them."""
        with self._lock:
            self._ensure_user(login, token=token, name=name)

    def add_org(self, login: str, *, members: Iterable[str] | None = None, name: str | None = None) -> None:
        """An organisation; its members (by default the token's user) may create, push to and delete its
        repositories."""
        with self._lock:
            self._ensure_org(login, [self.login] if members is None else list(members), name)

    def add_repo(
        self,
        owner: str,
        name: str,
        *,
        private: bool = False,
        description: str | None = None,
        default_branch: str = "main",
        files: Mapping[str, bytes | str] | None = None,
        auto_init: bool = True,
    ) -> None:
        """A repository. An unknown owner becomes an organisation the token's user is a member of, so that user
        may push to it and delete it. With ``auto_init`` (the default) it has one commit on ``default_branch``
        holding ``files`` (default: a README.md); without, it is empty."""
        with self._lock:
            account = self._accounts.get(owner.lower()) or self._ensure_org(owner, [self.login])
            repo = self._new_repo(account, name, private, description, default_branch)
            if auto_init:
                content = {p: c.encode() if isinstance(c, str) else c for p, c in (files or {}).items()}
                self._initial_commit(repo, content or {"README.md": f"# {name}\n".encode()}, self.login)

    def add_collaborator(self, owner: str, repo: str, login: str) -> None:
        """Give ``login`` push access to ``owner/repo``."""
        with self._lock:
            self._ensure_user(login)
            self._repos[f"{owner}/{repo}".lower()].collaborators.add(login.lower())

    # fault injection -----------------------------------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        path_glob: str,
        status: int | None = 502,
        *,
        times: int = 1,
        after_effect: bool = False,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and ``path_glob`` (the path without its query)
        with ``status`` (None: drop the connection) and ``body`` (default: GitHub's for the status) and
        ``headers``. With ``after_effect`` the request takes effect first."""
        self._inject(GitHubFault(method.upper(), path_glob, status, times, after_effect, body, dict(headers or {})))

    # inspection ----------------------------------------------------------------------------------------------------
    def repo_exists(self, owner: str, repo: str) -> bool:
        with self._lock:
            return f"{owner}/{repo}".lower() in self._repos

    def repo(self, owner: str, repo: str) -> JSON | None:
        """The repository as ``GET /repos/{owner}/{repo}`` shows it to its owner, or None."""
        with self._lock:
            found = self._repos.get(f"{owner}/{repo}".lower())
            return None if found is None else self._repo_json(found, self._accounts[found.owner.lower()])

    def issues(self, owner: str, repo: str, state: str = "all") -> list[JSON]:
        """Every issue (not pull request) in ``state`` ("open", "closed" or "all"), by number."""
        with self._lock:
            found = self._existing(owner, repo)
            return [
                self._issue_json(found, i)
                for i in sorted(found.issues.values(), key=lambda i: i.number)
                if i.pull is None and state in ("all", i.state)
            ]

    def issue(self, owner: str, repo: str, number: int) -> JSON | None:
        with self._lock:
            found = self._existing(owner, repo).issues.get(number)
            return None if found is None else self._issue_json(self._existing(owner, repo), found)

    def pulls(self, owner: str, repo: str, state: str = "all") -> list[JSON]:
        with self._lock:
            found = self._existing(owner, repo)
            return [
                self._pull_json(found, i)
                for i in sorted(found.issues.values(), key=lambda i: i.number)
                if i.pull is not None and state in ("all", i.state)
            ]

    def comments(self, owner: str, repo: str, number: int | None = None) -> list[JSON]:
        """The issue comments of the repository (of issue ``number`` only, if given), oldest first."""
        with self._lock:
            found = self._existing(owner, repo)
            return [
                self._comment_json(found, c)
                for c in sorted(found.comments.values(), key=lambda c: c.id)
                if number is None or c.issue_number == number
            ]

    def labels(self, owner: str, repo: str) -> list[str]:
        """The names of the repository's labels."""
        with self._lock:
            return sorted(label.name for label in self._existing(owner, repo).labels.values())

    def refs(self, owner: str, repo: str) -> dict[str, str]:
        """Every git ref of the repository, with the commit it points at."""
        with self._lock:
            return dict(sorted(self._existing(owner, repo).refs.items()))

    def file(self, owner: str, repo: str, path: str, ref: str | None = None) -> bytes | None:
        """The content of ``path`` on branch ``ref`` (default: the default branch), or None."""
        with self._lock:
            found = self._existing(owner, repo)
            sha = found.refs.get(f"refs/heads/{ref or found.default_branch}")
            return None if sha is None else found.commits[sha].files.get(path)

    # serving -------------------------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, raw_body: bytes, authorization: str | None) -> Answer:
        """Answer one request (the fake's lock is held)."""
        path, _, query_string = raw_path.partition("?")
        path = path.rstrip("/") or "/"
        query = dict(parse_qsl(query_string, keep_blank_values=True))
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            return self._error(ApiError(400, "Problems parsing JSON"))
        user: Account | None = None
        if authorization:
            scheme, _, token = authorization.partition(" ")
            login = self._tokens.get(token.strip()) if scheme.lower() in ("token", "bearer") else None
            if login is None:
                return self._error(ApiError(401, "Bad credentials"))
            user = self._accounts[login.lower()]
            self._rate_used += 1
        for verb, pattern, handler in _ROUTES:
            match = pattern.fullmatch(path) if verb == method else None
            if match is None:
                continue
            if user is None and method != "GET":
                return self._error(ApiError(401, "Requires authentication"))
            args = {k: unquote(v or "") for k, v in match.groupdict().items()}
            try:
                return handler(self, ApiCall(method, path, query, body, user, args))
            except ApiError as error:
                return self._error(error)
        return self._error(not_found())

    def rate_headers(self, authenticated: bool) -> dict[str, str]:
        limit = RATE_LIMIT if authenticated else 60
        used = min(self._rate_used, limit) if authenticated else 0
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(limit - used),
            "X-RateLimit-Reset": str(int(datetime.now(UTC).timestamp()) + 3600),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Resource": "core",
        }

    def _error(self, error: ApiError) -> Answer:
        return error.status, {}, error.payload

    def _record(self, request: Request) -> Recorded:
        query = dict(parse_qsl(request.query_string, keep_blank_values=True))
        return Recorded(request.method, request.path, query, request.json_body(), request.headers.get("authorization"))

    def _effect(self, request: Request, record: Recorded) -> tuple[Reply, bool]:
        status, headers, data = self.handle(request.method, request.target, request.body, record.authorization)
        headers = {**self.rate_headers(record.authorization is not None and status != 401), **headers}
        return _reply(request.method, status, headers, data), False  # GitHub has no idempotency keys

    def _fault_reply(self, fault: GitHubFault, status: int, record: Recorded) -> Reply:
        body = fault.body
        if body is None:
            body = {"message": responses.get(status, "Error"), "documentation_url": DOCS, "status": str(status)}
        return _reply(record.method, status, dict(fault.headers), body)


Handler = Callable[["FakeGitHub", ApiCall], Answer]


def _route(method: str, template: str, handler: Handler) -> tuple[str, re.Pattern[str], Handler]:
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
    pattern = re.sub(r"\{(\w+):int\}", r"(?P<\1>\\d+)", pattern)
    pattern = re.sub(r"\{(\w+):path\}", r"(?P<\1>.+)", pattern)
    pattern = re.sub(r"\{(\w+):rest\}", r"(?:/(?P<\1>.*))?", pattern)
    return method, re.compile(pattern), handler


_R = "/repos/{owner}/{repo}"


_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    _route("GET", "/user", FakeGitHub._get_user),
    _route("GET", "/user/repos", FakeGitHub._list_own_repos),
    _route("POST", "/user/repos", FakeGitHub._create_user_repo),
    _route("GET", "/users/{login}", FakeGitHub._get_named_user),
    _route("GET", "/users/{login}/repos", FakeGitHub._list_user_repos),
    _route("GET", "/orgs/{org}", FakeGitHub._get_org),
    _route("GET", "/orgs/{org}/repos", FakeGitHub._list_org_repos),
    _route("POST", "/orgs/{org}/repos", FakeGitHub._create_org_repo),
    _route("GET", "/repositories/{id:int}", FakeGitHub._get_repo_by_id),
    _route("GET", _R, FakeGitHub._get_repo),
    _route("PATCH", _R, FakeGitHub._edit_repo),
    _route("DELETE", _R, FakeGitHub._delete_repo),
    _route("GET", f"{_R}/issues", FakeGitHub._list_issues),
    _route("POST", f"{_R}/issues", FakeGitHub._create_issue),
    _route("GET", f"{_R}/issues/comments", FakeGitHub._list_repo_comments),
    _route("GET", f"{_R}/issues/comments/{{id:int}}", FakeGitHub._get_comment),
    _route("PATCH", f"{_R}/issues/comments/{{id:int}}", FakeGitHub._edit_comment),
    _route("DELETE", f"{_R}/issues/comments/{{id:int}}", FakeGitHub._delete_comment),
    _route("GET", f"{_R}/issues/{{number:int}}", FakeGitHub._get_issue),
    _route("PATCH", f"{_R}/issues/{{number:int}}", FakeGitHub._edit_issue),
    _route("GET", f"{_R}/issues/{{number:int}}/comments", FakeGitHub._list_issue_comments),
    _route("POST", f"{_R}/issues/{{number:int}}/comments", FakeGitHub._create_comment),
    _route("GET", f"{_R}/issues/{{number:int}}/labels", FakeGitHub._list_issue_labels),
    _route("POST", f"{_R}/issues/{{number:int}}/labels", FakeGitHub._add_issue_labels),
    _route("PUT", f"{_R}/issues/{{number:int}}/labels", FakeGitHub._set_issue_labels),
    _route("DELETE", f"{_R}/issues/{{number:int}}/labels", FakeGitHub._clear_issue_labels),
    _route("DELETE", f"{_R}/issues/{{number:int}}/labels/{{name:path}}", FakeGitHub._remove_issue_label),
    _route("GET", f"{_R}/labels", FakeGitHub._list_labels),
    _route("POST", f"{_R}/labels", FakeGitHub._create_label),
    _route("GET", f"{_R}/labels/{{name:path}}", FakeGitHub._get_label),
    _route("DELETE", f"{_R}/labels/{{name:path}}", FakeGitHub._delete_label),
    _route("GET", f"{_R}/pulls", FakeGitHub._list_pulls),
    _route("POST", f"{_R}/pulls", FakeGitHub._create_pull),
    _route("GET", f"{_R}/pulls/{{number:int}}", FakeGitHub._get_pull),
    _route("PATCH", f"{_R}/pulls/{{number:int}}", FakeGitHub._edit_pull),
    _route("GET", f"{_R}/pulls/{{number:int}}/merge", FakeGitHub._pull_merged),
    _route("PUT", f"{_R}/pulls/{{number:int}}/merge", FakeGitHub._merge_pull),
    _route("GET", f"{_R}/branches", FakeGitHub._list_branches),
    _route("GET", f"{_R}/branches/{{branch:path}}", FakeGitHub._get_branch),
    _route("GET", f"{_R}/commits/{{ref:path}}", FakeGitHub._get_commit),
    _route("GET", f"{_R}/git/commits/{{sha}}", FakeGitHub._get_git_commit),
    _route("GET", f"{_R}/git/refs", FakeGitHub._list_refs),
    _route("POST", f"{_R}/git/refs", FakeGitHub._create_ref),
    _route("GET", f"{_R}/git/ref/{{ref:path}}", FakeGitHub._get_ref),
    _route("GET", f"{_R}/git/refs/{{ref:path}}", FakeGitHub._get_refs_under),
    _route("PATCH", f"{_R}/git/refs/{{ref:path}}", FakeGitHub._update_ref),
    _route("DELETE", f"{_R}/git/refs/{{ref:path}}", FakeGitHub._delete_ref),
    _route("GET", f"{_R}/git/matching-refs/{{ref:path}}", FakeGitHub._matching_refs),
    _route("GET", f"{_R}/contents{{path:rest}}", FakeGitHub._get_contents),
    _route("PUT", f"{_R}/contents/{{path:path}}", FakeGitHub._put_contents),
    _route("DELETE", f"{_R}/contents/{{path:path}}", FakeGitHub._delete_contents),
]


def _reply(method: str, status: int, headers: dict[str, str], data: Any) -> Reply:
    payload = b"" if data is None else json.dumps(data).encode()
    headers.setdefault("X-GitHub-Request-Id", f"FAKE:{secrets.token_hex(8).upper()}")
    if status == 200 and method == "GET":
        headers["ETag"] = f'W/"{hashlib.sha256(payload).hexdigest()[:40]}"'
    if data is not None:
        headers["Content-Type"] = "application/json; charset=utf-8"
    return Reply(status, headers, payload)
