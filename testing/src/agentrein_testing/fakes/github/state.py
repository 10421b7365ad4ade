"""The state of a fake GitHub: accounts, repositories with their issues, pull requests, labels and commits, GitHub's
errors, and the lookups every endpoint shares."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from attrs import define, field

from agentrein_testing.fakes.base import JSON, url_of

Answer = tuple[int, dict[str, str], Any]  # status, headers, JSON body (None: no body)

DOCS = "https://docs.github.com/rest"

DEFAULT_PER_PAGE = 30

MAX_PER_PAGE = 100


@define
class Account:
    login: str
    id: int
    type: str  # "User" or "Organization"
    created_at: str
    name: str | None = None
    email: str | None = None
    members: set[str] = field(factory=set)  # organisations: lower-cased logins of the members


@define
class Commit:
    sha: str
    tree_sha: str
    message: str
    parents: list[str]
    files: dict[str, bytes]
    author: dict[str, str]  # name, email, date


@define
class Label:
    id: int
    name: str
    color: str
    description: str | None = None


@define
class Comment:
    id: int
    issue_number: int
    body: str
    user: str
    created_at: str
    updated_at: str


@define
class Pull:
    id: int
    head: str  # branch names
    base: str
    head_sha: str  # the head's commit when last seen (the branch may go away)
    draft: bool = False
    maintainer_can_modify: bool = False
    merged_at: str | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None


@define
class Issue:
    id: int
    number: int
    title: str
    body: str | None
    user: str
    created_at: str
    updated_at: str
    labels: list[str] = field(factory=list)  # lower-cased label names
    assignees: list[str] = field(factory=list)  # logins
    state: str = "open"
    state_reason: str | None = None
    closed_at: str | None = None
    closed_by: str | None = None
    pull: Pull | None = None  # set when this issue is a pull request


@define
class Repo:
    id: int
    owner: str
    name: str
    private: bool
    description: str | None
    default_branch: str
    created_at: str
    updated_at: str
    pushed_at: str | None = None
    homepage: str | None = None
    has_issues: bool = True
    collaborators: set[str] = field(factory=set)  # lower-cased logins with push access
    refs: dict[str, str] = field(factory=dict)  # "refs/heads/main" -> commit sha
    commits: dict[str, Commit] = field(factory=dict)
    issues: dict[int, Issue] = field(factory=dict)  # issues and pull requests share the numbers
    comments: dict[int, Comment] = field(factory=dict)
    labels: dict[str, Label] = field(factory=dict)  # by lower-cased name

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[JSON] | None = None, docs: str = DOCS) -> None:
        super().__init__(message)
        self.status = status
        self.payload: JSON = {"message": message}
        if errors is not None:
            self.payload["errors"] = errors
        self.payload["documentation_url"] = docs
        self.payload["status"] = str(status)


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def invalid(resource: str, field_name: str, code: str = "invalid", **extra: Any) -> ApiError:
    return ApiError(422, "Validation Failed", [{"resource": resource, "field": field_name, "code": code, **extra}])


def custom_invalid(resource: str, message: str) -> ApiError:
    return ApiError(422, "Validation Failed", [{"resource": resource, "code": "custom", "message": message}])


def invalid_request(detail: str) -> ApiError:
    return ApiError(422, f"Invalid request.\n\n{detail}", docs=f"{DOCS}/repos/contents")


@define
class ApiCall:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    user: Account | None
    args: dict[str, str]

    def object_body(self) -> JSON:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise ApiError(400, "Problems parsing JSON")
        return self.body

    def login(self) -> str:
        if self.user is None:  # the dispatcher refuses anonymous writes before this is asked
            raise ApiError(401, "Requires authentication")
        return self.user.login


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"{len(kind):02d}:{kind}{ident}".encode()).decode()


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha_of(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def wrapped_base64(data: bytes) -> str:
    encoded = base64.b64encode(data).decode()
    return "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))


class GitHubState:
    """What a fake GitHub holds (accounts, tokens, repositories) and the lookups every endpoint shares: who may
    see and push to a repository, its issues and pull requests, pages of a list."""

    __slots__ = ()
    _accounts: dict[str, Account]  # by lower-cased login
    _tokens: dict[str, str]  # token -> login
    _repos: dict[str, Repo]  # by lower-cased "owner/name"
    _ids: Iterator[int]  # the ids of every object, one sequence as on GitHub
    _server: ThreadingHTTPServer | None

    def _ensure_user(self, login: str, *, token: str | None = None, name: str | None = None) -> Account:
        account = self._accounts.get(login.lower())
        if account is None:
            account = self._accounts[login.lower()] = Account(login, self._next_id(), "User", timestamp(), name=name)
        if token is not None:
            self._tokens[token] = account.login
        return account

    def _ensure_org(self, login: str, members: list[str], name: str | None = None) -> Account:
        for member in members:
            self._ensure_user(member)
        org = Account(login, self._next_id(), "Organization", timestamp(), name=name)
        org.members = {m.lower() for m in members}
        self._accounts[login.lower()] = org
        return org

    def _next_id(self) -> int:
        return next(self._ids)

    @property
    def _api(self) -> str:
        return url_of(self._server) if self._server is not None else "http://127.0.0.1"

    def _existing(self, owner: str, repo: str) -> Repo:
        found = self._repos.get(f"{owner}/{repo}".lower())
        if found is None:
            raise KeyError(f"no repository {owner}/{repo}")
        return found

    def _is_admin(self, repo: Repo, user: Account | None) -> bool:
        if user is None:
            return False
        owner = self._accounts[repo.owner.lower()]
        return user.login.lower() == owner.login.lower() or user.login.lower() in owner.members

    def _can_push(self, repo: Repo, user: Account | None) -> bool:
        return self._is_admin(repo, user) or (user is not None and user.login.lower() in repo.collaborators)

    def _repo_for(self, call: ApiCall, *, push: bool = False, admin: bool = False) -> Repo:
        repo = self._repos.get(f"{call.args['owner']}/{call.args['repo']}".lower())
        if repo is None or (repo.private and not self._can_push(repo, call.user)):
            raise not_found()
        if admin and not self._is_admin(repo, call.user):
            raise ApiError(403, "Must have admin rights to Repository.")
        if push and not self._can_push(repo, call.user):
            raise ApiError(403, "Must have push access to repository")
        return repo

    def _issue_for(self, repo: Repo, call: ApiCall) -> Issue:
        if not repo.has_issues:
            raise ApiError(410, "Issues are disabled for this repo")
        issue = repo.issues.get(int(call.args["number"]))
        if issue is None:
            raise not_found()
        return issue

    def _pull_for(self, repo: Repo, call: ApiCall) -> tuple[Issue, Pull]:
        issue = repo.issues.get(int(call.args["number"]))
        if issue is None or issue.pull is None:
            raise not_found()
        return issue, issue.pull

    def _user(self, login: str) -> Account:
        return self._accounts[login.lower()]

    def _paged(self, call: ApiCall, items: list[JSON]) -> Answer:
        try:
            per_page = min(max(int(call.query.get("per_page", DEFAULT_PER_PAGE)), 1), MAX_PER_PAGE)
            page = max(int(call.query.get("page", 1)), 1)
        except ValueError:
            per_page, page = DEFAULT_PER_PAGE, 1
        last = max((len(items) + per_page - 1) // per_page, 1)

        def link(number: int) -> str:
            params = sorted({**call.query, "page": str(number)}.items())
            return f"{self._api}{call.path}?{urlencode(params)}"

        rels = []
        if page > 1:
            rels += [(min(page - 1, last), "prev")]
        if page < last:
            rels += [(page + 1, "next"), (last, "last")]
        if page > 1:
            rels += [(1, "first")]
        headers = {"Link": ", ".join(f'<{link(n)}>; rel="{rel}"' for n, rel in rels)} if rels else {}
        return 200, headers, items[(page - 1) * per_page : page * per_page]

    def _assignees(self, value: Any, resource: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid(resource, "assignees")
        logins = []
        for login in value:
            account = self._accounts.get(login.lower())
            if account is None or account.type != "User":
                raise invalid(resource, "assignees", value=login)
            logins.append(account.login)
        return logins

    def _label_names(self, repo: Repo, value: Any) -> list[str]:
        """Label names (or ``{"name": ...}`` objects) as lower-cased keys; unknown labels are created."""
        if isinstance(value, dict) and "labels" in value:
            value = value["labels"]
        if not isinstance(value, list):
            raise invalid("Label", "labels")
        keys: list[str] = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise invalid("Label", "name", "missing_field")
            if name.lower() not in repo.labels:
                repo.labels[name.lower()] = Label(self._next_id(), name, "ededed")
            if name.lower() not in keys:
                keys.append(name.lower())
        return keys

    def _close(self, issue: Issue, login: str, reason: str | None) -> None:
        issue.state, issue.closed_at, issue.closed_by = "closed", timestamp(), login
        issue.state_reason = reason or "completed"

    def _reopen(self, issue: Issue) -> None:
        issue.state, issue.closed_at, issue.closed_by, issue.state_reason = "open", None, None, "reopened"
