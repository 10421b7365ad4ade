"""Fixtures shared by the behaviour tests: real databases (SQLite file, PostgreSQL when CI provides it) and
a stateful fake service on 127.0.0.1."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from pytest_postgresql.janitor import DatabaseJanitor

from agentrein import AgentRein
from agentrein_server.demo.fake_service import FakeService

POSTGRES_ENV = "AGENTREIN_TEST_POSTGRES_URL"
NO_POSTGRES = f"{POSTGRES_ENV} is not set (.ci/run starts PostgreSQL and sets it)"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test module, dropped afterwards."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(NO_POSTGRES)
    parts = urlsplit(server)
    dbname = f"agentrein_test_{uuid.uuid4().hex[:12]}"
    janitor = DatabaseJanitor(
        user=parts.username or "postgres",
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        dbname=dbname,
        password=parts.password,
    )
    with janitor:
        yield f"postgresql+psycopg://{parts.netloc}/{dbname}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Each test that asks for a database runs once on SQLite and once on PostgreSQL."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'agentrein.db'}"


@pytest.fixture
def ar(database_url: str) -> Iterator[AgentRein]:
    """An embedded AgentRein in an organisation of its own (so policies never leak between tests)."""
    client = AgentRein(database_url, organisation=f"test-{uuid.uuid4().hex[:8]}")
    yield client
    client.close()


@pytest.fixture
def service() -> Iterator[FakeService]:
    with FakeService(location_collections=frozenset({"things"})).running() as running:
        yield running
