"""API keys: created (the key is shown once), listed and revoked, on a server (with an operator key) or on its
database."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from agentrein_cli.common import AsJson, Listing, Target, console, print_json, targeted, when
from agentrein_cli.reach import admin, engine, organisation
from agentrein_core.statuses import Role

if TYPE_CHECKING:
    from agentrein import AdminClient
    from agentrein_core.engine import Engine

T = TypeVar("T")

keys = typer.Typer(
    help=(
        "API keys of the organisation: on a server (--url, with an operator key) or on its database. "
        "A key is shown once, when it is created."
    ),
    no_args_is_help=True,
)


@keys.command("create")
@targeted
def keys_create(
    target: Target,
    role: Annotated[Role, typer.Option(help="agent: records its own work; operator: also reviews and manages.")],
) -> None:
    """Create an API key; the key is printed alone on the last line, and never again."""
    created = _on(
        target, lambda operator: operator.create_api_key(role), lambda found, org_id: _create(found, org_id, role)
    )
    console.print(f"Created {created['role']} key {created['keyId']}. The key, shown only now:", highlight=False)
    print(created["key"], flush=True)


@keys.command("list")
@targeted
def keys_list(target: Target, as_json: AsJson = False) -> None:
    """The organisation's API keys (their first characters, never the keys), revoked ones too."""
    listed = _on(target, lambda operator: operator.list_api_keys(), _stored)
    if as_json:
        print_json(listed)  # as GET /api-keys answers
        return
    shown = Listing("key", "role", "starts with", "created", "revoked", text=False)
    for row in listed:
        revoked = when(row["revokedAt"]) if row["revokedAt"] else "—"
        shown.add_row(row["keyId"], row["role"], f"{row['prefix']}…", when(row["createdAt"]), revoked)
    console.print(shown)


@keys.command("revoke")
@targeted
def keys_revoke(target: Target, key_id: str) -> None:
    """Revoke an API key: it stops working (through a server at once; revoked in its database, within
    seconds)."""
    _on(
        target,
        lambda operator: operator.revoke_api_key(key_id),
        lambda found, org_id: found.accounts.revoke_api_key(org_id, key_id),
    )
    console.print(f"Revoked {key_id}", highlight=False)


def _create(found: Engine, org_id: str, role: Role) -> dict[str, Any]:
    """The new key as ``POST /api-keys`` answers it (its secret in ``key``)."""
    from agentrein_core.read_models import api_key_shown

    key, secret = found.accounts.create_api_key(org_id, role)
    return api_key_shown(key) | {"key": secret}


def _stored(found: Engine, org_id: str) -> list[dict[str, Any]]:
    """The organisation's keys as ``GET /api-keys`` answers them."""
    from agentrein_core.read_models import api_key_shown

    return [api_key_shown(key) for key in found.accounts.list_api_keys(org_id)]


def _on(target: Target, on_server: Callable[[AdminClient], T], on_database: Callable[[Engine, str], T]) -> T:
    """What ``on_server`` answers with the server's operator API, or ``on_database`` with the engine and the
    organisation's id."""
    if target.url:
        with admin(target.url, target.api_key) as operator:
            return on_server(operator)
    with engine(target.database_url) as found:
        return on_database(found, organisation(found, target.org).org_id)
