"""The endpoints of users, organisations and repositories."""

from __future__ import annotations

import re

from agentrein_testing.fakes.github.shapes import Shapes
from agentrein_testing.fakes.github.state import Account, Answer, ApiCall, ApiError, invalid, not_found, timestamp


class Repositories(Shapes):
    """``/user``, ``/users``, ``/orgs`` and ``/repos/{owner}/{repo}`` itself."""

    __slots__ = ()

    # users and organisations ---------------------------------------------------------------------------------------
    def _get_user(self, call: ApiCall) -> Answer:
        if call.user is None:
            raise ApiError(401, "Requires authentication")
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

    def _get_named_user(self, call: ApiCall) -> Answer:
        account = self._accounts.get(call.args["login"].lower())
        if account is None:
            raise not_found()
        return 200, {}, self._full_user_json(account)

    def _list_repos_of(self, call: ApiCall, owner: str) -> Answer:
        repos = [
            self._repo_json(r, call.user)
            for r in sorted(self._repos.values(), key=lambda r: r.full_name.lower())
            if r.owner.lower() == owner.lower() and (not r.private or self._can_push(r, call.user))
        ]
        return self._paged(call, repos)

    def _list_own_repos(self, call: ApiCall) -> Answer:
        if call.user is None:
            raise ApiError(401, "Requires authentication")
        return self._list_repos_of(call, call.user.login)

    def _list_user_repos(self, call: ApiCall) -> Answer:
        if call.args["login"].lower() not in self._accounts:
            raise not_found()
        return self._list_repos_of(call, call.args["login"])

    def _get_org(self, call: ApiCall) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise not_found()
        return 200, {}, self._org_json(org)

    def _list_org_repos(self, call: ApiCall) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise not_found()
        return self._list_repos_of(call, org.login)

    # repositories --------------------------------------------------------------------------------------------------
    def _create_repo_for(self, call: ApiCall, owner: Account) -> Answer:
        body = call.object_body()
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ApiError(
                422,
                "Repository creation failed.",
                [{"resource": "Repository", "code": "missing_field", "field": "name"}],
            )
        name = re.sub(r"[^A-Za-z0-9._-]", "-", name.strip())
        if f"{owner.login}/{name}".lower() in self._repos:
            error = {"resource": "Repository", "code": "custom", "field": "name"}
            error["message"] = "name already exists on this account"
            raise ApiError(422, "Repository creation failed.", [error])
        description = body.get("description")
        repo = self._new_repo(owner, name, bool(body.get("private", False)), description, "main")
        repo.homepage = body.get("homepage")
        repo.has_issues = bool(body.get("has_issues", True))
        if body.get("auto_init"):
            readme = f"# {name}\n" + (f"{description}\n" if description else "")
            self._initial_commit(repo, {"README.md": readme.encode()}, call.login())
        url = f"{self._api}/repos/{repo.full_name}"
        return 201, {"Location": url}, self._repo_json(repo, call.user)

    def _create_user_repo(self, call: ApiCall) -> Answer:
        return self._create_repo_for(call, self._user(call.login()))

    def _create_org_repo(self, call: ApiCall) -> Answer:
        org = self._accounts.get(call.args["org"].lower())
        if org is None or org.type != "Organization":
            raise not_found()
        if call.login().lower() not in org.members:
            raise ApiError(403, "You need admin access to the organization before adding a repository to it.")
        return self._create_repo_for(call, org)

    def _get_repo(self, call: ApiCall) -> Answer:
        return 200, {}, self._repo_json(self._repo_for(call), call.user)

    def _get_repo_by_id(self, call: ApiCall) -> Answer:
        for repo in self._repos.values():
            if str(repo.id) == call.args["id"] and (not repo.private or self._can_push(repo, call.user)):
                return 200, {}, self._repo_json(repo, call.user)
        raise not_found()

    def _edit_repo(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, admin=True)
        body = call.object_body()
        if "default_branch" in body:
            if f"refs/heads/{body['default_branch']}" not in repo.refs:
                raise invalid("Repository", "default_branch")
            repo.default_branch = body["default_branch"]
        if "description" in body:
            repo.description = body["description"]
        if "homepage" in body:
            repo.homepage = body["homepage"]
        if "private" in body:
            repo.private = bool(body["private"])
        if "has_issues" in body:
            repo.has_issues = bool(body["has_issues"])
        repo.updated_at = timestamp()
        return 200, {}, self._repo_json(repo, call.user)

    def _delete_repo(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, admin=True)
        del self._repos[repo.full_name.lower()]
        return 204, {}, None
