"""How a command reaches AgentRein, one way to each target: a server (``--url``) through the SDK, whose
served mode reads and decides and whose :class:`~agentrein.admin.AdminClient` manages connector settings and
rollbacks; a database (``--database-url``) through the engine, in the SDK's embedded mode (without the
background work of an agent's process), with the server's services (vault, connectors) where those are
needed. Both modes are the SDK's :class:`~agentrein.port.Mode`, and raise the same named errors.

Everything heavy (SQLAlchemy, httpx, Litestar, the connector plugins) is imported here when a command runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentrein_cli.common import API_KEY_ENV, Target, errors_exit
from agentrein_core.errors import ValidationError

if TYPE_CHECKING:
    from agentrein.admin import AdminClient
    from agentrein.port import Mode
    from agentrein_core.engine import Engine
    from agentrein_core.model import Organisation
    from agentrein_server.services import Services


@contextmanager
def records(target: Target) -> Iterator[Mode]:
    """The organisation's records on the target, for one command."""
    with errors_exit():
        if target.url:
            from agentrein.served import ServedMode

            served = ServedMode(target.url, _key(target.api_key))
            try:
                yield served
            finally:
                served.close()
            return
        with engine(target.database_url) as found:
            # A database has no workers: overdue approvals are expired first, as an embedded agent does; and
            # the organisation is opened as an agent opens it (made when missing).
            found.maintain()
            yield in_organisation(found, organisation(found, target.org, create=True).org_id)


def in_organisation(found: Engine, org_id: str) -> Mode:
    """The engine's use cases in one organisation, with an operator's rights (the SDK's embedded mode). This
    process holds no wrapped client: an undo it cannot run is left for a process that can."""
    from agentrein.embedded import EmbeddedMode
    from agentrein.executor import ClientUndoExecutor
    from agentrein_core.plugins import Connectors, new_plugin_manager

    return EmbeddedMode(found, org_id, ClientUndoExecutor(Connectors(new_plugin_manager(load_entry_points=False))))


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


def organisation(found: Engine, name: str | None, *, create: bool = False) -> Organisation:
    """The organisation named (``None``: the default one); ``create`` makes it when missing."""
    from agentrein_core.engine import DEFAULT_ORGANISATION

    name = name or DEFAULT_ORGANISATION
    return found.ensure_organisation(name) if create else found.organisation_named(name)


def _key(api_key: str | None) -> str:
    if not api_key:
        raise ValidationError("--api-key", f"a server needs an API key (--api-key or ${API_KEY_ENV})")
    return api_key
