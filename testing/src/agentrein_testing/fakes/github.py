"""A stateful fake of the GitHub REST API on 127.0.0.1, for tests and demos that drive the real PyGithub.

It answers as GitHub does, closely enough that a connector built against it works against api.github.com:
JSON in and out with GitHub's response shapes (every ``url`` points back at the fake, so PyGithub's lazy
completion and follow-up calls land here), GitHub's errors (``{"message": "Not Found", "documentation_url":
...}``, 422 ``Validation Failed`` with ``errors``, 401 without a token or with a bad one), pagination by
``Link`` headers, and state: users and organisations, repositories, issues, issue comments, labels, pull
requests (created from branches, merged into their base), git refs and file contents over a small commit
graph. GitHub has no idempotency keys, so neither has the fake: a repeated POST creates twice.

Faults are injected as in every fake of :mod:`agentrein_testing.fakes.base`: an error status, a dropped
connection, and the "lost response" (``after_effect=True``: the request takes effect, the client never hears).

Start with :meth:`FakeGitHub.running`, then point PyGithub at ``base_url``::

    fake = FakeGitHub()  # the token "ghp_test" belongs to user "octocat"
    fake.add_repo("acme", "shop")
    with fake.running():
        gh = github.Github(auth=github.Auth.Token("ghp_test"), base_url=fake.base_url)
        gh.get_repo("acme/shop").create_issue("Broken checkout")
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from http.client import responses
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, unquote, urlencode

from attrs import define, field

from agentrein_testing.fakes.base import Fault, LoopbackFake, Reply, Request

JSON = dict[str, Any]
Answer = tuple[int, dict[str, str], Any]  # status, headers, JSON body (None: no body)

DOCS = "https://docs.github.com/rest"
RATE_LIMIT = 5000
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


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


# the state -----------------------------------------------------------------------------------------------
@define
class _Account:
    login: str
    id: int
    type: str  # "User" or "Organization"
    created_at: str
    name: str | None = None
    email: str | None = None
    members: set[str] = field(factory=set)  # organisations: lower-cased logins of the members


@define
class _Commit:
    sha: str
    tree_sha: str
    message: str
    parents: list[str]
    files: dict[str, bytes]
    author: dict[str, str]  # name, email, date


@define
class _Label:
    id: int
    name: str
    color: str
    description: str | None = None


@define
class _Comment:
    id: int
    issue_number: int
    body: str
    user: str
    created_at: str
    updated_at: str


@define
class _Pull:
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
class _Issue:
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
    pull: _Pull | None = None  # set when this issue is a pull request


@define
class _Repo:
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
    commits: dict[str, _Commit] = field(factory=dict)
    issues: dict[int, _Issue] = field(factory=dict)  # issues and pull requests share the numbers
    comments: dict[int, _Comment] = field(factory=dict)
    labels: dict[str, _Label] = field(factory=dict)  # by lower-cased name

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class _ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[JSON] | None = None, docs: str = DOCS) -> None:
        super().__init__(message)
        self.status = status
        self.payload: JSON = {"message": message}
        if errors is not None:
            self.payload["errors"] = errors
        self.payload["documentation_url"] = docs
        self.payload["status"] = str(status)


def _not_found() -> _ApiError:
    return _ApiError(404, "Not Found")


def _invalid(resource: str, field_name: str, code: str = "invalid", **extra: Any) -> _ApiError:
    return _ApiError(422, "Validation Failed", [{"resource": resource, "field": field_name, "code": code, **extra}])


def _custom(resource: str, message: str) -> _ApiError:
    return _ApiError(422, "Validation Failed", [{"resource": resource, "code": "custom", "message": message}])


def _invalid_request(detail: str) -> _ApiError:
    return _ApiError(422, f"Invalid request.\n\n{detail}", docs=f"{DOCS}/repos/contents")


@define
class _Call:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    user: _Account | None
    args: dict[str, str]

    def object_body(self) -> JSON:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise _ApiError(400, "Problems parsing JSON")
        return self.body

    def login(self) -> str:
        if self.user is None:  # the dispatcher refuses anonymous writes before this is asked
            raise _ApiError(401, "Requires authentication")
        return self.user.login


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"{len(kind):02d}:{kind}{ident}".encode()).decode()


def _blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _sha(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def _wrapped_base64(data: bytes) -> str:
    encoded = base64.b64encode(data).decode()
    return "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))


@define
class FakeGitHub(LoopbackFake[Recorded, GitHubFault]):
    """Start with :meth:`running`; ``base_url`` is then ``http://127.0.0.1:<port>``.

    ``login`` is the user that ``token`` authenticates (``GET /user``); more users and tokens come with
    :meth:`add_user`, organisations with :meth:`add_org`, seeded repositories with :meth:`add_repo`.
    """

    thread_name: ClassVar[str] = "fake-github"

    login: str = "octocat"
    token: str = "ghp_test"
    _accounts: dict[str, _Account] = field(factory=dict, init=False)  # by lower-cased login
    _tokens: dict[str, str] = field(factory=dict, init=False)  # token -> login
    _repos: dict[str, _Repo] = field(factory=dict, init=False)  # by lower-cased "owner/name"
    _last_id: int = field(default=0, init=False)
    _rate_used: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self.add_user(self.login, token=self.token)

    # seeding ------------------------------------------------------------------------------------------
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

    # fault injection ----------------------------------------------------------------------------------
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

    # inspection ---------------------------------------------------------------------------------------
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

    # serving ------------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, raw_body: bytes, authorization: str | None) -> Answer:
        """Answer one request (the fake's lock is held)."""
        path, _, query_string = raw_path.partition("?")
        path = path.rstrip("/") or "/"
        query = dict(parse_qsl(query_string, keep_blank_values=True))
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            return self._error(_ApiError(400, "Problems parsing JSON"))
        user: _Account | None = None
        if authorization:
            scheme, _, token = authorization.partition(" ")
            login = self._tokens.get(token.strip()) if scheme.lower() in ("token", "bearer") else None
            if login is None:
                return self._error(_ApiError(401, "Bad credentials"))
            user = self._accounts[login.lower()]
            self._rate_used += 1
        for verb, pattern, handler in _ROUTES:
            match = pattern.fullmatch(path) if verb == method else None
            if match is None:
                continue
            if user is None and method != "GET":
                return self._error(_ApiError(401, "Requires authentication"))
            args = {k: unquote(v or "") for k, v in match.groupdict().items()}
            try:
                return handler(self, _Call(method, path, query, body, user, args))
            except _ApiError as error:
                return self._error(error)
        return self._error(_not_found())

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

    def _error(self, error: _ApiError) -> Answer:
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

    # helpers ------------------------------------------------------------------------------------------
    def _ensure_user(self, login: str, *, token: str | None = None, name: str | None = None) -> _Account:
        account = self._accounts.get(login.lower())
        if account is None:
            account = self._accounts[login.lower()] = _Account(login, self._next_id(), "User", _now(), name=name)
        if token is not None:
            self._tokens[token] = account.login
        return account

    def _ensure_org(self, login: str, members: list[str], name: str | None = None) -> _Account:
        for member in members:
            self._ensure_user(member)
        org = _Account(login, self._next_id(), "Organization", _now(), name=name)
        org.members = {m.lower() for m in members}
        self._accounts[login.lower()] = org
        return org

    def _next_id(self) -> int:
        self._last_id += 1
        return self._last_id

    @property
    def _api(self) -> str:
        return self.base_url if self._server is not None else "http://127.0.0.1"

    def _existing(self, owner: str, repo: str) -> _Repo:
        found = self._repos.get(f"{owner}/{repo}".lower())
        if found is None:
            raise KeyError(f"no repository {owner}/{repo}")
        return found

    def _is_admin(self, repo: _Repo, user: _Account | None) -> bool:
        if user is None:
            return False
        owner = self._accounts[repo.owner.lower()]
        return user.login.lower() == owner.login.lower() or user.login.lower() in owner.members

    def _can_push(self, repo: _Repo, user: _Account | None) -> bool:
        return self._is_admin(repo, user) or (user is not None and user.login.lower() in repo.collaborators)

    def _repo_for(self, call: _Call, *, push: bool = False, admin: bool = False) -> _Repo:
        repo = self._repos.get(f"{call.args['owner']}/{call.args['repo']}".lower())
        if repo is None or (repo.private and not self._can_push(repo, call.user)):
            raise _not_found()
        if admin and not self._is_admin(repo, call.user):
            raise _ApiError(403, "Must have admin rights to Repository.")
        if push and not self._can_push(repo, call.user):
            raise _ApiError(403, "Must have push access to repository")
        return repo

    def _issue_for(self, repo: _Repo, call: _Call) -> _Issue:
        if not repo.has_issues:
            raise _ApiError(410, "Issues are disabled for this repo")
        issue = repo.issues.get(int(call.args["number"]))
        if issue is None:
            raise _not_found()
        return issue

    def _pull_for(self, repo: _Repo, call: _Call) -> tuple[_Issue, _Pull]:
        issue = repo.issues.get(int(call.args["number"]))
        if issue is None or issue.pull is None:
            raise _not_found()
        return issue, issue.pull

    def _user(self, login: str) -> _Account:
        return self._accounts[login.lower()]

    def _paged(self, call: _Call, items: list[JSON]) -> Answer:
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
            raise _invalid(resource, "assignees")
        logins = []
        for login in value:
            account = self._accounts.get(login.lower())
            if account is None or account.type != "User":
                raise _invalid(resource, "assignees", value=login)
            logins.append(account.login)
        return logins

    def _label_names(self, repo: _Repo, value: Any) -> list[str]:
        """Label names (or ``{"name": ...}`` objects) as lower-cased keys; unknown labels are created."""
        if isinstance(value, dict) and "labels" in value:
            value = value["labels"]
        if not isinstance(value, list):
            raise _invalid("Label", "labels")
        keys: list[str] = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise _invalid("Label", "name", "missing_field")
            if name.lower() not in repo.labels:
                repo.labels[name.lower()] = _Label(self._next_id(), name, "ededed")
            if name.lower() not in keys:
                keys.append(name.lower())
        return keys

    def _close(self, issue: _Issue, login: str, reason: str | None) -> None:
        issue.state, issue.closed_at, issue.closed_by = "closed", _now(), login
        issue.state_reason = reason or "completed"

    def _reopen(self, issue: _Issue) -> None:
        issue.state, issue.closed_at, issue.closed_by, issue.state_reason = "open", None, None, "reopened"

    # git ----------------------------------------------------------------------------------------------
    def _new_repo(
        self, owner: _Account, name: str, private: bool, description: str | None, default_branch: str
    ) -> _Repo:
        now = _now()
        repo = _Repo(self._next_id(), owner.login, name, private, description, default_branch, now, now)
        self._repos[repo.full_name.lower()] = repo
        return repo

    def _author(self, login: str, given: Any = None) -> dict[str, str]:
        if isinstance(given, dict) and isinstance(given.get("name"), str) and isinstance(given.get("email"), str):
            return {"name": given["name"], "email": given["email"], "date": _now()}
        account = self._user(login)
        email = account.email or f"{account.id}+{account.login}@users.noreply.github.com"
        return {"name": account.name or account.login, "email": email, "date": _now()}

    def _commit(
        self, repo: _Repo, parents: list[str], files: dict[str, bytes], message: str, author: dict[str, str]
    ) -> _Commit:
        tree = _sha("tree", *(f"{p} {_blob_sha(d)}" for p, d in sorted(files.items())))
        sha = _sha("commit", tree, *parents, json.dumps(author), message, str(self._next_id()))
        commit = _Commit(sha, tree, message, parents, files, author)
        repo.commits[sha] = commit
        repo.pushed_at = repo.updated_at = _now()
        return commit

    def _initial_commit(self, repo: _Repo, files: dict[str, bytes], login: str) -> None:
        commit = self._commit(repo, [], files, "Initial commit", self._author(login))
        repo.refs[f"refs/heads/{repo.default_branch}"] = commit.sha

    def _ancestors(self, repo: _Repo, sha: str) -> list[str]:
        """``sha`` and every commit it descends from, nearest first."""
        seen: list[str] = []
        queue = [sha]
        while queue:
            current = queue.pop(0)
            if current not in seen and current in repo.commits:
                seen.append(current)
                queue.extend(repo.commits[current].parents)
        return seen

    def _merged_files(self, repo: _Repo, base_sha: str, head_sha: str) -> dict[str, bytes] | None:
        """A three-way merge of the two commits' files; None when they conflict."""
        head_ancestors = set(self._ancestors(repo, head_sha))
        merge_base = next((s for s in self._ancestors(repo, base_sha) if s in head_ancestors), None)
        common = repo.commits[merge_base].files if merge_base else {}
        base, head = repo.commits[base_sha].files, repo.commits[head_sha].files
        merged: dict[str, bytes] = {}
        for path in sorted(set(base) | set(head) | set(common)):
            b, h, m = base.get(path), head.get(path), common.get(path)
            if h == m or b == h:
                chosen = b
            elif b == m:
                chosen = h
            else:
                return None
            if chosen is not None:
                merged[path] = chosen
        return merged

    def _resolve(self, repo: _Repo, ref: str | None) -> tuple[str, _Commit]:
        """The branch (or tag, or commit sha) ``ref`` names, and its commit; the default branch if None."""
        name = ref or repo.default_branch
        for candidate in (f"refs/heads/{name}", f"refs/tags/{name}", name):
            sha = repo.refs.get(candidate)
            if sha is not None:
                return name, repo.commits[sha]
        if name in repo.commits:
            return name, repo.commits[name]
        if not repo.refs:
            raise _ApiError(404, "This repository is empty.")
        raise _ApiError(404, f"No commit found for the ref {name}")

    # JSON shapes --------------------------------------------------------------------------------------
    def _user_json(self, account: _Account) -> JSON:
        url = f"{self._api}/users/{account.login}"
        return {
            "login": account.login,
            "id": account.id,
            "node_id": _node_id(account.type, account.id),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{account.id}?v=4",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self._api}/{account.login}",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": account.type,
            "user_view_type": "public",
            "site_admin": False,
        }

    def _full_user_json(self, account: _Account) -> JSON:
        public_repos = sum(1 for r in self._repos.values() if r.owner == account.login and not r.private)
        return {
            **self._user_json(account),
            "name": account.name,
            "company": None,
            "blog": "",
            "location": None,
            "email": account.email,
            "hireable": None,
            "bio": None,
            "twitter_username": None,
            "public_repos": public_repos,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": account.created_at,
            "updated_at": account.created_at,
        }

    def _org_json(self, org: _Account) -> JSON:
        url = f"{self._api}/orgs/{org.login}"
        return {
            "login": org.login,
            "id": org.id,
            "node_id": _node_id("Organization", org.id),
            "url": url,
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events",
            "hooks_url": f"{url}/hooks",
            "issues_url": f"{url}/issues",
            "members_url": f"{url}/members{{/member}}",
            "public_members_url": f"{url}/public_members{{/member}}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{org.id}?v=4",
            "description": None,
            "name": org.name,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "is_verified": False,
            "has_organization_projects": True,
            "has_repository_projects": True,
            "public_repos": sum(1 for r in self._repos.values() if r.owner == org.login and not r.private),
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "html_url": f"{self._api}/{org.login}",
            "created_at": org.created_at,
            "updated_at": org.created_at,
            "archived_at": None,
            "type": "Organization",
        }

    def _repo_json(self, repo: _Repo, user: _Account | None) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        owner = self._user(repo.owner)
        open_issues = sum(1 for i in repo.issues.values() if i.state == "open")
        data: JSON = {
            "id": repo.id,
            "node_id": _node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self._user_json(owner),
            "html_url": web,
            "description": repo.description,
            "fork": False,
            "url": api,
            "forks_url": f"{api}/forks",
            "collaborators_url": f"{api}/collaborators{{/collaborator}}",
            "hooks_url": f"{api}/hooks",
            "issue_events_url": f"{api}/issues/events{{/number}}",
            "events_url": f"{api}/events",
            "assignees_url": f"{api}/assignees{{/user}}",
            "branches_url": f"{api}/branches{{/branch}}",
            "tags_url": f"{api}/tags",
            "blobs_url": f"{api}/git/blobs{{/sha}}",
            "git_refs_url": f"{api}/git/refs{{/sha}}",
            "trees_url": f"{api}/git/trees{{/sha}}",
            "statuses_url": f"{api}/statuses/{{sha}}",
            "commits_url": f"{api}/commits{{/sha}}",
            "git_commits_url": f"{api}/git/commits{{/sha}}",
            "issue_comment_url": f"{api}/issues/comments{{/number}}",
            "contents_url": f"{api}/contents/{{+path}}",
            "merges_url": f"{api}/merges",
            "issues_url": f"{api}/issues{{/number}}",
            "pulls_url": f"{api}/pulls{{/number}}",
            "labels_url": f"{api}/labels{{/name}}",
            "created_at": repo.created_at,
            "updated_at": repo.updated_at,
            "pushed_at": repo.pushed_at,
            "git_url": f"git://127.0.0.1/{repo.full_name}.git",
            "ssh_url": f"git@127.0.0.1:{repo.full_name}.git",
            "clone_url": f"{web}.git",
            "svn_url": web,
            "homepage": repo.homepage,
            "size": sum(len(d) for d in self._head_files(repo).values()) // 1024,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": repo.has_issues,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "network_count": 0,
            "subscribers_count": 0,
        }
        if user is not None:
            admin, push = self._is_admin(repo, user), self._can_push(repo, user)
            data["permissions"] = {"admin": admin, "maintain": admin, "push": push, "triage": push, "pull": True}
        if owner.type == "Organization":
            data["organization"] = self._user_json(owner)
        return data

    def _head_files(self, repo: _Repo) -> dict[str, bytes]:
        sha = repo.refs.get(f"refs/heads/{repo.default_branch}")
        return repo.commits[sha].files if sha else {}

    def _label_json(self, repo: _Repo, label: _Label) -> JSON:
        return {
            "id": label.id,
            "node_id": _node_id("Label", label.id),
            "url": f"{self._api}/repos/{repo.full_name}/labels/{quote(label.name, safe='')}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def _association(self, repo: _Repo, login: str) -> str:
        owner = self._user(repo.owner)
        if login.lower() == owner.login.lower():
            return "OWNER"
        if login.lower() in owner.members:
            return "MEMBER"
        return "COLLABORATOR" if login.lower() in repo.collaborators else "NONE"

    def _issue_json(self, repo: _Repo, issue: _Issue) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        url = f"{api}/issues/{issue.number}"
        assignees = [self._user_json(self._user(a)) for a in issue.assignees]
        data: JSON = {
            "url": url,
            "repository_url": api,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"{web}/{'pull' if issue.pull else 'issues'}/{issue.number}",
            "id": issue.id,
            "node_id": _node_id("Issue", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self._user_json(self._user(issue.user)),
            "labels": [self._label_json(repo, repo.labels[key]) for key in issue.labels],
            "state": issue.state,
            "locked": False,
            "assignee": assignees[0] if assignees else None,
            "assignees": assignees,
            "milestone": None,
            "comments": sum(1 for c in repo.comments.values() if c.issue_number == issue.number),
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "author_association": self._association(repo, issue.user),
            "active_lock_reason": None,
            "body": issue.body,
            "closed_by": self._user_json(self._user(issue.closed_by)) if issue.closed_by else None,
            "timeline_url": f"{url}/timeline",
            "performed_via_github_app": None,
            "state_reason": issue.state_reason,
        }
        if issue.pull is not None:
            pull_url = f"{api}/pulls/{issue.number}"
            data["draft"] = issue.pull.draft
            data["pull_request"] = {
                "url": pull_url,
                "html_url": data["html_url"],
                "diff_url": f"{data['html_url']}.diff",
                "patch_url": f"{data['html_url']}.patch",
                "merged_at": issue.pull.merged_at,
            }
        return data

    def _comment_json(self, repo: _Repo, comment: _Comment) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        kind = "pull" if repo.issues[comment.issue_number].pull else "issues"
        return {
            "url": f"{api}/issues/comments/{comment.id}",
            "html_url": f"{web}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
            "issue_url": f"{api}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": _node_id("IssueComment", comment.id),
            "user": self._user_json(self._user(comment.user)),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "author_association": self._association(repo, comment.user),
            "body": comment.body,
            "performed_via_github_app": None,
        }

    def _pull_part_json(self, repo: _Repo, branch: str, sha: str) -> JSON:
        owner = self._user(repo.owner)
        return {
            "label": f"{owner.login}:{branch}",
            "ref": branch,
            "sha": sha,
            "user": self._user_json(owner),
            "repo": self._repo_json(repo, None),
        }

    def _pull_json(self, repo: _Repo, issue: _Issue) -> JSON:
        pull = issue.pull
        assert pull is not None
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        url, html = f"{api}/pulls/{issue.number}", f"{web}/pull/{issue.number}"
        head_sha = repo.refs.get(f"refs/heads/{pull.head}", pull.head_sha)
        base_sha = repo.refs.get(f"refs/heads/{pull.base}", "")
        open_ = issue.state == "open"
        mergeable = open_ and base_sha in repo.commits and self._merged_files(repo, base_sha, head_sha) is not None
        ahead = set(self._ancestors(repo, head_sha)) - set(self._ancestors(repo, base_sha)) if base_sha else set()
        assignees = [self._user_json(self._user(a)) for a in issue.assignees]
        return {
            "url": url,
            "id": pull.id,
            "node_id": _node_id("PullRequest", pull.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{issue.number}",
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{issue.number}/comments",
            "statuses_url": f"{api}/statuses/{head_sha}",
            "number": issue.number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self._user_json(self._user(issue.user)),
            "body": issue.body,
            "labels": [self._label_json(repo, repo.labels[key]) for key in issue.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "merged_at": pull.merged_at,
            "merge_commit_sha": pull.merge_commit_sha,
            "assignee": assignees[0] if assignees else None,
            "assignees": assignees,
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._pull_part_json(repo, pull.head, head_sha),
            "base": self._pull_part_json(repo, pull.base, base_sha),
            "_links": {
                "self": {"href": url},
                "html": {"href": html},
                "issue": {"href": f"{api}/issues/{issue.number}"},
                "comments": {"href": f"{api}/issues/{issue.number}/comments"},
                "commits": {"href": f"{url}/commits"},
                "statuses": {"href": f"{api}/statuses/{head_sha}"},
            },
            "author_association": self._association(repo, issue.user),
            "auto_merge": None,
            "draft": pull.draft,
            "merged": pull.merged_at is not None,
            "mergeable": mergeable if open_ else None,
            "rebaseable": mergeable if open_ else None,
            "mergeable_state": ("clean" if mergeable else "dirty") if open_ else "unknown",
            "merged_by": self._user_json(self._user(pull.merged_by)) if pull.merged_by else None,
            "comments": sum(1 for c in repo.comments.values() if c.issue_number == issue.number),
            "review_comments": 0,
            "maintainer_can_modify": pull.maintainer_can_modify,
            "commits": len(ahead),
            "additions": 0,
            "deletions": 0,
            "changed_files": 0,
        }

    def _git_commit_json(self, repo: _Repo, commit: _Commit) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        return {
            "sha": commit.sha,
            "node_id": _node_id("Commit", int(commit.sha[:8], 16)),
            "url": f"{api}/git/commits/{commit.sha}",
            "html_url": f"{web}/commit/{commit.sha}",
            "author": dict(commit.author),
            "committer": dict(commit.author),
            "message": commit.message,
            "tree": {"sha": commit.tree_sha, "url": f"{api}/git/trees/{commit.tree_sha}"},
            "parents": [
                {"sha": p, "url": f"{api}/git/commits/{p}", "html_url": f"{web}/commit/{p}"} for p in commit.parents
            ],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
        }

    def _commit_json(self, repo: _Repo, commit: _Commit) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        git = self._git_commit_json(repo, commit)
        del git["sha"], git["node_id"], git["html_url"], git["parents"]
        return {
            "sha": commit.sha,
            "node_id": _node_id("Commit", int(commit.sha[:8], 16)),
            "url": f"{api}/commits/{commit.sha}",
            "html_url": f"{web}/commit/{commit.sha}",
            "comments_url": f"{api}/commits/{commit.sha}/comments",
            "commit": {**git, "comment_count": 0},
            "author": None,
            "committer": None,
            "parents": [
                {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{web}/commit/{p}"} for p in commit.parents
            ],
        }

    def _ref_json(self, repo: _Repo, ref: str) -> JSON:
        api, sha = f"{self._api}/repos/{repo.full_name}", repo.refs[ref]
        return {
            "ref": ref,
            "node_id": _node_id("Ref", int(_sha(repo.full_name, ref)[:8], 16)),
            "url": f"{api}/git/{ref}",
            "object": {"sha": sha, "type": "commit", "url": f"{api}/git/commits/{sha}"},
        }

    def _content_json(self, repo: _Repo, ref: str, path: str, commit: _Commit, *, with_content: bool) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        data = commit.files.get(path)
        self_url = f"{api}/contents/{quote(path)}?ref={quote(ref, safe='')}"
        if data is None:  # a directory
            listing = sorted(p for p in commit.files if p.startswith(f"{path}/"))
            sha = _sha("tree", *(f"{p} {_blob_sha(commit.files[p])}" for p in listing))
            git_url, html_url, download = f"{api}/git/trees/{sha}", f"{web}/tree/{ref}/{path}", None
        else:
            sha = _blob_sha(data)
            git_url, html_url = f"{api}/git/blobs/{sha}", f"{web}/blob/{ref}/{path}"
            download = f"{web}/raw/{ref}/{path}"
        entry: JSON = {
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "size": 0 if data is None else len(data),
            "url": self_url,
            "html_url": html_url,
            "git_url": git_url,
            "download_url": download,
            "type": "dir" if data is None else "file",
        }
        if with_content and data is not None:
            entry["content"] = _wrapped_base64(data)
            entry["encoding"] = "base64"
        entry["_links"] = {"self": self_url, "git": git_url, "html": html_url}
        return entry

    # users and organisations --------------------------------------------------------------------------
    def _get_user(self, call: _Call) -> Answer:
        if call.user is None:
            raise _ApiError(401, "Requires authentication")
        own = [r for r in self._repos.values() if r.owner == call.user.login]
        return (
            200,
            {},
            {
                **self._full_user_json(call.user),
                "private_gists": 0,
                "total_private_repos": sum(1 for r in own if r.private),
                "owned_private_repos": sum(1 for r in own if r.private),
                "disk_usage": 0,
                "collaborators": 0,
                "two_factor_authentication": False,
                "plan": {"name": "free", "space": 976562499, "collaborators": 0, "private_repos": 10000},
            },
        )

    def _get_named_user(self, call: _Call) -> Answer:
        account = self._accounts.get(call.args["login"].lower())
        if account is None:
            raise _not_found()
        return 200, {}, self._full_user_json(account)

    def _list_repos_of(self, call: _Call, owner: str) -> Answer:
        repos = [
            self._repo_json(r, call.user)
            for r in sorted(self._repos.values(), key=lambda r: r.full_name.lower())
            if r.owner.lower() == owner.lower() and (not r.private or self._can_push(r, call.user))
        ]
        return self._paged(call, repos)

    def _list_own_repos(self, call: _Call) -> Answer:
        if call.user is None:
            raise _ApiError(401, "Requires authentication")
        return self._list_repos_of(call, call.user.login)

    def _list_user_repos(self, call: _Call) -> Answer:
        if call.args["login"].lower() not in self._accounts:
            raise _not_found()
        return self._list_repos_of(call, call.args["login"])

    def _get_org(self, call: _Call) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise _not_found()
        return 200, {}, self._org_json(org)

    def _list_org_repos(self, call: _Call) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise _not_found()
        return self._list_repos_of(call, org.login)

    # repositories -------------------------------------------------------------------------------------
    def _create_repo_for(self, call: _Call, owner: _Account) -> Answer:
        body = call.object_body()
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _ApiError(
                422,
                "Repository creation failed.",
                [{"resource": "Repository", "code": "missing_field", "field": "name"}],
            )
        name = re.sub(r"[^A-Za-z0-9._-]", "-", name.strip())
        if f"{owner.login}/{name}".lower() in self._repos:
            error = {"resource": "Repository", "code": "custom", "field": "name"}
            error["message"] = "name already exists on this account"
            raise _ApiError(422, "Repository creation failed.", [error])
        description = body.get("description")
        repo = self._new_repo(owner, name, bool(body.get("private", False)), description, "main")
        repo.homepage = body.get("homepage")
        repo.has_issues = bool(body.get("has_issues", True))
        if body.get("auto_init"):
            readme = f"# {name}\n" + (f"{description}\n" if description else "")
            self._initial_commit(repo, {"README.md": readme.encode()}, call.login())
        url = f"{self._api}/repos/{repo.full_name}"
        return 201, {"Location": url}, self._repo_json(repo, call.user)

    def _create_user_repo(self, call: _Call) -> Answer:
        return self._create_repo_for(call, self._user(call.login()))

    def _create_org_repo(self, call: _Call) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise _not_found()
        if call.login().lower() not in org.members:
            raise _ApiError(403, "You need admin access to the organization before adding a repository to it.")
        return self._create_repo_for(call, org)

    def _get_repo(self, call: _Call) -> Answer:
        return 200, {}, self._repo_json(self._repo_for(call), call.user)

    def _get_repo_by_id(self, call: _Call) -> Answer:
        for repo in self._repos.values():
            if str(repo.id) == call.args["id"] and (not repo.private or self._can_push(repo, call.user)):
                return 200, {}, self._repo_json(repo, call.user)
        raise _not_found()

    def _edit_repo(self, call: _Call) -> Answer:
        repo = self._repo_for(call, admin=True)
        body = call.object_body()
        if "default_branch" in body:
            if f"refs/heads/{body['default_branch']}" not in repo.refs:
                raise _invalid("Repository", "default_branch")
            repo.default_branch = body["default_branch"]
        if "description" in body:
            repo.description = body["description"]
        if "homepage" in body:
            repo.homepage = body["homepage"]
        if "private" in body:
            repo.private = bool(body["private"])
        if "has_issues" in body:
            repo.has_issues = bool(body["has_issues"])
        repo.updated_at = _now()
        return 200, {}, self._repo_json(repo, call.user)

    def _delete_repo(self, call: _Call) -> Answer:
        repo = self._repo_for(call, admin=True)
        del self._repos[repo.full_name.lower()]
        return 204, {}, None

    # issues -------------------------------------------------------------------------------------------
    def _list_issues(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        if not repo.has_issues:
            raise _ApiError(410, "Issues are disabled for this repo")
        state = call.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise _invalid("Issue", "state")
        wanted_labels = {n.strip().lower() for n in call.query.get("labels", "").split(",") if n.strip()}
        creator, assignee = call.query.get("creator"), call.query.get("assignee")
        issues = [
            i
            for i in repo.issues.values()
            if state in ("all", i.state)
            and wanted_labels <= set(i.labels)
            and (creator is None or i.user.lower() == creator.lower())
            and (
                assignee in (None, "*")
                or (assignee == "none" and not i.assignees)
                or (assignee is not None and assignee.lower() in {a.lower() for a in i.assignees})
            )
        ]
        sort = call.query.get("sort", "created")

        def key(issue: _Issue) -> tuple[str, int]:
            if sort == "comments":
                return f"{sum(1 for c in repo.comments.values() if c.issue_number == issue.number):09d}", issue.number
            return (issue.updated_at if sort == "updated" else issue.created_at), issue.number

        issues.sort(key=key, reverse=call.query.get("direction", "desc") != "asc")
        return self._paged(call, [self._issue_json(repo, i) for i in issues])

    def _create_issue(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        if not repo.has_issues:
            raise _ApiError(410, "Issues are disabled for this repo")
        body = call.object_body()
        title = body.get("title")
        if isinstance(title, int) and not isinstance(title, bool):
            title = str(title)
        if not isinstance(title, str) or not title.strip():
            raise _invalid("Issue", "title", "missing_field")
        text = body.get("body")
        if text is not None and not isinstance(text, str):
            raise _invalid("Issue", "body")
        pusher = self._can_push(repo, call.user)
        assignees = body.get("assignees", [body["assignee"]] if body.get("assignee") else [])
        assignees = self._assignees(assignees, "Issue") if pusher else []  # silently dropped without push access
        labels = self._label_names(repo, body.get("labels", [])) if pusher else []
        now = _now()
        number = max(repo.issues, default=0) + 1
        issue = _Issue(self._next_id(), number, title, text, call.login(), now, now, labels, assignees)
        repo.issues[number] = issue
        json_ = self._issue_json(repo, issue)
        return 201, {"Location": json_["url"]}, json_

    def _get_issue(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        return 200, {}, self._issue_json(repo, self._issue_for(repo, call))

    def _edit_issue(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        pusher = self._can_push(repo, call.user)
        if not pusher and issue.user.lower() != call.login().lower():
            raise _ApiError(403, "Must have push access to repository")
        self._apply_issue_edit(repo, issue, call.object_body(), call.login(), pusher)
        return 200, {}, self._issue_json(repo, issue)

    def _apply_issue_edit(self, repo: _Repo, issue: _Issue, body: JSON, login: str, pusher: bool) -> None:
        resource = "PullRequest" if issue.pull else "Issue"
        if "title" in body and (not isinstance(body["title"], str) or not body["title"].strip()):
            raise _invalid(resource, "title", "missing_field")
        if "body" in body and body["body"] is not None and not isinstance(body["body"], str):
            raise _invalid(resource, "body")
        state = body.get("state")
        if state is not None and state not in ("open", "closed"):
            raise _invalid(resource, "state")
        reason = body.get("state_reason")
        if reason is not None and reason not in ("completed", "not_planned", "reopened"):
            raise _invalid(resource, "state_reason")
        if state == "open" and issue.pull is not None and issue.pull.merged_at is not None:
            raise _custom("PullRequest", "state cannot be changed. The pull request has been merged.")
        assignees = self._assignees(body["assignees"], resource) if pusher and "assignees" in body else None
        labels = self._label_names(repo, body["labels"]) if pusher and "labels" in body else None
        if "title" in body:
            issue.title = body["title"]
        if "body" in body:
            issue.body = body["body"]
        if assignees is not None:
            issue.assignees = assignees
        if labels is not None:
            issue.labels = labels
        if state == "closed" and issue.state == "open":
            self._close(issue, login, reason)
        elif state == "open" and issue.state == "closed":
            self._reopen(issue)
        elif reason is not None and issue.state == "closed":
            issue.state_reason = reason
        issue.updated_at = _now()

    # comments -----------------------------------------------------------------------------------------
    def _list_issue_comments(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        found = sorted((c for c in repo.comments.values() if c.issue_number == issue.number), key=lambda c: c.id)
        return self._paged(call, [self._comment_json(repo, c) for c in found])

    def _list_repo_comments(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        found = sorted(repo.comments.values(), key=lambda c: c.id)
        return self._paged(call, [self._comment_json(repo, c) for c in found])

    def _create_comment(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        text = call.object_body().get("body")
        if not isinstance(text, str) or not text.strip():
            raise _invalid("IssueComment", "body", "missing_field")
        now = _now()
        comment = _Comment(self._next_id(), issue.number, text, call.login(), now, now)
        repo.comments[comment.id] = comment
        issue.updated_at = now
        json_ = self._comment_json(repo, comment)
        return 201, {"Location": json_["url"]}, json_

    def _comment_for(self, repo: _Repo, call: _Call, *, write: bool = False) -> _Comment:
        comment = repo.comments.get(int(call.args["id"]))
        if comment is None:
            raise _not_found()
        if write and comment.user.lower() != call.login().lower() and not self._can_push(repo, call.user):
            raise _ApiError(403, "Must have push access to repository")
        return comment

    def _get_comment(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        return 200, {}, self._comment_json(repo, self._comment_for(repo, call))

    def _edit_comment(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        comment = self._comment_for(repo, call, write=True)
        text = call.object_body().get("body")
        if not isinstance(text, str) or not text.strip():
            raise _invalid("IssueComment", "body", "missing_field")
        comment.body, comment.updated_at = text, _now()
        return 200, {}, self._comment_json(repo, comment)

    def _delete_comment(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        comment = self._comment_for(repo, call, write=True)
        del repo.comments[comment.id]
        return 204, {}, None

    # labels -------------------------------------------------------------------------------------------
    def _issue_labels_reply(self, repo: _Repo, issue: _Issue) -> Answer:
        return 200, {}, [self._label_json(repo, repo.labels[key]) for key in issue.labels]

    def _list_issue_labels(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        return self._paged(call, [self._label_json(repo, repo.labels[key]) for key in issue.labels])

    def _add_issue_labels(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        for key in self._label_names(repo, call.body):
            if key not in issue.labels:
                issue.labels.append(key)
        issue.updated_at = _now()
        return self._issue_labels_reply(repo, issue)

    def _set_issue_labels(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        issue.labels, issue.updated_at = self._label_names(repo, call.body or []), _now()
        return self._issue_labels_reply(repo, issue)

    def _clear_issue_labels(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        issue.labels, issue.updated_at = [], _now()
        return 204, {}, None

    def _remove_issue_label(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        key = call.args["name"].lower()
        if key not in issue.labels:
            raise _ApiError(404, "Label does not exist")
        issue.labels.remove(key)
        issue.updated_at = _now()
        return self._issue_labels_reply(repo, issue)

    def _list_labels(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        labels = sorted(repo.labels.values(), key=lambda label: label.name.lower())
        return self._paged(call, [self._label_json(repo, label) for label in labels])

    def _create_label(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        name, color = body.get("name"), str(body.get("color", "ededed")).lstrip("#")
        if not isinstance(name, str) or not name.strip():
            raise _invalid("Label", "name", "missing_field")
        if name.lower() in repo.labels:
            raise _invalid("Label", "name", "already_exists")
        if not re.fullmatch(r"[0-9a-fA-F]{6}", color):
            raise _invalid("Label", "color")
        label = _Label(self._next_id(), name, color.lower(), body.get("description"))
        repo.labels[name.lower()] = label
        json_ = self._label_json(repo, label)
        return 201, {"Location": json_["url"]}, json_

    def _get_label(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        label = repo.labels.get(call.args["name"].lower())
        if label is None:
            raise _not_found()
        return 200, {}, self._label_json(repo, label)

    def _delete_label(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        key = call.args["name"].lower()
        if key not in repo.labels:
            raise _not_found()
        del repo.labels[key]
        for issue in repo.issues.values():
            if key in issue.labels:
                issue.labels.remove(key)
        return 204, {}, None

    # pull requests ------------------------------------------------------------------------------------
    def _list_pulls(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        state = call.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise _invalid("PullRequest", "state")
        head, base = call.query.get("head"), call.query.get("base")
        pulls = [
            i
            for i in sorted(repo.issues.values(), key=lambda i: i.number, reverse=True)
            if i.pull is not None
            and state in ("all", i.state)
            and (head is None or head.split(":")[-1] == i.pull.head)
            and (base is None or base == i.pull.base)
        ]
        return self._paged(call, [self._pull_json(repo, i) for i in pulls])

    def _create_pull(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        for name in ("head", "base"):
            if not isinstance(body.get(name), str) or not body[name]:
                raise _invalid("PullRequest", name, "missing_field")
        head_owner, _, head = body["head"].rpartition(":")
        if head_owner and head_owner.lower() != repo.owner.lower():
            raise _invalid("PullRequest", "head")  # forks are not modelled
        base = body["base"]
        existing = repo.issues.get(body["issue"]) if isinstance(body.get("issue"), int) else None
        if "issue" in body and (existing is None or existing.pull is not None):
            raise _invalid("PullRequest", "issue")
        title = body.get("title")
        if existing is None and (not isinstance(title, str) or not title.strip()):
            raise _invalid("PullRequest", "title", "missing_field")
        if f"refs/heads/{base}" not in repo.refs:
            raise _invalid("PullRequest", "base")
        if f"refs/heads/{head}" not in repo.refs:
            raise _invalid("PullRequest", "head")
        head_sha, base_sha = repo.refs[f"refs/heads/{head}"], repo.refs[f"refs/heads/{base}"]
        if head_sha in self._ancestors(repo, base_sha):
            raise _custom("PullRequest", f"No commits between {base} and {head}")
        for other in repo.issues.values():
            if other.pull and other.state == "open" and (other.pull.head, other.pull.base) == (head, base):
                raise _custom("PullRequest", f"A pull request already exists for {repo.owner}:{head}.")
        pull = _Pull(self._next_id(), head, base, head_sha, bool(body.get("draft", False)))
        pull.maintainer_can_modify = bool(body.get("maintainer_can_modify", False))
        if existing is not None:
            existing.pull, existing.updated_at = pull, _now()
            issue = existing
        else:
            now = _now()
            number = max(repo.issues, default=0) + 1
            issue = _Issue(self._next_id(), number, str(title), body.get("body"), call.login(), now, now, pull=pull)
            repo.issues[number] = issue
        json_ = self._pull_json(repo, issue)
        return 201, {"Location": json_["url"]}, json_

    def _get_pull(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue, _ = self._pull_for(repo, call)
        return 200, {}, self._pull_json(repo, issue)

    def _edit_pull(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        issue, pull = self._pull_for(repo, call)
        pusher = self._can_push(repo, call.user)
        if not pusher and issue.user.lower() != call.login().lower():
            raise _ApiError(403, "Must have push access to repository")
        body = call.object_body()
        if "base" in body:
            if not isinstance(body["base"], str) or f"refs/heads/{body['base']}" not in repo.refs:
                raise _invalid("PullRequest", "base")
            pull.base = body["base"]
        if "maintainer_can_modify" in body:
            pull.maintainer_can_modify = bool(body["maintainer_can_modify"])
        edit = {k: v for k, v in body.items() if k in ("title", "body", "state", "labels", "assignees")}
        self._apply_issue_edit(repo, issue, edit, call.login(), pusher)
        return 200, {}, self._pull_json(repo, issue)

    def _pull_merged(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        _, pull = self._pull_for(repo, call)
        if pull.merged_at is None:
            raise _not_found()
        return 204, {}, None

    def _merge_pull(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        issue, pull = self._pull_for(repo, call)
        body = call.object_body()
        method = body.get("merge_method", "merge")
        if method not in ("merge", "squash", "rebase"):
            raise _invalid("PullRequest", "merge_method")
        head_sha = repo.refs.get(f"refs/heads/{pull.head}")
        base_sha = repo.refs.get(f"refs/heads/{pull.base}")
        if issue.state != "open" or pull.merged_at is not None or head_sha is None or base_sha is None:
            raise _ApiError(405, "Pull Request is not mergeable")
        if "sha" in body and body["sha"] != head_sha:
            raise _ApiError(409, "Head branch was modified. Review and try the merge again.")
        files = self._merged_files(repo, base_sha, head_sha)
        if files is None:
            raise _ApiError(405, "Pull Request is not mergeable")
        title = body.get("commit_title") or (
            f"{issue.title} (#{issue.number})"
            if method == "squash"
            else f"Merge pull request #{issue.number} from {repo.owner}/{pull.head}"
        )
        message = f"{title}\n\n{body['commit_message']}" if body.get("commit_message") else title
        parents = [base_sha, head_sha] if method == "merge" else [base_sha]
        commit = self._commit(repo, parents, files, message, self._author(call.login()))
        repo.refs[f"refs/heads/{pull.base}"] = commit.sha
        pull.merged_at, pull.merged_by, pull.merge_commit_sha = _now(), call.login(), commit.sha
        pull.head_sha = head_sha
        self._close(issue, call.login(), "completed")
        return 200, {}, {"sha": commit.sha, "merged": True, "message": "Pull Request successfully merged"}

    # branches, commits and refs -----------------------------------------------------------------------
    def _branch_json(self, repo: _Repo, name: str) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        return {
            "name": name,
            "commit": self._commit_json(repo, repo.commits[repo.refs[f"refs/heads/{name}"]]),
            "_links": {"self": f"{api}/branches/{quote(name)}", "html": f"{web}/tree/{name}"},
            "protected": False,
            "protection": {"enabled": False, "required_status_checks": {"enforcement_level": "off", "contexts": []}},
            "protection_url": f"{api}/branches/{quote(name)}/protection",
        }

    def _list_branches(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        names = sorted(r.removeprefix("refs/heads/") for r in repo.refs if r.startswith("refs/heads/"))
        return self._paged(call, [self._branch_json(repo, n) for n in names])

    def _get_branch(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        if f"refs/heads/{call.args['branch']}" not in repo.refs:
            raise _ApiError(404, "Branch not found")
        return 200, {}, self._branch_json(repo, call.args["branch"])

    def _get_commit(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        try:
            _, commit = self._resolve(repo, call.args["ref"])
        except _ApiError:
            raise _ApiError(422, f"No commit found for SHA: {call.args['ref']}") from None
        return 200, {}, self._commit_json(repo, commit)

    def _get_git_commit(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        commit = repo.commits.get(call.args["sha"])
        if commit is None:
            raise _not_found()
        return 200, {}, self._git_commit_json(repo, commit)

    def _list_refs(self, call: _Call, prefix: str = "refs/") -> Answer:
        repo = self._repo_for(call)
        if not repo.refs:
            raise _ApiError(409, "Git Repository is empty.")
        refs = [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(prefix)]
        return self._paged(call, refs)

    def _get_ref(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        if not repo.refs:
            raise _ApiError(409, "Git Repository is empty.")
        ref = f"refs/{call.args['ref']}"
        if ref not in repo.refs:
            raise _not_found()
        return 200, {}, self._ref_json(repo, ref)

    def _get_refs_under(self, call: _Call) -> Answer:
        """``GET /git/refs/{ref}``: the ref itself when it exists, else the refs under it (404 when none)."""
        repo = self._repo_for(call)
        ref = f"refs/{call.args['ref']}"
        if ref in repo.refs:
            return 200, {}, self._ref_json(repo, ref)
        under = [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(f"{ref}/")]
        if not under:
            raise _not_found()
        return 200, {}, under

    def _matching_refs(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        prefix = f"refs/{call.args['ref']}"
        return 200, {}, [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(prefix)]

    def _create_ref(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        ref, sha = body.get("ref"), body.get("sha")
        if not isinstance(ref, str):
            raise _invalid("Reference", "ref", "missing_field")
        if not isinstance(sha, str):
            raise _invalid("Reference", "sha", "missing_field")
        if ref.count("/") < 2:
            raise _ApiError(422, "Reference name must contain at least three slash-separated components.")
        if not ref.startswith("refs/") or "//" in ref or ref.endswith("/") or " " in ref:
            raise _ApiError(422, f"{ref} is not a valid ref name.")
        if sha not in repo.commits:
            raise _ApiError(422, "Object does not exist")
        if ref in repo.refs:
            raise _ApiError(422, "Reference already exists")
        repo.refs[ref] = sha
        json_ = self._ref_json(repo, ref)
        return 201, {"Location": json_["url"]}, json_

    def _update_ref(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        ref = f"refs/{call.args['ref']}"
        body = call.object_body()
        sha = body.get("sha")
        if ref not in repo.refs:
            raise _ApiError(422, "Reference does not exist")
        if not isinstance(sha, str) or sha not in repo.commits:
            raise _ApiError(422, "Object does not exist")
        if not body.get("force") and repo.refs[ref] not in self._ancestors(repo, sha):
            raise _ApiError(422, "Update is not a fast forward")
        repo.refs[ref] = sha
        return 200, {}, self._ref_json(repo, ref)

    def _delete_ref(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        ref = f"refs/{call.args['ref']}"
        if ref not in repo.refs:
            raise _ApiError(422, "Reference does not exist")
        del repo.refs[ref]
        return 204, {}, None

    # contents -----------------------------------------------------------------------------------------
    def _get_contents(self, call: _Call) -> Answer:
        repo = self._repo_for(call)
        path = call.args["path"].strip("/")
        ref, commit = self._resolve(repo, call.query.get("ref"))
        if path in commit.files:
            return 200, {}, self._content_json(repo, ref, path, commit, with_content=True)
        prefix = f"{path}/" if path else ""
        children = sorted({p[len(prefix) :].split("/", 1)[0] for p in commit.files if p.startswith(prefix)})
        if not children:
            raise _not_found()
        return 200, {}, [self._content_json(repo, ref, prefix + c, commit, with_content=False) for c in children]

    def _branch_to_write(self, repo: _Repo, body: JSON) -> tuple[str, _Commit | None]:
        branch = body.get("branch") or repo.default_branch
        if not isinstance(branch, str):
            raise _invalid_request('"branch" is not a string.')
        sha = repo.refs.get(f"refs/heads/{branch}")
        if sha is None and repo.refs:
            raise _ApiError(404, f"Branch {branch} not found")
        return branch, None if sha is None else repo.commits[sha]

    def _put_contents(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        path, body = call.args["path"].strip("/"), call.object_body()
        if not isinstance(body.get("message"), str):
            raise _invalid_request('"message" wasn\'t supplied.')
        if not isinstance(body.get("content"), str):
            raise _invalid_request('"content" wasn\'t supplied.')
        try:
            data = base64.b64decode(body["content"], validate=True)
        except (binascii.Error, ValueError):
            raise _invalid_request("content is not valid Base64") from None
        branch, head = self._branch_to_write(repo, body)
        files = dict(head.files) if head else {}
        if path in files:
            if "sha" not in body:
                raise _invalid_request('"sha" wasn\'t supplied.')
            if body["sha"] != _blob_sha(files[path]):
                raise _ApiError(409, f"{path} does not match {body['sha']}")
        elif not path or any(p.startswith(f"{path}/") for p in files):
            raise _ApiError(422, f"{path} is a directory")
        created = path not in files
        files[path] = data
        author = self._author(call.login(), body.get("author") or body.get("committer"))
        commit = self._commit(repo, [head.sha] if head else [], files, body["message"], author)
        repo.refs[f"refs/heads/{branch}"] = commit.sha
        content = self._content_json(repo, branch, path, commit, with_content=False)
        reply = {"content": content, "commit": self._git_commit_json(repo, commit)}
        return (201 if created else 200), {}, reply

    def _delete_contents(self, call: _Call) -> Answer:
        repo = self._repo_for(call, push=True)
        path, body = call.args["path"].strip("/"), call.object_body()
        if not isinstance(body.get("message"), str):
            raise _invalid_request('"message" wasn\'t supplied.')
        if not isinstance(body.get("sha"), str):
            raise _invalid_request('"sha" wasn\'t supplied.')
        branch, head = self._branch_to_write(repo, body)
        if head is None or path not in head.files:
            raise _not_found()
        if body["sha"] != _blob_sha(head.files[path]):
            raise _ApiError(409, f"{path} does not match {body['sha']}")
        files = {p: d for p, d in head.files.items() if p != path}
        author = self._author(call.login(), body.get("author") or body.get("committer"))
        commit = self._commit(repo, [head.sha], files, body["message"], author)
        repo.refs[f"refs/heads/{branch}"] = commit.sha
        return 200, {}, {"content": None, "commit": self._git_commit_json(repo, commit)}


Handler = Callable[["FakeGitHub", _Call], Answer]


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
