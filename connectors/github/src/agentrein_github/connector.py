"""The github connector: calls made through PyGithub's ``Github`` and the resource objects its calls return
(``Repository``, ``Issue``, ``PullRequest``, ``IssueComment``, ``GitRef``, ``Organization``,
``AuthenticatedUser``, ``ContentFile``), which the proxy wraps in turn; lazy attributes and ``PaginatedList``
keep working, and plain data passes through.

- Canonical names: ``issues.create``, ``issues.update``, ``issues.comments.create``, ``labels.add``,
  ``pulls.create``, ``pulls.merge``, ``git.refs.create``, ``files.create``, ``files.update``,
  ``repos.create``; other writes are ``<object>.<method>`` (``repository.create_label``), undo ``none``.
- GitHub has no idempotency keys and PyGithub retries POSTs on its own, so a create whose answer was lost
  would be made twice. A wrapped client must be made with ``retry=None`` (``wrap()`` refuses otherwise);
  AgentRein's retries then look for what a lost attempt made before trying again: issues and comments carry
  an invisible marker with the action's key (``<!-- agentrein:KEY -->``), pull requests and refs are found by
  their head or name when GitHub says they exist already.
- Inverses run as plain REST calls through the client's requester, with ``404`` counted as already undone.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from contextlib import suppress
from itertools import islice
from typing import Any, ClassVar

import github
from github.GithubException import GithubException, UnknownObjectException
from github.GithubObject import GithubObject
from github.PaginatedList import PaginatedList

from agentrein_core.connector import Connector, PreparedCall, merge_undo
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, UNDO_NONE, UndoConfig
from agentrein_core.statuses import OperationType

CLOSE_ISSUE = "github-close-issue"
RESTORE_ISSUE = "github-restore-issue"
DELETE_COMMENT = "github-delete-comment"
REMOVE_LABELS = "github-remove-labels"
CLOSE_PULL = "github-close-pull"
DELETE_REF = "github-delete-ref"
DELETE_FILE = "github-delete-file"
RESTORE_FILE = "github-restore-file"
DELETE_REPO = "github-delete-repo"

#: (object type, method) -> (canonical name, operation type)
CALLS: Mapping[tuple[str, str], tuple[str, OperationType]] = {
    ("Repository", "create_issue"): ("issues.create", OperationType.CREATE),
    ("Issue", "edit"): ("issues.update", OperationType.UPDATE),
    ("Issue", "create_comment"): ("issues.comments.create", OperationType.CREATE),
    ("Issue", "add_to_labels"): ("labels.add", OperationType.CREATE),
    ("Issue", "remove_from_labels"): ("labels.remove", OperationType.DELETE),
    ("Repository", "create_pull"): ("pulls.create", OperationType.CREATE),
    ("PullRequest", "merge"): ("pulls.merge", OperationType.OTHER),
    ("Repository", "create_git_ref"): ("git.refs.create", OperationType.CREATE),
    ("Repository", "create_file"): ("files.create", OperationType.CREATE),
    ("Repository", "update_file"): ("files.update", OperationType.UPDATE),
    ("AuthenticatedUser", "create_repo"): ("repos.create", OperationType.CREATE),
    ("Organization", "create_repo"): ("repos.create", OperationType.CREATE),
    ("Repository", "delete"): ("repos.delete", OperationType.DELETE),
}
#: Objects the proxy wraps in turn when a call returns them (so their calls are recorded too).
RESOURCES = frozenset(
    {"Repository", "Issue", "PullRequest", "IssueComment", "GitRef", "Organization", "AuthenticatedUser", "ContentFile"}
)
READ_PREFIXES = ("get_", "has_", "is_", "list_", "search_", "as_")
READS = frozenset({"complete", "update", "compare", "setCheckAfterInitFlag", "close", "raw_data", "raw_headers"})
ISSUE_FIELDS = ("title", "body", "state", "labels", "assignees")


class GitHubConnector(Connector):
    name: ClassVar[str] = "github"
    undo_types: ClassVar[frozenset[str]] = frozenset(
        {
            CLOSE_ISSUE,
            RESTORE_ISSUE,
            DELETE_COMMENT,
            REMOVE_LABELS,
            CLOSE_PULL,
            DELETE_REF,
            DELETE_FILE,
            RESTORE_FILE,
            DELETE_REPO,
        }
    )

    def accepts(self, client: Any) -> bool:
        """A ``Github``, or one of the resource objects it returns (a ``Repository`` say), made with
        ``retry=None``."""
        if not (isinstance(client, github.Github) or self.descend(client)) or isinstance(client, PaginatedList):
            return False
        if client.requester._Requester__retry:
            raise ValidationError(
                "client",
                "make the Github client with retry=None: PyGithub retries POSTs by itself, which can create an "
                "issue twice when an answer is lost; AgentRein retries the calls you list in `retryable` safely",
            )
        return True

    def descend(self, value: Any) -> bool:
        return isinstance(value, PaginatedList) or (
            isinstance(value, GithubObject) and type(value).__name__ in RESOURCES
        )

    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | None:
        if len(path) != 1:
            return None
        method_name = path[0]
        if method_name in READS or method_name.startswith(READ_PREFIXES) or method_name.startswith("_"):
            return None
        owner = "Github" if isinstance(client, github.Github) else type(client).__name__
        api_name, operation = CALLS.get((owner, method_name), (f"{owner.lower()}.{method_name}", OperationType.OTHER))
        method: Callable[..., Any] = getattr(client, method_name)
        context: dict[str, Any] = {"owner": client, "args": args, "kwargs": kwargs, "attempts": 0}
        if api_name == "issues.update":
            context["before"] = _issue_fields(client)
        if api_name == "files.update":
            path_arg = kwargs.get("path", args[0] if args else None)
            branch = kwargs.get("branch")
            current = client.get_contents(path_arg, ref=branch) if branch else client.get_contents(path_arg)
            context["before"] = current.decoded_content
        payload: JSON = {"args": [_plain(a) for a in args], "kwargs": {k: _plain(v) for k, v in kwargs.items()}}

        def run(key: str) -> Any:
            context["attempts"] += 1
            retry = context["attempts"] > 1
            if api_name in ("issues.create", "issues.comments.create"):
                return _create_once(client, method, api_name, args, kwargs, key, retry=retry)
            try:
                return method(*args, **kwargs)
            except GithubException as exc:
                # A retry told "already exists": the lost attempt made it; answer with what it made.
                made = _made_by_lost_attempt(client, api_name, args, kwargs) if retry and exc.status == 422 else None
                if made is None:
                    raise
                return made

        return PreparedCall(api_name=api_name, operation_type=operation, payload=payload, run=run, context=context)

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        data = _raw(result)
        return {k: v for k, v in data.items() if isinstance(v, str | int | float | bool) or v is None}

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        owner, context = call.context["owner"], call.context
        data = _raw(result)
        derived = UndoConfig(UNDO_NONE)
        name = call.api_name
        if name == "issues.create":
            derived = UndoConfig(CLOSE_ISSUE, {"repo": owner.full_name, "number": data["number"]})
        elif name == "issues.update":
            derived = UndoConfig(
                RESTORE_ISSUE, {"repo": _repo_of(owner), "number": owner.number, "fields": context["before"]}
            )
        elif name == "issues.comments.create":
            derived = UndoConfig(DELETE_COMMENT, {"repo": _repo_of(owner), "id": data["id"]})
        elif name == "labels.add":
            labels = [str(_plain(label)) for label in context["args"]]
            derived = UndoConfig(REMOVE_LABELS, {"repo": _repo_of(owner), "number": owner.number, "labels": labels})
        elif name == "pulls.create":
            derived = UndoConfig(CLOSE_PULL, {"repo": owner.full_name, "number": data["number"]})
        elif name == "git.refs.create":
            derived = UndoConfig(DELETE_REF, {"repo": owner.full_name, "ref": data["ref"]})
        elif name in ("files.create", "files.update"):
            path, branch = _file_target(context)
            params: JSON = {"repo": owner.full_name, "path": path, "branch": branch}
            if name == "files.create":
                derived = UndoConfig(DELETE_FILE, params)
            else:
                content = base64.b64encode(context["before"]).decode()
                derived = UndoConfig(RESTORE_FILE, {**params, "content": content})
        elif name == "repos.create":
            derived = UndoConfig(DELETE_REPO, {"repo": data["full_name"]}, require_approval=True)
        return merge_undo(derived, override)

    def check_undo(self, undo: UndoConfig) -> None:
        super().check_undo(undo)
        repo = undo.params.get("repo")
        if undo.type in self.undo_types and (not isinstance(repo, str) or repo.count("/") != 1):
            raise ValidationError("undo.repo", "a github undo names its repository as 'owner/name'")

    def is_transient(self, error: BaseException) -> bool:
        import requests

        if isinstance(error, requests.ConnectionError | requests.Timeout):
            return True
        return isinstance(error, GithubException) and error.status in (429, 500, 502, 503, 504)

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> None:
        if undo.type not in self.undo_types:
            super().run_undo(undo, client, idempotency_key)
            return
        requester = client.requester
        p = undo.params
        repo = f"/repos/{p['repo']}"
        try:
            if undo.type == CLOSE_ISSUE:
                requester.requestJsonAndCheck(
                    "PATCH", f"{repo}/issues/{p['number']}", input={"state": "closed", "state_reason": "not_planned"}
                )
            elif undo.type == RESTORE_ISSUE:
                requester.requestJsonAndCheck("PATCH", f"{repo}/issues/{p['number']}", input=p["fields"])
            elif undo.type == DELETE_COMMENT:
                requester.requestJsonAndCheck("DELETE", f"{repo}/issues/comments/{p['id']}")
            elif undo.type == REMOVE_LABELS:
                for label in p["labels"]:
                    _gone_is_fine(requester, "DELETE", f"{repo}/issues/{p['number']}/labels/{label}")
            elif undo.type == CLOSE_PULL:
                requester.requestJsonAndCheck("PATCH", f"{repo}/pulls/{p['number']}", input={"state": "closed"})
            elif undo.type == DELETE_REF:
                requester.requestJsonAndCheck("DELETE", f"{repo}/git/{p['ref']}")
            elif undo.type in (DELETE_FILE, RESTORE_FILE):
                _undo_file(requester, repo, p, idempotency_key)
            else:
                requester.requestJsonAndCheck("DELETE", repo)
        except UnknownObjectException:
            return  # already gone: the effect is undone

    def check_config(self, config: JSON, credentials: JSON) -> None:
        if set(config) - {"baseUrl"}:
            raise ValidationError("config", "the github connector takes only baseUrl (for GitHub Enterprise)")
        base = config.get("baseUrl")
        if base is not None and (not isinstance(base, str) or not base.startswith(("https://", "http://"))):
            raise ValidationError("config.baseUrl", "must be the http(s) address of the GitHub API")
        if set(credentials) != {"token"} or not isinstance(credentials["token"], str) or not credentials["token"]:
            raise ValidationError("credentials.token", "needs a GitHub token alone")

    def server_client(self, config: JSON, credentials: JSON) -> github.Github:
        options: dict[str, Any] = {"base_url": config["baseUrl"]} if config.get("baseUrl") else {}
        return github.Github(auth=github.Auth.Token(credentials["token"]), retry=None, **options)


def _create_once(
    client: Any,
    method: Callable[..., Any],
    api_name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str,
    *,
    retry: bool,
) -> Any:
    """Create an issue or comment carrying an invisible marker of ``key``; a retry first looks for the one a
    lost attempt made (GitHub has no idempotency keys)."""
    marker = f"<!-- agentrein:{key} -->"
    if retry:
        recent = (
            client.get_issues(state="all", sort="created", direction="desc")
            if api_name == "issues.create"
            else client.get_comments()
        )
        made = next((item for item in islice(recent, 50) if marker in (item.body or "")), None)
        if made is not None:
            return made
    if api_name == "issues.create":
        body = kwargs.get("body") or ""
        return method(*args, **{**kwargs, "body": f"{body}\n\n{marker}" if body else marker})
    body = kwargs.get("body", args[0] if args else "")
    return method(f"{body}\n\n{marker}", *args[1:], **{k: v for k, v in kwargs.items() if k != "body"})


def _made_by_lost_attempt(repo: Any, api_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What an earlier attempt of a pull request, ref or file create made, found by what names it."""
    bound = {**dict(zip(_POSITIONAL.get(api_name, ()), args, strict=False)), **kwargs}
    with suppress(GithubException):
        if api_name == "pulls.create":
            owner = repo.full_name.split("/")[0]
            pulls = repo.get_pulls(state="open", base=bound["base"], head=f"{owner}:{bound['head']}")
            return next(iter(pulls), None)
        if api_name == "git.refs.create":
            return repo.get_git_ref(str(bound["ref"]).removeprefix("refs/"))
        if api_name == "files.create":
            branch = bound.get("branch")
            content = repo.get_contents(bound["path"], ref=branch) if branch else repo.get_contents(bound["path"])
            return {"content": content}
    return None


_POSITIONAL = {
    "pulls.create": ("base", "head"),
    "git.refs.create": ("ref", "sha"),
    "files.create": ("path", "message", "content", "branch"),
}


def _undo_file(requester: Any, repo: str, p: Mapping[str, Any], key: str) -> None:
    params = {"ref": p["branch"]} if p.get("branch") else None
    _, current = requester.requestJsonAndCheck("GET", f"{repo}/contents/{p['path']}", parameters=params)
    body: JSON = {"message": f"AgentRein: undo ({key})", "sha": current["sha"]}
    if p.get("branch"):
        body["branch"] = p["branch"]
    if "content" in p:
        requester.requestJsonAndCheck("PUT", f"{repo}/contents/{p['path']}", input={**body, "content": p["content"]})
    else:
        requester.requestJsonAndCheck("DELETE", f"{repo}/contents/{p['path']}", input=body)


def _gone_is_fine(requester: Any, verb: str, url: str) -> None:
    with suppress(UnknownObjectException):
        requester.requestJsonAndCheck(verb, url)


def _issue_fields(issue: Any) -> JSON:
    return {
        "title": issue.title,
        "body": issue.body or "",
        "state": issue.state,
        "labels": [label.name for label in issue.labels],
        "assignees": [user.login for user in issue.assignees],
    }


def _file_target(context: Mapping[str, Any]) -> tuple[str, str | None]:
    args, kwargs = context["args"], context["kwargs"]
    path = kwargs.get("path", args[0] if args else "")
    return str(path), kwargs.get("branch")


def _repo_of(obj: Any) -> str:
    """``owner/name`` of the repository an issue or comment belongs to (from its API URL)."""
    parts = str(obj.url).split("/repos/", 1)[1].split("/")
    return f"{parts[0]}/{parts[1]}"


def _raw(value: Any) -> dict[str, Any]:
    if isinstance(value, GithubObject):
        return dict(value.raw_data)
    if isinstance(value, Mapping):  # create_file/update_file: {"content": ContentFile, "commit": Commit}
        content = value.get("content")
        return dict(content.raw_data) if isinstance(content, GithubObject) else {}
    return {}


def _plain(value: Any) -> Any:
    """What to record of an argument: a PyGithub object by its name or id, plain data as it is."""
    if isinstance(value, GithubObject):
        return getattr(value, "name", None) or getattr(value, "login", None) or str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | dict) or value is None else str(value)
