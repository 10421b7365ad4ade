"""The endpoints of branches, commits, git refs and file contents."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import quote

from agentrein_testing.fakes.base import JSON
from agentrein_testing.fakes.github.shapes import Shapes
from agentrein_testing.fakes.github.state import (
    Answer,
    ApiCall,
    ApiError,
    Commit,
    Repo,
    blob_sha,
    invalid,
    invalid_request,
    not_found,
)


class Contents(Shapes):
    """Branches, commits, refs, and files read, created, updated and deleted by their blob sha."""

    __slots__ = ()

    # branches, commits and refs ------------------------------------------------------------------------------------
    def _branch_json(self, repo: Repo, name: str) -> JSON:
        api, web = f"{self._api}/repos/{repo.full_name}", f"{self._api}/{repo.full_name}"
        return {
            "name": name,
            "commit": self._commit_json(repo, repo.commits[repo.refs[f"refs/heads/{name}"]]),
            "_links": {"self": f"{api}/branches/{quote(name)}", "html": f"{web}/tree/{name}"},
            "protected": False,
            "protection": {"enabled": False, "required_status_checks": {"enforcement_level": "off", "contexts": []}},
            "protection_url": f"{api}/branches/{quote(name)}/protection",
        }

    def _list_branches(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        names = sorted(r.removeprefix("refs/heads/") for r in repo.refs if r.startswith("refs/heads/"))
        return self._paged(call, [self._branch_json(repo, n) for n in names])

    def _get_branch(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        if f"refs/heads/{call.args['branch']}" not in repo.refs:
            raise ApiError(404, "Branch not found")
        return 200, {}, self._branch_json(repo, call.args["branch"])

    def _get_commit(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        try:
            _, commit = self._resolve(repo, call.args["ref"])
        except ApiError:
            raise ApiError(422, f"No commit found for SHA: {call.args['ref']}") from None
        return 200, {}, self._commit_json(repo, commit)

    def _get_git_commit(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        commit = repo.commits.get(call.args["sha"])
        if commit is None:
            raise not_found()
        return 200, {}, self._git_commit_json(repo, commit)

    def _list_refs(self, call: ApiCall, prefix: str = "refs/") -> Answer:
        repo = self._repo_for(call)
        if not repo.refs:
            raise ApiError(409, "Git Repository is empty.")
        refs = [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(prefix)]
        return self._paged(call, refs)

    def _get_ref(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        if not repo.refs:
            raise ApiError(409, "Git Repository is empty.")
        ref = f"refs/{call.args['ref']}"
        if ref not in repo.refs:
            raise not_found()
        return 200, {}, self._ref_json(repo, ref)

    def _get_refs_under(self, call: ApiCall) -> Answer:
        """``GET /git/refs/{ref}``: the ref itself when it exists, else the refs under it (404 when none)."""
        repo = self._repo_for(call)
        ref = f"refs/{call.args['ref']}"
        if ref in repo.refs:
            return 200, {}, self._ref_json(repo, ref)
        under = [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(f"{ref}/")]
        if not under:
            raise not_found()
        return 200, {}, under

    def _matching_refs(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        prefix = f"refs/{call.args['ref']}"
        return 200, {}, [self._ref_json(repo, r) for r in sorted(repo.refs) if r.startswith(prefix)]

    def _create_ref(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        body = call.object_body()
        ref, sha = body.get("ref"), body.get("sha")
        if not isinstance(ref, str):
            raise invalid("Reference", "ref", "missing_field")
        if not isinstance(sha, str):
            raise invalid("Reference", "sha", "missing_field")
        if ref.count("/") < 2:
            raise ApiError(422, "Reference name must contain at least three slash-separated components.")
        if not ref.startswith("refs/") or "//" in ref or ref.endswith("/") or " " in ref:
            raise ApiError(422, f"{ref} is not a valid ref name.")
        if sha not in repo.commits:
            raise ApiError(422, "Object does not exist")
        if ref in repo.refs:
            raise ApiError(422, "Reference already exists")
        repo.refs[ref] = sha
        json_ = self._ref_json(repo, ref)
        return 201, {"Location": json_["url"]}, json_

    def _update_ref(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        ref = f"refs/{call.args['ref']}"
        body = call.object_body()
        sha = body.get("sha")
        if ref not in repo.refs:
            raise ApiError(422, "Reference does not exist")
        if not isinstance(sha, str) or sha not in repo.commits:
            raise ApiError(422, "Object does not exist")
        if not body.get("force") and repo.refs[ref] not in self._ancestors(repo, sha):
            raise ApiError(422, "Update is not a fast forward")
        repo.refs[ref] = sha
        return 200, {}, self._ref_json(repo, ref)

    def _delete_ref(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        ref = f"refs/{call.args['ref']}"
        if ref not in repo.refs:
            raise ApiError(422, "Reference does not exist")
        del repo.refs[ref]
        return 204, {}, None

    # contents ------------------------------------------------------------------------------------------------------
    def _get_contents(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call)
        path = call.args["path"].strip("/")
        ref, commit = self._resolve(repo, call.query.get("ref"))
        if path in commit.files:
            return 200, {}, self._content_json(repo, ref, path, commit, with_content=True)
        prefix = f"{path}/" if path else ""
        children = sorted({p[len(prefix) :].split("/", 1)[0] for p in commit.files if p.startswith(prefix)})
        if not children:
            raise not_found()
        return 200, {}, [self._content_json(repo, ref, prefix + c, commit, with_content=False) for c in children]

    def _branch_to_write(self, repo: Repo, body: JSON) -> tuple[str, Commit | None]:
        branch = body.get("branch") or repo.default_branch
        if not isinstance(branch, str):
            raise invalid_request('"branch" is not a string.')
        sha = repo.refs.get(f"refs/heads/{branch}")
        if sha is None and repo.refs:
            raise ApiError(404, f"Branch {branch} not found")
        return branch, None if sha is None else repo.commits[sha]

    def _put_contents(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        path, body = call.args["path"].strip("/"), call.object_body()
        if not isinstance(body.get("message"), str):
            raise invalid_request('"message" wasn\'t supplied.')
        if not isinstance(body.get("content"), str):
            raise invalid_request('"content" wasn\'t supplied.')
        try:
            data = base64.b64decode(body["content"], validate=True)
        except (binascii.Error, ValueError):
            raise invalid_request("content is not valid Base64") from None
        branch, head = self._branch_to_write(repo, body)
        files = dict(head.files) if head else {}
        if path in files:
            if "sha" not in body:
                raise invalid_request('"sha" wasn\'t supplied.')
            if body["sha"] != blob_sha(files[path]):
                raise ApiError(409, f"{path} does not match {body['sha']}")
        elif not path or any(p.startswith(f"{path}/") for p in files):
            raise ApiError(422, f"{path} is a directory")
        created = path not in files
        files[path] = data
        author = self._author(call.login(), body.get("author") or body.get("committer"))
        commit = self._commit(repo, [head.sha] if head else [], files, body["message"], author)
        repo.refs[f"refs/heads/{branch}"] = commit.sha
        content = self._content_json(repo, branch, path, commit, with_content=False)
        reply = {"content": content, "commit": self._git_commit_json(repo, commit)}
        return (201 if created else 200), {}, reply

    def _delete_contents(self, call: ApiCall) -> Answer:
        repo = self._repo_for(call, push=True)
        path, body = call.args["path"].strip("/"), call.object_body()
        if not isinstance(body.get("message"), str):
            raise invalid_request('"message" wasn\'t supplied.')
        if not isinstance(body.get("sha"), str):
            raise invalid_request('"sha" wasn\'t supplied.')
        branch, head = self._branch_to_write(repo, body)
        if head is None or path not in head.files:
            raise not_found()
        if body["sha"] != blob_sha(head.files[path]):
            raise ApiError(409, f"{path} does not match {body['sha']}")
        files = {p: d for p, d in head.files.items() if p != path}
        author = self._author(call.login(), body.get("author") or body.get("committer"))
        commit = self._commit(repo, [head.sha], files, body["message"], author)
        repo.refs[f"refs/heads/{branch}"] = commit.sha
        return 200, {}, {"content": None, "commit": self._git_commit_json(repo, commit)}
