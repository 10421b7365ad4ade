"""How a command reaches AgentRein, one way to each target: a server (``--url``) through the SDK, whose
served mode reads and decides and whose :class:`~agentrein._admin.AdminClient` manages connector settings and
rollbacks; a database (``--database-url``) through the engine, in the SDK's embedded mode (without the
background work of an agent's process), with the engine's settings that hold secrets (vault, connectors:
:mod:`agentrein_core.engine.configuration`), and the undos of the stored connector settings where a rollback
runs here (the core's supervisor runs it, as a server's workers would). Both modes are the SDK's
:class:`~agentrein._port.Mode`, and raise the same named errors.

Only the commands that make a database (``serve``, ``db upgrade``, ``orgs create``) create a missing SQLite
file: every other one refuses it, so that a command run in the wrong directory does not answer from an empty
database it has just made. Everything heavy (SQLAlchemy, httpx, Litestar, the connector plugins) is imported
here when a command runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentrein_cli.common import API_KEY_ENV, DATABASE_URL_ENV, Target, errors_exit
from agentrein_core.errors import AgentReinError, ValidationError

if TYPE_CHECKING:
    from agentrein import AdminClient
    from agentrein._port import Mode
    from agentrein_core.engine import Engine
    from agentrein_core.engine.configuration import Configuration
    from agentrein_core.model import Organisation
    from agentrein_core.settings_undo import SettingsUndoExecutor


@contextmanager
def records(target: Target, *, create_organisation: bool = False) -> Iterator[Mode]:
    """The organisation's records on the target, for one command; ``create_organisation`` opens it as an
    agent opens it (made when missing), for a command that writes, where a read says it is missing."""
    with errors_exit():
        if target.url:
            from agentrein._served import ServedMode

            served = ServedMode(target.url, _key(target.api_key))
            try:
                yield served
            finally:
                served.close()
            return
        from agentrein_core.supervisor import catch_up

        with engine(target.database_url) as found:
            catch_up(found)  # a database may have no process running its supervisor
            yield in_organisation(found, organisation(found, target.org, create=create_organisation).org_id)


def in_organisation(found: Engine, org_id: str) -> Mode:
    """The engine's use cases in one organisation, with an operator's rights (the SDK's embedded mode). This
    process holds no wrapped client: an undo it cannot run is left for a process that can."""
    from agentrein._embedded import EmbeddedMode
    from agentrein._executor import ClientUndoExecutor
    from agentrein_core.plugins import Connectors, new_plugin_manager

    return EmbeddedMode(found, org_id, ClientUndoExecutor(Connectors(new_plugin_manager(load_entry_points=False))))


@contextmanager
def engine(database_url: str | None, *, create: bool = False) -> Iterator[Engine]:
    """The engine on the database (migrated), closed after the command; ``create``: a missing SQLite file
    is made, else refused."""
    from agentrein_core.engine import Engine
    from agentrein_core.store import Store

    with errors_exit():
        if not create:
            _refuse_a_missing_file(database_url)
        store = Store(database_url)
        try:
            yield Engine(store)
        finally:
            store.close()


@contextmanager
def configuration(target: Target) -> Iterator[tuple[Configuration, str]]:
    """The engine's settings that hold secrets, on the database (with its vault and the installed connectors),
    and the organisation's id."""
    from agentrein_core.engine.configuration import Configuration, vault_of
    from agentrein_core.plugins import installed_connectors

    with engine(target.database_url) as found:
        vault = vault_of(found.store.url, found.store.dialect)
        yield Configuration(found, installed_connectors(), vault), organisation(found, target.org).org_id


@contextmanager
def undoing(target: Target) -> Iterator[tuple[Engine, SettingsUndoExecutor, str]]:
    """The engine on the database with the installed connectors, the undos a server's workers would run
    (through the organisation's stored connector settings, opened with the database's vault), and the
    organisation's id."""
    from agentrein_core import redaction
    from agentrein_core.engine import Engine
    from agentrein_core.engine.configuration import vault_of
    from agentrein_core.engine.rollbacks import lease_from_environment
    from agentrein_core.plugins import installed_connectors
    from agentrein_core.settings_undo import SettingsUndoExecutor
    from agentrein_core.store import Store

    with errors_exit():
        _refuse_a_missing_file(target.database_url)
        store = Store(target.database_url)
        try:
            connectors = installed_connectors()
            found = Engine(store, connectors=connectors, rollback_lease=lease_from_environment())
            redaction.redact_logs(found.redactors.common, redaction.REQUEST_LOGGERS)
            undo = SettingsUndoExecutor(found, connectors, vault_of(store.url, store.dialect).decrypt)
            yield found, undo, organisation(found, target.org).org_id
        finally:
            store.close()


@contextmanager
def admin(url: str, api_key: str | None) -> Iterator[AdminClient]:
    """The operator API of the server at ``url``, for one command."""
    from agentrein import AdminClient

    with errors_exit(), AdminClient(url, _key(api_key)) as client:
        yield client


def _refuse_a_missing_file(database_url: str | None) -> None:
    """Refuse a SQLite database whose file does not exist (opening it would create it)."""
    from agentrein_core.database import resolve_database_url, sqlite_file

    file = sqlite_file(resolve_database_url(database_url))
    if file is not None and not file.exists():
        raise AgentReinError(
            f"no database at {os.path.abspath(file)} (and this command creates none). Point at yours with "
            f"--database-url sqlite:///PATH.db or ${DATABASE_URL_ENV}, at a server with --url and --api-key where "
            "the command takes them, or make an empty database with `agentrein db upgrade`."
        )


def organisation(found: Engine, name: str | None, *, create: bool = False) -> Organisation:
    """The organisation named (``None``: the default one); ``create`` makes it when missing."""
    from agentrein_core.engine import DEFAULT_ORGANISATION
    from agentrein_core.errors import NotFoundError

    name = name or DEFAULT_ORGANISATION
    if create:
        return found.accounts.ensure_organisation(name)
    try:
        return found.accounts.organisation_named(name)
    except NotFoundError:
        there = ", ".join(repr(org.name) for org in found.accounts.list_organisations()) or "none"
        raise AgentReinError(
            f"no organisation {name!r} in this database (its organisations: {there}); name one with --org, "
            f"or make it with `agentrein orgs create {name}`"
        ) from None


def _key(api_key: str | None) -> str:
    if not api_key:
        raise ValidationError("--api-key", f"a server needs an API key (--api-key or ${API_KEY_ENV})")
    return api_key
