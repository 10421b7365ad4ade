"""The endpoints of issues, their comments and labels, and pull requests."""

from __future__ import annotations

import re

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.github.shapes import Shapes
from agentrein_testing.fakes.github.state import (
    Answer,
    ApiCall,
    ApiError,
    Comment,
    Issue,
    Label,
    Pull,
    Repo,
    custom_invalid,
    invalid,
    not_found,
    timestamp,
)


class Issues(Shapes):
    """Issues, comments, labels and pull requests (merged into their base for real)."""

    __slots__ = ()

    # issues --------------------------------------------------------------------------------------------------------
    def _list_issues(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        if not repo.has_issues:
            raise ApiError(410, "Issues are disabled for this repo")
        state = call.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise invalid("Issue", "state")
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

        def key(issue: Issue) -> tuple[str, int]:
            if sort == "comments":
                return f"{sum(1 for c in repo.comments.values() if c.issue_number == issue.number):09d}", issue.number
            return (issue.updated_at if sort == "updated" else issue.created_at), issue.number

        issues.sort(key=key, reverse=call.query.get("direction", "desc") != "asc")
        return self._paged(call, [self._issue_json(repo, i) for i in issues])

    def _create_issue(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        if not repo.has_issues:
            raise ApiError(410, "Issues are disabled for this repo")
        body = call.object_body()
        title = body.get("title")
        if isinstance(title, int) and not isinstance(title, bool):
            title = str(title)
        if not isinstance(title, str) or not title.strip():
            raise invalid("Issue", "title", "missing_field")
        text = body.get("body")
        if text is not None and not isinstance(text, str):
            raise invalid("Issue", "body")
        pusher = self._can_push(repo, call.user)
        assignees = body.get("assignees", [body["assignee"]] if body.get("assignee") else [])
        assignees = self._assignees(assignees, "Issue") if pusher else []  # silently dropped without push access
        labels = self._label_names(repo, body.get("labels", [])) if pusher else []
        now = timestamp()
        number = max(repo.issues, default=0) + 1
        issue = Issue(self._next_id(), number, title, text, call.login(), now, now, labels, assignees)
        repo.issues[number] = issue
        json_ = self._issue_json(repo, issue)
        return 201, {"Location": json_["url"]}, json_

    def _get_issue(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        return 200, {}, self._issue_json(repo, self._issue_for(repo, call))

    def _edit_issue(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        pusher = self._can_push(repo, call.user)
        if not pusher and issue.user.lower() != call.login().lower():
            raise ApiError(403, "Must have push access to repository")
        self._apply_issue_edit(repo, issue, call.object_body(), call.login(), pusher)
        return 200, {}, self._issue_json(repo, issue)

    def _apply_issue_edit(self, repo: Repo, issue: Issue, body: JSON, login: str, pusher: bool) -> None:
        resource = "PullRequest" if issue.pull else "Issue"
        if "title" in body and (not isinstance(body["title"], str) or not body["title"].strip()):
            raise invalid(resource, "title", "missing_field")
        if "body" in body and body["body"] is not None and not isinstance(body["body"], str):
            raise invalid(resource, "body")
        state = body.get("state")
        if state is not None and state not in ("open", "closed"):
            raise invalid(resource, "state")
        reason = body.get("state_reason")
        if reason is not None and reason not in ("completed", "not_planned", "reopened"):
            raise invalid(resource, "state_reason")
        if state == "open" and issue.pull is not None and issue.pull.merged_at is not None:
            raise custom_invalid("PullRequest", "state cannot be changed. The pull request has been merged.")
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
        issue.updated_at = timestamp()

    # comments ------------------------------------------------------------------------------------------------------
    def _list_issue_comments(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        found = sorted((c for c in repo.comments.values() if c.issue_number == issue.number), key=lambda c: c.id)
        return self._paged(call, [self._comment_json(repo, c) for c in found])

    def _list_repo_comments(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        found = sorted(repo.comments.values(), key=lambda c: c.id)
        return self._paged(call, [self._comment_json(repo, c) for c in found])

    def _create_comment(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        text = call.object_body().get("body")
        if not isinstance(text, str) or not text.strip():
            raise invalid("IssueComment", "body", "missing_field")
        now = timestamp()
        comment = Comment(self._next_id(), issue.number, text, call.login(), now, now)
        repo.comments[comment.id] = comment
        issue.updated_at = now
        json_ = self._comment_json(repo, comment)
        return 201, {"Location": json_["url"]}, json_

    def _comment_for(self, repo: Repo, call: ApiCall, *, write: bool = False) -> Comment:
        comment = repo.comments.get(int(call.args["id"]))
        if comment is None:
            raise not_found()
        if write and comment.user.lower() != call.login().lower() and not self._can_push(repo, call.user):
            raise ApiError(403, "Must have push access to repository")
        return comment

    def _get_comment(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        return 200, {}, self._comment_json(repo, self._comment_for(repo, call))

    def _edit_comment(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        comment = self._comment_for(repo, call, write=True)
        text = call.object_body().get("body")
        if not isinstance(text, str) or not text.strip():
            raise invalid("IssueComment", "body", "missing_field")
        comment.body, comment.updated_at = text, timestamp()
        return 200, {}, self._comment_json(repo, comment)

    def _delete_comment(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        comment = self._comment_for(repo, call, write=True)
        del repo.comments[comment.id]
        return 204, {}, None

    # labels --------------------------------------------------------------------------------------------------------
    def _issue_labels_reply(self, repo: Repo, issue: Issue) -> Answer:
        return 200, {}, [self._label_json(repo, repo.labels[key]) for key in issue.labels]

    def _list_issue_labels(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue = self._issue_for(repo, call)
        return self._paged(call, [self._label_json(repo, repo.labels[key]) for key in issue.labels])

    def _add_issue_labels(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        for key in self._label_names(repo, call.body):
            if key not in issue.labels:
                issue.labels.append(key)
        issue.updated_at = timestamp()
        return self._issue_labels_reply(repo, issue)

    def _set_issue_labels(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        issue.labels, issue.updated_at = self._label_names(repo, call.body or []), timestamp()
        return self._issue_labels_reply(repo, issue)

    def _clear_issue_labels(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        issue.labels, issue.updated_at = [], timestamp()
        return 204, {}, None

    def _remove_issue_label(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        issue = self._issue_for(repo, call)
        key = call.args["name"].lower()
        if key not in issue.labels:
            raise ApiError(404, "Label does not exist")
        issue.labels.remove(key)
        issue.updated_at = timestamp()
        return self._issue_labels_reply(repo, issue)

    def _list_labels(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        labels = sorted(repo.labels.values(), key=lambda label: label.name.lower())
        return self._paged(call, [self._label_json(repo, label) for label in labels])

    def _create_label(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        name, color = body.get("name"), str(body.get("color", "ededed")).lstrip("#")
        if not isinstance(name, str) or not name.strip():
            raise invalid("Label", "name", "missing_field")
        if name.lower() in repo.labels:
            raise invalid("Label", "name", "already_exists")
        if not re.fullmatch(r"[0-9a-fA-F]{6}", color):
            raise invalid("Label", "color")
        label = Label(self._next_id(), name, color.lower(), body.get("description"))
        repo.labels[name.lower()] = label
        json_ = self._label_json(repo, label)
        return 201, {"Location": json_["url"]}, json_

    def _get_label(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        label = repo.labels.get(call.args["name"].lower())
        if label is None:
            raise not_found()
        return 200, {}, self._label_json(repo, label)

    def _delete_label(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        key = call.args["name"].lower()
        if key not in repo.labels:
            raise not_found()
        del repo.labels[key]
        for issue in repo.issues.values():
            if key in issue.labels:
                issue.labels.remove(key)
        return 204, {}, None

    # pull requests -------------------------------------------------------------------------------------------------
    def _list_pulls(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        state = call.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise invalid("PullRequest", "state")
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

    def _create_pull(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        for name in ("head", "base"):
            if not isinstance(body.get(name), str) or not body[name]:
                raise invalid("PullRequest", name, "missing_field")
        head_owner, _, head = body["head"].rpartition(":")
        if head_owner and head_owner.lower() != repo.owner.lower():
            raise invalid("PullRequest", "head")  # forks are not modelled
        base = body["base"]
        existing = repo.issues.get(body["issue"]) if isinstance(body.get("issue"), int) else None
        if "issue" in body and (existing is None or existing.pull is not None):
            raise invalid("PullRequest", "issue")
        title = body.get("title")
        if existing is None and (not isinstance(title, str) or not title.strip()):
            raise invalid("PullRequest", "title", "missing_field")
        if f"refs/heads/{base}" not in repo.refs:
            raise invalid("PullRequest", "base")
        if f"refs/heads/{head}" not in repo.refs:
            raise invalid("PullRequest", "head")
        head_sha, base_sha = repo.refs[f"refs/heads/{head}"], repo.refs[f"refs/heads/{base}"]
        if head_sha in self._ancestors(repo, base_sha):
            raise custom_invalid("PullRequest", f"No commits between {base} and {head}")
        for other in repo.issues.values():
            if other.pull and other.state == "open" and (other.pull.head, other.pull.base) == (head, base):
                raise custom_invalid("PullRequest", f"A pull request already exists for {repo.owner}:{head}.")
        pull = Pull(self._next_id(), head, base, head_sha, bool(body.get("draft", False)))
        pull.maintainer_can_modify = bool(body.get("maintainer_can_modify", False))
        if existing is not None:
            existing.pull, existing.updated_at = pull, timestamp()
            issue = existing
        else:
            now = timestamp()
            number = max(repo.issues, default=0) + 1
            issue = Issue(self._next_id(), number, str(title), body.get("body"), call.login(), now, now, pull=pull)
            repo.issues[number] = issue
        json_ = self._pull_json(repo, issue)
        return 201, {"Location": json_["url"]}, json_

    def _get_pull(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue, _ = self._pull_for(repo, call)
        return 200, {}, self._pull_json(repo, issue)

    def _edit_pull(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        issue, pull = self._pull_for(repo, call)
        pusher = self._can_push(repo, call.user)
        if not pusher and issue.user.lower() != call.login().lower():
            raise ApiError(403, "Must have push access to repository")
        body = call.object_body()
        if "base" in body:
            if not isinstance(body["base"], str) or f"refs/heads/{body['base']}" not in repo.refs:
                raise invalid("PullRequest", "base")
            pull.base = body["base"]
        if "maintainer_can_modify" in body:
            pull.maintainer_can_modify = bool(body["maintainer_can_modify"])
        edit = {k: v for k, v in body.items() if k in ("title", "body", "state", "labels", "assignees")}
        self._apply_issue_edit(repo, issue, edit, call.login(), pusher)
        return 200, {}, self._pull_json(repo, issue)

    def _pull_merged(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        _, pull = self._pull_for(repo, call)
        if pull.merged_at is None:
            raise not_found()
        return 204, {}, None

    def _merge_pull(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        issue, pull = self._pull_for(repo, call)
        body = call.object_body()
        method = body.get("merge_method", "merge")
        if method not in ("merge", "squash", "rebase"):
            raise invalid("PullRequest", "merge_method")
        head_sha = repo.refs.get(f"refs/heads/{pull.head}")
        base_sha = repo.refs.get(f"refs/heads/{pull.base}")
        if issue.state != "open" or pull.merged_at is not None or head_sha is None or base_sha is None:
            raise ApiError(405, "Pull Request is not mergeable")
        if "sha" in body and body["sha"] != head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        files = self._merged_files(repo, base_sha, head_sha)
        if files is None:
            raise ApiError(405, "Pull Request is not mergeable")
        title = body.get("commit_title") or (
            f"{issue.title} (#{issue.number})"
            if method == "squash"
            else f"Merge pull request #{issue.number} from {repo.owner}/{pull.head}"
        )
        message = f"{title}\n\n{body['commit_message']}" if body.get("commit_message") else title
        parents = [base_sha, head_sha] if method == "merge" else [base_sha]
        commit = self._commit(repo, parents, files, message, self._author(call.login()))
        repo.refs[f"refs/heads/{pull.base}"] = commit.sha
        pull.merged_at, pull.merged_by, pull.merge_commit_sha = timestamp(), call.login(), commit.sha
        pull.head_sha = head_sha
        self._close(issue, call.login(), "completed")
        return 200, {}, {"sha": commit.sha, "merged": True, "message": "Pull Request successfully merged"}
