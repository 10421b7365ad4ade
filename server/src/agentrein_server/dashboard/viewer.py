"""Who is signed in to the dashboard: the user named by the encrypted session cookie, read afresh on every
request so that a removed user is signed out at once, and what their role lets them do.

A sign-in lasts ``SIGNED_IN_SECONDS`` from the moment the password was given (the cookie is re-sent with
every answer, so its own expiry would never come while a tab polls), and ends everywhere when the user signs
out: the cookie carries the user's sign-in epoch, which signing out advances."""

from __future__ import annotations

import time
from typing import Any, TypeAlias

from attrs import frozen
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.handlers.base import BaseRouteHandler

from agentrein_core.errors import ForbiddenError, NotFoundError
from agentrein_core.model import User
from agentrein_core.statuses import UserRole
from agentrein_server.services import Services, ServicesDep

#: How long a sign-in lasts, from the moment the password was given.
SIGNED_IN_SECONDS = 12 * 3600


class SignInRequired(Exception):
    """No one (or no longer anyone) is signed in: the dashboard answers with the sign-in page."""


@frozen
class Viewer:
    user: User

    @property
    def org_id(self) -> str:
        return self.user.org_id

    @property
    def email(self) -> str:
        return self.user.email

    @property
    def is_admin(self) -> bool:
        return self.user.role is UserRole.ADMIN


def start_sign_in(connection: ASGIConnection[Any, Any, Any, Any], user: User) -> None:
    """Remember ``user`` in a fresh session cookie (a new one, so a cookie planted before cannot be reused)."""
    connection.clear_session()
    connection.set_session(
        {"user_id": user.user_id, "org_id": user.org_id, "epoch": user.sign_in_epoch, "since": time.time()}
    )


def signed_in_user(connection: ASGIConnection[Any, Any, Any, Any], services: Services) -> User:
    """The user the session cookie names, if that sign-in still holds; :class:`SignInRequired` otherwise."""
    signed_in = connection.session
    user_id, org_id, epoch, since = (signed_in.get(k) for k in ("user_id", "org_id", "epoch", "since"))
    if not (isinstance(user_id, str) and isinstance(org_id, str) and isinstance(epoch, int)):
        raise SignInRequired
    if not isinstance(since, int | float) or not 0 <= time.time() - since < SIGNED_IN_SECONDS:
        raise SignInRequired
    try:
        user = services.engine.accounts.get_user(org_id, user_id)
    except NotFoundError:
        raise SignInRequired from None
    if user.sign_in_epoch != epoch:
        raise SignInRequired
    return user


def provide_viewer(request: Request[Any, Any, Any], services: ServicesDep) -> Viewer:
    return Viewer(signed_in_user(request, services))


def admins_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard of every admin page, so that none is open to reviewers even if its handler never asks who is
    signed in."""
    require_admin(Viewer(signed_in_user(connection, connection.app.state.services)))


def require_admin(viewer: Viewer) -> Viewer:
    if not viewer.is_admin:
        raise ForbiddenError(f"{viewer.email} is a {viewer.user.role}; this is for admins")
    return viewer


def provide_member(signed_in: NamedDependency[Viewer]) -> Viewer:
    """The viewer of a page any signed-in user may see."""
    return signed_in


def provide_admin(signed_in: NamedDependency[Viewer]) -> Viewer:
    """The viewer of an admin page, who must be an admin."""
    return require_admin(signed_in)


ViewerDep: TypeAlias = NamedDependency[Viewer]
