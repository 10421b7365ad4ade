"""The github connector keeps the connector contract (agentrein_testing), against the fake of GitHub. GitHub
has no idempotency keys: the key travels as the marker a create leaves in what it makes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import github
import pytest
import requests
from github.GithubException import GithubException, UnknownObjectException

from agentrein_core.connector import Connector
from agentrein_core.statuses import OperationType
from agentrein_github import GitHubConnector
from agentrein_testing import ConnectorContract, FakeGitHub, Sample

CREATE = Sample(
    ("create_issue",),
    kwargs={"title": "Checkout is slow"},
    api_name="issues.create",
    operation_type=OperationType.CREATE,
    undo_type="github-close-issue",
)
MARKER = re.compile(r"<!-- agentrein:(\S+) -->")


class TestGitHubConnector(ConnectorContract):
    samples = (
        CREATE,
        Sample(
            ("create_pull",),
            kwargs={"title": "Speed up checkout", "head": "fast-checkout", "base": "main"},
            api_name="pulls.create",
            operation_type=OperationType.CREATE,
            undo_type="github-close-pull",
        ),
        Sample(
            ("create_label",),
            args=("bug", "ff0000"),
            api_name="repository.create_label",
            operation_type=OperationType.OTHER,
        ),
        Sample(("get_issues",)),
        Sample(("get_branch",), args=("main",)),
    )
    create = CREATE
    secret = Sample(
        ("create_label",),
        kwargs={"name": "billing", "color": "ff0000", "description": "4242424242424242"},
        api_name="repository.create_label",
    )
    secret_value = "4242424242424242"
    transient_errors = (requests.ConnectionError("reset"), GithubException(502, {"message": "Bad Gateway"}))
    permanent_errors = (GithubException(422, {"message": "Validation Failed"}), UnknownObjectException(404))

    @pytest.fixture
    def connector(self) -> Connector:
        return GitHubConnector()

    @pytest.fixture
    def service(self) -> Iterator[FakeGitHub]:
        fake = FakeGitHub(token="ghp_test")
        fake.add_repo("acme", "shop")
        with fake.running() as running:
            yield running

    @pytest.fixture
    def client(self, service: FakeGitHub) -> Any:
        gh = github.Github(
            auth=github.Auth.Token("ghp_test"),
            base_url=service.base_url,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        repo = gh.get_repo("acme/shop")
        main = repo.get_branch("main").commit.sha
        repo.create_git_ref("refs/heads/fast-checkout", main)
        repo.create_file("speed.txt", "faster", "speed", branch="fast-checkout")
        return repo

    def exists(self, service: Any, result: Any) -> bool:
        return any(i["number"] == result.number for i in service.issues("acme", "shop", state="open"))

    def count(self, service: Any) -> int:
        return len(service.issues("acme", "shop"))

    def lose_next_answer(self, service: Any) -> None:
        service.fail_next("POST", "/repos/acme/shop/issues", status=502, after_effect=True)

    def idempotency_keys(self, service: Any) -> list[str | None]:
        bodies = [c.body.get("body") or "" for c in service.calls("POST") if isinstance(c.body, dict)]
        return [m.group(1) if (m := MARKER.search(body)) else None for body in bodies]
