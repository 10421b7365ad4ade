"""The pytest plugin of agentrein-testing: installing the distribution registers it (entry point ``pytest11``), so
every test can ask for these fixtures without importing anything.

``agentrein``
    An embedded :class:`~agentrein.AgentRein` on ``agentrein_database_url``, in an organisation of its own,
    journaling to ``agentrein_journal_path``; closed after the test.
``agentrein_database_url``
    Where ``agentrein`` and the :class:`~agentrein_testing.ConnectorContract` record: a new SQLite file in the
    test's ``tmp_path``. Override it in your ``conftest.py`` to test on another database.
``agentrein_journal_path``
    Where the SDK journals calls made while AgentRein is unavailable: a file in the test's ``tmp_path``.
``fake_stripe``
    A running :class:`~agentrein_testing.FakeStripe`: ``stripe.StripeClient("sk_test_...",
    base_addresses={"api": fake_stripe.base_url}, max_network_retries=0)``.
``fake_github``
    A running :class:`~agentrein_testing.FakeGitHub` where the token ``ghp_test`` is ``octocat``: seed it with
    ``fake_github.add_repo("acme", "shop")``, then ``github.Github(auth=github.Auth.Token("ghp_test"),
    base_url=fake_github.base_url)``.
``fake_http_service``
    A running :class:`~agentrein_testing.FakeService`, a REST service under ``/v1/<collection>`` for an
    ``httpx.Client(base_url=fake_http_service.base_url)``.

Each fake serves on 127.0.0.1 only and is stopped after the test; ``fail_next``, ``hold`` and ``calls`` inject
faults, hold requests and show what the fake received.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrein import AgentRein
from agentrein_testing.fakes.github import FakeGitHub
from agentrein_testing.fakes.service import FakeService
from agentrein_testing.fakes.stripe import FakeStripe


@pytest.fixture
def agentrein_database_url(tmp_path: Path) -> str:
    """Where AgentRein records for this test: a new SQLite file in ``tmp_path`` (override to use another)."""
    return f"sqlite:///{tmp_path / 'agentrein.db'}"


@pytest.fixture
def agentrein_journal_path(tmp_path: Path) -> Path:
    """Where the SDK journals calls made while AgentRein is unavailable: never the working directory."""
    return tmp_path / "agentrein-journal.db"


@pytest.fixture
def agentrein(agentrein_database_url: str, agentrein_journal_path: Path) -> Iterator[AgentRein]:
    """AgentRein embedded on ``agentrein_database_url``, in an organisation of its own (so policies never leak
    between tests sharing a database), closed after the test."""
    client = AgentRein(
        agentrein_database_url, organisation=f"test-{uuid.uuid4().hex[:8]}", journal_path=agentrein_journal_path
    )
    yield client
    client.close()


@pytest.fixture
def fake_stripe() -> Iterator[FakeStripe]:
    """A fake of the Stripe API on 127.0.0.1 that the real ``stripe`` SDK can be pointed at."""
    with FakeStripe().running() as fake:
        yield fake


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A fake of the GitHub REST API on 127.0.0.1 for PyGithub; the token ``ghp_test`` authenticates ``octocat``."""
    with FakeGitHub().running() as fake:
        yield fake


@pytest.fixture
def fake_http_service() -> Iterator[FakeService]:
    """A stateful REST service on 127.0.0.1 that honours ``Idempotency-Key``."""
    with FakeService().running() as fake:
        yield fake
