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
import inspect
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from itertools import islice
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import github
from attrs import frozen
from github.GithubException import GithubException, UnknownObjectException
from github.GithubObject import GithubObject
from github.PaginatedList import PaginatedList

from agentrein_core.connector import (
    JSON,
    NOT_RESTORED,
    UNDO_NONE,
    Action,
    Connector,
    OperationType,
    PreparedCall,
    Setting,
    SettingKind,
    Undoable,
    UndoConfig,
    UndoError,
    UndoOutlook,
    ValidationError,
    bind_call,
    merge_undo,
    not_undone,
    secret_fields,
    without_secrets,
)

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
#: Octokit's calls (``rest.issues.create`` or ``issues.create``) reported after they ran by the hosted product's
#: published npm SDK, which wraps Octokit, whose undo can be derived from the call and its response: the
#: canonical name of each, and the field of the response's ``data`` its undo names (what it made).
OCTOKIT_CREATES: Mapping[str, tuple[str, str]] = {
    "issues.create": ("issues.create", "number"),
    "pulls.create": ("pulls.create", "number"),
    "issues.createComment": ("issues.comments.create", "id"),
    "git.createRef": ("git.refs.create", "ref"),
}
#: The same calls by the name they are recorded under: a held call is confirmed by that name
#: (``PATCH /compat/sessions/{id}/actions/{actionId}``), its undo derived then.
OCTOKIT_RECORDED: Mapping[str, tuple[str, str]] = {name: (name, field) for name, field in OCTOKIT_CREATES.values()}
#: What each undo names besides its repository.
REQUIRED_PARAMS: Mapping[str, tuple[str, ...]] = {
    CLOSE_ISSUE: ("number",),
    RESTORE_ISSUE: ("number", "fields"),
    DELETE_COMMENT: ("id",),
    REMOVE_LABELS: ("number", "labels"),
    CLOSE_PULL: ("number",),
    DELETE_REF: ("ref",),
    DELETE_FILE: ("path",),
    RESTORE_FILE: ("path", "content"),
    DELETE_REPO: (),
}
#: How each call with an inverse is undone, in words, before it runs (the README's table).
UNDONE_BY: Mapping[str, str] = {
    "issues.create": "Close the issue it opens, as not planned",
    "issues.update": "Restore the fields of the issue it changes, as they were just before",
    "issues.comments.create": "Delete the comment it adds",
    "labels.add": "Remove the labels it adds (not those the issue had)",
    "pulls.create": "Close the pull request it opens",
    "git.refs.create": "Delete the ref it creates",
    "files.create": "Delete the file it creates",
    "files.update": "Restore the file as it was just before",
    "repos.create": "Delete the repository it creates, after a reviewer approves",
}
#: Why a call has no inverse, where there is more to say than that the connector has none.
NO_INVERSE: Mapping[str, str] = {
    "pulls.merge": "a merge cannot be taken back through GitHub's API",
    "repos.delete": "a deleted repository cannot be brought back",
}
#: The payload key that records the API URL of the object a call was made on (no PyGithub parameter has
#: this name), so that its record says where the call went: ``…/repos/acme/web/issues/12``.
TARGET = "target"
_REPO = re.compile(r"[\w.-]+/[\w.-]+")
_REF = re.compile(r"refs/(heads|tags)/[\w./-]+")
READ_PREFIXES = ("get_", "has_", "is_", "list_", "search_", "as_")
READS = frozenset({"complete", "update", "compare", "setCheckAfterInitFlag", "close"})
ISSUE_FIELDS = ("title", "body", "state", "labels", "assignees")


class GitHubConnector(Connector):
    name: ClassVar[str] = "github"
    #: Secrets set through the API (``create_secret(name, unencrypted_value)``), on top of the default list.
    sensitive_fields: ClassVar[frozenset[str]] = frozenset({"unencryptedvalue", "encryptedvalue"})
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
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "token",
            "Token",
            "The GitHub token undos are made with: write access to the repositories your agents change (and the "
            "delete_repo scope if they create repositories).",
            secret=True,
            required=True,
            example="ghp_…",
        ),
        Setting(
            "baseUrl",
            "API address",
            "The API address of a GitHub Enterprise server. Empty: github.com.",
            SettingKind.URL,
            example="https://github.example.com/api/v3",
        ),
    )

    def accepts(self, client: Any) -> bool:
        """A ``Github``, or one of the resource objects it returns (a ``Repository`` say), made with
        ``retry=None``."""
        if not isinstance(client, github.Github | GithubObject):
            return False
        if getattr(client.requester, "_Requester__retry", None):  # PyGithub keeps it private
            raise ValidationError(
                "client",
                "make the Github client with retry=None: PyGithub retries POSTs by itself, which can create an "
                "issue twice when an answer is lost; AgentRein retries the calls you list in `retryable` safely",
            )
        return True

    def descend(self, value: Any) -> bool:
        """Every PyGithub object (its writes are recorded, its reads pass through), and what lists them: a
        ``PaginatedList``, a slice of one, or a plain list of them (``get_page``, ``get_contents`` of a folder)."""
        if isinstance(value, GithubObject | PaginatedList) or type(value).__name__ == "_Slice":
            return True
        return isinstance(value, list) and bool(value) and all(isinstance(v, GithubObject) for v in value)

    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | None:
        *through, method_name = path
        if method_name in READS or method_name.startswith(READ_PREFIXES) or method_name.startswith("_"):
            return None
        target: Any = client
        for name in through:  # issue.repository.create_issue(...): the call is on the repository
            target = getattr(target, name)
        if not _is_pygithub(target):
            return None
        owner = "Github" if isinstance(target, github.Github) else type(target).__name__
        api_name, operation = CALLS.get((owner, method_name), (f"{owner.lower()}.{method_name}", OperationType.OTHER))
        call = _Call(getattr(target, method_name), args, kwargs)
        context: dict[str, Any] = {"owner": target, "named": call.named, "attempts": 0}

        def run(key: str) -> Any:
            context["attempts"] += 1
            retry = context["attempts"] > 1
            if not context.get("read_before"):  # just before the call (after any approval), once: a retry
                _read_before(target, api_name, call.named, context)  # would read the lost attempt's effect
                context["read_before"] = True
            if api_name in ("issues.create", "issues.comments.create"):
                return _create_once(target, call, api_name, key, retry=retry)
            try:
                return call.run()
            except GithubException as exc:
                # A retry told "already exists": the lost attempt made it; answer with what it made.
                made = _made_by_lost_attempt(target, api_name, call.named) if retry and exc.status == 422 else None
                if made is None:
                    raise
                return made

        payload = {k: _plain(v) for k, v in call.named.items()}
        url = getattr(target, "url", None) if not isinstance(target, github.Github) else None
        if isinstance(url, str) and TARGET not in payload:
            payload[TARGET] = url
        return PreparedCall(api_name=api_name, operation_type=operation, payload=payload, run=run, context=context)

    def recorded(self, path: tuple[str, ...], payload: Any, before: JSON | None = None) -> PreparedCall | None:
        """Octokit's creations of issues, pull requests, issue comments and refs (``{owner, repo, …}``, answered
        ``{status, data, …}``), by Octokit's path or by the name they are recorded under; other reported calls
        are recorded with no undo."""
        named = ".".join(path[1:] if path[:1] == ("rest",) else path)
        known = OCTOKIT_CREATES.get(named) or OCTOKIT_RECORDED.get(named)
        if known is None or not isinstance(payload, Mapping):
            return None
        name, made_by = known
        owner, repo = payload.get("owner"), payload.get("repo")
        if not isinstance(owner, str) or not isinstance(repo, str):
            return None

        def never_run(_key: str) -> Any:
            raise UndoError(f"{name} was reported after it ran; it is not run again")

        context = {"owner": _ReportedRepository(f"{owner}/{repo}"), "octokit": made_by}
        return PreparedCall(name, OperationType.CREATE, dict(payload), never_run, context=context)

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        data = _raw(result)
        return {k: v for k, v in data.items() if isinstance(v, str | int | float | bool) or v is None}

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        owner, context = call.context["owner"], call.context
        data = _raw(result)
        if context.get("octokit"):  # an Octokit response, as reported: the object is its data
            made = result.get("data") if isinstance(result, Mapping) else None
            data = dict(made) if isinstance(made, Mapping) else {}
        derived = UndoConfig(UNDO_NONE)
        name = call.api_name
        if context.get("octokit") and context["octokit"] not in data:
            pass  # a reported call whose response was not the object made: nothing names what to undo
        elif name == "issues.create":
            derived = UndoConfig(CLOSE_ISSUE, {"repo": owner.full_name, "number": data["number"]})
        elif name == "issues.update":
            fields, secret = without_secrets(context["before"], self.redactor)
            target = {"repo": _repo_of(owner), "number": owner.number}
            if fields:
                derived = UndoConfig(
                    RESTORE_ISSUE, {**target, "fields": fields, **({NOT_RESTORED: secret} if secret else {})}
                )
            else:
                derived = not_undone(f"{secret_fields(secret)}, so no undo can restore what it changed")
        elif name == "issues.comments.create":
            repo = owner.full_name if context.get("octokit") else _repo_of(owner)  # reported: by name
            derived = UndoConfig(DELETE_COMMENT, {"repo": repo, "id": data["id"]})
        elif name == "labels.add":
            already = context["had_labels"]  # only the labels the issue did not have are undone
            labels = [
                str(_plain(label)) for label in context["named"].get("labels", []) if _plain(label) not in already
            ]
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
                before: bytes = context["before"]
                # Checked as text: in base64, which the undo carries, a secret would pass redaction unseen.
                if without_secrets({"content": before.decode(errors="replace")}, self.redactor)[0]:
                    derived = UndoConfig(RESTORE_FILE, {**params, "content": base64.b64encode(before).decode()})
                else:  # its record cannot keep the file as it was
                    derived = not_undone(f"{secret_fields(['its content before'])}, so no undo can put it back")
        elif name == "repos.create":
            derived = UndoConfig(DELETE_REPO, {"repo": data["full_name"]}, require_approval=True)
        return merge_undo(derived, override)

    def check_undo(self, undo: UndoConfig) -> None:
        """An undo an agent sent names exactly one object of one repository: ids are numbers, refs are branch or
        tag refs, paths stay inside the repository, and deleting a repository waits for a human's approval."""
        super().check_undo(undo)
        if undo.type not in self.undo_types:
            return
        p = undo.params
        repo = p.get("repo")
        if not isinstance(repo, str) or not _REPO.fullmatch(repo) or {".", ".."} & set(repo.split("/")):
            raise ValidationError("undo.repo", "a github undo names its repository as 'owner/name'")
        for key in REQUIRED_PARAMS[undo.type]:
            if key not in p:
                raise ValidationError(f"undo.{key}", f"a {undo.type} undo needs {key!r}")
        for key in ("number", "id"):
            if key in p and (isinstance(p[key], bool) or not isinstance(p[key], int)):
                raise ValidationError(f"undo.{key}", "must be a number")
        if "ref" in p and (not isinstance(p["ref"], str) or not _REF.fullmatch(p["ref"]) or ".." in p["ref"]):
            raise ValidationError("undo.ref", "must be a branch or tag ref (refs/heads/… or refs/tags/…)")
        if "path" in p and (not isinstance(p["path"], str) or _escapes(p["path"])):
            raise ValidationError("undo.path", "must be a path inside the repository")
        if "labels" in p and not (isinstance(p["labels"], list) and all(isinstance(x, str) for x in p["labels"])):
            raise ValidationError("undo.labels", "must be a list of label names")
        if "fields" in p and not (isinstance(p["fields"], dict) and set(p["fields"]) <= set(ISSUE_FIELDS)):
            raise ValidationError("undo.fields", f"may restore only {', '.join(ISSUE_FIELDS)}")
        secret = p.get(NOT_RESTORED, [])  # read by reviewers: the names of issue fields, nothing else
        if not (isinstance(secret, list) and all(isinstance(x, str) and x in ISSUE_FIELDS for x in secret)):
            raise ValidationError(f"undo.{NOT_RESTORED}", f"names issue fields left out: {', '.join(ISSUE_FIELDS)}")
        if undo.type == DELETE_REPO and not undo.require_approval:
            raise ValidationError("undo.requireApproval", "deleting a repository always waits for a human's approval")

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
        repo = "/repos/" + "/".join(_segment(part) for part in p["repo"].split("/"))
        try:
            if undo.type == CLOSE_ISSUE:
                closed = {"state": "closed", "state_reason": "not_planned"}
                requester.requestJsonAndCheck("PATCH", f"{repo}/issues/{int(p['number'])}", input=closed)
            elif undo.type == RESTORE_ISSUE:
                requester.requestJsonAndCheck("PATCH", f"{repo}/issues/{int(p['number'])}", input=p["fields"])
            elif undo.type == DELETE_COMMENT:
                requester.requestJsonAndCheck("DELETE", f"{repo}/issues/comments/{int(p['id'])}")
            elif undo.type == REMOVE_LABELS:
                for label in p["labels"]:
                    _gone_is_fine(requester, "DELETE", f"{repo}/issues/{int(p['number'])}/labels/{_segment(label)}")
            elif undo.type == CLOSE_PULL:
                requester.requestJsonAndCheck("PATCH", f"{repo}/pulls/{int(p['number'])}", input={"state": "closed"})
            elif undo.type == DELETE_REF:
                requester.requestJsonAndCheck("DELETE", f"{repo}/git/{quote(p['ref'], safe='/')}")
            elif undo.type in (DELETE_FILE, RESTORE_FILE):
                _undo_file(requester, repo, p, idempotency_key)
            elif undo.type == DELETE_REPO:
                requester.requestJsonAndCheck("DELETE", repo)
        except UnknownObjectException:
            return  # already gone: the effect is undone

    def describe(self, action: Action) -> str:
        p, name = action.payload, action.api_name
        on = _place(p.get(TARGET))
        if name == "issues.create":
            return f"Create issue “{p.get('title', '')}” in {on}"
        if name == "issues.update":
            if p.get("state") == "closed":
                reason = {
                    "not_planned": " as not planned",
                    "completed": " as completed",
                    "duplicate": " as a duplicate",
                }
                return f"Close issue {on}{reason.get(str(p.get('state_reason')), '')}"
            if p.get("state") == "open":
                return f"Reopen issue {on}"
            return f"Edit issue {on}: {', '.join(sorted(k for k in p if k != TARGET))}"
        if name == "issues.comments.create":
            return f"Comment on issue {on}"
        if name in ("labels.add", "labels.remove"):
            labels = p.get("labels", [p.get("label")])
            listed = ", ".join(str(x) for x in labels) if isinstance(labels, list) else str(labels)
            plural = "s" if isinstance(labels, list) and len(labels) > 1 else ""
            if name == "labels.add":
                return f"Add label{plural} {listed} to issue {on}"
            return f"Remove label{plural} {listed} from issue {on}"
        if name == "pulls.create":
            return f"Open pull request “{p.get('title', '')}” from {p.get('head')} into {p.get('base')} in {on}"
        if name == "pulls.merge":
            return f"Merge pull request {on}"
        if name == "git.refs.create":
            return f"Create {_ref(str(p.get('ref', '')))} in {on}"
        if name in ("files.create", "files.update"):
            branch = f" on branch {p['branch']}" if isinstance(p.get("branch"), str) else ""
            return f"{'Create' if name == 'files.create' else 'Update'} file {p.get('path')} in {on}{branch}"
        if name == "repos.create":
            return f"Create repository {p.get('name')} for {on}"
        if name == "repos.delete":
            return f"Delete repository {on}"
        method = name.partition(".")[2].replace("_", " ")
        label = next((f" {p[k]}" for k in ("name", "title", "tag") if isinstance(p.get(k), str)), "")
        return f"{method.capitalize()}{label} on {on}"

    def describe_undo(self, action: Action) -> str:
        undo = action.undo
        if undo is None or undo.type not in self.undo_types:
            return NO_INVERSE.get(action.api_name, f"the github connector has no inverse for {action.api_name}")
        p = undo.params
        repo, issue = p.get("repo"), f"{p.get('repo')}#{p.get('number')}"
        branch = f" on branch {p['branch']}" if isinstance(p.get("branch"), str) else ""
        if undo.type == REMOVE_LABELS:
            labels = p.get("labels") or []
            if not labels:
                return f"Remove no label from issue {issue} (it had each of them before)"
            return f"Remove label{'s' if len(labels) > 1 else ''} {', '.join(map(str, labels))} from issue {issue}"
        fields = p["fields"] if isinstance(p.get("fields"), dict) else {}
        secret = p.get(NOT_RESTORED)
        unsaid = f" ({secret_fields(secret)}: not restored)" if isinstance(secret, list) and secret else ""
        said = {
            CLOSE_ISSUE: f"Close issue {issue} as not planned",
            RESTORE_ISSUE: f"Restore {', '.join(sorted(fields))} of issue {issue} as they were{unsaid}",
            DELETE_COMMENT: f"Delete comment {p.get('id')} in {repo}",
            CLOSE_PULL: f"Close pull request {issue}",
            DELETE_REF: f"Delete {_ref(str(p.get('ref', '')))} in {repo}",
            DELETE_FILE: f"Delete file {p.get('path')} in {repo}{branch}",
            RESTORE_FILE: f"Restore file {p.get('path')} in {repo}{branch} as it was",
            DELETE_REPO: f"Delete repository {repo}",
        }
        return said[undo.type]

    def foresee_undo(self, action: Action) -> UndoOutlook:
        how = UNDONE_BY.get(action.api_name)
        if how is None:
            return UndoOutlook(Undoable.NO, self.describe_undo(action))
        return UndoOutlook(Undoable.YES, how)

    def target_host(self, action: Action) -> str | None:
        target = action.payload.get(TARGET)
        if not isinstance(target, str):
            return None
        return urlsplit(target).netloc or None

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        if set(config) - {"baseUrl"}:
            raise ValidationError("config", "the github connector takes only baseUrl (for GitHub Enterprise)")
        base = config.get("baseUrl")
        if base is not None and (not isinstance(base, str) or not base.startswith(("https://", "http://"))):
            raise ValidationError("config.baseUrl", "must be the http(s) address of the GitHub API")
        if set(credentials) != {"token"} or not isinstance(credentials["token"], str) or not credentials["token"]:
            raise ValidationError("credentials.token", "needs a GitHub token alone")

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> github.Github:
        base = config.get("baseUrl")
        options: dict[str, Any] = {"base_url": base} if base else {}
        client = github.Github(auth=github.Auth.Token(credentials["token"]), retry=None, **options)
        if base:  # an address the organisation chose: reached only as checked while connecting
            from agentrein_github.pinned import pin

            pin(client.requester)
        return client


def _read_before(target: Any, api_name: str, named: Mapping[str, Any], context: dict[str, Any]) -> None:
    """What an update's undo restores, read fresh (a stale copy would undo someone else's change)."""
    if api_name == "issues.update":
        target.update()
        changed = set(named) & set(ISSUE_FIELDS)
        context["before"] = {k: v for k, v in _issue_fields(target).items() if k in changed}
    elif api_name == "labels.add":
        target.update()
        context["had_labels"] = {label.name for label in target.labels}
    elif api_name == "files.update":
        branch = named.get("branch")
        current = target.get_contents(named["path"], ref=branch) if branch else target.get_contents(named["path"])
        context["before"] = current.decoded_content


def _create_once(owner: Any, call: _Call, api_name: str, key: str, *, retry: bool) -> Any:
    """Create an issue or comment carrying an invisible marker of ``key``; a retry first looks for the one a
    lost attempt made (GitHub has no idempotency keys)."""
    marker = f"<!-- agentrein:{key} -->"
    if retry:
        # Issues newest first, the latest 50; an issue's comments come oldest first, so all of them.
        recent = (
            islice(owner.get_issues(state="all", sort="created", direction="desc"), 50)
            if api_name == "issues.create"
            else owner.get_comments()
        )
        made = next((item for item in recent if marker in (item.body or "")), None)
        if made is not None:
            return made
    body = call.named.get("body")
    return call.run(body=f"{body}\n\n{marker}" if isinstance(body, str) and body else marker)


def _made_by_lost_attempt(repo: Any, api_name: str, named: Mapping[str, Any]) -> Any:
    """What an earlier attempt of a pull request, ref or file create made, found by what names it."""
    with suppress(GithubException):
        # Only what matches the call is taken for its own: a human's pull request or ref of the same name is not.
        if api_name == "pulls.create":
            owner = repo.full_name.split("/")[0]
            pulls = repo.get_pulls(state="open", base=named["base"], head=f"{owner}:{named['head']}")
            return next((p for p in pulls if p.title == named.get("title")), None)
        if api_name == "git.refs.create":
            ref = repo.get_git_ref(str(named["ref"]).removeprefix("refs/"))
            return ref if ref.object.sha == named["sha"] else None
        if api_name == "repos.create":
            return repo.get_repo(named["name"])  # on the user or organisation the create was made on
        if api_name == "files.create":
            branch = named.get("branch")
            content = repo.get_contents(named["path"], ref=branch) if branch else repo.get_contents(named["path"])
            wanted = named["content"].encode() if isinstance(named["content"], str) else named["content"]
            return {"content": content} if content.decoded_content == wanted else None
    return None


class _Call:
    """A PyGithub method call with its arguments bound to their names (so what is recorded is named, and a
    positional ``branch`` or ``body`` is found where it was given)."""

    def __init__(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.method = method
        self.bound = bind_call(method, args, kwargs)
        parameters = self.bound.signature.parameters
        self.named: dict[str, Any] = {}
        for name, value in self.bound.arguments.items():
            if parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                self.named.update(value)
            else:
                self.named[name] = list(value) if parameters[name].kind is inspect.Parameter.VAR_POSITIONAL else value

    def run(self, **replaced: Any) -> Any:
        arguments = {**self.bound.arguments, **replaced}
        call = inspect.BoundArguments(self.bound.signature, arguments)
        return self.method(*call.args, **call.kwargs)


def _undo_file(requester: Any, repo: str, p: Mapping[str, Any], key: str) -> None:
    params = {"ref": p["branch"]} if p.get("branch") else None
    target = f"{repo}/contents/{quote(p['path'], safe='/')}"
    _, current = requester.requestJsonAndCheck("GET", target, parameters=params)
    body: JSON = {"message": f"AgentRein: undo ({key})", "sha": current["sha"]}
    if p.get("branch"):
        body["branch"] = p["branch"]
    if "content" in p:
        requester.requestJsonAndCheck("PUT", target, input={**body, "content": p["content"]})
    else:
        requester.requestJsonAndCheck("DELETE", target, input=body)


def _gone_is_fine(requester: Any, verb: str, url: str) -> None:
    with suppress(UnknownObjectException):
        requester.requestJsonAndCheck(verb, url)


def _segment(value: Any) -> str:
    """One path segment, quoted: a label called ``a/../b`` or ``#x`` stays a label."""
    return quote(str(value), safe="")


def _escapes(path: str) -> bool:
    return path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/"))


def _is_pygithub(value: Any) -> bool:
    return isinstance(value, github.Github | GithubObject)


def _issue_fields(issue: Any) -> JSON:
    return {
        "title": issue.title,
        "body": issue.body or "",
        "state": issue.state,
        "labels": [label.name for label in issue.labels],
        "assignees": [user.login for user in issue.assignees],
    }


def _file_target(context: Mapping[str, Any]) -> tuple[str, str | None]:
    named = context["named"]
    branch = named.get("branch")
    return str(named["path"]), branch if isinstance(branch, str) else None


@frozen
class _ReportedRepository:
    """The repository of a call reported by name (``owner/name``), as :meth:`GitHubConnector.undo_for` reads
    a PyGithub repository."""

    full_name: str


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


def _place(target: Any) -> str:
    """Where a call was made, from the API URL of its object: ``acme/web`` (a repository), ``acme/web#12`` (an
    issue or pull request), ``comment 5 in acme/web``, ``acme`` (an organisation), ``the signed-in user``."""
    path = urlsplit(target).path if isinstance(target, str) else ""
    if "/repos/" in path:
        parts = path.split("/repos/", 1)[1].split("/")
        repo, rest = "/".join(parts[:2]), parts[2:]
        if rest[:1] in (["issues"], ["pulls"]) and len(rest) == 2:
            return f"{repo}#{rest[1]}"
        if rest[:2] == ["issues", "comments"] and len(rest) == 3:
            return f"comment {rest[2]} in {repo}"
        return repo
    for prefix in ("/orgs/", "/users/"):
        if prefix in path:
            return path.split(prefix, 1)[1].split("/")[0]
    if path.endswith("/user"):
        return "the signed-in user"
    return "GitHub"


def _ref(ref: str) -> str:
    """``refs/heads/x`` -> ``branch x``, ``refs/tags/v1`` -> ``tag v1``."""
    for prefix, kind in (("refs/heads/", "branch"), ("refs/tags/", "tag")):
        if ref.startswith(prefix):
            return f"{kind} {ref.removeprefix(prefix)}"
    return f"ref {ref}"
