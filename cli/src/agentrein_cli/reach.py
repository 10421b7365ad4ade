"""How a command reaches AgentRein, one way to each target: a server (``--url``) through the SDK, whose
:class:`~agentrein.AgentRein` reads and decides and whose :class:`~agentrein.admin.AdminClient` manages
connector settings and rollbacks; a database (``--database-url``) through the engine, with the server's
services (vault, connectors) where those are needed. Both raise the same named errors.

Everything heavy (SQLAlchemy, httpx, Litestar, the connector plugins) is imported here when a command runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

from agentrein_cli.common import API_KEY_ENV, Target, errors_exit
from agentrein_core.errors import ValidationError

if TYPE_CHECKING:
    from agentrein import AgentRein
    from agentrein.admin import AdminClient
    from agentrein.backend import LocalBackend
    from agentrein_core.engine import Engine
    from agentrein_core.model import Organisation
    from agentrein_server.services import Services


#: What the commands read and decide in an organisation: the SDK on a server, the engine on a database.
Records: TypeAlias = "AgentRein | LocalBackend"


@contextmanager
def records(target: Target) -> Iterator[Records]:
    """The organisation's records on the target, for one command."""
    with errors_exit():
        if target.url:
            with _agentrein(target.url, target.api_key) as ar:
                yield ar
            return
        with engine(target.database_url) as found:
            # A database has no workers: overdue approvals are expired first, as an embedded agent does; and
            # the organisation is opened as an agent opens it (made when missing).
            found.maintain()
            yield in_organisation(found, organisation(found, target.org, create=True).org_id)


def in_organisation(found: Engine, org_id: str) -> LocalBackend:
    """The engine's use cases in one organisation, with an operator's rights (the SDK's embedded transport)."""
    from agentrein.backend import LocalBackend

    return LocalBackend(found, org_id)


@contextmanager
def engine(database_url: str | None) -> Iterator[Engine]:
    """The engine on the database (migrated), closed after the command."""
    from agentrein_core.engine import Engine
    from agentrein_core.store import Store

    with errors_exit():
        store = Store(database_url)
        try:
            yield Engine(store)
        finally:
            store.close()


@contextmanager
def services(target: Target) -> Iterator[tuple[Services, str]]:
    """The server's services on the database (its workers not started), and the organisation's id."""
    from agentrein_server.app import open_services

    with errors_exit():
        opened = open_services(target.database_url, rollback_threads=0)
        try:
            yield opened, organisation(opened.engine, target.org).org_id
        finally:
            opened.engine.store.close()


@contextmanager
def admin(url: str, api_key: str | None) -> Iterator[AdminClient]:
    """The operator API of the server at ``url``, for one command."""
    from agentrein.admin import AdminClient

    with errors_exit(), AdminClient(url, _key(api_key)) as client:
        yield client


@contextmanager
def _agentrein(url: str, api_key: str | None) -> Iterator[AgentRein]:
    from agentrein import AgentRein
    from agentrein_core.plugins import Connectors, new_plugin_manager

    # The command line wraps no client, so it loads no connector plugin (PyGithub alone takes a second).
    no_connectors = Connectors(new_plugin_manager(load_entry_points=False))
    with AgentRein(base_url=url, api_key=_key(api_key), connectors=no_connectors) as ar:
        yield ar


def organisation(found: Engine, name: str | None, *, create: bool = False) -> Organisation:
    """The organisation named (``None``: the default one); ``create`` makes it when missing."""
    from agentrein_core.engine import DEFAULT_ORGANISATION

    name = name or DEFAULT_ORGANISATION
    return found.ensure_organisation(name) if create else found.organisation_named(name)


def _key(api_key: str | None) -> str:
    if not api_key:
        raise ValidationError("--api-key", f"a server needs an API key (--api-key or ${API_KEY_ENV})")
    return api_key
