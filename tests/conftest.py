"""Fixtures shared by the behaviour tests: real databases (SQLite file, PostgreSQL when CI provides it) and
a stateful fake service on 127.0.0.1. The fixtures of agentrein-testing's pytest plugin (``agentrein``,
``fake_stripe``…) are here too; they record on the test's databases."""

from __future__ import annotations

import importlib
import ipaddress
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pytest_postgresql.janitor import DatabaseJanitor
from serving import RunningServer
from third_party import EXAMPLE_PLUGIN, install

from agentrein import AgentRein
from agentrein_core.plugins import installed_connectors
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_testing import FakeService

pytest_plugins = ("pytester",)

POSTGRES_ENV = "AGENTREIN_TEST_POSTGRES_URL"
NO_POSTGRES = f"{POSTGRES_ENV} is not set (.ci/run starts PostgreSQL and sets it)"

# Every peer of the tests (webhook receivers, the fake model) is on 127.0.0.1, which organisations may reach
# only when the server allows it; the tests of that refusal take the permission away again.
os.environ[ALLOW_PRIVATE_ENV] = "1"


def _loopback_only(connect: Any) -> Any:
    """``socket.connect`` that refuses, before anything is sent, every address outside 127.0.0.0/8 and [::1]:
    a test that names a private or public address (to see it refused) can never reach it, whatever the code
    under test does. Unix sockets and ``localhost`` pass."""

    def guarded(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] != "localhost":
            try:
                loopback = ipaddress.ip_address(str(address[0]).split("%", 1)[0]).is_loopback
            except ValueError:
                loopback = False
            if not loopback:
                raise ConnectionRefusedError(f"the tests reach loopback only, not {address[0]}")
        return connect(sock, address)

    return guarded


socket.socket.connect = _loopback_only(socket.socket.connect)  # type: ignore[method-assign]
socket.socket.connect_ex = _loopback_only(socket.socket.connect_ex)  # type: ignore[method-assign]

PLUGINS_SITE = pytest.StashKey[Path]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Install the example plugin for this session, before any test asks which connectors are installed: the
    answer is found once per process, and the servers the tests run in threads ask too."""
    site = Path(tempfile.mkdtemp(prefix="agentrein-plugins-"))
    session.config.stash[PLUGINS_SITE] = site
    install(EXAMPLE_PLUGIN, site)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    installed_connectors.cache_clear()  # in case a plugin of pytest's asked already


def pytest_sessionfinish(session: pytest.Session) -> None:
    site = session.config.stash.get(PLUGINS_SITE, None)
    if site is not None:
        shutil.rmtree(site, ignore_errors=True)


@pytest.fixture(scope="session")
def plugins_site(request: pytest.FixtureRequest) -> Path:
    """Where the session installed the example plugin (on this process's ``sys.path`` only)."""
    return request.config.stash[PLUGINS_SITE]


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A new PostgreSQL database, dropped afterwards."""
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


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test module."""
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def own_postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test alone."""
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture(autouse=True)
def journal_in_tmp(agentrein_journal_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every client journals where the plugin's ``agentrein`` does (never the working directory), servers too."""
    monkeypatch.setenv("AGENTREIN_JOURNAL", str(agentrein_journal_path))
    return agentrein_journal_path


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Each test that asks for a database runs once on SQLite and once on PostgreSQL."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'agentrein.db'}"


@pytest.fixture
def agentrein_database_url(database_url: str) -> str:
    """The plugin's ``agentrein`` and the connector contract record on both kinds of database."""
    return database_url


class Servers:
    """Real servers for a test module, started when first asked for: one per database kind, each on a
    database of its own (a server's workers roll back every organisation of its database, so embedded tests
    must not share it)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._running: dict[str, RunningServer] = {}
        self._databases = ExitStack()

    def on(self, database_url: str) -> RunningServer:
        kind = "postgresql" if database_url.startswith("postgresql") else "sqlite"
        if kind not in self._running:
            if kind == "postgresql":
                url = self._databases.enter_context(fresh_postgres_database())
            else:
                url = f"sqlite:///{self._tmp.mktemp('server') / 'agentrein.db'}"
            self._running[kind] = RunningServer(url)
        return self._running[kind]

    def stop(self) -> None:
        for server in self._running.values():
            server.stop()
        self._databases.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    pool = Servers(tmp_path_factory)
    yield pool
    pool.stop()


@pytest.fixture
def server(database_url: str, servers: Servers) -> RunningServer:
    """A real server on 127.0.0.1 over the test's kind of database (shared by the module's tests, each of
    which works in an organisation of its own)."""
    return servers.on(database_url)


@pytest.fixture
def own_database_url(database_url: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of this test alone, of the test's kind: for what looks at every organisation at once (the
    server's rollback workers claim any organisation's jobs)."""
    if database_url.startswith("postgresql"):
        return str(request.getfixturevalue("own_postgres_url"))
    return f"sqlite:///{tmp_path / 'own.db'}"


@pytest.fixture(params=["embedded", "server"])
def ar(request: pytest.FixtureRequest, database_url: str) -> Iterator[AgentRein]:
    """The SDK in an organisation of its own (so policies never leak between tests): embedded on the
    database, and through a real server over HTTP on the same kind of database, with an operator key."""
    if request.param == "embedded":
        yield request.getfixturevalue("agentrein")  # which closes it
        return
    client = request.getfixturevalue("server").tenant().client()
    yield client
    client.close()


@pytest.fixture
def embedded(agentrein: AgentRein) -> AgentRein:
    """The SDK embedded (no server), for what only embedded mode does (inverses through wrapped clients)."""
    return agentrein


@pytest.fixture
def service() -> Iterator[FakeService]:
    with FakeService(location_collections=frozenset({"things"})).running() as running:
        yield running
