"""How a fake GitHub renders what it holds: the JSON GitHub answers with, every URL pointing back at the fake."""

from __future__ import annotations

from urllib.parse import quote

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.github.git import Git
from agentrein_testing.fakes.github.state import (
    Account,
    Comment,
    Commit,
    Issue,
    Label,
    Repo,
    blob_sha,
    node_id,
    sha_of,
    wrapped_base64,
)


class Shapes(Git):
    """GitHub's JSON for users, organisations, repositories, labels, issues, comments, pull
    requests, commits, refs and contents."""

    __slots__ = ()

    def _user_json(self, account: Account) -> JSON:
        url = f"{self._api}/users/{account.login}"
        return {
            "login": account.login,
            "id": account.id,
            "node_id": node_id(account.type, account.id),
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

    def _full_user_json(self, account: Account) -> JSON:
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

    def _org_json(self, org: Account) -> JSON:
        url = f"{self._api}/orgs/{org.login}"
        return {
            "login": org.login,
            "id": org.id,
            "node_id": node_id("Organization", org.id),
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

    def _repo_json(self, repo: Repo, user: Account | None) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        owner = self._user(repo.owner)
        open_issues = sum(1 for i in repo.issues.values() if i.state == "open")
        data: JSON = {
            "id": repo.id,
            "node_id": node_id("Repository", repo.id),
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

    def _head_files(self, repo: Repo) -> dict[str, bytes]:
        sha = repo.refs.get(f"refs/heads/{repo.default_branch}")
        return repo.commits[sha].files if sha else {}

    def _label_json(self, repo: Repo, label: Label) -> JSON:
        return {
            "id": label.id,
            "node_id": node_id("Label", label.id),
            "url": f"{self._api}/repos/{repo.full_name}/labels/{quote(label.name, safe='')}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def _association(self, repo: Repo, login: str) -> str:
        owner = self._user(repo.owner)
        if login.lower() == owner.login.lower():
            return "OWNER"
        if login.lower() in owner.members:
            return "MEMBER"
        return "COLLABORATOR" if login.lower() in repo.collaborators else "NONE"

    def _issue_json(self, repo: Repo, issue: Issue) -> JSON:
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
            "node_id": node_id("Issue", issue.id),
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

    def _comment_json(self, repo: Repo, comment: Comment) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        kind = "pull" if repo.issues[comment.issue_number].pull else "issues"
        return {
            "url": f"{api}/issues/comments/{comment.id}",
            "html_url": f"{web}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
            "issue_url": f"{api}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": node_id("IssueComment", comment.id),
            "user": self._user_json(self._user(comment.user)),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "author_association": self._association(repo, comment.user),
            "body": comment.body,
            "performed_via_github_app": None,
        }

    def _pull_part_json(self, repo: Repo, branch: str, sha: str) -> JSON:
        owner = self._user(repo.owner)
        return {
            "label": f"{owner.login}:{branch}",
            "ref": branch,
            "sha": sha,
            "user": self._user_json(owner),
            "repo": self._repo_json(repo, None),
        }

    def _pull_json(self, repo: Repo, issue: Issue) -> JSON:
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
            "node_id": node_id("PullRequest", pull.id),
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

    def _git_commit_json(self, repo: Repo, commit: Commit) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        return {
            "sha": commit.sha,
            "node_id": node_id("Commit", int(commit.sha[:8], 16)),
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

    def _commit_json(self, repo: Repo, commit: Commit) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        git = self._git_commit_json(repo, commit)
        del git["sha"], git["node_id"], git["html_url"], git["parents"]
        return {
            "sha": commit.sha,
            "node_id": node_id("Commit", int(commit.sha[:8], 16)),
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

    def _ref_json(self, repo: Repo, ref: str) -> JSON:
        api, sha = f"{self._api}/repos/{repo.full_name}", repo.refs[ref]
        return {
            "ref": ref,
            "node_id": node_id("Ref", int(sha_of(repo.full_name, ref)[:8], 16)),
            "url": f"{api}/git/{ref}",
            "object": {"sha": sha, "type": "commit", "url": f"{api}/git/commits/{sha}"},
        }

    def _content_json(self, repo: Repo, ref: str, path: str, commit: Commit, *, with_content: bool) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        data = commit.files.get(path)
        self_url = f"{api}/contents/{quote(path)}?ref={quote(ref, safe='')}"
        if data is None:  # a directory
            listing = sorted(p for p in commit.files if p.startswith(f"{path}/"))
            sha = sha_of("tree", *(f"{p} {blob_sha(commit.files[p])}" for p in listing))
            git_url, html_url, download = f"{api}/git/trees/{sha}", f"{web}/tree/{ref}/{path}", None
        else:
            sha = blob_sha(data)
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
            entry["content"] = wrapped_base64(data)
            entry["encoding"] = "base64"
        entry["_links"] = {"self": self_url, "git": git_url, "html": html_url}
        return entry
