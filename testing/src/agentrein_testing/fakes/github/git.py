"""Git in a fake GitHub: commits over a small graph of file snapshots, and three-way merges."""

from __future__ import annotations

import json
from typing import Any

from agentrein_testing.fakes.github.state import (
    Account,
    ApiError,
    Commit,
    GitHubState,
    Repo,
    blob_sha,
    sha_of,
    timestamp,
)


class Git(GitHubState):
    """Repositories' commits: made, walked, merged, and named by refs."""

    __slots__ = ()

    def _new_repo(self, owner: Account, name: str, private: bool, description: str | None, default_branch: str) -> Repo:
        now = timestamp()
        repo = Repo(self._next_id(), owner.login, name, private, description, default_branch, now, now)
        self._repos[repo.full_name.lower()] = repo
        return repo

    def _author(self, login: str, given: Any = None) -> dict[str, str]:
        if isinstance(given, dict) and isinstance(given.get("name"), str) and isinstance(given.get("email"), str):
            return {"name": given["name"], "email": given["email"], "date": timestamp()}
        account = self._user(login)
        email = account.email or f"{account.id}+{account.login}@users.noreply.github.com"
        return {"name": account.name or account.login, "email": email, "date": timestamp()}

    def _commit(
        self, repo: Repo, parents: list[str], files: dict[str, bytes], message: str, author: dict[str, str]
    ) -> Commit:
        tree = sha_of("tree", *(f"{p} {blob_sha(d)}" for p, d in sorted(files.items())))
        sha = sha_of("commit", tree, *parents, json.dumps(author), message, str(self._next_id()))
        commit = Commit(sha, tree, message, parents, files, author)
        repo.commits[sha] = commit
        repo.pushed_at = repo.updated_at = timestamp()
        return commit

    def _initial_commit(self, repo: Repo, files: dict[str, bytes], login: str) -> None:
        commit = self._commit(repo, [], files, "Initial commit", self._author(login))
        repo.refs[f"refs/heads/{repo.default_branch}"] = commit.sha

    def _ancestors(self, repo: Repo, sha: str) -> list[str]:
        """``sha`` and every commit it descends from, nearest first."""
        seen: list[str] = []
        queue = [sha]
        while queue:
            current = queue.pop(0)
            if current not in seen and current in repo.commits:
                seen.append(current)
                queue.extend(repo.commits[current].parents)
        return seen

    def _merged_files(self, repo: Repo, base_sha: str, head_sha: str) -> dict[str, bytes] | None:
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

    def _resolve(self, repo: Repo, ref: str | None) -> tuple[str, Commit]:
        """The branch (or tag, or commit sha) ``ref`` names, and its commit; the default branch if None."""
        name = ref or repo.default_branch
        for candidate in (f"refs/heads/{name}", f"refs/tags/{name}", name):
            sha = repo.refs.get(candidate)
            if sha is not None:
                return name, repo.commits[sha]
        if name in repo.commits:
            return name, repo.commits[name]
        if not repo.refs:
            raise ApiError(404, "This repository is empty.")
        raise ApiError(404, f"No commit found for the ref {name}")
